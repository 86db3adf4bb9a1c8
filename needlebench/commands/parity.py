"""``needlebench parity``: the parity proof a user runs on their own OpenCompass and data files.

A thin layer over ``parity.py``: it runs the check, prints the report, and writes it as
``parity.json`` (the figures a leaderboard or a reviewer reads) and ``parity.md`` beside each other.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError
from ..files import atomic_write

__all__ = ["PARITY_FILE", "run_parity"]

PARITY_FILE = "parity.json"


def run_parity(
    data: Path,
    out: Path,
    profile: str = "v1",
    suite: str = "4k",
    render: str = "prompt",
    tasks: Sequence[str] | None = None,
    every: bool = False,
    quiet: bool = False,
) -> tuple[bool, Path]:
    """Check a suite's prompts and scores against the installed OpenCompass on the user's data files.

    Args:
        data: OpenCompass's NeedleBench data folder.
        out: the folder ``parity.json`` and ``parity.md`` go to (made if missing).
        profile: ``v2`` or ``v1``.
        suite: ``4k`` ... ``1000k``.
        render: ``prompt`` or ``raw``.
        tasks: any of ``srt``, ``mrt``, ``mrs`` (default: all).
        every: every cell at the config's repeats instead of a sample.
        quiet: no line per compared cell on stderr.

    Returns:
        (whether it passed, the ``parity.json`` written).

    Raises:
        ConfigError: a missing or partial data folder (a file the tasks read missing, empty or not UTF-8), an
            output that is a file, or an unknown profile, suite, render or task.
    """
    from ..parity import check_parity

    if out.exists() and not out.is_dir():  # found before the check's minutes, not after
        raise ConfigError(f"--output: {out} is a file; give a folder for parity.json and parity.md")
    progress = None if quiet else (lambda line: print(line, file=sys.stderr))
    report = check_parity(data, profile, suite, render, tasks, every, progress)
    out.mkdir(parents=True, exist_ok=True)
    target = out / PARITY_FILE
    text = report.markdown()
    for path, body in (
        (target, json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n"),
        (out / "parity.md", text),
    ):
        with atomic_write(path) as tmp:
            tmp.write_text(body, encoding="utf-8")
    print(text, end="")
    return report.passed, target
