"""The engine extras: none, because no current vLLM / LMDeploy co-installs with our pins.

``vllm = ["vllm"]`` / ``lmdeploy = ["lmdeploy"]`` next to torch==2.13.0, transformers<5, numpy<2 and
opencompass==0.5.4 resolved to a 2023 vLLM sdist and lmdeploy 0.2.2: installable on paper, useless in
practice. The extras are gone and the README sends users to a server in its own environment. The e2e
test reads the newest releases' metadata from the registry (a ``--no-deps`` dry run: seconds, where a
full resolution to ResolutionImpossible takes minutes) and fails once a release fits our pins, the
signal to bring the extra back.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

PINS = {"torch": "2.13.0", "transformers": "4.57.6", "numpy": "1.26.4"}  # versions inside our pins' ranges


def test_no_engine_extras_and_the_readme_says_where_engines_go() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    assert "vllm" not in extras and "lmdeploy" not in extras, extras
    pins = {Requirement(r).name: Requirement(r).specifier for r in project["dependencies"]}
    # the pins that rule the engines out (see test_newest_releases_conflict_with_our_pins)
    assert pins["torch"].contains("2.13.0") and not pins["transformers"].contains("5.16.1")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Use a running server" in readme
    assert "tools/vllm_cpu.sh" in readme


def _requires(spec: str) -> tuple[str, list[Requirement]]:
    """Version and unconditional requirements of ``spec`` as the registry serves it (no install)."""
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed"]
        + ["--report", "-", spec],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (item,) = json.loads(r.stdout)["install"]
    reqs = [Requirement(d) for d in item["metadata"].get("requires_dist", [])]
    return item["metadata"]["version"], [q for q in reqs if q.marker is None]


@pytest.mark.e2e
@pytest.mark.parametrize("package", ["vllm", "lmdeploy"])
def test_newest_releases_conflict_with_our_pins(package: str) -> None:
    version, reqs = _requires(package)
    clashes = [str(q) for q in reqs if q.name in PINS and not q.specifier.contains(PINS[q.name], prereleases=True)]
    assert clashes, f"{package} {version} fits torch==2.13.0 / transformers<5 / numpy<2: restore the extra"
