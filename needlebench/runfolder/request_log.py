"""The request log: how each prediction file's requests went out (``predictions/<model>/needlebench_requests.jsonl``).

One line per prediction file, appended by the inferencer when the file is done: the batch size, the most
requests in flight, the order, and an API model's flow record (:meth:`needlebench.flow.FlowControl.summary`).
``results.json`` sums them per model (:func:`request_totals`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from ..jsonl import BadLine, read_jsonl

__all__ = ["REQUESTS_FILE", "flow_totals", "read_requests", "record_requests", "request_totals"]

REQUESTS_FILE = "needlebench_requests.jsonl"  # one line per prediction file: how its requests went out


def record_requests(
    folder: Any,
    abbr: str,
    batch_size: int,
    in_flight: int,
    order: str,
    flow: dict[str, Any] | None,
    rope: dict[str, Any] | None = None,
) -> None:
    """Append how one prediction file's requests went out to its model's predictions folder (:data:`REQUESTS_FILE`).

    Args:
        folder: ``<work_dir>/predictions/<model>`` (a ``pathlib.Path``).
        abbr: the prediction file's name without ``.json``.
        batch_size: prompts per batch.
        in_flight: the most requests the model could have in flight at once.
        order: the order the prompts were sent in.
        flow: :meth:`FlowControl.summary` for those requests, None without flow limits.
        rope: the RoPE scaling the loaded model answered them with, as its engine's config of it says
            (``{"scaling": block or None, "read_from": ...}``); None where the engine does not say (an API
            model: its server's; a scripted model).
    """
    line = {"abbr": abbr, "batch_size": batch_size, "in_flight": in_flight, "order": order, "flow": flow, "rope": rope}
    with (folder / REQUESTS_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def read_requests(folder: Any) -> list[dict[str, Any]]:
    """Every prediction file's request record in a model's predictions folder (:data:`REQUESTS_FILE`), in order.

    Args:
        folder: ``<work_dir>/predictions/<model>`` (a ``pathlib.Path``).
    """
    path = folder / REQUESTS_FILE
    if not path.exists():
        return []
    bad: list[BadLine] = []  # a line a killed task left half-written: the records before it stand
    records = read_jsonl(path, bad)
    for line in bad:
        logging.getLogger(__name__).warning("%s; skipped", line)
    return records


def request_totals(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How a model's requests went out over its prediction files: the batch sizes and in-flight counts used,
    the orders, and the flow records summed (:func:`flow_totals`); None where nothing was recorded.

    Args:
        records: :func:`read_requests`'s lines (of one or more runs).
    """
    if not records:
        return None
    return {
        "files": len(records),
        "batch_size": sorted({r["batch_size"] for r in records}),
        "in_flight": sorted({r["in_flight"] for r in records}),
        "order": sorted({r["order"] for r in records}),
        "flow": flow_totals([r["flow"] for r in records if r.get("flow")]),
    }


def flow_totals(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A model's flow records in sum: settings (the last file's), throttling answers and limit changes summed,
    the most in flight and the lowest limits over all files; None where no file's requests had flow limits.

    Args:
        records: the ``flow`` of :func:`read_requests`'s lines.
    """
    if not records:
        return None

    def extreme(key: str, pick: Callable[..., Any]) -> int | None:
        values = [r[key] for r in records if r.get(key) is not None]
        return pick(values) if values else None

    return {
        "settings": records[-1]["settings"],
        "files": len(records),
        "requests": sum(r["requests"] for r in records),
        "throttles": sum(r["throttles"] for r in records),
        "decreases": sum(r["decreases"] for r in records),
        "increases": sum(r["increases"] for r in records),
        "max_tokens_in_flight_seen": extreme("max_tokens_in_flight_seen", max),
        "max_requests_in_flight_seen": extreme("max_requests_in_flight_seen", max),
        "lowest_token_limit": extreme("lowest_token_limit", min),
        "lowest_request_limit": extreme("lowest_request_limit", min),
    }
