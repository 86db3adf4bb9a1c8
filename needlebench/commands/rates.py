"""``needlebench plan CONFIG --rates RUN``: the plan's wall time, device-hours and money at an earlier run's rates.

The earlier run's records hold each request's cost (``needlebench.request_cost``); its stored config and plan give
back each request's prompt as the dataset cache holds it (its cl100k tokens and the prefix it shares with the
prompt before it, as ``needlebench plan`` counts them); its progress log says how long its requests were in
flight. :mod:`needlebench.planning.rates` fits each model's rates on them and predicts the new plan's requests,
model by model, matched by abbr: a model of the config the run does not have gets no prediction (said so).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..planning.costs import Prices
from ..planning.prefix import prompt_bytes, shared_prefixes
from ..planning.rates import Planned, Prediction, Rates, fit_rates, observations, predict
from ..record import GradedSample
from .plan import PlanReport

__all__ = ["batch_sizes", "format_rates", "rate_plan", "run_rates"]


def _rows(datasets: list[Any], limits: Any) -> dict[str, Any]:
    """Each needlebench dataset's rows as the model with these limits is sent them, by abbr."""
    from ..planning.limits import model_rows

    return {d["abbr"]: model_rows(d, limits.get(d["abbr"]) if limits is not None else None) for d in datasets}


def batch_sizes(cfg: Any) -> dict[str, int]:
    """Each model's ``batch_size`` in a loaded config (OpenCompass's default 1), by abbr: how its requests are cut
    into batches, which the rates are per.

    Args:
        cfg: the config (``opencompass.configs.load_config``'s first item).
    """
    return {m.get("abbr", "model"): int(m.get("batch_size", 1) or 1) for m in cfg.get("models", [])}


def _needlebench_datasets(config: Path) -> list[Any]:
    """A config's needlebench datasets, as ``opencompass`` reads them."""
    from ..opencompass.configs import load_config

    return list(load_config(str(config))[1])


def run_rates(run: Path) -> dict[str, Rates]:
    """Each model's rates in a run, fitted on its batches whose requests have a cost, by abbr.

    Args:
        run: the run folder (``<work_dir>/<time>``).

    Raises:
        ConfigError: not a run folder, or no request of it has a cost.
    """
    from ..report.results import load_results
    from ..runfolder.cost_log import cost_batches
    from ..runfolder.plan_file import read_plan
    from ..runfolder.progress_log import in_flight_span, read_progress
    from .retry import run_config

    datasets = _needlebench_datasets(run_config(run, "plan --rates"))
    plan = read_plan(run)
    records = load_results([run]).records
    by_limits: dict[str, dict[str, tuple[int, float]]] = {}  # models with the same limits are sent the same rows
    out: dict[str, Rates] = {}
    for model in dict.fromkeys(str(r.model) for r in records):
        mine = plan.model(model) if plan is not None else None
        limits = mine.limits if mine else None
        key = json.dumps({k: asdict(v) for k, v in limits.items()} if limits else None, sort_keys=True, default=str)
        if key not in by_limits:
            sizes = {}  # sample id -> (prompt tokens, prefix shared with the prompt before)
            for rows in _rows(datasets, limits).values():
                tokens = list(rows["prompt_tokens"])
                shared = shared_prefixes(prompt_bytes(rows), tokens)
                sizes.update(zip(rows["id"], zip(tokens, shared, strict=True), strict=True))
            by_limits[key] = sizes
        sizes, graded = by_limits[key], {r.id: r for r in records if str(r.model) == model}

        def sized(sample: str, sizes: dict = sizes, graded: dict = graded) -> tuple[GradedSample, int, float] | None:
            found, record = sizes.get(sample), graded.get(sample)
            return (record, *found) if found is not None and record is not None else None

        folder = run / "predictions" / model
        measured = observations([costs for _, costs in cost_batches(folder)], sized)
        if not any(measured.batches):
            continue
        span = in_flight_span(read_progress(folder)[0]) or None
        out[model] = fit_rates(
            model, str(run), measured.engine, measured.batches, measured.reusable_tokens, measured.cached_tokens, span
        )
    if not out:
        raise ConfigError(f"plan --rates: no request of {run} has a cost (a run from before costs were kept?)")
    return out


def rate_plan(
    plan: PlanReport, run: Path, prices: Prices | None = None, rates: dict[str, Rates] | None = None
) -> tuple[list[Prediction], list[str]]:
    """Each model of a plan at its rates in an earlier run: (predictions, models the run has no rates for).

    Args:
        plan: the new config's plan (``commands.plan.plan_config``).
        run: the earlier run's folder.
        prices: the prices (``planning.costs``); None: the earlier run's recorded ones, if any.
        rates: the run's rates where already read (:func:`run_rates`).

    Raises:
        ConfigError: not a run folder, no request of it has a cost, or no model of the plan is in it.
    """
    from ..opencompass.configs import load_config
    from ..report.results import recorded_prices

    rates = rates if rates is not None else run_rates(run)
    prices = prices if prices is not None else recorded_prices([run])
    missing = [m.abbr for m in plan.models if m.abbr not in rates]
    if len(missing) == len(plan.models):
        raise ConfigError(
            f"plan --rates: {run} has rates for {sorted(rates)}, the config's models are {missing}: "
            "rates are a model's on its engine, matched by abbr"
        )
    cfg, datasets = load_config(plan.config)
    batch_size = batch_sizes(cfg)
    out = []
    for m in plan.models:
        run_plan = plan.run.model(m.abbr)
        if m.abbr not in rates or run_plan is None:
            continue
        rows = _rows(list(datasets), run_plan.limits)
        share = {d.abbr: d.prefix_share for d in m.datasets}
        budget = {d.abbr: d.max_out_len for d in m.datasets}
        task = {d.abbr: d.task for d in m.datasets}
        size = batch_size.get(m.abbr, 1)
        batches = []
        tokens_of = {abbr: list(r["prompt_tokens"]) for abbr, r in rows.items()}
        for shard in run_plan.shards:  # each piece in batches of the model's batch_size, as the inferencer sends it
            for part in shard.parts:
                tokens = tokens_of[part.dataset][part.start : part.end]
                requests = [
                    Planned(task[part.dataset], int(t), share[part.dataset], budget[part.dataset]) for t in tokens
                ]
                batches += [requests[i : i + size] for i in range(0, len(requests), size)]
        out.append(predict(rates[m.abbr], batches, m.num_gpus, prices.of(m.abbr) if prices else None))
    return out, missing


def _seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    return f"{s:,.1f} s" if s < 120 else f"{s / 60:,.1f} min" if s < 7200 else f"{s / 3600:,.2f} h"


def format_rates(predictions: list[Prediction], missing: list[str]) -> str:
    """The predictions under the plan: per model, what it will take and what each number rests on.

    Args:
        predictions: from :func:`rate_plan`.
        missing: the models with no rates.
    """
    lines = []
    for p in predictions:
        r = p.rates
        c = r.coefficients
        lo, hi = r.prompt_range
        lines += [
            "",
            f"model {p.model} at the rates of {r.run} ({r.engine or 'engine not reported'}; {r.requests} requests "
            f"in {r.batches} batches, {lo:,}-{hi:,} prompt tokens):",
            f"  predicted: {p.requests:,} requests in {p.batches:,} batches, {_seconds(p.batch_s)} of batches, "
            f"wall {_seconds(p.run_s)}"
            + (f", {p.device_h:,.3f} device-h" if p.device_h is not None else ", no device-hours (no GPU held)")
            + (f", ${p.money:,.2f}" if p.money is not None else ", unpriced"),
            f"  tokens: {p.prompt_tokens:,} prompt, {p.computed_tokens:,.0f} computed, {p.output_tokens:,.0f} output",
            f"  rates: {c['batch']:.3f} s/batch + {c['computed']:.4f} s per 1k computed + {c['attention']:.5f} s "
            f"per 1k computed x 1k prompt + {c['decode']:.4f} s per decode step (fit error on its run: total "
            f"{r.fit_error[0]:.1%}, per batch {r.fit_error[1]:.0%})",
            f"  measured in that run: {'; '.join(p.measured)}",
            f"  from the token plan: {', '.join(p.planned)}",
        ]
        if p.beyond:
            lines.append(f"  {p.beyond:,} requests are longer than any it measured ({hi:,}): the fit extrapolates")
    for m in missing:
        lines += ["", f"model {m}: no rates (the run has no model {m!r})"]
    return "\n".join(lines)
