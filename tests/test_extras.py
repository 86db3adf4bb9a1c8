"""The package next to a GPU user's engine: real pip resolutions of the built wheel against the registry.

OpenCompass's in-process engine models import vLLM / LMDeploy into the opencompass environment, so our
package must install there without touching the user's torch or engine, and ``needlebench[vllm]`` /
``needlebench[lmdeploy]`` must land on a current engine release. These tests ask pip itself, with full
dependency resolution (``pip install --dry-run --report``, never ``--no-deps``: the engines' clash with
opencompass 0.5.4 is two levels down, vLLM >= 0.14.1 -> opencv-python-headless >= 4.13 -> numpy >= 2 against
opencompass's numpy < 2, which a ``--no-deps`` look at the engine's own metadata cannot see).

They need the package registry and take about 30-60 s each (marker ``resolver``; deselect with
``-m "not resolver"``). Each pip call has its own timeout, ``NEEDLEBENCH_RESOLVER_TIMEOUT`` seconds
(default 300), so a stalled registry fails the test instead of the suite.

pip's answer is kept per user for the rest of the UTC day (``resolutions/`` in the user's needlebench cache),
keyed by everything it is an answer to: the requirements (our wheel by its metadata), the environment it
resolves into (by its packages' metadata), pip, this Python, the index and the day. A machine that ran the
suite today reads its own answers (three resolutions cost ~190 s of a 2-core test run); a new day, another
``pyproject.toml``, another pip, or ``NEEDLEBENCH_RESOLVER_FRESH=1`` asks the registry again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
from conftest import ROOT, USER_CACHE
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from needlebench.files import atomic_write

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

pytestmark = pytest.mark.resolver

TIMEOUT = int(os.environ.get("NEEDLEBENCH_RESOLVER_TIMEOUT", "300"))

# What docs/guide/install.md ("Install on a GPU machine") promises each extra resolves to (Python 3.11, Linux
# x86_64). A new engine release that fits moves these; the table there moves with them.
EXPECTED = {
    "vllm": {"vllm": "0.14.0", "torch": "2.9.1", "transformers": "4.57.", "numpy": "1.26."},
    "lmdeploy": {"lmdeploy": "0.18.", "torch": "2.12.", "transformers": "4.57.", "numpy": "1.26."},
}

# The GPU user's environment of the "stays" test, as the issue describes it.
USER_ENV = ["opencompass==0.5.4", "vllm==0.13.0", "torch==2.9.0", "transformers<5", "numpy<2"]


# the metadata fields pip's resolver reads (the rest, the README among them, changes no resolution)
RESOLVED_FIELDS = ("Name:", "Version:", "Requires-Python:", "Requires-Dist:", "Provides-Extra:")


def _resolved_metadata(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(RESOLVED_FIELDS)]


def _wheel_named(arg: str) -> str:
    """``arg`` with a wheel's path (``/x/needlebench-0.1-py3-none-any.whl``, ``name[extra] @ file:///x/....whl``)
    replaced by the digest of the metadata pip resolves it by: the same package built elsewhere asks the same."""
    head, at, where = arg.rpartition(" @ ")
    path = Path(url2pathname(urlparse(where).path)) if where.startswith("file:") else Path(where)
    if path.suffix != ".whl":
        return arg
    with zipfile.ZipFile(path) as whl:
        (meta,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        fields = _resolved_metadata(whl.read(meta).decode("utf-8"))
    return f"{head}{at}wheel:{hashlib.sha256(json.dumps(fields).encode()).hexdigest()}"


# pip's configuration files, as it reads them (besides $PIP_CONFIG_FILE and this environment's own)
PIP_CONFIG_FILES = (
    Path("/etc/pip.conf"),
    Path.home() / ".pip" / "pip.conf",
    Path.home() / ".config" / "pip" / "pip.conf",
)


def _question(args: list[str], python: Path | None) -> str:
    """What a resolution answers, as a key: ``args`` (wheels by their metadata), the environment resolved into (its
    packages' metadata), pip and its settings (every ``PIP_*`` variable, its configuration files), this Python and
    platform, and the UTC day (the registry moves)."""
    import pip
    from packaging.tags import sys_tags

    metas = python.parent.parent.glob("lib/*/site-packages/*.dist-info/METADATA") if python else []
    installed = sorted(json.dumps(_resolved_metadata(m.read_text(encoding="utf-8"))) for m in metas)
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_"))
    files = [
        *PIP_CONFIG_FILES,
        Path(sys.prefix) / "pip.conf",
        Path(os.environ.get("PIP_CONFIG_FILE") or "/nonexistent"),
    ]
    configs = [f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file()]
    here = [pip.__version__, sys.version, sysconfig.get_platform(), str(next(sys_tags()))]
    day = time.strftime("%Y-%m-%d", time.gmtime())
    parts = [[_wheel_named(a) for a in args], installed, settings, configs, here, day]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def _pip(args: list[str], python: Path | None = None) -> dict:
    """``pip install --dry-run --report -`` with ``args``; the parsed report (pip's own JSON), today's if asked today.

    Args:
        args: requirements and extra pip options.
        python: resolve for this interpreter's environment (pip's ``--python``) instead of a fresh one
            (``--ignore-installed``).
    """
    kept = USER_CACHE / "resolutions" / f"{_question(args, python)}.json"
    if kept.is_file() and os.environ.get("NEEDLEBENCH_RESOLVER_FRESH") != "1":
        return json.loads(kept.read_text(encoding="utf-8"))
    target = ["--python", str(python)] if python else []
    where = [] if python else ["--ignore-installed"]
    # without PYTHONPATH: a source checkout on it (with the egg-info a wheel build leaves) would count as an
    # installed needlebench
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-m", "pip", *target, "install", "--dry-run", "--quiet", *where, "--report", "-", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads(r.stdout)
    kept.parent.mkdir(parents=True, exist_ok=True)
    for old in kept.parent.glob("*.json"):  # answers of an earlier day are never read again
        if time.time() - old.stat().st_mtime > 2 * 86400:
            old.unlink(missing_ok=True)
    with atomic_write(kept) as tmp:
        tmp.write_text(r.stdout, encoding="utf-8")
    return report


def _versions(report: dict) -> dict[str, str]:
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}


def _requirement_line(line: str) -> Requirement | None:
    """The requirement a ``"...",`` line of pyproject.toml holds, if it is one."""
    m = re.fullmatch(r'"([^"]+)",?', line)
    try:
        return Requirement(m.group(1)) if m else None
    except InvalidRequirement:
        return None


def test_metadata_pins_no_torch_and_explains_every_upper_bound() -> None:
    """No exact torch (or engine) pin; each ``<`` / ``==`` bound sits under a comment that says why."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = tomllib.loads(text)["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    assert "torch" not in {q.name for q in reqs}
    extras = project["optional-dependencies"]
    assert set(extras) >= {"vllm", "lmdeploy"}
    for name in ("vllm", "lmdeploy"):
        (req,) = [Requirement(r) for r in extras[name]]
        assert req.name == name and not any(s.operator in ("==", "===") for s in req.specifier), req
        assert any(s.operator == ">=" for s in req.specifier), f"{req}: a lower bound keeps pip off 2023 releases"
    lines = [line.strip() for line in text.splitlines()]
    for q in reqs + [Requirement(r) for rs in extras.values() for r in rs]:
        if not any(s.operator in ("<", "<=", "==", "~=") for s in q.specifier):
            continue
        (i,) = [n for n, line in enumerate(lines) if _requirement_line(line) == q]
        assert lines[i - 1].startswith("#"), f"{q}: upper bound without its reason in a comment above it"


@pytest.mark.parametrize("extra", ["vllm", "lmdeploy"])
def test_extra_resolves_to_a_current_engine(wheel: Path, extra: str) -> None:
    """``pip install needlebench[extra]`` into a fresh environment: the engine, torch, transformers, numpy pip picks."""
    got = _versions(_pip([f"needlebench[{extra}] @ {wheel.as_uri()}"]))
    picked = {name: got.get(name) for name in EXPECTED[extra]}
    assert all((picked[n] or "").startswith(v) for n, v in EXPECTED[extra].items()), picked
    assert got["opencompass"] == "0.5.4"
    if extra == "vllm":  # OpenCompass 0.5.4's VLLMwithChatTemplate imports ray before it builds vllm.LLM
        assert "ray" in got
    # docs/guide/install.md's "Install on a GPU machine" table states exactly these versions
    row = f"{extra} {got[extra]}, torch {got['torch']}, transformers {got['transformers']}, numpy {got['numpy']}"
    page = ROOT / "docs" / "guide" / "install.md"
    assert row in page.read_text(encoding="utf-8"), f"{page.relative_to(ROOT)} does not say: {row}"
    # opencv-python-headless is where vLLM >= 0.14.1 breaks: its numpy-1 wheels end at 4.12
    assert Version(got["opencv-python-headless"]) < Version("4.13"), got["opencv-python-headless"]


def _fake_installed(report: dict, venv: Path) -> None:
    """Register every package of ``report`` as installed in ``venv`` (a ``.dist-info`` with its real metadata).

    pip decides what to install from the installed distributions' metadata only (name, version,
    ``Requires-Dist``, ``Requires-Python``), never from their files, so this venv is, for pip's resolver,
    the environment the report describes, without downloading gigabytes of CUDA wheels.
    """
    purelib = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    for item in report["install"]:
        meta = item["metadata"]
        info = purelib / f"{canonicalize_name(meta['name']).replace('-', '_')}-{meta['version']}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", f"Name: {meta['name']}", f"Version: {meta['version']}"]
        if meta.get("requires_python"):
            lines.append(f"Requires-Python: {meta['requires_python']}")
        lines += [f"Provides-Extra: {e}" for e in meta.get("provides_extra", [])]
        lines += [f"Requires-Dist: {r}" for r in meta.get("requires_dist", [])]
        (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
        (info / "RECORD").write_text("", encoding="utf-8")


def test_installing_into_a_vllm_environment_keeps_torch_and_vllm(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``pip install needlebench`` where torch 2.9.0 + vLLM 0.13.0 + opencompass 0.5.4 are installed changes none of them.

    Why this proves "they stay as they are": the environment is what pip itself resolves for
    ``opencompass==0.5.4 vllm==0.13.0 torch==2.9.0`` (a GPU user's vLLM environment), registered as
    installed in a throwaway venv with each package's real metadata. Then a plain ``pip install <our
    wheel>`` is resolved *against that venv* (pip's ``--python``, no ``--ignore-installed``): pip keeps an
    installed distribution when it satisfies every requirement and would list it under "install" if it
    had to replace it (what the old ``torch==2.13.0`` pin did). So "torch, vllm, opencompass,
    transformers, numpy absent from the install list" is exactly "pip leaves them alone".
    """
    env = _pip(USER_ENV)
    before = _versions(env)
    assert (before["torch"], before["vllm"], before["opencompass"]) == ("2.9.0", "0.13.0", "0.5.4")
    venv = tmp_path_factory.mktemp("gpu_env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    _fake_installed(env, venv)

    plan = _versions(_pip([str(wheel)], python=venv / "bin" / "python"))
    assert "needlebench" in plan  # the resolution did run against our wheel
    touched = {n: (before[n], plan[n]) for n in ("torch", "vllm", "opencompass", "transformers", "numpy") if n in plan}
    assert not touched, f"installing needlebench would replace {touched}"
    # and the control: the old exact pin would have replaced torch in this very environment
    old = _pip(["torch==2.13.0", str(wheel)], python=venv / "bin" / "python")
    assert _versions(old).get("torch", "").startswith("2.13.0")
