"""``needlebench leaderboard`` and ``needlebench verify``: many runs on the papers' boards, and a bundle checked.

``leaderboard RUN [RUN ...] -o DIR`` reads each run (an OpenCompass work dir or run folder, or a
``needlebench score`` output), lays its rows out on the papers' table shapes beside the papers' own rows and
writes ``leaderboard.csv``, ``leaderboard.md`` and ``leaderboard.html`` into DIR.
``verify BUNDLE RUN`` recomputes a run's ``results.json`` from its graded samples and lists what differs.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..report.board_pages import number, write_leaderboard
from ..report.bundle import Verification, verify_bundle
from ..report.leaderboard import PUBLISHED, Leaderboard, build_leaderboard

__all__ = ["make_leaderboard", "summary_lines", "verify", "verification_lines"]


def make_leaderboard(runs: list[Path], out: Path, published: bool = True) -> tuple[Leaderboard, dict[str, Path]]:
    """Build the leaderboard of some runs and write its three files.

    Args:
        runs: the runs (work dirs, run folders or ``needlebench score`` outputs).
        out: the folder for ``leaderboard.{csv,md,html}``.
        published: put the papers' rows beside the measured ones.

    Raises:
        ConfigError: no run, a run that does not exist, or runs without any needlebench results.
    """
    lb = build_leaderboard(runs, published=published)
    if not any(r.kind != PUBLISHED for b in lb.boards for r in b.rows):
        raise ConfigError("leaderboard: no needlebench results in " + "; ".join(lb.warnings or map(str, runs)))
    return lb, write_leaderboard(lb, out)


def summary_lines(lb: Leaderboard) -> list[str]:
    """A few lines per board for the terminal: each measured row's rank, value and comparability."""
    lines = []
    for b in lb.boards:
        measured = [r for r in b.rows if r.kind != PUBLISHED]
        papers = (
            f", {len(b.rows) - len(measured)} published row(s) from {', '.join(b.published)}" if b.published else ""
        )
        lines.append(f"{b.title}: {len(measured)} measured row(s){papers}")
        for r in measured:
            rank = f"rank {r.rank}{r.rank_class}" if r.rank else "unranked"
            done = "" if r.complete else ", incomplete"
            why = r.comparability.text if r.comparability else ""
            lines.append(f"  {rank}: {r.name} {r.rank_by} {number(r.value.value) or '-'}{done}; {why}")
    return lines


def verify(bundle: Path, run: Path) -> Verification:
    """Check a results bundle against the run it names (see :func:`~needlebench.report.bundle.verify_bundle`).

    Args:
        bundle: the ``results.json``.
        run: the run folder or work dir.
    """
    return verify_bundle(bundle, run)


def verification_lines(found: Verification, bundle: Path, run: Path) -> list[str]:
    """What ``needlebench verify`` prints: the verdict, then every difference, then the notes."""
    if found.ok:
        head = f"ok: {bundle} matches {run} ({found.samples} samples, {found.numbers} numbers recomputed)"
    else:
        head = f"differs: {bundle} does not match {run} ({len(found.failures)} difference(s))"
    return [head, *(f"  {f}" for f in found.failures), *(f"  note: {n}" for n in found.notes)]
