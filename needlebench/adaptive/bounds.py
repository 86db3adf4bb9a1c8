"""Bounds on a length's full-grid score from the prompts sampled so far: exact, without replacement, at every look.

Why a finite population: a length of the grid holds a known set of prompts (its depths x repeats, N of them),
and the score the full grid would give it is exactly their mean. An adaptive run samples n of them without
replacement, so its interval is on that mean, not on a model's unknown accuracy; once every prompt is asked the
interval is the full grid's score itself. Two bounds, each intersected with what is certain (the n scores seen,
the N - n unseen all 0 or all 1):

* every score 0 or 1 (S-RT and M-RS answers, ATC): the exact hypergeometric interval for the number right in
  the population (Buonaccorsi, "A note on confidence intervals for proportions in finite populations", The
  American Statistician 41(3), 1987);
* any score in [0, 1] (M-RT's share of needles found, the 2024 protocol's Levenshtein): the Hoeffding-Serfling
  inequality for sampling without replacement (Bardenet and Maillard, Bernoulli 21(3), 2015, Corollary 2.5).

A length is looked at no more than a known number of times (the ladder's schedule ends at the whole
population), and each look spends an equal share of the error: with ``delta`` spread over ``looks``, the
interval holds at every look at once with probability at least ``1 - delta``, however the looks fall (the
Bonferroni error-spending of group-sequential designs; Lan and DeMets, Biometrika 70(3), 1983).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = ["mean_bounds"]


@lru_cache(maxsize=1)
def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])


def _log_choose(lf: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    valid = (b >= 0) & (b <= a)
    out = np.full(np.broadcast(a, b).shape, -np.inf)
    aa, bb = np.broadcast_arrays(a, b)
    out[valid] = lf[aa[valid]] - lf[bb[valid]] - lf[aa[valid] - bb[valid]]
    return out


@lru_cache(maxsize=65536)
def _hypergeometric(population: int, sampled: int, right: int, alpha: float) -> tuple[int, int]:
    """The exact (1 - alpha) interval of the number right in the population, both tails at alpha / 2."""
    lf = _log_factorials(max(1024, 1 << population.bit_length()))
    k = np.arange(population + 1)[:, None]  # the number right in the population
    x = np.arange(sampled + 1)[None, :]  # the number right among the sampled
    logp = (
        _log_choose(lf, k, x)
        + _log_choose(lf, population - k, sampled - x)
        - _log_choose(lf, np.array(population), np.array(sampled))
    )
    pmf = np.exp(logp)
    at_most = pmf[:, : right + 1].sum(axis=1)  # P(X <= right | K)
    at_least = pmf[:, right:].sum(axis=1)  # P(X >= right | K)
    low = int(np.argmax(at_least > alpha / 2))
    high = int(population - np.argmax((at_most > alpha / 2)[::-1]))
    return low, high


def mean_bounds(
    scores: Sequence[float], population: int, delta: float, looks: int, graded: bool = False
) -> tuple[float, float]:
    """Bounds on the mean score over the whole population (0..1), holding at each of ``looks`` looks at once with
    probability at least ``1 - delta``.

    Args:
        scores: the sampled prompts' scores, each in [0, 1].
        population: the prompts at the length (the full grid's).
        delta: the error over every look.
        looks: the most looks this length can have that spend error (a look at the whole population is certain).
        graded: the population's scores may lie between 0 and 1: Hoeffding-Serfling even where the scores seen
            are all 0 or 1 (the hypergeometric interval assumes every unseen score is 0 or 1 too).

    Raises:
        ValueError: more scores than the population, a score outside [0, 1], ``delta`` outside (0, 1), or fewer
            than one look.
    """
    n = len(scores)
    if n > population or not 0 < delta < 1 or looks < 1:
        raise ValueError(f"bounds: {n} scores of {population} prompts, delta {delta}, looks {looks}")
    if any(not 0 <= s <= 1 for s in scores):
        raise ValueError("bounds: a score outside [0, 1]")
    total = float(sum(scores))
    certain = (total / population, (total + population - n) / population)
    if n == 0:
        return certain
    alpha = delta / looks
    if not graded and all(s in (0, 1) for s in scores):
        low, high = _hypergeometric(population, n, int(total), alpha)
        return max(certain[0], low / population), min(certain[1], high / population)
    rho = min(1 - (n - 1) / population, (1 - n / population) * (1 + 1 / n))
    eps = math.sqrt(rho * math.log(2 / alpha) / (2 * n))
    mean = total / n
    return max(certain[0], mean - eps), min(certain[1], mean + eps)
