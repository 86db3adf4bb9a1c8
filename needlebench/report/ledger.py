"""What each cell cost: the ledger of a run, added up from its records' request costs (``needlebench_cost.csv``).

One row per model and cell (task, language, length), then one per model (``task`` "all"). Every number is a sum,
a share or a percentile of what the engine or the clock said for that cell's requests
(:class:`~needlebench.request_cost.RequestCost`), each fact as its field declares: nothing is estimated, and
a fact no request of the cell reported is left empty, never 0. ``requests`` counts the samples whose answer this
run paid for, each once at its answer's cost (an answer carried over from an earlier run has none here; a request
that failed and was asked again counts as its answer: ``needlebench status``'s spent line counts every request
logged); ``with tokens`` and ``with timings`` say how many of them reported cached tokens and engine timings, so a
sum over fewer requests than the cell's says so.

Beside them: ``device_s``, the wall time times the GPUs each of the model's tasks held (its plan's ``devices``;
empty where it held none: an API model's devices are its provider's); ``money`` in dollars where a prices file
prices the model (``planning.costs``: each request's prompt, cached and output tokens at its tier's prices,
where the engine reported its prompt tokens, and the device-seconds at ``device_hour``), with ``priced`` the
requests it covers; and on each model's row the plan's ``planned prompt_tokens`` (its shards', counted before the
run).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.effective_length import length_text
from ..planning.costs import Price, Prices, request_costs
from ..planning.run import ModelRun
from ..record import GradedSample
from ..request_cost import RequestCost, cache_share
from ..tasks import get_task

__all__ = ["LEDGER_TABLE", "cost_grid", "cost_ledger"]

LEDGER_TABLE = "needlebench_cost"

Paid = tuple[RequestCost, int | None]  # a request's cost and its output tokens


def _facts(costs: Sequence[RequestCost]) -> dict[str, Any]:
    """Each fact over the requests, as its field says the ledger takes it."""
    out: dict[str, Any] = {}
    for name, way in RequestCost.ledger_ways().items():
        values = [getattr(c, name) for c in costs if getattr(c, name) is not None]
        if way == "sum":
            out[name] = float(sum(values)) if values else None
        elif way == "max":
            out[name] = float(max(values)) if values else None
        elif way == "quantiles":
            out[f"{name} p50"] = float(np.percentile(values, 50)) if values else None
            out[f"{name} p90"] = float(np.percentile(values, 90)) if values else None
        elif way == "any":
            out[name] = any(values) if values else None
        elif way == "label":  # the one value, or every value seen
            seen = sorted({str(v) for v in values})
            out[name] = " | ".join(seen) if seen else None
    return out


def _row(paid: Sequence[Paid], devices: int, price: Price | None) -> dict[str, Any]:
    """The ledger's numbers over some requests."""
    costs = [c for c, _ in paid]
    both = [c for c in costs if c.computed_tokens is not None]
    facts = _facts(costs)
    device_s = facts["wall_s"] * devices if devices and facts["wall_s"] is not None else None
    money, priced = _money(paid, device_s, price)
    return {
        "requests": len(costs),
        "with tokens": len(both),
        "with timings": sum(c.ttft_ms is not None for c in costs),
        **facts,
        "computed_tokens": float(sum(c.computed_tokens or 0 for c in both)) if both else None,
        "cache share": cache_share(costs),
        "devices": devices or None,
        "device_s": device_s,
        "money": money,
        "priced": priced,
    }


def _money(paid: Sequence[Paid], device_s: float | None, price: Price | None) -> tuple[float | None, int | None]:
    """Dollars and the requests they cover: tokens at the model's token prices, device-seconds at its device-hour
    price; (None, None) where nothing of it is priced."""
    if price is None:
        return None, None
    dollars, priced = 0.0, 0
    if price.tiers:
        for cost, output in paid:
            if cost.prompt_tokens is not None:
                billed = request_costs(price, [cost.prompt_tokens], [cost.cached_tokens or 0], output or 0)
                dollars, priced = dollars + billed.online, priced + 1
    if price.device_hour is not None and device_s is not None:
        dollars, priced = dollars + device_s / 3600 * price.device_hour, len(paid)
    return (dollars, priced) if priced else (None, None)


def cost_ledger(
    records: Sequence[GradedSample],
    models: Sequence[str],
    plans: Mapping[str, ModelRun] | None = None,
    prices: Prices | None = None,
) -> pd.DataFrame:
    """The run's ledger: per model and cell, then per model; empty where no record holds a cost.

    Args:
        records: graded records (with ``model``).
        models: the models, in order.
        plans: each model's plan (``RunResults.model_plans``): the devices its tasks held, its planned tokens.
        prices: the prices file, read (``planning.costs.load_prices``); None: nothing is priced.
    """
    cells: dict[str, dict[tuple[str, str, Any], list[Paid]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.output.cost is not None:
            cells[str(r.model)][(r.task, r.lang, r.get("length"))].append((r.output.cost, r.output.output_tokens))
    rows = []
    for m in models:
        mine = cells.get(m)
        if not mine:
            continue
        plan = (plans or {}).get(m)
        devices, price = (plan.devices if plan else 0), (prices.of(m) if prices else None)
        for (task, lang, length), paid in sorted(mine.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
            label = length_text(int(length)) if length is not None else ""
            cell = _row(paid, devices, price)
            rows.append({"model": m, "task": get_task(task).short, "lang": lang.upper(), "length": label, **cell})
        planned = sum(s.prompt_tokens for s in plan.shards) if plan and plan.shards else None
        whole = _row([p for paid in mine.values() for p in paid], devices, price)
        rows.append({"model": m, "task": "all", "lang": "", "length": "", **whole, "planned prompt_tokens": planned})
    df = pd.DataFrame(rows)
    for column in df.columns:  # counts stay whole numbers, blank where unknown (pandas would make them floats)
        if column in _COUNTS or RequestCost.ledger_ways().get(column) == "sum" and column.endswith("_tokens"):
            df[column] = df[column].astype("Int64")
    return df


_COUNTS = ("requests", "with tokens", "with timings", "devices", "priced", "computed_tokens", "planned prompt_tokens")


def cost_grid(cells: Mapping[tuple[float, int], Sequence[tuple[GradedSample, float]]]) -> pd.DataFrame:
    """Mean wall seconds per request over depth (rows) x length (columns): the cost map beside a score heatmap;
    NaN where no request of the cell has a cost (empty where none has).

    Args:
        cells: (depth, length) -> (record, score) pairs (``tables.grid_members``); a record counts once a cell.
    """
    walls = {
        key: [
            r.output.cost.wall_s for r in {id(r): r for r, _ in rs}.values() if r.output.cost and r.output.cost.wall_s
        ]
        for key, rs in cells.items()
    }
    if not any(walls.values()):
        return pd.DataFrame()
    depths, lengths = sorted({d for d, _ in walls}), sorted({n for _, n in walls})
    data = [[float(np.mean(walls[(d, n)])) if walls.get((d, n)) else np.nan for n in lengths] for d in depths]
    return pd.DataFrame(data, index=depths, columns=lengths)
