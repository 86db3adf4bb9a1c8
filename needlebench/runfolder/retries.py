"""Failed requests asked again: what each infer task re-asked, and how it ended.

An infer task whose model sets ``retry_passes`` (``models.api_model``) asks its failed requests again after
its batches (``inferencer.py``) and appends one line per prediction file to
``predictions/<model>/needlebench_retries.jsonl``: how many requests had failed, how many were asked again
over how many passes, how many still failed. A resume (``opencompass CONFIG -r``, ``needlebench retry``)
reads the last line of each file: a prediction file with failures left is taken apart (its answers carried
over, ``carryover.requeue_failed``) so that only its failed requests are asked again (of the models a
``request.RunRequest`` names, or of every model). The report's results
bundle sums the lines per model.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from ..jsonl import BadLine, iter_jsonl, read_jsonl

__all__ = ["RETRIES_FILE", "failed_requests", "read_retries", "record_retries", "retry_totals"]

RETRIES_FILE = "needlebench_retries.jsonl"
log = logging.getLogger(__name__)


def record_retries(folder: Path | str, abbr: str, first: int, asked: int, passes: int, still_failed: int) -> None:
    """Append how a prediction file's failed requests were asked again.

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        abbr: the prediction file's name without ``.json``.
        first: requests that had failed before the passes.
        asked: requests asked again, over all passes.
        passes: passes made.
        still_failed: requests failed after them.
    """
    line = {"abbr": abbr, "failed": first, "asked_again": asked, "passes": passes, "still_failed": still_failed}
    with (Path(folder) / RETRIES_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def read_retries(folder: Path | str) -> dict[str, list[dict[str, Any]]]:
    """Every record per prediction file, in the order they were made (the last one is its state now).

    Args:
        folder: ``<work_dir>/predictions/<model>``.
    """
    path = Path(folder) / RETRIES_FILE
    out: dict[str, list[dict[str, Any]]] = {}
    if path.exists():
        bad: list[BadLine] = []  # a line a killed task left half-written: the file's state is the line before
        for item in read_jsonl(path, bad):
            out.setdefault(item["abbr"], []).append(item)
        for line in bad:
            log.warning("%s; skipped", line)
    return out


def retry_totals(folder: Path | str) -> dict[str, int]:
    """A model's requests asked again, in sum: ``asked_again``, ``passes`` (the most any file took), and
    ``still_failed`` (the files' last records).

    Args:
        folder: ``<work_dir>/predictions/<model>``.
    """
    records = read_retries(folder)
    return {
        "asked_again": sum(r["asked_again"] for rs in records.values() for r in rs),
        "passes": max((r["passes"] for rs in records.values() for r in rs), default=0),
        "still_failed": sum(rs[-1]["still_failed"] for rs in records.values()),
    }


def failed_requests(run: Path) -> Counter[tuple[str, str]]:
    """Per (model, dataset), the graded samples whose request failed.

    Args:
        run: the run folder (``<work_dir>/<time>``).
    """
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted((run / "results").glob("*/*.samples.jsonl")):
        bad: list[BadLine] = []  # a record that cannot be read is counted by the report, not here
        for _, record in iter_jsonl(path, bad):
            if isinstance(record, dict) and record.get("unscored") == "request_failed":
                found[(path.parent.name, path.name.removesuffix(".samples.jsonl"))] += 1
    return found
