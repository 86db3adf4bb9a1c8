"""What the whole suite would cost at a run's rates (``needlebench_cost_forecast.csv``, and in ``report.html``).

Why: a run of a few lengths says what a model costs on its engine, and the question after it is what the whole
suite will take. Each model's batches, read from its cost log, are fitted as ``needlebench plan --rates`` fits
them (:mod:`needlebench.planning.rates`), with each prompt at its nominal length (the report reads no dataset
rows); the suite its lengths belong to is then sized from each task's own ``suite_requests`` (every length of
the suite, at the suite's depths, repeats and needle counts, in the languages the run has), each prompt at its
nominal length less the share of prompt tokens the engine served from its cache in the run, each answer at
the task's mean in the run, in batches of the run's size. An estimate, and said to be one: it is not in
``results.json`` (``needlebench verify`` checks what was measured), and the measured ledger sits beside it.
``needlebench plan SUITE_CONFIG --rates RUN`` makes the same forecast from the suite's real prompts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from ..aggregate.effective_length import length_text
from ..planning.rates import Planned, fit_rates, observations, predict
from ..record import GradedSample
from ..request_cost import cache_share
from ..runfolder.cost_log import cost_batches
from ..runfolder.progress_log import in_flight_span, read_progress
from ..tasks import get_task
from .leaderboard import infer_suite
from .results import RunResults

__all__ = ["FORECAST_TABLE", "cost_forecast"]

FORECAST_TABLE = "needlebench_cost_forecast"


def cost_forecast(results: RunResults) -> pd.DataFrame:
    """Per model with costs: the run's requests and batch seconds, and the whole suite's at the run's rates.

    Args:
        results: the runs read (their records, run folders, plans' devices and prices).
    """
    records, models, sources, prices = results.records, results.models, results.sources, results.prices
    devices = {m: p.devices for m, p in results.model_plans.items()}
    rows = []
    for model in models:
        mine = {r.id: r for r in records if r.model == model}
        folder = next(
            (Path(s) / "predictions" / model for s in sources if (Path(s) / "predictions" / model).is_dir()), None
        )

        def sized(sample: str, mine: dict[str, GradedSample] = mine) -> tuple[GradedSample, int, float] | None:
            record = mine.get(sample)  # each prompt at its nominal length; no dataset row is read
            return (record, int(record.get("length")), 0.0) if record is not None and record.get("length") else None

        measured = observations([costs for _, costs in cost_batches(folder)], sized) if folder else None
        if measured is None or not any(measured.batches):
            continue
        batches = measured.batches
        span = in_flight_span(read_progress(folder)[0]) or None
        share = cache_share([r.output.cost for r in mine.values() if r.output.cost is not None]) or 0.0
        rates = fit_rates(model, str(folder.parent.parent), measured.engine, batches, 0.0, None, span)
        rates = dataclasses.replace(rates, cache_capture=1.0)  # each prompt's cached share as the run measured it
        profile = str(next(iter(mine.values())).get("profile") or "v2")
        suite = infer_suite([r.get("length") for r in mine.values()], profile)
        size = max(len(b) for b in batches)
        planned: list[list[Planned]] = []
        left_out = []
        for task in sorted({r.task for r in mine.values()}):
            requests = get_task(task).aggregation().suite_requests
            if not requests or not suite:
                left_out.append(get_task(task).short)  # no suite of lengths (ATC, NeedleChain): not forecast
                continue
            # each answer within its budget as the plan set it (the run's longest answer where the plan has none)
            datasets = {str(r.dataset) for r in mine.values() if r.task == task}
            budgets = [results.budgets[(model, d)] for d in datasets if (model, d) in results.budgets]
            seen = max((r.output.output_tokens or 0 for r in mine.values() if r.task == task), default=0)
            budget = max(budgets, default=max(seen, 1))
            for lang in sorted({r.lang for r in mine.values() if r.task == task}):
                for length, n in requests(suite, lang, profile).items():
                    prompts = [Planned(task, length, share, budget)] * n
                    planned += [prompts[i : i + size] for i in range(0, n, size)]
        if not planned:
            continue
        held = devices.get(model, 0)
        p = predict(rates, planned, held, prices.of(model) if prices else None)
        lo, hi = rates.prompt_range
        basis = [
            f"rates of {rates.batches} batches at {length_text(lo)}-{length_text(hi)}",
            "nominal lengths",
            f"cache share {share:.0%}",
            f"batches of {size}",
        ]
        if p.beyond and rates.coefficients["attention"] == 0:
            basis.append("no attention rate measured: the longer lengths are likely under-predicted")
        if left_out:
            basis.append(f"not forecast: {', '.join(left_out)}")
        rows.append(
            {
                "model": model,
                "run requests": rates.requests,
                "run batch_s": rates.batch_s,
                "suite": suite,
                "suite requests": p.requests,
                "suite beyond measured": p.beyond,
                "suite prompt_tokens": p.prompt_tokens,
                "suite batch_s": p.batch_s,
                "suite run_s": p.run_s,
                "suite device_h": p.device_h,
                "suite money": p.money,
                "basis": "; ".join(basis),
            }
        )
    return pd.DataFrame(rows)
