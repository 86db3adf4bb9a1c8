"""Scripted models for the ladder: accuracy curves over length and depth, each prompt right or wrong by a seeded draw.

Why: before a run, nobody knows where a model's score falls, so what an adaptive run will spend is a range,
not a number. ``needlebench plan --adaptive`` climbs the ladder against named scenarios and a population of
curves on the config's own grid, and ``bench/adaptive_sim.py`` against the full grid: both from here, so the
plan's expectation and the bench's agreement rest on the same curves.

Families (log2 length x): logistic (midpoints evenly over the grid's positions, from a step before its shortest
length to a step past its longest; slopes 0.7, 1.5, 3, 8; tops 1.0, 0.95, 0.85 over floors 0, 0.1, 0.3), a step
down at every length (1.0 to 0, 0.9 to 0.5), plateaus (1.0 to 0.2), a dip at one length that recovers, and "lost
in the middle" (middle depths fail first, from three points of the grid).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence

from ..seeding import stable_seed
from .ladder import LadderSettings, Round, next_round

__all__ = ["Curve", "answer", "climb", "curves", "named"]

Curve = Callable[[int, float], float]  # (length, depth) -> the chance a prompt there is answered right


def _logistic(mid: float, slope: float, top: float, floor: float) -> Curve:
    return lambda n, d: floor + (top - floor) / (1 + math.exp(slope * (math.log2(n) - mid)))


def curves(lengths: Sequence[int], count: int) -> list[tuple[str, Curve]]:
    """``count`` scripted models for a grid of these lengths: every step, plateau, dip and middle curve, then
    logistic curves evenly over their parameters for the rest.

    Args:
        lengths: the grid's lengths, ascending.
        count: how many.
    """
    lo, hi = math.log2(lengths[0]), math.log2(lengths[-1])
    logs = [math.log2(n) for n in lengths]
    logistic: list[tuple[str, Curve]] = []
    for i in range(16):  # midpoints spread evenly over the grid's positions, from a step before it to a step past
        at = -1 + (len(lengths) + 1) * i / 15
        j = min(max(int(math.floor(at)), 0), max(len(logs) - 2, 0))
        mid = logs[j] + ((logs[j + 1] - logs[j]) * (at - j) if len(logs) > 1 else at - j)
        for slope in (0.7, 1.5, 3.0, 8.0):
            for top, floor in ((1.0, 0.0), (0.95, 0.1), (0.85, 0.3)):
                name = f"logistic mid 2^{mid:.1f} slope {slope} top {top} floor {floor}"
                logistic.append((name, _logistic(mid, slope, top, floor)))
    others: list[tuple[str, Curve]] = []
    for cut in lengths[1:]:  # steps
        for top, low in ((1.0, 0.0), (0.9, 0.5)):
            others.append((f"step at {cut} {top}->{low}", lambda n, d, c=cut, t=top, b=low: t if n < c else b))
    for level in (1.0, 0.97, 0.9, 0.75, 0.5, 0.2):  # plateaus
        others.append((f"plateau {level}", lambda n, d, v=level: v))
    for dip in lengths[1:-1]:  # a dip that recovers
        others.append((f"dip at {dip}", lambda n, d, x=dip: 0.3 if n == x else 0.97))
    for mid in (lo + (hi - lo) * f for f in (0.3, 0.6, 0.9)):  # lost in the middle: middle depths fall first
        others.append(
            (
                f"lost in the middle from 2^{mid:.1f}",
                lambda n, d, m=mid: (
                    0.98 if math.log2(n) < m or d <= 20 or d >= 80 else 0.98 - 0.8 * min(1.0, math.log2(n) - m)
                ),
            )
        )
    room = max(0, count - len(others))
    return others[:count] + [logistic[int(i * len(logistic) / room)] for i in range(room)]


def named(lengths: Sequence[int]) -> list[tuple[str, Curve]]:
    """The scenarios a plan names: a model that holds the bar everywhere, one that collapses at the middle length,
    one that collapses right after the shortest.

    Args:
        lengths: the grid's lengths, ascending.
    """
    middle = lengths[len(lengths) // 2] if len(lengths) > 1 else lengths[0]
    second = lengths[1] if len(lengths) > 1 else lengths[0]
    cases = [("holds the bar at every length", lambda n, d: 1.0)]
    for cut in dict.fromkeys((middle, second)) if len(lengths) > 1 else ():  # one case where the two are one length
        cases.append((f"collapses at {cut:,}", lambda n, d, cut=cut: 1.0 if n < cut else 0.0))
    return cases


def answer(name: str, curve: Curve, length: int, depth: float | None, key: Hashable, seed: int) -> float:
    """A scripted model's score on one prompt: right (1) where a seeded draw falls under its accuracy there.

    Args:
        name: the curve's name (part of the draw's seed).
        curve: its accuracy.
        length: the prompt's length.
        depth: its depth (None: no depth; the curve is read at 50).
        key: what tells the prompt from the others of its cell (a repeat, a sample id).
        seed: the draws' seed.
    """
    draw = (stable_seed("adaptive_scenario", seed, name, length, depth, key) % 10**9) / 10**9
    return 1.0 if draw < curve(length, 50.0 if depth is None else depth) else 0.0


def climb(
    grid: Mapping[int, Sequence[tuple[float, Hashable]]],
    tokens: Mapping[int, float],
    settings: LadderSettings,
    scores: Callable[[int, float, Hashable], float],
) -> tuple[Round, dict[tuple[int, float, Hashable], float], int]:
    """The ladder run to its end against a scripted model: (its last round, every prompt asked with its score,
    the rounds it took).

    Args:
        grid: per length, its (depth, key) prompts.
        tokens: per length, one prompt's tokens (what the ladder's budget counts).
        settings: the ladder's settings.
        scores: a prompt's score, by (length, depth, key).
    """
    asked: dict[tuple[int, float, Hashable], float] = {}
    rounds = 0
    while (step := next_round(grid, asked, tokens, settings)).asks:
        rounds += 1
        for n, cells in step.asks.items():
            asked.update({(n, d, k): scores(n, d, k) for d, k in cells})
    return step, asked, rounds
