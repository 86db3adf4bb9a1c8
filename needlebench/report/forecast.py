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

from ..planning.rates import Observation, Planned, fit_rates, in_flight_span, predict
from ..record import GradedSample
from ..runfolder.cost_log import cost_batches
from ..runfolder.progress_log import read_progress
from ..tasks import get_task
from .leaderboard import infer_suite
from .results import RunResults

__all__ = ["FORECAST_TABLE", "cost_forecast"]

FORECAST_TABLE = "needlebench_cost_forecast"


def _observations(folder: Path, mine: dict[str, GradedSample]) -> list[list[Observation]]:
    """The model's batches as its cost log has them, each request at its nominal length."""
    batches = []
    for _, costs in cost_batches(folder):
        batch = []
        for key, cost in costs.items():
            record = mine.get(key)
            length = record.get("length") if record is not None else None
            if record is None or not length or not cost.wall_s:
                continue
            share = (
                cost.cached_tokens / cost.prompt_tokens
                if cost.computed_tokens is not None and cost.prompt_tokens
                else 0.0
            )
            computed = int(length) * (1 - share)
            batch.append(
                Observation(
                    record.task, int(length), computed, record.output.output_tokens, cost.wall_s, bool(cost.shared)
                )
            )
        batches.append(batch)
    return batches


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
        batches = _observations(folder, mine) if folder else []
        if not any(batches):
            continue
        steps, _ = read_progress(folder)
        span = in_flight_span([(s.abbr, s.t) for s in steps]) or None
        costs = [r.output.cost for r in mine.values() if r.output.cost is not None]
        both = [c for c in costs if c.computed_tokens is not None]
        prompt = sum(c.prompt_tokens or 0 for c in both)
        share = sum(c.cached_tokens or 0 for c in both) / prompt if prompt else 0.0
        rates = fit_rates(model, str(folder.parent.parent), "", batches, 0.0, None, span)
        rates = dataclasses.replace(rates, cache_capture=1.0)  # each prompt's cached share as the run measured it
        profile = str(next(iter(mine.values())).get("profile") or "v2")
        suite = infer_suite([r.get("length") for r in mine.values()], profile)
        size = max(len(b) for b in batches)
        planned: list[list[Planned]] = []
        for task in sorted({r.task for r in mine.values()}):
            requests = get_task(task).aggregation().suite_requests
            budget = max((r.output.output_tokens or 0 for r in mine.values() if r.task == task), default=0)
            for lang in sorted({r.lang for r in mine.values() if r.task == task}) if requests and suite else ():
                for length, n in requests(suite, lang, profile).items():
                    prompts = [Planned(task, length, share, max(budget, 1))] * n
                    planned += [prompts[i : i + size] for i in range(0, n, size)]
        if not planned:
            continue
        held = devices.get(model, 0)
        p = predict(rates, planned, held, prices.of(model) if prices else None)
        rows.append(
            {
                "model": model,
                "run requests": rates.requests,
                "run batch_s": rates.batch_s,
                "suite": suite,
                "suite requests": p.requests,
                "suite prompt_tokens": p.prompt_tokens,
                "suite batch_s": p.batch_s,
                "suite wall_s": p.run_s,
                "suite device_h": p.device_h,
                "suite money": p.money,
                "basis": f"rates of {rates.batches} batches; nominal lengths; cache share {share:.0%}; "
                f"batches of {size}",
            }
        )
    return pd.DataFrame(rows)
