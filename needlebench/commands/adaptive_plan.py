"""``needlebench plan CONFIG --adaptive``: what the adaptive length ladder would ask of each model, against the full grid.

Why: an adaptive run spends what the model's scores make it spend, so before a run its cost is a range: at worst
the full grid (or the budget), at best the sparse first round and the prompts that decide each length. The plan
climbs the ladder (:mod:`needlebench.adaptive.ladder`) on the config's own grid (each summary task's rows as the
model's limit leaves them: their lengths, depths and prompt tokens) against scripted models
(:mod:`needlebench.adaptive.scenarios`): three named ones (a model that holds the bar everywhere, one that
collapses at the middle length, one right after the shortest) and a population of 60 curves, whose median and
90th percentile are the expectation. With ``--rates RUN`` each gets the seconds and money of its prompts at that
run's rates, in batches of the model's ``batch_size`` and no prefix reuse (the ladder's random order does not
follow the stream's). Adaptive runs through OpenCompass are issue 74's next step; this is what they would ask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..adaptive.ladder import LadderSettings
from ..adaptive.scenarios import answer, climb, curves, named
from ..planning.adaptive import LadderGrid, ladder_grid
from ..planning.rates import Planned, Rates, predict
from .plan import PlanReport, text_table
from .rates import batch_sizes

__all__ = ["AdaptiveCase", "AdaptivePlan", "adaptive_plan", "format_adaptive"]

POPULATION = 60  # scripted curves per model: the expectation's
SEED = 74


@dataclass(frozen=True)
class AdaptiveCase:
    """What the ladder asks of one model in one case.

    Args:
        case: ``full grid``, a named scenario, ``median`` or ``p90`` (of the population, by prompt tokens).
        prompts: the prompts asked.
        prompt_tokens: their cl100k prompt tokens.
        share: ``prompt_tokens`` over the full grid's.
        rounds: the rounds it took (the population's at its median or p90 case).
        seconds: at the rates given, the batches' seconds (None without rates).
        money: at the rates and prices, dollars (None unpriced).
    """

    case: str
    prompts: int
    prompt_tokens: int
    share: float
    rounds: int
    seconds: float | None = None
    money: float | None = None


@dataclass(frozen=True)
class AdaptivePlan:
    """One model's adaptive range.

    Args:
        model: its abbr.
        datasets: the datasets the ladder climbs (its summary tasks'; the others run whole).
        cases: the full grid, the named scenarios, the population's median and 90th percentile.
    """

    model: str
    datasets: list[str]
    cases: list[AdaptiveCase]

    def to_dict(self) -> dict[str, Any]:
        """The range as JSON data."""
        return asdict(self)


Asked = dict[str, list[tuple[int, int]]]  # dataset -> (prompt tokens, output budget) of each prompt asked


def _grids(plan: PlanReport, model: str, datasets: Sequence[Any]) -> dict[str, tuple[LadderGrid, int]]:
    """Per summary-task dataset of the config's ``datasets``: its ladder grid as the run would plan it, and its
    output budget."""
    run = plan.run.model(model)
    budgets = {d.abbr: d.max_out_len for m in plan.models if m.abbr == model for d in m.datasets}
    out = {}
    for d in datasets:
        if run is None or d["abbr"] not in run.limits:
            continue
        grid = ladder_grid(d, run.limits[d["abbr"]])
        if grid is not None:
            out[d["abbr"]] = (grid, budgets.get(d["abbr"], 0))
    return out


def _climb_all(
    grids: Mapping[str, tuple[LadderGrid, int]], settings: LadderSettings, name: str, curve: Any
) -> tuple[Asked, int]:
    """Every dataset's ladder climbed against one scripted model: what each asked, and the most rounds any took.
    A graded dataset climbs on the bounds for any score, as its run would (``LadderGrid.graded``)."""
    asked: Asked = {}
    most = 0
    for abbr, (grid, budget) in grids.items():
        cells = {n: [(c[0], c[1]) for c in found] for n, found in grid.cells.items()}
        sizes = {(n, c[0], c[1]): c[3] for n, found in grid.cells.items() for c in found}
        _, got, rounds = climb(
            cells, grid.tokens, grid.bounded(settings), lambda n, d, key: answer(name, curve, n, d, key, SEED)
        )
        asked[abbr] = [(sizes[k], budget) for k in got]
        most = max(most, rounds)
    return asked, most


def _case(
    name: str,
    asked: Asked,
    full: int,
    rounds: int,
    tasks: Mapping[str, str],
    rates: Rates | None,
    batch: int,
    price: Any,
) -> AdaptiveCase:
    prompts = sum(len(v) for v in asked.values())
    tokens = sum(t for v in asked.values() for t, _ in v)
    seconds = money = None
    if rates is not None:
        batches = []
        for abbr, prompts_of in asked.items():
            requests = [Planned(tasks[abbr], t, 0.0, out) for t, out in prompts_of]
            batches += [requests[i : i + batch] for i in range(0, len(requests), batch)]
        p = predict(rates, batches, 0, price)
        seconds, money = p.batch_s, p.money
    return AdaptiveCase(name, prompts, tokens, tokens / full if full else 0.0, rounds, seconds, money)


def adaptive_plan(
    plan: PlanReport,
    settings: LadderSettings | None = None,
    rates: Mapping[str, Rates] | None = None,
    prices: Any = None,
) -> list[AdaptivePlan]:
    """Each model's adaptive range (see the module).

    Args:
        plan: the config's plan (``commands.plan.plan_config``).
        settings: the ladder's settings (default: the config's ``runtime(adaptive=...)``, else the defaults).
        rates: per model abbr, the rates of an earlier run (``commands.rates.run_rates``), for seconds and money.
        prices: the prices (``planning.costs.Prices``), for money.
    """
    from ..opencompass.configs import load_config

    settings = settings or LadderSettings.of(plan.run.settings.adaptive)  # the config's own, where it has them
    cfg, datasets = load_config(plan.config)  # once: every model's grids come from its datasets
    batch_size = batch_sizes(cfg)
    out = []
    for m in plan.models:
        grids = _grids(plan, m.abbr, datasets)
        if not grids:
            continue
        tasks = {abbr: g.task for abbr, (g, _) in grids.items()}
        full: Asked = {abbr: [(t, budget) for t in g.sizes().values()] for abbr, (g, budget) in grids.items()}
        total = sum(t for v in full.values() for t, _ in v)
        mine = (rates or {}).get(m.abbr)
        price = prices.of(m.abbr) if prices is not None else None
        batch = batch_size.get(m.abbr, 1)

        cases = [_case("full grid", full, total, 1, tasks, mine, batch, price)]
        lengths = sorted({n for g, _ in grids.values() for n in g.cells})
        for name, curve in named(lengths):
            asked, rounds = _climb_all(grids, settings, name, curve)
            cases.append(_case(name, asked, total, rounds, tasks, mine, batch, price))
        population = sorted(
            (_climb_all(grids, settings, name, curve) for name, curve in curves(lengths, POPULATION)),
            key=lambda x: sum(t for v in x[0].values() for t, _ in v),
        )
        for label, at in (("median of 60 curves", 0.5), ("p90 of 60 curves", 0.9)):
            asked, rounds = population[min(len(population) - 1, int(at * len(population)))]
            cases.append(_case(label, asked, total, rounds, tasks, mine, batch, price))
        out.append(AdaptivePlan(m.abbr, sorted(grids), cases))
    return out


def format_adaptive(plans: Sequence[AdaptivePlan]) -> str:
    """Each model's range under its plan: a row per case.

    Args:
        plans: from :func:`adaptive_plan`.
    """
    lines = []
    for p in plans:
        lines += ["", f"model {p.model}, adaptive ({', '.join(p.datasets)}; what runtime(adaptive=...) would ask):"]
        head = ("case", "prompts", "prompt tokens", "share", "rounds", "seconds", "$")
        rows = [
            (c.case, f"{c.prompts:,}", f"{c.prompt_tokens:,}", f"{c.share:.1%}", str(c.rounds))
            + ("" if c.seconds is None else f"{c.seconds:,.0f}", "" if c.money is None else f"{c.money:,.2f}")
            for c in p.cases
        ]
        lines += text_table(head, rows, total=False)
    return "\n".join(lines)
