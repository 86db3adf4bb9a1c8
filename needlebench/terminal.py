"""The terminal: every display the package draws goes through rich (which OpenCompass installs too).

Why one module: the export, score and report counts and the run's status (``report/status_view.py``) must
agree on when to draw at all. They draw on a terminal only, never into a pipe or a log file (a
redirected run's log holds no carriage returns or escape codes), and never when asked to be quiet.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

__all__ = ["Counting", "console", "is_terminal"]


def is_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default ``sys.stderr``) is a terminal a display may draw on.

    Args:
        stream: the stream to draw on.
    """
    stream = stream if stream is not None else sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def console(stream: TextIO | None = None) -> Console:
    """A rich console on ``stream`` (default ``sys.stderr``): colours and redraws only where it is a terminal, 200
    columns where it is not.

    Args:
        stream: the stream to draw on.
    """
    stream = stream if stream is not None else sys.stderr
    terminal = is_terminal(stream)
    # a pipe or a file has no width: wide enough for a status table's columns, never wrapped at 80
    return Console(file=stream, force_terminal=terminal, width=None if terminal else 200, highlight=False)


class _Rate(ProgressColumn):
    """Items per second since the start (rich's own speed column counts bytes)."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        return Text(f"{task.completed / elapsed:,.0f}/s" if elapsed > 0 else "")


class Counting:
    """A count of items as they are done, drawn as one line (a bar where the total is known).

    Args:
        label: what is counted (``"samples"``).
        total: how many there will be, where known.
        quiet: never draw.
        stream: where to draw (default ``sys.stderr``); nothing is drawn unless it is a terminal.
    """

    def __init__(self, label: str, total: int | None = None, quiet: bool = False, stream: TextIO | None = None):
        self.count = 0
        self._progress: Progress | None = None
        if not quiet and is_terminal(stream):
            columns: list[Any] = [TextColumn("{task.description}")]
            if total:
                columns.append(BarColumn())
            columns += [MofNCompleteColumn() if total else TextColumn("{task.completed:,.0f}"), _Rate()]
            columns.append(TimeElapsedColumn())
            self._progress = Progress(*columns, console=console(stream), refresh_per_second=5)
            self._task = self._progress.add_task(label, total=total)
            self._progress.start()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items.

        Args:
            n: items done since the last call.
        """
        self.count += n
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def close(self) -> None:
        """Draw the final count and end the line (where anything is drawn)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
