"""The progress log: when each batch of a prediction file was answered (``predictions/<model>/needlebench_progress.jsonl``).

Why a file: a prediction file and its ``tmp_`` log say how much is done, not when. ``needlebench status``
reads a run from its files alone (from a Slurm login node too), and a rate and an ETA need times. The
inferencer appends one line when it starts a prediction file (``new`` 0: the samples a resume restored) and
one after each batch: ``{"abbr", "t", "done", "new", "failed", "throttles"}``, where ``done`` is the samples
the file holds so far, ``new`` those just answered, ``failed`` its requests failed so far and ``throttles``
the throttling answers its flow control met so far (API models; 0 otherwise). A line is a few dozen
bytes a batch; nothing reads it to decide anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..jsonl import tail_jsonl

__all__ = ["PROGRESS_FILE", "Step", "in_flight_span", "read_progress", "record_progress"]

PROGRESS_FILE = "needlebench_progress.jsonl"


@dataclass(frozen=True)
class Step:
    """One line of the log.

    Args:
        abbr: the prediction file's name without ``.json`` (a plan's piece).
        t: when it was written (Unix seconds).
        done: samples the file holds so far.
        new: samples answered in this batch (0 on the line a file starts with).
        failed: its requests that failed so far.
        throttles: throttling answers met so far for this file.
    """

    abbr: str
    t: float
    done: int
    new: int
    failed: int = 0
    throttles: int = 0


def record_progress(folder: Path | str, step: Step) -> None:
    """Append one step to a model's progress log.

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        step: the line.
    """
    line = {"abbr": step.abbr, "t": round(step.t, 3), "done": step.done, "new": step.new}
    line.update(failed=step.failed, throttles=step.throttles)
    with (Path(folder) / PROGRESS_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def read_progress(folder: Path | str, offset: int = 0) -> tuple[list[Step], int]:
    """The steps of a model's progress log from byte ``offset`` on, in the order written, and where they end.

    A watcher passes the returned offset back to read only what is new; a line not yet whole (or one a kill
    cut short) is left for later.

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        offset: where the previous read ended (0: the start).
    """
    items, end = tail_jsonl(Path(folder) / PROGRESS_FILE, offset)
    steps = []
    for item in items:
        try:
            steps.append(
                Step(
                    str(item["abbr"]),
                    float(item["t"]),
                    int(item["done"]),
                    int(item["new"]),
                    int(item.get("failed", 0)),
                    int(item.get("throttles", 0)),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # not a step (a display never stops on one)
    return steps, end


def in_flight_span(steps: list[Step]) -> float:
    """The seconds during which any of a model's prediction files was being answered: each file from a line that
    starts it (``new`` 0: a start or a resume) to its last line before the next start, overlaps counted once
    (parallel tasks), gaps left out (a task starting, a model loading, a run stopped and resumed later). What
    ``needlebench plan --rates`` divides a run's batch seconds by (its parallel).

    Args:
        steps: a model's progress log (:func:`read_progress`), in the order written.
    """
    spans: list[list[float]] = []
    open_span: dict[str, list[float]] = {}
    for step in steps:
        current = open_span.get(step.abbr)
        if current is None or step.new == 0:
            open_span[step.abbr] = current = [step.t, step.t]
            spans.append(current)
        current[1] = max(current[1], step.t)
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total
