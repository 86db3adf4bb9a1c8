from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Dataset caches of a test run never mix with the user's."""
    os.environ["NEEDLEBENCH_CACHE"] = str(tmp_path_factory.mktemp("nbcache"))


def bin_path(name: str) -> str:
    return str(VENV_BIN / name)


def run_export(config: str, out: Path) -> list[dict]:
    """``needlebench export`` in its own process; the rows it wrote."""
    import json
    import subprocess

    r = subprocess.run(
        [bin_path("needlebench"), "export", config, "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def run_opencompass(config: str, work: Path, env: dict | None = None) -> Path:
    """A real ``opencompass`` run; the timestamped run folder it made."""
    import subprocess

    result = subprocess.run(
        [bin_path("opencompass"), config, "-w", str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return run_dir
