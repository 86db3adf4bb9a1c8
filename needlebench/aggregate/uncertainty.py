"""Percentile-bootstrap intervals for every score the reports print.

Why: one number per cell hides how few samples it rests on. Each leaf cell
(one group of samples, e.g. task x lang x length) is resampled with
replacement ``RESAMPLES`` times; aggregates (per-language, per-task, suite
overall, ATC weighted score, ENL-50) are recomputed from the same resampled
leaf means, so every level of a table shares one set of draws. The draws of
a cell are seeded from a stable hash of its identity (:func:`seed_for`), so a
rerun prints identical intervals.

Comparisons use a paired bootstrap: per-sample differences ``b - a`` over the
sample ids present in both runs, resampled the same way; a difference is
significant when its 95% interval excludes 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..seeding import rng

__all__ = ["RESAMPLES", "LEVEL", "seed_for", "resample_means", "interval", "significant"]

RESAMPLES = 1000
LEVEL = 0.95


def seed_for(*identity: object) -> int:
    """The 64-bit numpy seed of a cell, from a stable hash of its identity (same in every process).

    Args:
        identity: what names the cell, e.g. ``("summary", model, task, lang, length)``.
    """
    return rng("bootstrap", *identity).getrandbits(64)


def resample_means(values: Sequence[float] | np.ndarray, *identity: object, resamples: int = RESAMPLES) -> np.ndarray:
    """Means of ``resamples`` resamples (with replacement) of ``values``; NaNs with fewer than two.

    One sample says nothing about its own spread: its resamples would all equal it and print a
    zero-width interval, so a pool of one sample (and every aggregate over it) gets no interval.

    Args:
        values: the cell's per-sample scores.
        identity: the cell's identity, which seeds the draws (see :func:`seed_for`).
        resamples: how many resamples.
    Returns:
        An array of shape ``(resamples,)``; vectorised, so thousands of samples take milliseconds.
    """
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return np.full(resamples, np.nan)
    gen = np.random.default_rng(seed_for(*identity))
    idx = gen.integers(0, data.size, size=(resamples, data.size))
    return data[idx].mean(axis=1)


def interval(draws: np.ndarray, level: float = LEVEL, method: str = "linear") -> tuple[float, float]:
    """The percentile interval of bootstrap draws; (nan, nan) when any draw is undefined.

    Args:
        draws: one statistic per resample.
        level: coverage, 0.95 for a 95% interval.
        method: numpy's percentile method; "inverted_cdf" keeps a discrete statistic (ENL-50) on its values.
    """
    draws = np.asarray(draws, dtype=float)
    if draws.size == 0 or np.isnan(draws).any():
        return float("nan"), float("nan")
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(draws, [tail, 100.0 - tail], method=method)
    return float(lo), float(hi)


def significant(low: float, high: float) -> bool:
    """Whether a difference is significant: its interval excludes 0 (an undefined, NaN interval never is).

    Args:
        low: lower end of the difference's 95% interval.
        high: upper end of the difference's 95% interval.
    """
    return bool(low > 0 or high < 0)
