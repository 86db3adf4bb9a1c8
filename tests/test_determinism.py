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
DATASET_VERSION = "4.1"
GOLDEN = {
    "tests/configs/golden_atc.py": "32d385f7eddd3de111e7f9cb08123a3c81a9605c6fd403cc792dab2d086ff074",
    "tests/configs/golden_chain.py": "abae48f0e90757c565da13bf215067a88c45eca35c09a242274f79b480871af6",
    "tests/configs/golden_sparse.py": "4b31aee4c1229a5bcd9126d992779c029bfe3034e6fc7239fd66329b4f87afe4",
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
