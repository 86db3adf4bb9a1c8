"""The package as users install it: a wheel, in a fresh venv, run from an unrelated folder.

The wheel is built from the repository, installed (without its dependencies, which the fresh venv
borrows from the project's ``.venv`` through a ``.pth`` line, so nothing is downloaded) into a venv
that cannot see the repository, and driven from a temporary folder: ``needlebench export`` and an
``opencompass`` run with the oracle model. Needle banks and name pools must come from the wheel.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.e2e

CONFIG = """\
_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, atc_datasets, needlebench_datasets, runtime

datasets = needlebench_datasets(suite="4k", langs=["en", "zh"], lengths=[1000], depths=[0, 100], repeats=1,
                                mrt=dict(num_needles=[2]), mrs=dict(num_needles=[2]))
datasets += atc_datasets(langs=["en"], needle_counts=[2], repeats=1)
models = [dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", max_seq_len=100000,
               max_out_len=256, batch_size=16, run_cfg=dict(num_gpus=0), datasets=datasets)]
infer, eval = runtime(num_shards=2, eval_workers=1)
summarizer = dict(type=SUMMARIZER)
"""


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A venv holding only the built wheel (its dependencies borrowed from .venv); its python."""
    base = tmp_path_factory.mktemp("wheel")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the dependencies: the site-packages folders this interpreter reads (.venv's, and the per-user dependency
    # folder scripts/setup.sh adds to it), as plain path entries (their .pth files, among them the editable
    # install's finder that points at the repository, are not run from there)
    deps = [p for p in sys.path if p.endswith("site-packages")] or [sysconfig.get_paths()["purelib"]]
    (purelib / "needlebench-deps.pth").write_text("\n".join(deps) + "\n")
    # a pure-Python wheel installs by unpacking into site-packages (package, data, dist-info); pip is
    # not used for it: `pip install --prefix` from .venv would first uninstall .venv's editable copy
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(purelib)
    return py


def _env(py: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # OpenCompass starts its tasks with the `python` it finds first
    return {**env, "PATH": f"{py.parent}{os.pathsep}{env.get('PATH', '')}"}


def test_the_wheel_carries_its_data_and_runs_from_anywhere(fresh: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "tiny.py").write_text(CONFIG)
    env = _env(fresh)

    where = subprocess.run(
        [
            str(fresh),
            "-c",
            "import needlebench, needlebench.tasks.inputs as n; print(needlebench.__file__, n.DATA_DIR)",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(str(fresh.parents[1]) in w and str(ROOT) not in w for w in where), where

    r = subprocess.run(
        [str(fresh), "-m", "needlebench.commands.cli", "export", "tiny.py", "-o", "rows.jsonl"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (work / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {row["task"] for row in rows} == {"srt", "mrt", "mrs", "atc"}
    assert {row["lang"] for row in rows} == {"en", "zh"}

    r = subprocess.run(
        [str(fresh), "-m", "opencompass.cli.main", "tiny.py", "-w", "out"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (summary,) = (work / "out").glob("*/summary/needlebench_summary.csv")
    scores = [row["oracle"] for row in csv.DictReader(summary.open(encoding="utf-8")) if row.get("oracle")]
    assert scores and all(float(s) == 100.0 for s in scores), scores


def test_the_wheel_states_its_licence_as_an_spdx_expression(wheel: Path) -> None:
    """``license = "Apache-2.0"`` (PEP 639) reaches the metadata as ``License-Expression``, not a free-text field."""
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = zf.read(name).decode("utf-8")
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers
    assert not any(h.startswith("License:") for h in headers)
