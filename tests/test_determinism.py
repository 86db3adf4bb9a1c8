"""Golden digests: the exact bytes three small configs export, in any process.

Rule: a change to these digests is a change to the benchmark. Change them
only together with ``needlebench.sample.DATASET_VERSION``, and say in
CHANGELOG.md what changed in the samples (prompts, gold, ids or meta)
and why. A digest that moves without a version bump means generation
changed by accident: find out why before touching this file.

The rule is checked, not only written: each digest carries the version it was
recorded under, and a digest that differs at the same version fails with
"digest changed without a DATASET_VERSION bump". That covers the export and
this table itself: the table's (config, version) -> digest must be the one
every committed version of this file recorded (git history), so editing a
digest in place at the same version fails too. Three past edits did that,
before the check existed (``PAST_EDITS``).

Print the current digests with::

    .venv/bin/python tests/test_determinism.py
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDLEBENCH = str(Path(sys.executable).parent / "needlebench")
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

# config -> (the DATASET_VERSION it was recorded under, sha256 of `needlebench export CONFIG`)
GOLDEN = {
    "tests/configs/golden_atc.py": ("4.1", "32d385f7eddd3de111e7f9cb08123a3c81a9605c6fd403cc792dab2d086ff074"),
    "tests/configs/golden_chain.py": ("4.1", "abae48f0e90757c565da13bf215067a88c45eca35c09a242274f79b480871af6"),
    "tests/configs/golden_sparse.py": ("4.1", "4b31aee4c1229a5bcd9126d992779c029bfe3034e6fc7239fd66329b4f87afe4"),
}
# Digests that moved at the same version before this check existed: (config, version) as committed then
# (05bed87 golden_sparse at 2.1, 6bb3177 golden_chain at 2.2, the 17333cb merge golden_chain and golden_sparse at 3.0).
PAST_EDITS = frozenset(
    {
        ("tests/configs/golden_sparse.py", "2.1"),
        ("tests/configs/golden_chain.py", "2.2"),
        ("tests/configs/golden_chain.py", "3.0"),
        ("tests/configs/golden_sparse.py", "3.0"),
    }
)


def digest_problem(config: str, digest: str, version: str, golden: Mapping[str, tuple[str, str]]) -> str | None:
    """What is wrong with an export's digest against the table, or None.

    Args:
        config: the config exported.
        digest: the export's sha256.
        version: the package's DATASET_VERSION now.
        golden: the table (config -> (version recorded under, digest)).
    """
    recorded_under, recorded = golden[config]
    if (recorded_under, recorded) == (version, digest):
        return None
    if recorded_under == version:
        return (
            f"{config}: digest changed without a DATASET_VERSION bump (still {version}): recorded {recorded}, "
            f"exported {digest}; see this module's docstring"
        )
    return (
        f"{config}: DATASET_VERSION is {version}, its digest was recorded under {recorded_under}: record the new "
        f"digest under {version} (python {THIS}) and say in CHANGELOG.md what changed"
    )


def recorded_digests(text: str) -> dict[tuple[str, str], str]:
    """(config, version) -> digest, as one version of this file records them: this layout, or the former one (one
    ``DATASET_VERSION = "x"`` for a table of config -> digest); a digest not yet computed ("TBD") is left out.

    Args:
        text: the file's text.
    """
    pairs = re.findall(r'"(tests/configs/[\w.]+)": \("([\d.]+)", "([0-9a-f]{64})"\)', text)
    if pairs:
        return {(config, version): digest for config, version, digest in pairs}
    (version,) = re.findall(r'^DATASET_VERSION = "([\d.]+)"$', text, re.M)
    return {(c, version): d for c, d in re.findall(r'"(tests/configs/[\w.]+)": "([0-9a-f]{64})"', text)}


def digest_conflicts(tables: Iterable[tuple[str, str]], past: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """Each (config, version) recorded with two digests across versions of this file, naming both.

    Args:
        tables: (where, the file's text) per version of the file: a commit, or the working tree.
        past: (config, version) pairs known to have moved before the check existed.
    """
    seen: dict[tuple[str, str], dict[str, str]] = {}  # (config, version) -> {digest: where first recorded}
    problems = []
    for where, text in tables:
        for key, digest in recorded_digests(text).items():
            digests = seen.setdefault(key, {})
            if digests and digest not in digests and key not in past:
                first, at = next(iter(digests.items()))
                problems.append(
                    f"{key[0]}: digest changed without a DATASET_VERSION bump (still {key[1]}): {first} in {at}, "
                    f"{digest} in {where}"
                )
            digests.setdefault(digest, where)
    return problems


def _committed_tables() -> list[tuple[str, str]]:
    """(commit, this file's text) for every commit that changed it, oldest first (none outside a git checkout)."""
    if not (ROOT / ".git").exists():
        return []
    log = subprocess.run(
        ["git", "log", "--reverse", "--format=%h", "--", THIS], cwd=ROOT, capture_output=True, text=True, check=True
    )
    show = [
        subprocess.run(["git", "show", f"{c}:{THIS}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for c in log.stdout.split()
    ]
    return list(zip(log.stdout.split(), show, strict=True))


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

    stale = [c for c, (version, _) in GOLDEN.items() if version != current]
    assert stale == [], f"new dataset version {current}: record these digests under it ({THIS}'s docstring): {stale}"


@pytest.mark.parametrize("config", sorted(GOLDEN))
def test_export_matches_golden_digest_under_any_hash_seed(config: str, tmp_path: Path) -> None:
    from needlebench.sample import DATASET_VERSION as current

    a = export_digest(config, tmp_path / "a.jsonl", hash_seed="0")
    b = export_digest(config, tmp_path / "b.jsonl", hash_seed="4242")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a == b, f"{config}: the export depends on PYTHONHASHSEED"
    assert digest_problem(config, a, current, GOLDEN) is None, digest_problem(config, a, current, GOLDEN)


def test_no_digest_moved_at_the_same_version_in_this_files_history() -> None:
    """Every committed version of this table and the working one agree on each (config, version)'s digest."""
    tables = [*_committed_tables(), ("the working tree", Path(__file__).read_text(encoding="utf-8"))]
    assert digest_conflicts(tables, PAST_EDITS) == []


def test_the_checker_fails_a_digest_changed_without_a_version_bump() -> None:
    """The checks above on modified tables: the export moved at the same version; the version moved; a table
    edited in place (a second digest for one version); and the past edits, which it would have caught."""
    config = "tests/configs/golden_atc.py"
    version, digest = GOLDEN[config]
    moved = "0" * 64
    assert digest_problem(config, digest, version, GOLDEN) is None
    said = digest_problem(config, moved, version, GOLDEN)
    assert said is not None and said.startswith(f"{config}: digest changed without a DATASET_VERSION bump (still")
    assert f"recorded {digest}, exported {moved}" in said
    bumped = digest_problem(config, moved, "9.9", GOLDEN)
    assert bumped is not None and f"DATASET_VERSION is 9.9, its digest was recorded under {version}" in bumped
    # a table edited in place: this file's text with one digest changed, against itself unchanged
    text = Path(__file__).read_text(encoding="utf-8")
    edited = text.replace(digest, moved, 1)
    assert recorded_digests(edited)[(config, version)] == moved
    (conflict,) = digest_conflicts([("HEAD", text), ("the edit", edited)])
    assert conflict == (
        f"{config}: digest changed without a DATASET_VERSION bump (still {version}): {digest} in HEAD, {moved} in "
        "the edit"
    )
    bumped_table = edited.replace(f'("{version}", "{moved}")', f'("9.9", "{moved}")')
    assert digest_conflicts([("HEAD", text), ("a bump", bumped_table)]) == []  # a new version: a new digest
    # the former layout, as 2d1c4e9 and 05bed87 committed it: golden_sparse moved at 2.1
    former = 'DATASET_VERSION = "2.1"\nGOLDEN = {{\n    "tests/configs/golden_sparse.py": "{}",\n}}\n'
    found = digest_conflicts([("2d1c4e9", former.format("d" * 64)), ("05bed87", former.format("f" * 64))])
    assert found == [
        f"tests/configs/golden_sparse.py: digest changed without a DATASET_VERSION bump (still 2.1): {'d' * 64} "
        f"in 2d1c4e9, {'f' * 64} in 05bed87"
    ]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for name in sorted(GOLDEN):
            from needlebench.sample import DATASET_VERSION as current

            print(f'    "{name}": ("{current}", "{export_digest(name, Path(folder) / "out.jsonl")}"),')
