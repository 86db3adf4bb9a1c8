"""Where a run stands, read from its folder alone: done and planned per model and dataset, the rate, an ETA,
and, for a run that stopped, what is left and the command that finishes it.

Why files only: a run on a cluster is watched from a login node that shares the work dir and nothing else,
and a run that crashed has no process left to ask. Everything comes from files the run writes anyway: the
plan (``needlebench_plan.json``: every piece's rows and prompt tokens, and which process runs the stage, since
when), the prediction files and their ``tmp_`` logs (what is done), the progress log (``progress_log.py``:
when), and the result files (what is scored). Reading never writes, locks or moves anything.

A run is *running* while the process its plan's history names for its last stage (infer or eval) is alive
on this host and started before that stage did (a process id the system gave to another process since is
not the run: :data:`PID_SLACK`), or, seen from another host, while it wrote a file in the last :data:`QUIET`
seconds; else it is *finished* (every piece predicted and every dataset scored) or *stopped*. The rate is
prompt tokens answered per second over the last :data:`WINDOW` seconds of the progress log (the first step in
the window is where it starts counting); the ETA is the plan's prompt tokens not yet answered at that rate, to
the end of the infer stage.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..planning.run import ModelRun, Part, Shard
from .cost_log import CostTally, tally_costs
from .ladder_rounds import pending
from .pieces import piece_done
from .plan_file import PLAN_FILE, StoredPlan, read_stored, resume_command, retry_command
from .progress_log import Step, read_progress

__all__ = [
    "PID_SLACK",
    "QUIET",
    "WINDOW",
    "DatasetProgress",
    "ModelProgress",
    "RunStatus",
    "StatusReader",
    "TaskProgress",
    "elapsed_seconds",
    "find_run",
    "stored_config",
]

WINDOW = 300.0  # seconds of the progress log the rate is measured over ("the last minutes")
QUIET = 600.0  # a run seen from another host that wrote nothing for this long is taken as stopped
RECENT = 60.0  # a run whose process ended but that wrote a file this recently: a task may outlive it (said)
# a stage's process starts before the stage records its time; one that started more than this after it holds a
# reused process id. The slack covers how the start is read: the boot time in whole seconds (Linux), ``ps``'s
# elapsed time in whole seconds (elsewhere)
PID_SLACK = 5.0


@dataclass(frozen=True)
class DatasetProgress:
    """One model's dataset: its samples and prompt tokens done against the plan.

    Args:
        dataset: the dataset's abbr.
        planned: samples planned.
        done: samples predicted (a prediction file's or its ``tmp_`` log's).
        planned_tokens: their prompt tokens, planned.
        done_tokens: the prompt tokens of the samples done.
        failed: requests that failed so far (asked again at the next resume or ``needlebench retry``).
        throttles: throttling answers its requests met (API models).
        scored: its result file is written.
        grid: in an adaptive run, the samples of the dataset's full grid, of which its rounds so far asked
            ``planned``; None where the plan holds no ladder for it.
    """

    dataset: str
    planned: int
    done: int
    planned_tokens: int
    done_tokens: int
    failed: int
    throttles: int
    scored: bool
    grid: int | None = None


@dataclass(frozen=True)
class TaskProgress:
    """One infer task (a shard of the plan).

    Args:
        index: the shard's number.
        state: ``finished``, ``running``, ``waiting`` (a live run has not come to it), ``stopped`` (begun,
            the run is not alive) or ``not started``.
        pieces: the prediction files it writes.
    """

    index: int
    state: str
    pieces: tuple[str, ...]


@dataclass(frozen=True)
class ModelProgress:
    """One model of the run.

    Args:
        abbr: the model's abbr.
        datasets: its needlebench datasets, in plan order.
        tasks: its infer tasks.
        rate: prompt tokens answered per second over the window; None where too little was answered in it.
        eta_s: seconds to the end of its infer tasks at that rate (a running run only).
        others: its datasets that are not needlebench's (OpenCompass runs them; not counted here).
        spent: what its requests have cost so far (its cost log, ``runfolder.cost_log``); None before any.
        devices: the GPUs each of its tasks holds (the plan's), for its device-hours.
        next_round: in an adaptive run whose latest round is answered and scored, the prompts the ladder's next
            round asks of this model (0: its ladders are decided); None otherwise.
    """

    abbr: str
    datasets: tuple[DatasetProgress, ...]
    tasks: tuple[TaskProgress, ...]
    rate: float | None
    eta_s: float | None
    others: tuple[str, ...] = ()
    spent: CostTally | None = None
    devices: int = 0
    next_round: int | None = None

    def total(self, name: str) -> int:
        """A count summed over the model's datasets (``planned``, ``done``, ``planned_tokens``, ...).

        Args:
            name: a :class:`DatasetProgress` count.
        """
        return sum(int(getattr(d, name)) for d in self.datasets)


@dataclass(frozen=True)
class RunStatus:
    """A run as its files show it at ``now``.

    Args:
        run: the run folder.
        state: ``running``, ``stopped`` or ``finished``.
        stage: ``infer`` (pieces to predict), ``eval`` (datasets to score), ``next round`` (an adaptive run
            whose ladder asks more once every round so far is scored) or ``done``.
        how: how the state is known (the process and host, or when a file was last written).
        started: when the last infer stage started (Unix seconds).
        last_write: when the run last wrote a prediction, progress line or result.
        now: when it was read.
        models: per model, in plan order.
        rate: prompt tokens per second over the window, all models together.
        eta_s: seconds to the end of the infer stage at that rate (a running run only).
        commands: for a run that is not running: the command that finishes it (none where nothing is left).
    """

    run: Path
    state: str
    stage: str
    how: str
    started: float | None
    last_write: float | None
    now: float
    models: tuple[ModelProgress, ...]
    rate: float | None
    eta_s: float | None
    commands: tuple[str, ...] = field(default=())

    def total(self, name: str) -> int:
        """A count summed over every model (:meth:`ModelProgress.total`).

        Args:
            name: a :class:`DatasetProgress` count.
        """
        return sum(m.total(name) for m in self.models)

    def left(self) -> list[str]:
        """What is left, a line per model and dataset: samples to predict, failed requests, scores to write."""
        lines = []
        for m in self.models:
            for d in m.datasets:
                parts = []
                if d.done < d.planned:
                    parts.append(f"{d.planned - d.done:,} of {d.planned:,} samples to predict")
                if d.failed:
                    parts.append(f"{d.failed:,} failed requests to ask again")
                if not d.scored:
                    parts.append("not scored")
                if parts:
                    lines.append(f"{m.abbr} / {d.dataset}: {', '.join(parts)}")
            if m.next_round:
                lines.append(f"{m.abbr}: the ladder's next round asks {m.next_round:,} prompts (adaptive run)")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The status as JSON data (``needlebench status --json``): the fields, the totals and what is left."""
        data = asdict(self)
        data["run"] = str(self.run)
        for model, m in zip(data["models"], self.models):
            model.update({k: m.total(k) for k in ("planned", "done", "planned_tokens", "done_tokens", "failed")})
            model["tasks_by_state"] = _by_state(m.tasks)
        data.update({k: self.total(k) for k in ("planned", "done", "planned_tokens", "done_tokens", "failed")})
        data["tasks_by_state"] = _by_state(t for m in self.models for t in m.tasks)
        data["left"] = self.left()
        return data


def _by_state(tasks: Iterable[TaskProgress]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.state] = counts.get(t.state, 0) + 1
    return counts


def find_run(path: Path | str, command: str = "status") -> Path:
    """The run folder a path names: itself where it holds a plan, else its newest run folder that does.

    Args:
        path: a run folder (``<work_dir>/<time>``) or a work dir.
        command: the command asking, named in the error.

    Raises:
        ConfigError: no such folder, or neither it nor a folder in it holds a needlebench plan.
    """
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{command}: no such folder {path}")
    if (path / PLAN_FILE).is_file():
        return path
    runs = sorted(p for p in path.iterdir() if (p / PLAN_FILE).is_file())
    if not runs:
        raise ConfigError(
            f"{command}: {path} is not a needlebench run (no {PLAN_FILE} in it or in a run folder in it); give "
            "<work_dir> or <work_dir>/<time> of a run started with needlebench's partitioner"
        )
    return runs[-1]


def stored_config(run: Path) -> Path | None:
    """The config OpenCompass stored in the run (its newest dump, ``configs/<time>.py``), which a resume is given.

    Args:
        run: the run folder.
    """
    configs = sorted((Path(run) / "configs").glob("*.py"))
    return configs[-1] if configs else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _started(pid: int) -> float | None:
    """When a process started (Unix seconds), or None where it cannot be read (the process is gone, or neither
    ``/proc`` nor ``ps`` says).

    Linux: ``/proc/<pid>/stat``'s field 22 (clock ticks since boot) after ``/proc/stat``'s ``btime``. Elsewhere
    (macOS, the BSDs): ``ps -o etime=``, the time since it started.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        boot = Path("/proc/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():  # Linux: the process is gone
            return None
        return _ps_started(pid)
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    found = re.search(r"^btime (\d+)$", boot, re.MULTILINE)
    if len(fields) < 20 or not fields[19].isdigit() or found is None:
        return None
    return int(found.group(1)) + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: the 20th after ")"


def _ps_started(pid: int) -> float | None:
    """When a process started, from ``ps``'s elapsed time (the platforms without ``/proc``)."""
    try:
        out = subprocess.run(
            ["ps", "-o", "etime=", "-p", str(pid)], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    elapsed = elapsed_seconds(out)
    return time.time() - elapsed if elapsed is not None else None


def elapsed_seconds(text: str) -> int | None:
    """``ps``'s elapsed time, ``[[dd-]hh:]mm:ss``, in seconds; None for anything else.

    Args:
        text: what ``ps -o etime=`` printed.
    """
    found = re.fullmatch(r"\s*(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)\s*", text)
    if found is None:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _count_lines(path: Path, known: tuple[int, int, int] | None) -> tuple[int, int, int]:
    """(inode, bytes read, lines) of a growing ``tmp_`` log, counting only what was appended since ``known``."""
    stat = path.stat()
    inode, offset, lines = known if known and known[0] == stat.st_ino and known[1] <= stat.st_size else (0, 0, 0)
    with path.open("rb") as fh:
        fh.seek(offset)
        while chunk := fh.read(1 << 22):
            lines += chunk.count(b"\n")
            offset += len(chunk)
    return stat.st_ino, offset, lines


class StatusReader:
    """Reads one run's status, again and again, reading only what changed since the last time.

    Why a reader: ``needlebench status --watch`` and the live view of ``needlebench run`` redraw a few times
    a second; a 1000k run has thousands of pieces and ``tmp_`` logs of gigabytes. The plan is read again
    only when its file changes, the progress logs and ``tmp_`` logs from where the last read ended, and a
    piece found whole is not opened again.

    Args:
        run: the run folder (:func:`find_run`).
        host: this machine's name (a run on another host is judged by its files' times).
    """

    def __init__(self, run: Path | str, host: str | None = None) -> None:
        self.run = Path(run)
        self.host = host if host is not None else socket.gethostname()
        self._plan_key: tuple[int, int] | None = None
        self._stored: StoredPlan | None = None
        self._steps: dict[str, list[Step]] = {}  # model -> its progress log's steps
        self._offsets: dict[str, int] = {}
        self._lines: dict[Path, tuple[int, int, int]] = {}
        self._whole: dict[Path, tuple[int, int]] = {}  # prediction file -> (size, mtime) when found whole
        self._costs: dict[str, tuple[int, int, CostTally]] = {}  # model -> its cost log, read so far

    def _plan(self) -> StoredPlan:
        path = self.run / PLAN_FILE
        stat = path.stat()
        key = (stat.st_size, stat.st_mtime_ns)
        if key != self._plan_key or self._stored is None:
            stored = read_stored(self.run)
            if stored is None:
                raise ConfigError(f"status: {path} cannot be read as a needlebench plan")
            self._stored, self._plan_key = stored, key
            self._steps.clear()
            self._offsets.clear()
        return self._stored

    def _read_steps(self, model: str) -> list[Step]:
        steps, self._offsets[model] = read_progress(self.run / "predictions" / model, self._offsets.get(model, 0))
        self._steps.setdefault(model, []).extend(steps)
        return self._steps[model]

    def _done(self, folder: Path, part: Part, last: Step | None) -> tuple[int, bool, float | None]:
        """(samples done, begun, last write time) of one piece."""
        rows = part.size
        final = folder / f"{part.abbr}.json"
        whole = folder / f"{part.dataset}.json"
        for path in (final, whole):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            key = (stat.st_size, stat.st_mtime_ns)
            if self._whole.get(path) == key or piece_done(folder, part.dataset, part.abbr):
                self._whole[path] = key
                return rows, True, stat.st_mtime
        log = folder / f"tmp_{part.abbr}.jsonl"
        try:
            stat = log.stat()
        except FileNotFoundError:
            return (min(rows, last.done), True, last.t) if last else (0, False, None)
        if last is not None and last.t >= stat.st_mtime - 2:  # the step was written after the log's last lines
            return min(rows, last.done), True, stat.st_mtime
        self._lines[log] = _count_lines(log, self._lines.get(log))
        return min(rows, self._lines[log][2]), True, stat.st_mtime

    def read(self, now: float | None = None) -> RunStatus:
        """The run's status now.

        Args:
            now: the time to read it at (Unix seconds; default: the clock).

        Raises:
            ConfigError: the run's plan is gone or unreadable.
        """
        now = time.time() if now is None else now
        try:
            stored = self._plan()
        except FileNotFoundError:
            raise ConfigError(f"status: {self.run} has no {PLAN_FILE}") from None
        last_stage = stored.history[-1] if stored.history else {}  # the live stage: infer or eval
        infer = [h for h in stored.history if h.get("stage") != "eval"]
        started = float((infer[-1] if infer else {}).get("at") or (self.run / PLAN_FILE).stat().st_mtime)
        writes: list[float] = []
        models, timed = [], []  # timed: (prompt tokens per row of the step's piece, step), every model's
        for model_run in stored.plan.models:
            steps = self._read_steps(model_run.abbr)
            per_row = _tokens_per_row(model_run)
            models.append(self._model(model_run, per_row, steps, started, writes))
            timed.append([(per_row.get(s.abbr, 0.0), s) for s in steps])
        for m in models:
            writes += [
                (self.run / "results" / m.abbr / f"{d.dataset}.json").stat().st_mtime for d in m.datasets if d.scored
            ]
        last_write = max(writes, default=None)
        state, how = self._state(last_stage, last_write, now)
        end = now if state == "running" else max((s.t for steps in timed for _, s in steps), default=now)

        def eta(planned: int, done: int, rate: float | None) -> float | None:
            return (planned - done) / rate if rate and state == "running" else None

        models = [
            dataclasses.replace(
                m, rate=(r := _rate(steps, end)), eta_s=eta(m.total("planned_tokens"), m.total("done_tokens"), r)
            )
            for m, steps in zip(models, timed)
        ]
        models = [_settle(m, state == "running") for m in models]
        rate = _rate([x for steps in timed for x in steps], end)
        status = RunStatus(self.run, state, "", how, started, last_write, now, tuple(models), rate, None)
        stage = "infer" if status.total("done") < status.total("planned") else "eval"
        if all(d.scored for m in models for d in m.datasets):
            stage = "done" if stage == "eval" else stage
        if stage == "done" and stored.plan.settings.adaptive is not None:
            asks = pending(stored.plan, self.run)
            models = [dataclasses.replace(m, next_round=asks.get(m.abbr)) for m in models]
            status = dataclasses.replace(status, models=tuple(models))
            stage = "next round" if any(asks.values()) else stage
        if state == "stopped" and stage == "done":
            state = "finished"
        elif state == "stopped" and last_write is not None and now - last_write < RECENT:
            how += f"; a file was written {now - last_write:,.0f} s ago: a task it started may still run"
        status = dataclasses.replace(
            status,
            state=state,
            stage=stage,
            how=how,
            eta_s=eta(status.total("planned_tokens"), status.total("done_tokens"), rate),
        )
        return dataclasses.replace(status, commands=_commands(status)) if state != "running" else status

    def _model(
        self,
        model_run: ModelRun,
        per_row: dict[str, float],
        steps: list[Step],
        started: float,
        writes: list[float],
    ) -> ModelProgress:
        folder = self.run / "predictions" / model_run.abbr
        last = {s.abbr: s for s in steps}  # each piece's latest step
        if steps:
            writes.append(steps[-1].t)
        sums: dict[str, list[int]] = {}  # dataset -> planned, done, planned tokens, done tokens, failed, throttles
        tasks = []
        for shard in model_run.shards:
            states = []
            for part in shard.parts:
                done, begun, written = self._done(folder, part, last.get(part.abbr))
                if written is not None:
                    writes.append(written)
                rows = part.size
                row = sums.setdefault(part.dataset, [0, 0, 0, 0, 0, 0])
                step = last.get(part.abbr)
                row[0] += rows
                row[1] += done
                row[2] += round(per_row[part.abbr] * rows)
                row[3] += round(per_row[part.abbr] * done)
                row[4] += step.failed if step else 0
                row[5] += step.throttles if step else 0
                recent = step is not None and step.t >= started
                states.append("done" if done >= rows else "active" if recent else "begun" if begun else "none")
            tasks.append((shard, states))
        results = self.run / "results" / model_run.abbr
        grids = {abbr: grid.size for abbr, grid in model_run.ladders.items()}
        datasets = tuple(
            DatasetProgress(abbr, *row[:4], row[4], row[5], (results / f"{abbr}.json").is_file(), grids.get(abbr))
            for abbr, row in sums.items()
        )
        return ModelProgress(
            model_run.abbr,
            datasets,
            tuple(
                TaskProgress(shard.index, _task_state(states), tuple(p.abbr for p in shard.parts))
                for shard, states in tasks
            ),
            None,
            None,
            tuple(model_run.others),
            self._spent(model_run.abbr, folder),
            model_run.devices,
        )

    def _spent(self, model: str, folder: Path) -> CostTally | None:
        self._costs[model] = tally = tally_costs(folder, self._costs.get(model))
        return tally[2] if tally[2].requests else None

    def _state(self, last_stage: dict[str, Any], last_write: float | None, now: float) -> tuple[str, str]:
        host, pid, at = last_stage.get("host"), last_stage.get("pid"), last_stage.get("at")
        if host == self.host and isinstance(pid, int):
            stage = " its eval stage" if last_stage.get("stage") == "eval" else ""
            if not _alive(pid):
                return "stopped", f"process {pid} on {host} has ended"
            began = _started(pid)
            if began is not None and isinstance(at, int | float) and began > at + PID_SLACK:
                return "stopped", (
                    f"process {pid} on {host} has ended: that id is another process's now, started "
                    f"{began - at:,.0f} s after the stage (the pid was reused)"
                )
            return "running", f"process {pid} on {host} is running{stage or ' it'}"
        where = f"run on {host}" if host else "no process recorded in its plan"
        if last_write is not None and now - last_write < QUIET:
            return "running", f"{where}; a file was written {now - last_write:,.0f} s ago"
        ago = f"nothing written for {now - last_write:,.0f} s" if last_write else "nothing written yet"
        return "stopped", f"{where}; {ago}"


def _settle(model: ModelProgress, live: bool) -> ModelProgress:
    """Task states as the run's state has them: in a live run a task begun in an earlier stage waits for this
    one's turn; in a run that is not live no task runs (one begun this stage stopped with it)."""
    moved = {"stopped": "waiting"} if live else {"running": "stopped"}
    tasks = tuple(dataclasses.replace(t, state=moved.get(t.state, t.state)) for t in model.tasks)
    return dataclasses.replace(model, tasks=tasks)


def _task_state(states: list[str]) -> str:
    """An infer task's state from its pieces' (``done``, ``active`` this stage, ``begun`` before, ``none``)."""
    if all(s == "done" for s in states):
        return "finished"
    if "active" in states:
        return "running"
    if "begun" in states or "done" in states:
        return "stopped"
    return "not started"


def _tokens_per_row(model_run: ModelRun) -> dict[str, float]:
    """Per piece abbr, its prompt tokens per row (a plan stored before pieces held tokens: the shard's mean)."""
    out: dict[str, float] = {}
    for shard in model_run.shards:
        for part in shard.parts:
            rows = max(1, part.size)
            out[part.abbr] = part.prompt_tokens / rows if part.prompt_tokens else _shard_mean(shard)
    return out


def _shard_mean(shard: Shard) -> float:
    return shard.prompt_tokens / max(1, shard.samples)


def _rate(steps: list[tuple[float, Step]], end: float) -> float | None:
    """Prompt tokens per second over the window ending at ``end``: the tokens answered after the window's first
    step, over the time since it (None with fewer than two steps in it, or no time)."""
    inside = sorted(((t, s) for t, s in steps if s.t > end - WINDOW), key=lambda x: x[1].t)
    if len(inside) < 2 or end <= inside[0][1].t:
        return None
    answered = sum(t * s.new for t, s in inside[1:])
    return answered / (end - inside[0][1].t) if answered else None


def _commands(status: RunStatus) -> tuple[str, ...]:
    """The command that finishes a run that is not running: a resume where pieces or scores are left (it asks
    failed requests again too) or an adaptive run's ladder asks another round, ``needlebench retry`` where only
    failed requests are, else none."""
    run = status.run
    if status.stage != "done":
        config = stored_config(run)
        if config is None:
            return ()
        adaptive = any(d.grid is not None for m in status.models for d in m.datasets)  # killed mid-round too
        return (resume_command(run, config, adaptive=adaptive),)
    if status.total("failed"):
        return (retry_command(run),)
    return ()
