"""A model's effective context length: the largest tested length up to which it keeps its score.

Per model, task and language, over the suite's tested lengths in order: the effective length is the largest
tested length L such that the score at every tested length up to L passes the rule. Two rules:

* ``relative`` (the default, NoLiMa's): at least ``share`` (0.85) of the model's own score at the shortest
  tested length, and above 0, so a model wrong everywhere has no effective length;
* ``absolute`` (RULER's): at least ``threshold`` (85.6, Llama-2-7B's score at 4k in RULER).

The edges are said, never guessed: every tested length passes -> *at least* the largest; the shortest fails
-> *below* the shortest; a length whose cell is incomplete (failed, skipped, shortened or unreadable
samples) before the first failure -> *undetermined above* the last length passed. A pass after a fail is
flagged with the first failing length (the effective length stops at the first failure). ATC's ENL-50 (the
2025 paper's: the largest needle count at which the model stays at 50% accuracy or above) is another
number, kept as the paper defines it.

The interval is a percentile bootstrap over each length's samples (seeded by the cell's identity, so the same
records give the same interval): the rule is applied to every resample, and the 2.5th and 97.5th
percentiles of the resulting positions are read back as tested lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError
from .uncertainty import RESAMPLES, interval, resample_means

__all__ = [
    "METRICS",
    "RULES",
    "EffectiveLength",
    "EffectiveRule",
    "LengthCell",
    "length_cell",
    "effective_length",
    "length_text",
]

RULES = ("relative", "absolute")
# the numbers a dataset's result file holds (NaN where they do not apply): the effective length, its interval,
# 1 where every tested length passed ("at least"), and the first incomplete length where that stopped the walk
METRICS = (
    "effective_length",
    "effective_length_ci_low",
    "effective_length_ci_high",
    "effective_length_at_least",
    "effective_length_undetermined_above",
)


@dataclass(frozen=True)
class EffectiveRule:
    """Which scores pass.

    Args:
        rule: ``"relative"`` (a share of the model's own score at the shortest tested length) or
            ``"absolute"`` (a fixed score).
        share: the share of the relative rule, in (0, 1].
        threshold: the score of the absolute rule, in (0, 100].

    Raises:
        ConfigError: an unknown rule, or a share or threshold out of its range (one line naming the valid values).
    """

    rule: str = "relative"
    share: float = 0.85
    threshold: float = 85.6

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ConfigError(f"effective length rule: {self.rule!r}; choose from {RULES}")
        if not isinstance(self.share, (int, float)) or not 0 < self.share <= 1:
            raise ConfigError(f"effective length share: {self.share!r}; a number in (0, 1], e.g. 0.85")
        if not isinstance(self.threshold, (int, float)) or not 0 < self.threshold <= 100:
            raise ConfigError(f"effective length threshold: {self.threshold!r}; a score in (0, 100], e.g. 85.6")

    @classmethod
    def of(cls, settings: object) -> EffectiveRule:
        """A rule from a config's mapping (``summarizer=dict(..., effective_length=dict(rule=..., share=...))``).

        Args:
            settings: the mapping; None: the default rule.

        Raises:
            ConfigError: not a mapping, an unknown key, or a value out of range.
        """
        if settings is None:
            return cls()
        if not isinstance(settings, dict):
            raise ConfigError(f"effective_length: {settings!r}; a dict of rule, share, threshold")
        unknown = sorted(set(settings) - {"rule", "share", "threshold"})
        if unknown:
            raise ConfigError(f"effective_length: unknown key(s) {unknown}; its keys are rule, share, threshold")
        return cls(**settings)

    def bar(self, base: float) -> float:
        """The score a length must reach, given the model's score at the shortest tested length.

        Args:
            base: the mean score at the shortest tested length (0-100).
        """
        return self.share * base if self.rule == "relative" else float(self.threshold)

    def passes(self, score: float, base: float) -> bool:
        """Whether a length's mean score passes.

        Args:
            score: the length's mean score.
            base: the mean score at the shortest tested length.
        """
        return score >= self.bar(base) and (self.rule == "absolute" or score > 0)

    @property
    def label(self) -> str:
        """The rule in words, for table headers and the report."""
        if self.rule == "relative":
            return f"relative: at least {self.share:.0%} of the model's own score at the shortest length"
        return f"absolute: a score of at least {self.threshold:g}"


@dataclass(frozen=True)
class LengthCell:
    """One tested length's samples.

    Args:
        length: the tested length (tokens).
        scores: the scored samples' scores (0-100).
        complete: whether every planned sample of the cell was scored.
    """

    length: int
    scores: tuple[float, ...]
    complete: bool


def length_cell(length: int, scores: Sequence[float], planned: int) -> LengthCell:
    """One tested length's cell, as the dataset's metrics and the summary's table both build it: complete when
    every sample planned there was scored (and one was).

    Args:
        length: the tested length (tokens).
        scores: the scored samples' scores.
        planned: the samples the plan gives the length.
    """
    return LengthCell(int(length), tuple(float(s) for s in scores), bool(scores) and len(scores) == planned)


@dataclass(frozen=True)
class EffectiveLength:
    """The effective length of one model, task and language (see the module).

    Args:
        value: the effective length, a tested length; None where none passed (or none was determined).
        edge: ``"exact"`` (a later length failed), ``"at_least"`` (every tested length passed), ``"below"``
            (the shortest failed) or ``"undetermined"`` (an incomplete cell came first, at ``undetermined_above``).
        bar: the score a length had to reach (None where the shortest length had no scores).
        lengths: the tested lengths, in order.
        undetermined_above: the first incomplete length, where it stopped the walk.
        non_monotone_at: the first failing length, where a longer length passed again.
        ci_low: the interval's low end (a tested length; None: below the shortest).
        ci_high: its high end.
    """

    value: int | None
    edge: str
    bar: float | None
    lengths: tuple[int, ...]
    undetermined_above: int | None = None
    non_monotone_at: int | None = None
    ci_low: int | None = None
    ci_high: int | None = None

    def metrics(self) -> dict[str, float]:
        """The numbers a dataset's result file holds (:data:`METRICS`), NaN where one does not apply."""

        def num(value: int | None) -> float:
            return float("nan") if value is None else float(value)

        return {
            "effective_length": num(self.value),
            "effective_length_ci_low": num(self.ci_low),
            "effective_length_ci_high": num(self.ci_high),
            "effective_length_at_least": 1.0 if self.edge == "at_least" else 0.0,
            "effective_length_undetermined_above": num(self.undetermined_above),
        }

    @property
    def text(self) -> str:
        """The number as a table shows it: ``32k [16k, 64k]``, ``>= 128k``, ``< 1k``, ``>= 4k, undetermined above 8k``."""
        if self.edge == "below":
            main = f"< {length_text(self.lengths[0])}" if self.lengths else "none"
        elif self.edge == "at_least":
            main = f">= {length_text(self.value)}"
        elif self.edge == "undetermined":
            main = f">= {length_text(self.value)}" if self.value is not None else "undetermined"
            main += f", undetermined above {length_text(self.undetermined_above)}"
        else:
            main = length_text(self.value)
        if self.edge in ("exact", "at_least", "below") and (self.ci_low, self.ci_high) != (None, None):
            main += f" [{_bound(self.ci_low, self.lengths)}, {_bound(self.ci_high, self.lengths)}]"
        if self.non_monotone_at is not None:
            main += f" (passes again after failing at {length_text(self.non_monotone_at)})"
        return main


def length_text(length: int | None) -> str:
    """A length as the papers write it: ``4k``, ``128k``, ``1000k``; another (a ``max_seq_len`` of 32,768) in
    full, ``32,768``; ``-`` for None.

    Args:
        length: tokens.
    """
    if length is None:
        return "-"
    if length and length % 1000 == 0:
        return f"{length // 1000}k"
    return f"{length:,}"


def _bound(value: int | None, lengths: Sequence[int]) -> str:
    return f"< {length_text(lengths[0])}" if value is None else length_text(value)


def _walk(means: Sequence[float], complete: Sequence[bool], rule: EffectiveRule) -> tuple[int, str, int | None]:
    """(index of the effective length, -1 for none; the edge; index of the first failure, or None)."""
    base = means[0]
    last = -1
    for i, (mean, whole) in enumerate(zip(means, complete, strict=True)):
        if not whole or np.isnan(mean):
            return last, "undetermined", None
        if not rule.passes(mean, base):
            return last, ("below" if last < 0 else "exact"), i
        last = i
    return last, "at_least", None


def effective_length(
    cells: Sequence[LengthCell], rule: EffectiveRule, *identity: object, resamples: int = RESAMPLES
) -> EffectiveLength:
    """The effective length over one model's tested lengths of one task and language (see the module).

    Args:
        cells: the tested lengths' samples (any order; sorted here).
        rule: which scores pass.
        identity: what names the curve (model, task, language): it seeds the interval's draws.
        resamples: bootstrap resamples for the interval.
    """
    cells = sorted(cells, key=lambda c: c.length)
    lengths = tuple(c.length for c in cells)
    if not cells:
        return EffectiveLength(None, "undetermined", None, lengths)
    means = [float(np.mean(c.scores)) if c.scores else float("nan") for c in cells]
    complete = [c.complete and bool(c.scores) for c in cells]
    first, edge, failed = _walk(means, complete, rule)
    bar = None if np.isnan(means[0]) else rule.bar(means[0])
    value = lengths[first] if first >= 0 else None
    if edge == "undetermined":
        stop = next(i for i, whole in enumerate(complete) if not whole)
        return EffectiveLength(value, edge, bar, lengths, undetermined_above=lengths[stop])
    rebound = failed is not None and any(rule.passes(m, means[0]) for m in means[failed + 1 :])
    low, high = _interval(cells, rule, identity, resamples)
    return EffectiveLength(
        value,
        edge,
        bar,
        lengths,
        non_monotone_at=lengths[failed] if rebound else None,
        ci_low=low,
        ci_high=high,
    )


def sampled_effective_length(
    cells: Sequence[LengthCell], rule: EffectiveRule, decided: tuple[int | None, str, int | None], *identity: object
) -> EffectiveLength:
    """An adaptive run's effective length: its ladder's decision, with the interval the same bootstrap over each
    length's sampled prompts (a length's prompts are the ladder's sample, not its whole; an ``undetermined`` or
    ``below`` decision has no interval).

    Args:
        cells: the tested lengths' samples, as scored (their ``complete`` is set aside).
        rule: which scores pass.
        decided: the ladder's (effective length, edge, first open length).
        identity: what names the curve (model, task, language): it seeds the interval's draws.
    """
    sampled = [replace(c, complete=True) for c in cells if c.scores]
    value, edge, above = decided
    found = replace(effective_length(sampled, rule, *identity), value=value, edge=edge, undetermined_above=above)
    return replace(found, ci_low=None, ci_high=None) if edge in ("undetermined", "below") else found


def _interval(
    cells: Sequence[LengthCell], rule: EffectiveRule, identity: tuple, resamples: int
) -> tuple[int | None, int | None]:
    """The 95% interval of the effective length, as tested lengths (None: below the shortest).

    A cell of one sample has no spread to resample (``resample_means`` gives NaN): its mean is used in every
    draw, so the interval says what the other cells' samples allow.
    """
    draws = np.empty((resamples, len(cells)))
    for j, cell in enumerate(cells):
        col = resample_means(cell.scores, "effective_length", *identity, cell.length, resamples=resamples)
        mean = float(np.mean(cell.scores)) if cell.scores else float("nan")  # no scores: NaN, the walk stops there
        draws[:, j] = np.where(np.isnan(col), mean, col)
    positions = np.array([_walk(row, [True] * len(cells), rule)[0] for row in draws], dtype=float)
    lo, hi = interval(positions, method="inverted_cdf")
    lengths = [c.length for c in cells]
    return (None if lo < 0 else lengths[int(lo)]), (None if hi < 0 else lengths[int(hi)])
