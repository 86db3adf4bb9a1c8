"""``needlebench plan``: what a run will cost, per model, before any GPU time.

Reads a config as ``opencompass`` does (its ``models``, through ``$NEEDLEBENCH_MODELS``, its
``datasets`` and its infer partitioner's settings) and makes the run's plan with the function the
partitioner makes it with (:func:`needlebench.planning.run.plan_run`: each model's room, the cells it
shortens or skips, the shards and their pieces): the same object, which the report carries as ``run``.
On top it reads the rows each model is sent (:func:`needlebench.cache.rows.load_rows`) for what they cost.
Token counts come from the rows' ``prompt_tokens`` column (cl100k, counted at generation); the model's own
tokenizer is used only on a few sampled prompt slices, to estimate its count. No model weights are loaded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..planning.prefix import prompt_bytes, shared_prefixes
from ..planning.run import ModelRun, RunPlan, plan_run
from ..planning.variants import Variant
from ..planning.window import Window

log = logging.getLogger(__name__)

__all__ = [
    "DatasetPlan",
    "ThinkingRoom",
    "ShardPlan",
    "TokenizerEstimate",
    "ModelPlan",
    "PlanReport",
    "plan_config",
    "format_plan",
    "text_table",
]

# Model-tokenizer estimate: this many prompts per dataset, evenly spaced, each cut to its first
# SAMPLE_CHARS characters (the haystack text is the same throughout a prompt, so a slice measures it).
SAMPLE_PROMPTS = 4
SAMPLE_CHARS = 100_000


@dataclass
class ThinkingRoom:
    """What a reasoning model has left to think in at a dataset's longest cell.

    Args:
        cell: the cell of the dataset's longest prompt (its coarse coordinate, e.g. ``length 128000``).
        prompt_tokens: the cl100k tokens the run fits that prompt in (its ``budget_tokens``, as generated).
        model_tokens: the same in the model's tokens, as the partitioner counts them (x its tokenizer ratio).
        room: ``max_seq_len - model_tokens - reserve``: the output the context leaves there.
        budget: the output budget (the plan's ``Limit.out_len``: what the eval stage counts cut-off outputs by).
        fits: the run's rule: ``prompt_tokens`` at most the limit's ``max_prompt_tokens`` (then ``room >= budget``).
        action: where it does not fit, what the run does with such prompts (the over-length policy):
            ``shortened`` (the haystack is cut until prompt and budget fit) or ``skipped`` (never sent); ``""``
            where it fits.
    """

    cell: str
    prompt_tokens: int
    model_tokens: int
    room: int
    budget: int
    fits: bool
    action: str = ""


@dataclass
class DatasetPlan:
    """One dataset as one model gets it.

    Args:
        abbr: the dataset config's abbr.
        task: registry name of the task.
        lang: the dataset's language.
        samples: prompts sent (after the model's limit: skipped ones are not counted).
        prompt_tokens: their prompt tokens in cl100k (the rows' ``prompt_tokens``).
        model_tokens: estimated prompt tokens in the model's tokenizer; None where it has no local one.
        output_tokens: the output budget: ``samples`` x the dataset's (else the model's) ``max_out_len``.
        max_out_len: that per-prompt output budget.
        max_prompt_tokens: the model's room for this dataset's prompts, in cl100k tokens.
        limit_ratio: the model-tokens-per-cl100k ratio the partitioner divided the room by (at least 1).
        num_shortened: prompts whose haystack is cut to fit the room.
        num_skipped: prompts not sent because they do not fit.
        shortened: ``[length, depth, count]`` per shortened cell.
        skipped: ``[length, depth, count]`` per skipped cell.
        prefix_tokens: estimated prompt tokens each prompt shares with the one sent before it.
        prefix_share: ``prefix_tokens / prompt_tokens``.
        thinking: for a reasoning model, the thinking room at the dataset's longest cell (None otherwise).
        cost: with a prices file, what its requests cost through the model's API (``planning.costs.Cost``).
    """

    abbr: str
    task: str
    lang: str
    samples: int
    prompt_tokens: int
    model_tokens: int | None
    output_tokens: int
    max_out_len: int
    max_prompt_tokens: int
    limit_ratio: float = 1.0
    num_shortened: int = 0
    num_skipped: int = 0
    shortened: list[list[Any]] = field(default_factory=list)
    skipped: list[list[Any]] = field(default_factory=list)
    prefix_tokens: int = 0
    prefix_share: float = 0.0
    thinking: ThinkingRoom | None = None
    cost: Any = None


@dataclass
class ShardPlan:
    """One infer task the partitioner will cut.

    Args:
        index: the shard's number.
        samples: prompts in it.
        prompt_tokens: their cl100k prompt tokens.
        output_tokens: their output budget.
        parts: ``abbr[start:end]`` row ranges of the datasets in it.
    """

    index: int
    samples: int
    prompt_tokens: int
    output_tokens: int
    parts: list[str]


@dataclass
class TokenizerEstimate:
    """How the model's own token counts were obtained.

    Args:
        path: the local tokenizer folder, or None.
        available: whether it loaded (else the counts are ``n/a``).
        reason: why not, or how the estimate was made.
        ratio: model tokens per cl100k token over the sampled slices (None when unavailable).
        sample_prompts: prompts sampled.
        sample_tokens: cl100k tokens in the sampled slices.
    """

    path: str | None
    available: bool
    reason: str
    ratio: float | None = None
    sample_prompts: int = 0
    sample_tokens: int = 0


@dataclass
class ModelPlan:
    """Everything one model's run will cost.

    Args:
        abbr: the model's abbr.
        max_seq_len: its context in model tokens.
        reserve: tokens its prompts leave free beyond the output budget (chat template; an API client's reserve).
        tokenizer: how its own token counts were estimated.
        limit_ratio: the largest of its datasets' ``limit_ratio``.
        datasets: per dataset.
        shards: the infer tasks.
        samples: total prompts.
        prompt_tokens: total cl100k prompt tokens.
        model_tokens: total estimated model-tokenizer prompt tokens (None: n/a).
        output_tokens: total output budget.
        num_shortened: total shortened prompts.
        num_skipped: total skipped prompts.
        prefix_share: the share of prompt tokens an unbounded prefix cache can reuse, in request order.
        reasoning: the model is set up as a reasoning model (OpenCompass's think strip as its postprocessor).
        cost: with a prices file that prices it, the sum of its datasets' costs.
        num_gpus: the GPUs each of its infer tasks asks for (its ``run_cfg.num_gpus``).
        devices: what the devices check says (``preflight.devices``; empty where it asks for none).
        devices_stop: the run would stop on it: this machine shows fewer GPUs than a task asks for.
        kv_cache: the KV cache one sequence of the longest prompt takes (``planning.window.kv_cache_bytes``), in
            words; empty where the model's ``config.json`` cannot be read offline.
    """

    abbr: str
    max_seq_len: int
    reserve: int
    tokenizer: TokenizerEstimate
    limit_ratio: float
    datasets: list[DatasetPlan]
    shards: list[ShardPlan]
    samples: int = 0
    prompt_tokens: int = 0
    model_tokens: int | None = None
    output_tokens: int = 0
    num_shortened: int = 0
    num_skipped: int = 0
    prefix_share: float = 0.0
    reasoning: bool = False
    cost: Any = None
    num_gpus: int = 0
    devices: str = ""
    devices_stop: bool = False
    kv_cache: str = ""


@dataclass
class PlanReport:
    """The plan of one config, with what it will cost.

    Args:
        run: the run's plan itself (``planning.run.plan_run``): the object the partitioner renders its tasks
            from and stores in the run's folder.
        config: the config file.
        num_shards: shards per model.
        overlength: the over-length policy (``shorten`` or ``skip``).
        template_margin: tokens the partitioner keeps free for the chat template.
        models: per model.
        other_datasets: abbrs of datasets that are not needlebench's (not planned).
        notes: how the estimates are made.
    """

    run: RunPlan
    config: str
    num_shards: int
    overlength: str
    template_margin: int
    models: list[ModelPlan]
    other_datasets: list[str]
    notes: list[str]

    def to_json(self) -> str:
        """The plan as one JSON object."""
        return json.dumps(asdict(self), ensure_ascii=False)


NOTES = (
    "prompt_tokens: cl100k tokens of the prompts sent (the rows' prompt_tokens), after the model's limit.",
    f"model_tokens: estimate = cl100k tokens x the model tokenizer's ratio on {SAMPLE_PROMPTS} evenly spaced "
    f"prompts per dataset (first {SAMPLE_CHARS:,} characters each).",
    "prefix_share: tokens each prompt shares with the previous one of its dataset (rows in the order sent), "
    "over all prompt tokens; an unbounded prefix cache, one per run (shard cuts and chat template ignored).",
    "thinking room (reasoning models): max_seq_len - the longest prompt (model tokens, as the partitioner "
    "counts them) - reserve; where it is less than max_out_len the run shortens or skips those prompts "
    "(overlength), so the budget always fits.",
)


def _model_ratio(tokenizer: Any, rows: Any) -> tuple[float, int, int]:
    """(model tokens per cl100k token, prompts sampled, cl100k tokens sampled) on evenly spaced prompt slices.

    The pooled ratio: an estimate of what the model is sent, where the room uses the worst prompt's.
    """
    from ..planning.limits import token_counts

    n = len(rows)
    if n == 0:
        return 1.0, 0, 0
    picks = sorted({int(i) for i in np.linspace(0, n - 1, min(SAMPLE_PROMPTS, n))})
    pairs = token_counts(tokenizer, [rows[i]["prompt"][:SAMPLE_CHARS] for i in picks])
    theirs, ours = sum(m for m, _ in pairs), sum(o for _, o in pairs)
    return (theirs / ours if ours else 1.0), len(picks), ours


def _thinking(dataset: dict, limit: Any) -> ThinkingRoom:
    """The thinking room a reasoning model has at a dataset's longest cell, by the rule the run applies.

    A row fits when its ``budget_tokens`` (the cl100k tokens its prompt is built to: its length's, or the room
    it was cut to) are at most the limit's ``max_prompt_tokens``; the room beside it is ``max_seq_len`` - those
    tokens in model tokens (``tokenizer_ratio``) - the reserve, against the output budget. Every number is the
    run plan's (:class:`~needlebench.planning.limits.Limit`), so the plan and the run cannot disagree.

    Args:
        dataset: the dataset config as written (before the model's limit).
        limit: the run plan's limit for the pair.
    """
    import math

    from ..cache.rows import load_rows
    from ..tasks import config_params, get_task

    rows = load_rows(dataset["task"], **config_params(dataset))
    sizes = rows["budget_tokens"]
    at = max(range(len(sizes)), key=sizes.__getitem__)  # the first longest prompt
    longest = json.loads(rows[at]["meta"])  # its cell, as the task names it
    spec = get_task(dataset["task"])
    prompt = int(sizes[at])
    tokens = math.ceil(prompt * float(limit.tokenizer_ratio))
    room = int(limit.max_seq_len) - tokens - int(limit.reserve)
    fits = prompt <= int(limit.max_prompt_tokens)
    action = "" if fits else ("skipped" if limit.policy == "skip" else "shortened")
    cell = f"{spec.cell[0]} {spec.cell_of(longest)[0]}"
    return ThinkingRoom(cell, prompt, tokens, room, int(limit.out_len), fits, action)


def _plain(item: Any) -> dict:
    """A config section as a plain dict (mmengine's ``ConfigDict`` or a dict)."""
    return item.to_dict() if hasattr(item, "to_dict") else dict(item)


def _settings(cfg: Any, num_shards: int | None) -> Any:
    """The config's run settings as the run would use them (checked; nothing is written)."""
    from ..planning.settings import RunSettings

    settings = dict((cfg.get("infer") or {}).get("partitioner") or {})
    if num_shards is not None:
        settings["num_shards"] = num_shards
    return RunSettings.of(settings)


def _plan_model(
    limits: Any, model: dict, datasets: list[Any], run: ModelRun, runner: Any, price: Any = None
) -> ModelPlan:
    """One model's plan report: the run plan's limits, cells and shards, with the rows, estimates and prefix share,
    what the devices check says of it under the infer stage's ``runner`` (and with ``price``, a
    ``planning.costs.Price``, what its requests cost)."""
    from ..cache.rows import load_rows
    from ..opencompass.outputs import is_reasoning_model
    from ..planning.costs import Cost, request_costs
    from ..planning.limits import limited_dataset, model_tokenizer
    from ..planning.window import kv_cache_bytes
    from ..preflight.devices import devices_note, task_gpus
    from ..tasks import config_params

    thinks = is_reasoning_model(model)
    tok, where, error = limits.tokenizer(model)
    path = model_tokenizer(model)[0] or ""
    if tok is not None:
        estimate = TokenizerEstimate(where, True, "")
    elif error:
        estimate = TokenizerEstimate(where, False, f"tokenizer at {where} failed to load: {error}")
    else:
        estimate = TokenizerEstimate(None, False, f"{path!r} is not a local folder (nothing is downloaded)")
    plans = []
    limit_ratio, longest = 1.0, 0.0
    sampled_model = sampled_ours = sampled_prompts = 0
    for d in datasets:
        limit = run.limits[d["abbr"]]
        limit_ratio = max(limit_ratio, float(limit.tokenizer_ratio))
        lim = limited_dataset(d, limit)
        cells = run.overlength.get(d["abbr"]) or {}
        rows = load_rows(lim["task"], **config_params(lim))
        tokens = rows["prompt_tokens"]
        longest = max([longest, *(t * float(limit.tokenizer_ratio) + int(limit.out_len) for t in tokens)])
        model_tokens = None
        if tok is not None:
            ratio, picked, ours = _model_ratio(tok, rows)
            model_tokens = int(round(ratio * sum(tokens)))
            sampled_prompts, sampled_ours = sampled_prompts + picked, sampled_ours + ours
            sampled_model += int(round(ratio * ours))
        per_out = int(limit.out_len)
        shared = shared_prefixes(prompt_bytes(rows), tokens)
        prefix = int(round(sum(shared)))
        cost = None
        if price is not None and price.tiers:  # billed in the model's tokens where its tokenizer was measured
            scale = ratio if tok is not None else 1.0
            cost = request_costs(price, [t * scale for t in tokens], [c * scale for c in shared], per_out)
        plans.append(
            DatasetPlan(
                abbr=d["abbr"],
                task=d["task"],
                lang=d.get("lang", "en"),
                samples=len(tokens),
                prompt_tokens=sum(tokens),
                model_tokens=model_tokens,
                output_tokens=per_out * len(tokens),
                max_out_len=per_out,
                max_prompt_tokens=int(limit.max_prompt_tokens),
                limit_ratio=float(limit.tokenizer_ratio),
                num_shortened=cells.get("num_shortened", 0),
                num_skipped=cells.get("num_skipped", 0),
                shortened=cells.get("shortened", []),
                skipped=cells.get("skipped", []),
                prefix_tokens=prefix,
                prefix_share=prefix / sum(tokens) if tokens else 0.0,
                thinking=_thinking(d, limit) if thinks else None,
                cost=cost,
            )
        )
    if tok is not None:
        estimate.ratio = round(sampled_model / sampled_ours, 4) if sampled_ours else None
        estimate.sample_prompts, estimate.sample_tokens = sampled_prompts, sampled_ours
        estimate.reason = (
            f"estimate: cl100k tokens x the ratio on {sampled_prompts} sampled prompt slices "
            f"({sampled_ours:,} cl100k tokens)"
        )
    slices = [[f"{p.dataset}[{p.start}:{p.end}]" for p in s.parts] for s in run.shards]
    shards = [
        ShardPlan(s.index, s.samples, s.prompt_tokens, s.output_tokens, cut) for s, cut in zip(run.shards, slices)
    ]
    total_prompt = sum(p.prompt_tokens for p in plans)
    first = run.limits[datasets[0]["abbr"]]  # the model's context and reserve, as the plan decided them
    cost = None if price is None else Cost()
    for p in plans if cost is not None else ():
        cost.add(p.cost)
    gpus = task_gpus(model)
    devices, stop = devices_note(run.abbr, gpus, runner)  # the run's devices check, said here
    kv = kv_cache_bytes(model)
    kv_text = (
        f"KV cache of one sequence at the longest prompt and its output ({longest:,.0f} model tokens): "
        f"{kv[0] * longest / 2**30:,.1f} GiB ({kv[1]})"
        if kv and longest
        else ""
    )
    return ModelPlan(
        abbr=model.get("abbr", "model"),
        max_seq_len=int(first.max_seq_len),
        reserve=int(first.reserve),
        tokenizer=estimate,
        limit_ratio=limit_ratio,
        datasets=plans,
        shards=shards,
        samples=sum(p.samples for p in plans),
        prompt_tokens=total_prompt,
        model_tokens=sum(p.model_tokens or 0 for p in plans) if tok is not None else None,
        output_tokens=sum(p.output_tokens for p in plans),
        num_shortened=sum(p.num_shortened for p in plans),
        num_skipped=sum(p.num_skipped for p in plans),
        prefix_share=sum(p.prefix_tokens for p in plans) / total_prompt if total_prompt else 0.0,
        reasoning=thinks,
        cost=cost,
        num_gpus=gpus,
        devices=devices,
        devices_stop=stop,
        kv_cache=kv_text,
    )


def plan_config(config_path: str, num_shards: int | None = None, prices_path: str | None = None) -> PlanReport:
    """Plan a config's run: per model, what it sends, what it costs and how it is cut.

    Builds the datasets' cache files first where missing (as the partitioner would); writes nothing else.

    Args:
        config_path: an OpenCompass config with needlebench datasets (models through ``$NEEDLEBENCH_MODELS``).
        num_shards: shards per model; None takes the config's infer partitioner's ``num_shards``.
        prices_path: a prices file (``planning.costs``): each priced model's datasets get their cost.

    Raises:
        ConfigError: a missing or unloadable config, one without needlebench datasets or models, a bad
            partitioner setting, a shard count below 1, or a bad prices file (one that prices a model the
            config does not have included).
    """
    from ..cache.arrow_rows import materialize_many
    from ..opencompass.configs import check_raw_messages, check_summarizer, load_config
    from ..planning.costs import check_priced_models, load_prices
    from ..planning.limits import Limits
    from ..tasks import config_params, is_needlebench

    if num_shards is not None and num_shards < 1:
        raise ConfigError(f"--shards: {num_shards} must be at least 1")
    prices = load_prices(prices_path) if prices_path else None
    cfg, ours = load_config(config_path)
    check_summarizer(cfg.get("summarizer"))  # what the run would refuse, refused here too
    models = [_plain(m) for m in cfg.get("models", [])]
    if not models:
        raise ConfigError(f"config: {config_path} defines no models")
    if prices is not None:
        check_priced_models(prices, [m.get("abbr", "model") for m in models], str(config_path))
    settings = _settings(cfg, num_shards)
    for model in models:  # what the run would refuse, refused here too
        check_raw_messages(model, [_plain(d) for d in ours])
    limits = Limits(settings)  # silent: a tokenizer that fails to load is reported in the plan itself
    datasets = [_plain(d) for d in ours]
    try:
        materialize_many([(d["task"], config_params(d)) for d in datasets])
    except OSError as exc:  # an unwritable cache: load_rows builds the rows in memory, slower
        log.warning("dataset cache not written (%s: %s); rows are built in memory", type(exc).__name__, exc)
    everything = [_plain(d) for d in cfg.get("datasets", [])]
    run = plan_run(models, everything, settings, limits=limits)
    runner = (cfg.get("infer") or {}).get("runner")
    reports = [
        _plan_model(limits, m, datasets, r, runner, prices.of(m.get("abbr", "model")) if prices else None)
        for m, r in zip(models, run.models, strict=True)
    ]
    return PlanReport(
        run=run,
        config=str(config_path),
        num_shards=settings.num_shards,
        overlength=settings.overlength,
        template_margin=settings.template_margin,
        models=reports,
        other_datasets=[str(d.get("abbr")) for d in cfg.get("datasets", []) if not is_needlebench(d)],
        notes=list(NOTES),
    )


def _window_lines(run: RunPlan, abbr: str, verbose: bool) -> list[str]:
    """The model's context window (``planning.window``) and the cells past it, with what the run does: by the
    cell's coarse coordinate over its datasets (with ``verbose`` also per dataset)."""
    model = run.model(abbr)
    if model is None:
        return []
    if model.window is None:
        return ["  context window: unknown (no config.json readable offline): not checked"]
    window = Window(**model.window)
    lines = [f"  context window: {window.describe()}, from {window.source}"]
    if not model.beyond_window:
        return lines
    act = (
        "the run stops before any model call; runtime(beyond_window='mark') runs them, marked"
        if run.settings.beyond_window == "stop"
        else "run and marked 'beyond window' in the tables"
    )
    past: dict[Any, list[int]] = {}
    for entry in model.beyond_window.values():
        for coord, n, most in entry["cells"]:
            seen = past.setdefault(coord, [0, 0])
            seen[0], seen[1] = seen[0] + n, max(seen[1], most)
    cells = ", ".join(
        f"{c} ({n:,} prompts, up to {most:,} tokens)" for c, (n, most) in sorted(past.items(), key=_order)
    )
    lines.append(f"  past the window: {cells}: {act}")
    for dataset, entry in model.beyond_window.items() if verbose else ():
        lines.append(
            f"    {dataset}: " + ", ".join(f"{c[0]} ({c[1]} prompts, up to {c[2]:,} tokens)" for c in entry["cells"])
        )
    return lines


def _order(item: tuple[Any, Any]) -> tuple[bool, Any]:
    """Cells by their coordinate: numbers in numeric order, before any text."""
    return isinstance(item[0], str), item[0]


def _cut_lines(m: ModelPlan, verbose: bool) -> list[str]:
    """Prompts shortened or skipped to fit the model's room: by the room's reason and the cell's first coordinate
    (the length) over the datasets (with ``verbose`` also per dataset and cell, ``length/depth xN``)."""
    from ..tasks import get_task

    groups: dict[tuple[str, str, str], dict[Any, int]] = {}
    detail = []
    for d in m.datasets:
        for action, cells in (("shortened", d.shortened), ("skipped", d.skipped)):
            counts = groups.setdefault((action, _room(m, d), get_task(d.task).cell[0]), {}) if cells else {}
            for cell in cells:
                counts[cell[0]] = counts.get(cell[0], 0) + cell[-1]
            if cells:
                detail.append(f"    {d.abbr}, {action} (length/depth): {_cells_text(cells)}")
    lines = [
        f"  {action} to fit the room of {room}: {key} "
        + ", ".join(f"{c} x{n:,}" for c, n in sorted(counts.items(), key=_order))
        for (action, room, key), counts in groups.items()
        if counts
    ]
    return lines + (detail if verbose else [])


def _room(m: ModelPlan, d: DatasetPlan) -> str:
    """A dataset's room and why it is that: ``31,680 cl100k tokens (max_seq_len - output - reserve) / ratio``."""
    ratio = f" / tokenizer ratio {d.limit_ratio:.3f}" if d.limit_ratio != 1 else ""
    return (
        f"{d.max_prompt_tokens:,} cl100k tokens (max_seq_len {m.max_seq_len:,} - output {d.max_out_len:,} - "
        f"reserve {m.reserve}){ratio}"
    )


def text_table(head: tuple[str, ...], rows: list[tuple[str, ...]], total: bool = True) -> list[str]:
    """Rows under a head, the first column left-aligned and the others right, a rule under the head (and with
    ``total``, above the last row: the total).

    Args:
        head: the columns' names.
        rows: each row's cells, as text.
        total: the last row is a total.
    """
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    rule = "  " + "  ".join("-" * w for w in widths)
    out = []
    for k, row in enumerate((head, *rows)):
        if total and k == len(rows):
            out.append(rule)
        out.append("  " + "  ".join([row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]))
        if k == 0:
            out.append(rule)
    return out


def _cost_lines(m: ModelPlan) -> list[str]:
    """A priced model's cost per dataset and in total: online (cached input priced as such), batch."""
    if m.cost is None:
        return []
    head = ("dataset", "requests", "prompt", "cached", "output", "online $", "cache saves $", "batch $", "long")
    rows = [
        (name, f"{c.requests:,}", *(_num(int(n)) for n in (c.prompt_tokens, c.cached_tokens, c.output_tokens)))
        + (*(f"{x:,.2f}" for x in (c.online, c.cache_savings, c.batch)), str(c.long_requests))
        for name, c in [*((d.abbr, d.cost) for d in m.datasets), ("total", m.cost)]
    ]
    cached = "cached = the prefix each request shares with the one before"
    return [f"  cost (output at its budget: an upper bound; {cached})", *text_table(head, rows)]


def _num(n: int | None) -> str:
    """A token count, short: 1,234 / 12.3k / 4.56M; ``n/a`` for None."""
    if n is None:
        return "n/a"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 10_000:
        return f"{n / 1e3:.1f}k"
    return f"{n:,}"


def _cells_text(cells: list[list[Any]]) -> str:
    """``length/depth xN`` per cell (``length xN`` for cells without a depth)."""
    return ", ".join(f"{c[0]}{'' if c[1] is None else f'/{c[1]}'} x{c[2]}" for c in cells)


def _thinking_lines(plan: PlanReport, m: ModelPlan) -> list[str]:
    """A reasoning model's thinking room at each dataset's longest cell, against its budget."""
    lines = []
    for d in (d for d in m.datasets if d.thinking is not None):
        t = d.thinking
        verdict = (
            f"fits the budget {t.budget:,}"
            if t.fits
            else f"less than the budget {t.budget:,}: the run {'skips' if t.action == 'skipped' else 'shortens'} "
            f"such prompts (overlength={plan.overlength}; {d.num_shortened} shortened, {d.num_skipped} skipped)"
        )
        lines.append(
            f"    {d.abbr}, {t.cell}: prompt {t.model_tokens:,} model tokens ({t.prompt_tokens:,} cl100k), "
            f"room {t.room:,}: {verdict}"
        )
    head = f"  thinking room at each dataset's longest cell (max_seq_len {m.max_seq_len:,} - prompt - reserve "
    return [f"{head}{m.reserve}), against the reasoning budget:", *lines] if lines else []


LEGEND = (
    "prompt cl100k: tokens sent, after the model's limit; prompt model: the same in its tokenizer (estimated);",
    "room: the cl100k tokens a prompt may hold; prefix: the share of prompt tokens a prefix cache can reuse.",
    "--verbose: each shard's dataset slices, the cells cut per depth, how each number is estimated; --json: all.",
)


def format_plan(plan: PlanReport, verbose: bool = False) -> str:
    """The plan on one screen for a run of one model and one suite: per model its datasets and a total row,
    the prompts cut to fit (by length, with the room's reason), the window and devices checks, one line per shard.

    Args:
        plan: from :func:`plan_config`.
        verbose: also each shard's dataset slices, the cut cells per dataset and depth, and the estimates' notes.
    """
    lines = [f"plan of {plan.config}: {plan.num_shards} shard(s) per model, overlength={plan.overlength}"]
    head = ("dataset", "samples", "prompt cl100k", "prompt model", "output", "room", "shortened", "skipped", "prefix")
    for m in plan.models:
        t = m.tokenizer
        tok_line = f"tokenizer: {t.path} ({t.reason})" if t.available else f"tokenizer: n/a ({t.reason})"
        lines += ["", f"model {m.abbr}: max_seq_len {m.max_seq_len:,}; {tok_line}"]
        rows = [
            (d.abbr, f"{d.samples:,}", _num(d.prompt_tokens), _num(d.model_tokens), _num(d.output_tokens))
            + (_num(d.max_prompt_tokens), str(d.num_shortened), str(d.num_skipped), f"{d.prefix_share:.0%}")
            for d in m.datasets
        ]
        rows.append(
            ("total", f"{m.samples:,}", _num(m.prompt_tokens), _num(m.model_tokens), _num(m.output_tokens))
            + ("", str(m.num_shortened), str(m.num_skipped), f"{m.prefix_share:.0%}")
        )
        lines += text_table(head, rows) + _cut_lines(m, verbose) + _window_lines(plan.run, m.abbr, verbose)
        lines += [f"  {x}" for x in (m.devices, m.kv_cache) if x]
        ran = plan.run.model(m.abbr)
        varied = ran.model_variant if ran else None
        if varied:  # what it varies, of which model (the plan's record): a press prefills as above, then compresses
            v = Variant.from_dict(varied)
            labels = ", ".join(f"{k} {x}" for k, x in v.labels.items())
            lines.append(f"  variant of {v.of or '(no model of the run)'}: {labels}")
        lines += _cost_lines(m) + _thinking_lines(plan, m)
        if ran and ran.rounds:  # an adaptive run: its shards are its first round's
            first = sum(s.samples for s in m.shards)
            lines.append(f"  adaptive: the first round asks {first:,} of {m.samples:,} prompts (--adaptive: the range)")
        for s in m.shards:
            lines.append(
                f"  shard {s.index}: {s.samples:,} prompts, {_num(s.prompt_tokens)} prompt + "
                f"{_num(s.output_tokens)} output tokens" + (f": {', '.join(s.parts)}" if verbose else "")
            )
    if plan.other_datasets:
        lines += ["", f"not needlebench (not planned): {', '.join(plan.other_datasets)}"]
    lines += ["", *(plan.notes if verbose else LEGEND)]
    return "\n".join(lines)
