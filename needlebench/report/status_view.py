"""A run's status drawn for a person: ``needlebench status`` and the live view of ``needlebench run``.

The numbers are ``runfolder.status``'s; this module only lays them out, with rich (``terminal.py``): a
headline (state, stage, how it is known), the totals with the rate and the ETA, a table per model and
dataset, and, for a run that is not running, what is left and the command that finishes it. The live
view (:class:`LiveStatus`) is the compact form: one row per model and the datasets in progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..runfolder.status import DatasetProgress, ModelProgress, RunStatus, StatusReader
from ..terminal import console

__all__ = ["LiveStatus", "duration", "status_view"]

MAX_LEFT = 20  # lines of "what is left" drawn before "... and N more"


def duration(seconds: float | None) -> str:
    """``1h 02m``, ``4m 05s``, ``12s``; ``-`` where unknown.

    Args:
        seconds: a duration.
    """
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def _share(done: int, planned: int) -> str:
    return f"{done:,}/{planned:,}" + (f" ({100 * done / planned:.0f}%)" if planned else "")


def _asked(datasets: Sequence[DatasetProgress]) -> str:
    """An adaptive run's datasets: the samples its rounds asked, against their full grid's (a dataset without a
    ladder, asked whole, its own); nothing for a full-grid run."""
    if all(d.grid is None for d in datasets):
        return ""
    return f" of a grid of {sum(d.planned if d.grid is None else d.grid for d in datasets):,} (adaptive)"


def _tasks(status: RunStatus, model: ModelProgress | None = None) -> str:
    tasks = [t for m in ([model] if model else status.models) for t in m.tasks]
    order = ("running", "waiting", "stopped", "not started", "finished")
    counts = {s: sum(t.state == s for t in tasks) for s in order}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no tasks"


def _headline(status: RunStatus) -> list[RenderableType]:
    colour = {"running": "green", "stopped": "yellow", "finished": "cyan"}[status.state]
    head = Text.assemble(
        ("needlebench ", "bold"), (status.state, f"bold {colour}"), f" · {status.stage} · {status.run}"
    )
    rate = f"{status.rate:,.0f} prompt tokens/s" if status.rate else "rate -"
    totals = (
        f"samples {_share(status.total('done'), status.total('planned'))} · prompt tokens "
        f"{_share(status.total('done_tokens'), status.total('planned_tokens'))} · {rate} · ETA {duration(status.eta_s)}"
        f" · tasks: {_tasks(status)}"
    )
    return [head, Text(f"{status.how}", style="dim"), Text(totals)]


def spent_lines(status: RunStatus) -> list[str]:
    """Per model, what its requests have cost so far (its cost log) against the plan's prompt tokens."""
    lines = []
    for m in status.models:
        s = m.spent
        if s is None:
            continue
        wall = s.sums.get("wall_s", 0.0)
        hours = f", {wall * m.devices / 3600:,.2f} device-h" if m.devices else ""
        cached = s.reported.get("cached_tokens", 0)
        engine = (
            f"; the engine counted {s.sums.get('prompt_tokens', 0):,.0f} prompt tokens "
            f"({s.sums['cached_tokens']:,.0f} cached) over {cached:,} of them"
            if cached
            else ""
        )
        lines.append(
            f"spent by {m.abbr}: {s.requests:,} requests, {duration(wall)} on the clock{hours}{engine}; "
            f"the plan: {m.total('planned_tokens'):,} prompt tokens, {m.total('done_tokens'):,} answered"
        )
    return lines


def status_view(status: RunStatus, compact: bool = False) -> RenderableType:
    """The status as rich renders it: headline, totals, the table, what is left and the command.

    Args:
        status: the run's status.
        compact: one row per model and only the datasets in progress (the live view).
    """
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, right in (("model", False), ("dataset", False), ("samples", True), ("prompt tokens", True)):
        table.add_column(name, justify="right" if right else "left")
    for name in ("failed", "throttled", "rate/s", "ETA", "tasks" if compact else "scored"):
        table.add_column(name, justify="right" if name != "tasks" else "left")
    for m in status.models:
        rate = f"{m.rate:,.0f}" if m.rate else "-"
        table.add_row(
            Text(m.abbr, style="bold"),
            f"{len(m.datasets)} datasets" + (f" (+{len(m.others)} not needlebench's)" if m.others else ""),
            _share(m.total("done"), m.total("planned")) + _asked(m.datasets),
            _share(m.total("done_tokens"), m.total("planned_tokens")),
            f"{m.total('failed'):,}",
            f"{m.total('throttles'):,}",
            rate,
            duration(m.eta_s),
            _tasks(status, m) if compact else f"{sum(d.scored for d in m.datasets)}/{len(m.datasets)}",
        )
        for d in m.datasets:
            if compact and not 0 < d.done < d.planned:
                continue
            table.add_row(
                "",
                d.dataset,
                _share(d.done, d.planned) + _asked([d]),
                _share(d.done_tokens, d.planned_tokens),
                f"{d.failed:,}",
                f"{d.throttles:,}",
                "",
                "",
                "" if compact else ("yes" if d.scored else "no"),
            )
    parts: list[RenderableType] = [*_headline(status), table]
    parts += [Text(f"  {line}", style="dim") for line in spent_lines(status)]
    if status.state != "running":
        left = status.left()
        if left:
            parts.append(Text("left:", style="bold"))
            parts += [Text(f"  {line}") for line in left[:MAX_LEFT]]
            if len(left) > MAX_LEFT:
                parts.append(Text(f"  ... and {len(left) - MAX_LEFT} more (needlebench status RUN --json lists all)"))
        for command in status.commands:
            parts.append(Text.assemble(("to finish: ", "bold"), command))
    return Group(*parts)


class LiveStatus:
    """The live view of a run on the terminal, redrawn from its files a few times a second in a thread.

    The thread only reads (``runfolder.status.StatusReader``); the tasks run in their own processes and never
    wait for it. Until the run's folder is known (``find``), it says the run is being planned.

    Args:
        find: returns the run folder once it exists (called each redraw until it does), else None.
        interval: seconds between reads.
    """

    def __init__(self, find: Callable[[], Path | None], interval: float = 0.5) -> None:
        self._find, self._interval = find, interval
        self._reader: StatusReader | None = None
        self._view: RenderableType = Text("needlebench: planning the run ...", style="dim")
        self._stop = threading.Event()
        self._live = Live(
            get_renderable=lambda: self._view,
            console=console(),
            refresh_per_second=4,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        self._thread = threading.Thread(target=self._loop, name="needlebench-live", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.refresh()

    def refresh(self) -> None:
        """Read the run again and replace the view (a read that fails keeps the last view)."""
        try:
            if self._reader is None:
                run = self._find()
                if run is None:
                    return
                self._reader = StatusReader(run)
            self._view = status_view(self._reader.read(time.time()), compact=True)
        except Exception:  # noqa: BLE001 - a display never stops the run; the next read tries again
            return

    def __enter__(self) -> LiveStatus:
        self._live.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.refresh()
        self._live.stop()
