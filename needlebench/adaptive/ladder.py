"""The adaptive length ladder: which prompts of a length x depth grid to ask next, until the effective length is
decided.

Why: a grid spends most of its tokens at its longest lengths, and a model whose score has collapsed pays for them
all the same. The effective length (``aggregate.effective_length``: the largest length up to which every length
keeps the bar) needs, at each length, only whether its full-grid score reaches the bar; the ladder asks prompts
until :mod:`~needlebench.adaptive.bounds` decides that, length by length, and no further.

The rules, each a function of the answers so far (so a resume asks nothing twice and ``needlebench verify``
replays every decision from the records):

* **Sparse first**: every length gets ``first`` prompts (4), the first of its seeded random order: why four,
  every column of the heatmap has prompts in it, a curve that dips and recovers shows at every length, and a
  length of 110 prompts costs 3.6% of its full grid's tokens before any decision. The order is a uniform
  random permutation (the bounds assume a simple random sample), so which depths come first is the seed's.
* **Doubling where undecided**: a length whose bounds straddle the bar gets more prompts, up to the next point
  of its schedule (``first``, x ``growth``, ... the whole length); the shortest length, which the relative bar
  is a share of, grows with any undecided length, since its bounds widen the bar's, and alone while it is
  itself undecided (no bar yet). The climb is lazy: no length above the first undecided one whose score so far
  falls short of the bar grows (a likely failure would make them irrelevant).
* **First failure ends the climb**: the effective length stops at the first length that fails (as the full
  grid's walk does), so lengths past the first decided failure get nothing beyond their sparse prompts; a curve
  that dips and recovers is seen there (its sparse prompts), and flagged as the full grid flags it.
* **Budget**: a cap on the prompt tokens of one ladder (a model's dataset); a round that would pass it asks what fits, shortest
  lengths first, and the lengths left open are *undetermined* (never a 0).

Each length's bounds hold at all its looks with probability at least ``1 - delta`` (``adaptive.bounds``); a
pass or a fail needs its own bounds and the shortest length's, so one length's decision is wrong with
probability at most ``2 delta`` (0.05 at the default ``delta`` 0.025). The effective length rests on every length
up to the first failure: it is wrong with probability at most ``(k + 1) delta`` for k such lengths (a union bound,
loose: ``bench/adaptive_sim.py`` measures the agreement with the full grid).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..aggregate.effective_length import EffectiveRule
from ..errors import ConfigError, unknown_option_error
from ..seeding import stable_hash
from .bounds import mean_bounds

__all__ = ["OPTIONS", "LadderSettings", "Round", "Rung", "next_round", "sampling_order", "schedule"]

STATUSES = ("pass", "fail", "open")
# what ``runtime(adaptive=dict(...))`` may set; the rule is the summarizer's ``effective_length`` (one rule per run)
OPTIONS = ("delta", "first", "growth", "budget", "seed", "extend", "graded")


@dataclass(frozen=True)
class LadderSettings:
    """How the ladder decides.

    Args:
        rule: the effective length's rule (the same as the full grid's).
        delta: each length's error over all its looks.
        first: prompts per length in the first round.
        growth: how a length's prompts grow between looks.
        budget: the most prompt tokens one ladder (a model's dataset) may ask in all (None: the full grid's).
        seed: the sampling order's seed.
        extend: lengths of the grid past its suite (2M, 4M, 8M: the rungs past 1M), climbed one at a time and
            only once every length below has passed; never in the sparse first round.
        graded: every dataset's scores may lie between 0 and 1: the bounds are Hoeffding-Serfling's even where
            the prompts seen so far scored 0 or 1 only. A dataset whose task says so (M-RT's share of needles,
            Levenshtein: ``planning.adaptive.LadderGrid.graded``) gets them without it.

    Raises:
        ConfigError: a value out of its range.
    """

    rule: EffectiveRule = field(default_factory=EffectiveRule)
    delta: float = 0.025
    first: int = 4
    growth: float = 2.0
    budget: float | None = None
    seed: int = 0
    extend: tuple[int, ...] = ()
    graded: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.delta < 0.5:
            raise ConfigError(f"adaptive delta: {self.delta!r}; a number in (0, 0.5), e.g. 0.025")
        if self.first < 1:
            raise ConfigError(f"adaptive first: {self.first!r}; at least 1 prompt per length")
        if not self.growth > 1:
            raise ConfigError(f"adaptive growth: {self.growth!r}; more than 1, e.g. 2")
        if self.budget is not None and not self.budget > 0:
            raise ConfigError(f"adaptive budget: {self.budget!r}; prompt tokens, more than 0")
        if any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in self.extend):
            raise ConfigError(f"adaptive extend: {self.extend!r}; lengths in tokens, e.g. (2000000, 4000000)")

    @classmethod
    def of(cls, options: Mapping[str, object] | None, rule: EffectiveRule | None = None) -> LadderSettings:
        """The settings a config's ``runtime(adaptive=dict(...))`` gives; an unknown key is refused, never ignored.

        Args:
            options: the mapping (keys of :data:`OPTIONS`); None or empty: every default.
            rule: the run's effective-length rule (the summarizer's ``effective_length``; None: the default).

        Raises:
            ConfigError: not a mapping, an unknown key, or a value out of range.
        """
        if options is None:
            options = {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"adaptive: {options!r}; a dict of {', '.join(OPTIONS)} (or {{}} for the defaults)")
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise unknown_option_error("adaptive", map(str, unknown), OPTIONS)
        values = dict(options)
        try:
            if "extend" in values:
                values["extend"] = tuple(values["extend"])  # type: ignore[arg-type]
            return cls(rule=rule or EffectiveRule(), **values)  # type: ignore[arg-type]
        except TypeError as exc:  # a string where a number goes
            raise ConfigError(f"adaptive: {dict(options)!r}: {exc}") from None


def schedule(population: int, settings: LadderSettings) -> list[int]:
    """The prompt counts a length is looked at: ``first``, then x ``growth`` each time, then the whole length.

    Args:
        population: the length's prompts in the full grid.
        settings: the ladder's settings.
    """
    points, n = [], min(settings.first, population)
    while n < population:
        points.append(n)
        n = max(n + 1, math.ceil(n * settings.growth))
    return [*points, population]


def sampling_order(
    length: int, cells: Sequence[tuple[float, int]], settings: LadderSettings
) -> list[tuple[float, int]]:
    """A length's prompts in the order the ladder asks them: a uniform random permutation drawn by the seed (each
    prompt ranked by a stable hash of its coordinates and the seed), so the first n asked are a simple random
    sample without replacement, which the bounds assume. Why not depths spread by design: the bounds would no
    longer hold where scores depend on depth, which is when spreading matters.

    Args:
        length: the length.
        cells: its (depth, repeat) pairs.
        settings: the ladder's settings (its ``seed``).
    """
    return sorted(cells, key=lambda c: stable_hash("ladder", settings.seed, length, c[0], c[1]))


@dataclass(frozen=True)
class Rung:
    """One length as the round found it.

    Args:
        length: the length.
        population: its prompts in the full grid.
        answered: those answered so far.
        low: the lower bound of its full-grid score (0..1).
        high: the upper bound.
        status: ``pass``, ``fail`` or ``open`` against the bar.
    """

    length: int
    population: int
    answered: int
    low: float
    high: float
    status: str


@dataclass(frozen=True)
class Round:
    """One decision of the ladder: what it found and what it asks next.

    Args:
        rungs: each length, shortest first.
        asks: the prompts to ask next, per length (its (depth, repeat) pairs); empty when the ladder is done.
        reason: why it asks them, or why it stopped.
        effective: the effective length as decided so far: (its length or None, its edge as the full grid's:
            ``exact``, ``at_least``, ``below`` or ``undetermined``, the first open length where undetermined).
    """

    rungs: tuple[Rung, ...]
    asks: Mapping[int, tuple[tuple[float, int], ...]]
    reason: str
    effective: tuple[int | None, str, int | None]


def _status(rung_low: float, rung_high: float, base: tuple[float, float], rule: EffectiveRule, shortest: bool) -> str:
    """Pass, fail or open: the length's bounds against the bar the shortest length's bounds allow."""
    if rule.rule == "absolute":
        bar = rule.threshold / 100
        return "pass" if rung_low >= bar else "fail" if rung_high < bar else "open"
    if shortest:  # the relative rule's shortest length passes with any score above 0
        return "pass" if rung_low > 0 else "fail" if rung_high == 0 else "open"
    if rung_low > 0 and rung_low >= rule.share * base[1]:
        return "pass"
    if rung_high == 0 or rung_high < rule.share * base[0]:
        return "fail"
    return "open"


def _effective(rungs: Sequence[Rung]) -> tuple[int | None, str, int | None]:
    last = None
    for rung in rungs:
        if rung.status == "fail":
            return last, ("below" if last is None else "exact"), None
        if rung.status == "open":
            return last, "undetermined", rung.length
        last = rung.length
    return last, "at_least", None


def next_round(
    grid: Mapping[int, Sequence[tuple[float, int]]],
    answers: Mapping[tuple[int, float, int], float],
    tokens: Mapping[int, float],
    settings: LadderSettings,
) -> Round:
    """The ladder's next round, from the answers so far alone.

    Args:
        grid: per length, its (depth, repeat) prompts in the full grid.
        answers: each answered prompt's score (0..1) by (length, depth, repeat).
        tokens: per length, the prompt tokens of one of its prompts (what the budget counts).
        settings: the ladder's settings.

    Raises:
        ValueError: an answer for a prompt the grid does not have.
    """
    lengths = sorted(grid)
    orders = {n: sampling_order(n, grid[n], settings) for n in lengths}
    cells = {n: set(grid[n]) for n in lengths}
    unknown = [k for k in answers if k[0] not in cells or (k[1], k[2]) not in cells[k[0]]]
    if unknown:
        raise ValueError(f"ladder: answers for prompts outside the grid: {unknown[:3]}")
    spent = sum(tokens[k[0]] for k in answers)
    asked = {n: [c for c in orders[n] if (n, *c) in answers] for n in lengths}
    suite = [n for n in lengths if n not in settings.extend]
    if any(len(asked[n]) < min(settings.first, len(grid[n])) for n in suite):  # the sparse first round
        asks = {n: tuple(c for c in orders[n][: settings.first] if (n, *c) not in answers) for n in suite}
        return _capped(lengths, asks, tokens, spent, settings, "first round: every length sparsely", ())
    beyond = [n for n in lengths if n in settings.extend]
    climbed = suite + [n for i, n in enumerate(beyond) if all(asked[m] for m in beyond[: i + 1])]
    rungs = []
    base = (0.0, 1.0)
    for i, n in enumerate(climbed):
        if not grid[n]:  # every prompt of the length left unscored: nothing decides it, it stays open
            rungs.append(Rung(n, 0, 0, 0.0, 1.0, "open"))
            continue
        points = schedule(len(grid[n]), settings)
        scores = [answers[(n, *c)] for c in asked[n]]
        looks = max(1, len(points) - 1)  # the last look asks the whole length: certain, it spends nothing
        low, high = mean_bounds(scores, len(grid[n]), settings.delta, looks, settings.graded)
        if i == 0:
            base = (low, high)
        status = _status(low, high, base, settings.rule, shortest=i == 0)
        rungs.append(Rung(n, len(grid[n]), len(scores), low, high, status))
    frontier = []
    for rung in rungs:  # the climb: up to the first decided failure
        frontier.append(rung)
        if rung.status == "fail":
            break
    open_ = [r for r in frontier if r.status == "open"]
    if not open_:
        following = [n for n in beyond if n not in climbed]
        if following and all(r.status == "pass" for r in rungs):  # every length passed: one rung higher
            n = following[0]
            asks = {n: tuple(orders[n][: settings.first])}  # nothing of it asked yet
            reason = f"every length up to {climbed[-1]} passed: the ladder climbs to {n}"
            return _capped(lengths, asks, tokens, spent, settings, reason, tuple(rungs))
        return Round(tuple(rungs), {}, "decided: every length up to the first failure", _effective(rungs))
    grow = {climbed[0]} | set(_climb(rungs, open_, answers, asked, settings.rule))
    asks = {}
    for rung in rungs:
        if rung.length in grow and rung.answered < rung.population:  # (an empty length has nothing to ask)
            points = schedule(rung.population, settings)
            target = next(p for p in points if p > rung.answered)
            pending = [c for c in orders[rung.length] if (rung.length, *c) not in answers]
            asks[rung.length] = tuple(pending[: target - rung.answered])
    reason = f"open at {', '.join(str(r.length) for r in open_)}: more prompts there and at the shortest length"
    return _capped(lengths, asks, tokens, spent, settings, reason, tuple(rungs))


def _climb(
    rungs: Sequence[Rung],
    open_: Sequence[Rung],
    answers: Mapping[tuple[int, float, int], float],
    asked: Mapping[int, Sequence[tuple[float, int]]],
    rule: EffectiveRule,
) -> list[int]:
    """The open lengths worth more prompts now: none above an open shortest length (the bar is not set until it
    passes), and none above the first open length whose score so far falls short of the bar (a likely failure,
    which would make every length above it irrelevant)."""
    if rungs[0].status == "open":
        return []

    def mean(n: int) -> float:  # a length with nothing answered: below any bar (the climb stops there)
        return sum(answers[(n, *c)] for c in asked[n]) / len(asked[n]) if asked[n] else -1.0

    bar = rule.threshold / 100 if rule.rule == "absolute" else rule.share * mean(rungs[0].length)
    out = []
    for rung in open_:
        out.append(rung.length)
        if mean(rung.length) < bar:
            break
    return out


def _capped(
    lengths: Sequence[int],
    asks: Mapping[int, tuple[tuple[float, int], ...]],
    tokens: Mapping[int, float],
    spent: float,
    settings: LadderSettings,
    reason: str,
    rungs: tuple[Rung, ...],
) -> Round:
    """The round's asks within the budget (shortest lengths first); a round that asks nothing more ends the run."""
    effective = _effective(rungs) if rungs else (None, "undetermined", lengths[0] if lengths else None)
    if settings.budget is None:
        return Round(rungs, {n: a for n, a in asks.items() if a}, reason, effective)
    left, kept = settings.budget - spent, {}
    for n in lengths:
        take = []
        for c in asks.get(n, ()):
            if tokens[n] > left:
                break
            take.append(c)
            left -= tokens[n]
        if take:
            kept[n] = tuple(take)
    if sum(map(len, kept.values())) < sum(map(len, asks.values())):
        reason += f"; the budget ({settings.budget:,.0f} prompt tokens) cut the round"
        if not kept:
            return Round(rungs, {}, f"stopped: the budget ({settings.budget:,.0f} prompt tokens) is spent", effective)
    return Round(rungs, kept, reason, effective)
