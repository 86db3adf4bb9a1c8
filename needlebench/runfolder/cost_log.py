"""The cost log: what each request cost (``predictions/<model>/needlebench_costs.jsonl``).

Kept apart from the prediction files, which stay OpenCompass's bytes and the same bytes on every run of a config:
a request's cost is what the engine or the clock said that time (``needlebench.request_cost``). One line per
batch, appended by the inferencer when the batch is answered: the prediction file's name and each answered
sample's cost by its sample id. The evaluator reads its dataset's (:func:`dataset_costs`) and the graded record
keeps each; a line a killed task left half-written is skipped, and a sample asked again keeps its latest
answer's cost.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonl import BadLine, read_jsonl
from ..request_cost import RequestCost

__all__ = ["COSTS_FILE", "CostTally", "cost_batches", "dataset_costs", "record_costs", "tally_costs"]

COSTS_FILE = "needlebench_costs.jsonl"


def record_costs(folder: Path, abbr: str, costs: dict[str, RequestCost]) -> None:
    """Append one batch's costs to its model's predictions folder (:data:`COSTS_FILE`).

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        abbr: the prediction file's name without ``.json`` (a dataset's, or one of its parts': ``<dataset>_<n>``).
        costs: each answered sample's cost, by its sample id.
    """
    if costs:
        line = {"file": abbr, "costs": {key: cost.to_json() for key, cost in costs.items()}}
        with (folder / COSTS_FILE).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def _of_dataset(file: Any, dataset: str) -> bool:
    """A prediction file of the dataset: the dataset's own, or one of its parts (``<dataset>_<n>``)."""
    name = str(file)
    return name == dataset or (name.startswith(f"{dataset}_") and name[len(dataset) + 1 :].isdigit())


def dataset_costs(folder: Path, dataset: str) -> dict[str, RequestCost]:
    """The cost of each of a dataset's answered samples, by sample id; empty where none was kept.

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        dataset: the dataset's abbr.
    """
    log = folder / COSTS_FILE
    if not log.exists():
        return {}
    bad: list[BadLine] = []
    out: dict[str, RequestCost] = {}
    for line in read_jsonl(log, bad):
        if not isinstance(line, dict) or not _of_dataset(line.get("file"), dataset):
            continue
        for key, data in (line.get("costs") or {}).items():
            cost = RequestCost.from_json(data)
            if cost is not None:
                out[str(key)] = cost
    for b in bad:
        logging.getLogger(__name__).warning("%s; skipped", b)
    return out


def cost_batches(folder: Path) -> list[tuple[str, dict[str, RequestCost]]]:
    """Each batch's costs as logged, in the order answered: (prediction file, each sample's cost by its id); the
    rates ``needlebench plan --rates`` fits are a batch's (its requests were in flight together).

    Args:
        folder: ``<work_dir>/predictions/<model>``.
    """
    log = folder / COSTS_FILE
    if not log.exists():
        return []
    bad: list[BadLine] = []
    out = []
    for line in read_jsonl(log, bad):
        if isinstance(line, dict):
            costs = {str(k): RequestCost.from_json(v) for k, v in (line.get("costs") or {}).items()}
            out.append((str(line.get("file")), {k: c for k, c in costs.items() if c is not None}))
    for b in bad:
        logging.getLogger(__name__).warning("%s; skipped", b)
    return out


@dataclass(frozen=True)
class CostTally:
    """What a model's requests have cost so far, as its cost log says (``needlebench status``).

    Args:
        requests: requests answered with a cost.
        sums: each fact the ledger sums (``RequestCost.ledger_ways``), over the requests that reported it.
        reported: how many requests reported each of those facts.
    """

    requests: int = 0
    sums: Mapping[str, float] = field(default_factory=dict)
    reported: Mapping[str, int] = field(default_factory=dict)

    def add(self, cost: RequestCost) -> CostTally:
        """This tally with one more request.

        Args:
            cost: the request's cost.
        """
        sums, reported = dict(self.sums), dict(self.reported)
        for name, way in RequestCost.ledger_ways().items():
            value = getattr(cost, name)
            if way == "sum" and value is not None:
                sums[name] = sums.get(name, 0.0) + float(value)
                reported[name] = reported.get(name, 0) + 1
        return CostTally(self.requests + 1, sums, reported)


def tally_costs(folder: Path, known: tuple[int, int, CostTally] | None = None) -> tuple[int, int, CostTally]:
    """(inode, bytes read, tally) of a model's cost log, reading only the whole lines appended since ``known``
    (``needlebench status --watch`` reads it a few times a second).

    Args:
        folder: ``<work_dir>/predictions/<model>``.
        known: what the last call returned; None: from the start.
    """
    path = folder / COSTS_FILE
    try:
        stat = path.stat()
    except FileNotFoundError:
        return 0, 0, CostTally()
    inode, offset, tally = (
        known if known and known[0] == stat.st_ino and known[1] <= stat.st_size else (0, 0, CostTally())
    )
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read(stat.st_size - offset)
    whole = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next read
    for raw in whole.split(b"\n")[:-1]:  # lines end at "\n" alone (needlebench.jsonl)
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a line a killed task left half-written
        for value in (line.get("costs") or {}).values() if isinstance(line, dict) else ():
            cost = RequestCost.from_json(value)
            if cost is not None:
                tally = tally.add(cost)
    return stat.st_ino, offset + len(whole), tally
