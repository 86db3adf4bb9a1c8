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
