"""A model's rates on its engine, fitted from an earlier run's batches: what ``needlebench plan --rates`` predicts by.

Why batches: OpenCompass's inferencer sends a model ``batch_size`` requests at once and the next batch after the
last answer, so a request's own wall time includes the work of the others in flight with it; a batch's time is
what adds up to the run's. A batch's seconds (its slowest request for a server, its clock for an in-process
engine) grow with the prompt tokens the engine computes (prefill), with those times the context they attend to
(attention, which dominates at long lengths), and with the tokens its longest answer writes (decode steps):

    seconds = batch + computed x a + computed x prompt x b + longest output x c     (tokens in thousands for a, b)

summed over the batch's requests, fitted by least squares with every coefficient at least 0 (a rate is never
negative: the 2^4 subsets of terms are each solved, the best one that is non-negative wins, so the fit is exact and
deterministic). ``computed`` is a prompt's cl100k tokens less the share the engine said it served from its prefix
cache (all of them where it reports none); the planned prompts are counted in cl100k, so the measured runs are too.

Three more facts come from the run as measured, never from the fit: the tokens each task's answers took, and
each batch's longest (decode is paid on what a model writes, not on its budget, for as long as its longest), the share of the plan's reusable prefix the engine
did serve from its cache (``cache_capture``: the next config's prefix is the plan's, times that), and how many
batches ran at once (``parallel``: the batches' seconds over the seconds its progress log spans; above 1 where
tasks ran side by side), which turns batch seconds into the run's wall time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np

from ..record import GradedSample
from ..request_cost import RequestCost
from .costs import Price, request_costs

__all__ = [
    "TERMS",
    "Measured",
    "Observation",
    "Planned",
    "Prediction",
    "Rates",
    "batch_seconds",
    "fit_rates",
    "observations",
    "predict",
]

# the fit's terms, in the order of Rates.coefficients: seconds per batch, per 1k computed tokens, per 1k computed
# x 1k prompt tokens, per token of the batch's longest answer (a decode step)
TERMS = ("batch", "computed", "attention", "decode")


@dataclass(frozen=True)
class Observation:
    """One answered request of the earlier run.

    Args:
        task: its task's registry name.
        prompt_tokens: its prompt's cl100k tokens (the dataset row's).
        computed_tokens: of them, the ones the engine computed: less the share it said it served from its cache.
        output_tokens: the tokens its answer took (None: not counted).
        seconds: its seconds on the clock (its share of its batch's, for an in-process engine).
        shared: ``seconds`` is a share of its batch's clock (an in-process engine), not its own request's.
    """

    task: str
    prompt_tokens: int
    computed_tokens: float
    output_tokens: int | None
    seconds: float
    shared: bool = False


@dataclass(frozen=True)
class Measured:
    """A model's answered requests of one run, batch by batch, as the rates are fitted on them.

    Args:
        batches: each batch's requests (its cost log line's).
        reusable_tokens: the prefix tokens the plan counts as reusable over them (0 where not counted).
        cached_tokens: the prompt tokens the engine served from its cache, scaled to the sizes given (None where
            it said nothing).
        engine: the engine and its version most of them name.
    """

    batches: list[list[Observation]]
    reusable_tokens: float
    cached_tokens: float | None
    engine: str


def observations(
    batches: Sequence[Mapping[str, RequestCost]],
    sized: Callable[[str], tuple[GradedSample, int, float] | None],
) -> Measured:
    """A model's batches read into observations: the one reading of a cost log for rates (``needlebench plan
    --rates`` sizes each prompt by its dataset row, the report's forecast by its nominal length).

    Args:
        batches: each batch's costs by sample id, in the order answered (``runfolder.cost_log.cost_batches``).
        sized: a sample id's (record, prompt tokens, reusable prefix tokens), or None for a sample to leave out.
    """
    out, reusable, cached, engines = [], 0.0, None, Counter()
    for costs in batches:
        batch = []
        for key, cost in costs.items():
            found = sized(key)
            if found is None or not cost.wall_s:
                continue
            record, tokens, shared = found
            share = (
                cost.cached_tokens / cost.prompt_tokens
                if cost.computed_tokens is not None and cost.prompt_tokens
                else None
            )
            if share is not None:
                cached = (cached or 0.0) + share * tokens
            reusable += shared
            computed = tokens * (1 - share) if share is not None else float(tokens)
            seconds, shared_clock = float(cost.wall_s), bool(cost.shared)
            batch.append(Observation(record.task, tokens, computed, record.output.output_tokens, seconds, shared_clock))
            engines[" ".join(x for x in (cost.engine, cost.engine_version) if x)] += 1
        out.append(batch)
    return Measured(out, reusable, cached, engines.most_common(1)[0][0] if engines else "")


def batch_seconds(batch: Sequence[Observation]) -> float:
    """A batch's seconds: its requests' shares of its clock added up, or its slowest request (all in flight at once).

    Args:
        batch: its answered requests.
    """
    walls = [o.seconds for o in batch]
    return float(sum(walls)) if all(o.shared for o in batch) else float(max(walls))


def _features(sizes: Sequence[tuple[float, float]], longest: float) -> list[float]:
    """A batch's terms from its requests' (prompt, computed) tokens and its longest answer's tokens."""
    return [1.0, sum(c for _, c in sizes) / 1e3, sum(c / 1e3 * p / 1e3 for p, c in sizes), longest]


@dataclass(frozen=True)
class Rates:
    """What one model's batches cost on its engine, from one earlier run.

    Args:
        model: the model's abbr in that run.
        run: the run folder.
        engine: the engine and its version as the costs say (``openai-api 0.32.0``; ``""`` where none was said).
        requests: the requests fitted on.
        batches: the batches they came in.
        coefficients: per term of :data:`TERMS`, the fitted rate.
        fit_error: the fit's relative error on its own batches: |sum of fitted - sum of measured| / measured, and
            the mean absolute error per batch over the mean batch seconds (two numbers, in that order).
        output_tokens: per task, the mean tokens its answers took; ``"*"``: over every task.
        longest_tokens: per task, the mean over its batches of the batch's longest answer (what the decode steps
            are counted on; with answers of varied length it exceeds the mean); ``"*"``: over every batch.
        cache_reported: the engine said how many prompt tokens it served from its cache.
        cache_capture: the cached tokens over the plan's reusable prefix (None: no cache reported, or nothing to
            reuse).
        parallel: batch seconds over the seconds the progress log spans (None: no log).
        span_s: those seconds.
        batch_s: the batch seconds measured.
        request_s: the request seconds measured (the ledger's wall seconds).
        prompt_range: the shortest and the longest prompt measured (cl100k tokens).
    """

    model: str
    run: str
    engine: str
    requests: int
    batches: int
    coefficients: dict[str, float]
    fit_error: tuple[float, float]
    output_tokens: dict[str, float]
    longest_tokens: dict[str, float]
    cache_reported: bool
    cache_capture: float | None
    parallel: float | None
    span_s: float | None
    batch_s: float
    request_s: float
    prompt_range: tuple[int, int]

    def seconds(self, sizes: Sequence[tuple[float, float]], longest: float) -> float:
        """A batch's predicted seconds.

        Args:
            sizes: its requests' (prompt, computed) tokens.
            longest: its longest answer's tokens.
        """
        return float(sum(self.coefficients[t] * v for t, v in zip(TERMS, _features(sizes, longest), strict=True)))

    def answer_tokens(self, task: str, budget: int, longest: bool = False) -> float:
        """The tokens an answer of ``task`` takes, as measured (its task's mean, else every task's), at most ``budget``.

        Args:
            task: the task's registry name.
            budget: the request's ``max_out_len``.
            longest: the batch's longest answer's instead (the mean over the run's batches of the task).
        """
        measured = self.longest_tokens if longest else self.output_tokens
        return min(float(budget), measured.get(task, measured.get("*", 0.0)))


def _nonnegative_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient at least 0: the best non-negative solution over all subsets of columns."""
    best, best_sse = np.zeros(x.shape[1]), float(np.sum(y * y))
    for k in range(1, x.shape[1] + 1):
        for cols in combinations(range(x.shape[1]), k):
            sub = x[:, list(cols)]
            if np.linalg.matrix_rank(sub) < k:
                continue
            coef = np.linalg.lstsq(sub, y, rcond=None)[0]
            if np.any(coef < 0):
                continue
            sse = float(np.sum((sub @ coef - y) ** 2))
            if sse < best_sse - 1e-12:
                full = np.zeros(x.shape[1])
                full[list(cols)] = coef
                best, best_sse = full, sse
    return best


def fit_rates(
    model: str,
    run: str,
    engine: str,
    batches: Sequence[Sequence[Observation]],
    reusable_tokens: float,
    cached_tokens: float | None,
    span_s: float | None,
) -> Rates:
    """Fit a model's rates on its batches of one run.

    Args:
        model: its abbr.
        run: the run folder.
        engine: its engine and version, as its costs say.
        batches: its answered requests with a cost, batch by batch (as the cost log has them).
        reusable_tokens: the prefix tokens the plan counted as reusable over those requests (cl100k).
        cached_tokens: the tokens the engine said it served from its cache (cl100k); None where it said nothing.
        span_s: the seconds its progress log spans (``runfolder.progress_log.in_flight_span``); None without one.

    Raises:
        ValueError: no observation.
    """
    batches = [b for b in batches if b]
    if not batches:
        raise ValueError(f"{model}: no request of {run} has a cost")
    observations = [o for b in batches for o in b]
    longest = [max(o.output_tokens or 0 for o in b) for b in batches]
    x = np.array([_features([(o.prompt_tokens, o.computed_tokens) for o in b], m) for b, m in zip(batches, longest)])
    y = np.array([batch_seconds(b) for b in batches])
    coef = _nonnegative_lstsq(x, y)
    fitted = x @ coef
    total = float(y.sum())
    by_task: dict[str, list[int]] = {}
    for o in observations:
        if o.output_tokens is not None:
            by_task.setdefault(o.task, []).append(o.output_tokens)
    outputs = {t: float(np.mean(v)) for t, v in sorted(by_task.items())}
    everything = [n for v in by_task.values() for n in v]
    if everything:
        outputs["*"] = float(np.mean(everything))
    tops: dict[str, list[int]] = {}  # a batch's longest answer, by the task of that answer
    for b, m in zip(batches, longest, strict=True):
        tops.setdefault(max(b, key=lambda o: o.output_tokens or 0).task, []).append(m)
    longest_tokens = {t: float(np.mean(v)) for t, v in sorted(tops.items())} | {"*": float(np.mean(longest))}
    return Rates(
        model=model,
        run=run,
        engine=engine,
        requests=len(observations),
        batches=len(batches),
        coefficients={t: float(c) for t, c in zip(TERMS, coef, strict=True)},
        fit_error=(
            abs(float(fitted.sum()) - total) / total if total else 0.0,
            float(np.mean(np.abs(fitted - y))) / float(np.mean(y)) if total else 0.0,
        ),
        output_tokens=outputs,
        longest_tokens=longest_tokens,
        cache_reported=cached_tokens is not None,
        cache_capture=cached_tokens / reusable_tokens if cached_tokens is not None and reusable_tokens > 0 else None,
        parallel=total / span_s if span_s else None,
        span_s=span_s,
        batch_s=total,
        request_s=float(sum(o.seconds for o in observations)),
        prompt_range=(min(o.prompt_tokens for o in observations), max(o.prompt_tokens for o in observations)),
    )


@dataclass(frozen=True)
class Planned:
    """One request of the new config, as its plan has it.

    Args:
        task: its task's registry name.
        prompt_tokens: its prompt's cl100k tokens.
        prefix_share: its dataset's reusable prefix share (the plan's ``prefix_share``).
        max_out_len: its output budget.
    """

    task: str
    prompt_tokens: int
    prefix_share: float
    max_out_len: int


@dataclass(frozen=True)
class Prediction:
    """What a new config's requests of one model will cost at an earlier run's rates.

    Args:
        model: the model's abbr.
        rates: the rates it is predicted at.
        requests: its requests (the plan's).
        batches: the batches they go in (the plan's pieces, cut at the model's ``batch_size``).
        prompt_tokens: their cl100k prompt tokens (the plan's).
        computed_tokens: of them, those the engine will compute (the plan's prefix times the measured capture).
        output_tokens: the tokens their answers will take (the measured means per task, within each budget).
        batch_s: the seconds its batches will take, one after another.
        run_s: the run's inference wall time: ``batch_s`` over the measured parallel (None without a progress log).
        devices: the GPUs each of its tasks holds (the plan's).
        device_h: ``batch_s`` x devices, in hours (None where it holds none: an API model's are its provider's).
        money: dollars at the prices (device-hours at ``device_hour``, tokens at the token prices); None unpriced.
        beyond: requests longer than the longest the run measured (the fit extrapolates there).
        measured: what of it comes from the run (each a phrase).
        planned: what of it comes from the token plan.
    """

    model: str
    rates: Rates
    requests: int
    batches: int
    prompt_tokens: int
    computed_tokens: float
    output_tokens: float
    batch_s: float
    run_s: float | None
    devices: int
    device_h: float | None
    money: float | None
    beyond: int
    measured: list[str] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The prediction as JSON data."""
        return asdict(self)


def predict(
    rates: Rates,
    batches: Sequence[Sequence[Planned]],
    devices: int,
    price: Price | None = None,
) -> Prediction:
    """A new config's cost for one model at its rates.

    Args:
        rates: from :func:`fit_rates`.
        batches: the config's requests for the model, as planned, batch by batch.
        devices: the GPUs each of its tasks holds.
        price: the model's prices (``planning.costs``): its tokens at its tiers, its device-hours at
            ``device_hour``; None: unpriced.
    """
    capture = min(1.0, rates.cache_capture) if rates.cache_capture is not None else 0.0
    computed = outputs = seconds = token_dollars = 0.0
    prompt = beyond = requests = 0
    for batch in batches:
        sizes, longest = [], 0.0
        for r in batch:
            cached = capture * r.prefix_share * r.prompt_tokens
            out = rates.answer_tokens(r.task, r.max_out_len)
            longest = max(longest, rates.answer_tokens(r.task, r.max_out_len, longest=True))
            sizes.append((float(r.prompt_tokens), r.prompt_tokens - cached))
            outputs += out
            if price is not None and price.tiers:
                token_dollars += request_costs(price, [r.prompt_tokens], [cached], out).online
        seconds += rates.seconds(sizes, longest) if sizes else 0.0
        computed += sum(c for _, c in sizes)
        prompt += sum(r.prompt_tokens for r in batch)
        beyond += sum(r.prompt_tokens > rates.prompt_range[1] for r in batch)
        requests += len(batch)
    device_h = seconds * devices / 3600 if devices else None
    by_hour = price is not None and price.device_hour is not None and device_h is not None
    dollars = None
    if price is not None and (price.tiers or by_hour):
        dollars = token_dollars + (device_h * price.device_hour if by_hour else 0.0)
    measured = [
        f"rates from {rates.batches} batches of {rates.requests} requests ({', '.join(TERMS)}: least squares, "
        "none negative)",
        "output tokens per task, and each batch's longest",
    ]
    if rates.cache_capture is not None:
        measured.append(f"cache capture {rates.cache_capture:.0%} of the plan's reusable prefix")
    if rates.parallel is not None:
        measured.append(f"parallel {rates.parallel:.2f}")
    planned = ["requests", "batches", "prompt tokens", "reusable prefix"]
    if not rates.cache_reported:
        planned.append("no prefix cache (the engine reported no cached tokens)")
    return Prediction(
        model=rates.model,
        rates=rates,
        requests=requests,
        batches=sum(1 for b in batches if b),
        prompt_tokens=prompt,
        computed_tokens=computed,
        output_tokens=outputs,
        batch_s=seconds,
        run_s=seconds / rates.parallel if rates.parallel else None,
        devices=devices,
        device_h=device_h,
        money=dollars,
        beyond=beyond,
        measured=measured,
        planned=planned,
    )
