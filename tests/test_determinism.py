"""Golden digests: the exact bytes three small configs export, in any process.

Rule: a change to these digests is a change to the benchmark. Change them
only together with ``needlebench.sample.DATASET_VERSION``, and say in
CHANGELOG.md what changed in the samples (prompts, gold, ids or meta)
and why. A digest that moves without a version bump means generation
changed by accident: find out why before touching this file.

Print the current digests with::

    .venv/bin/python tests/test_determinism.py
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDLEBENCH = str(Path(sys.executable).parent / "needlebench")

# sha256 of `needlebench export CONFIG` for DATASET_VERSION below
DATASET_VERSION = "3.0"
GOLDEN = {
    "tests/configs/golden_atc.py": "6c7233769ab64cf650974a386ae4c1fd51d7b9d11a4331ea89ff0c73a1855bfb",
    "tests/configs/golden_chain.py": "8fe9e7c7326c15d3544fad08b86141e995a5fcff075aca143cb726a68edcd868",
    "tests/configs/golden_sparse.py": "0a309c43861b6afad465ed0081f2327f186882f3017513a9c192a90b03e09012",
}


def export_digest(config: str, out: Path, hash_seed: str = "0") -> str:
    """sha256 of the export of ``config``, made in a fresh process with the given ``PYTHONHASHSEED``.

    Args:
        config: config path relative to the repository root.
        out: where the export file goes.
        hash_seed: the child's ``PYTHONHASHSEED``; salted ``hash()`` must never reach a sample.
    """
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    r = subprocess.run(
        [NEEDLEBENCH, "export", config, "-o", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return hashlib.sha256(out.read_bytes()).hexdigest()


def test_golden_version_matches_the_package() -> None:
    from needlebench.sample import DATASET_VERSION as current

    assert current == DATASET_VERSION, "new dataset version: recompute GOLDEN (see the module docstring)"


@pytest.mark.parametrize("config", sorted(GOLDEN))
def test_export_matches_golden_digest_under_any_hash_seed(config: str, tmp_path: Path) -> None:
    a = export_digest(config, tmp_path / "a.jsonl", hash_seed="0")
    b = export_digest(config, tmp_path / "b.jsonl", hash_seed="4242")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a == b == GOLDEN[config], f"{config}: export changed; see this module's docstring"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for name in sorted(GOLDEN):
            print(f'    "{name}": "{export_digest(name, Path(folder) / "out.jsonl")}",')
