"""Metrics every task shares: means that skip missing cells, per-dataset summaries, error shares.

Inputs are graded samples (:class:`~needlebench.record.GradedSample`) or plain
numbers (percentages). Missing cells are left out of means, never counted as 0,
and so are samples that were counted but never scored (a failed request, a
prompt shortened to fit the model: ``GradedSample.counts``): OpenCompass's
``summary_<time>.csv`` (these numbers) and ``needlebench_summary.csv`` (the
report's tables) must give one number per cell. A task's own numbers (the ATC
weighted score, NeedleChain's cells) are declared with the task
(``TaskSpec.results``) and added by the caller.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ..record import GradedSample
from .cells import format_failure_rate, percent, truncated_rate

__all__ = ["COMMON_METRICS", "GRADER_ERROR", "mean", "summarise_details", "breakdown", "error_shares"]

# the numbers every dataset reports first, in this order (``summarise_details``)
COMMON_METRICS = (
    "score",
    "accuracy",
    "format_failure_rate",
    "num_samples",
    "num_scored",
    "num_failed",
    "num_shortened",
    "num_truncated",
    "num_truncated_excluded",
    "truncated_rate",
)
GRADER_ERROR = "grader_error"  # the error kind of a grader that raised, for every task (``grading.evaluation``)


def mean(values: Iterable[float]) -> float:
    """The mean of the values that are not missing (None or NaN); NaN when none is left."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else float("nan")


def _group(records: Sequence[GradedSample], key: str) -> dict[Any, list[float]]:
    out: dict[Any, list[float]] = defaultdict(list)
    for r in records:
        value = r.get(key)
        if value is not None:
            out[value].append(float(r.score))
    return out


def summarise_details(details: Sequence[GradedSample], error_kinds: Iterable[str] = ()) -> dict[str, float]:
    """The numbers an evaluator reports for one dataset: score, failure rate, per length / needles, counts.

    Every rate and mean is over the scored samples only; the unscored ones are counted beside them
    (``num_samples`` = ``num_scored`` + ``num_failed`` + ``num_shortened`` + ``num_truncated_excluded``),
    never averaged in as 0. ``truncated_rate`` is the share of answered samples (scored, or left out for
    being cut off) whose output was cut off at its budget, and ``num_truncated`` their count (its
    numerator); ``num_truncated_excluded`` counts those of them left out (``truncated="unscored"``).

    Args:
        details: the dataset's graded samples.
        error_kinds: the error kinds the task's grader can give (``TaskSpec.error_kinds``): each gets its
            ``error_<kind>`` share, 0 where none occurred (NaN where nothing was scored).
    """
    scored = [d for d in details if d.counts]
    answered = [d for d in details if d.answered]
    out: dict[str, float] = {
        "score": mean(float(d.score) for d in scored),
        "accuracy": percent(sum(d.correct for d in scored), len(scored)),
        "format_failure_rate": format_failure_rate(scored),
        "num_samples": len(details),
        "num_scored": len(scored),
        "num_failed": sum(d.failed for d in details),  # a shortened prompt is counted as shortened
        "num_shortened": sum(d.shortened for d in details),
        "num_truncated": sum(d.output.truncated for d in answered),
        "num_truncated_excluded": sum(d.unscored == "truncated" for d in details),
        "truncated_rate": truncated_rate(answered),
    }
    out.update(breakdown(scored, "length", "length"))
    for kind, share in error_shares(scored, (*error_kinds, GRADER_ERROR)).items():
        out[f"error_{kind}"] = share
    return out


def breakdown(details: Sequence[GradedSample], key: str, prefix: str) -> dict[str, float]:
    """The mean score per value of one metadata key, over the scored samples: ``{"<prefix>_<value>": mean}``.

    A task declares which keys it breaks its numbers down by (``TaskSpec.breakdowns``); the length
    breakdown is common to all. Samples without the key, shortened or unanswered ones are left out.

    Args:
        details: graded samples.
        key: the metadata key (``length``, or a task's own such as a needle count).
        prefix: the metric name's head.
    """
    scored = [d for d in details if d.counts]
    return {f"{prefix}_{value}": mean(vals) for value, vals in sorted(_group(scored, key).items())}


def error_shares(details: Sequence[GradedSample], kinds: Iterable[str] = ()) -> dict[str, float]:
    """Percentage of the given samples that failed with each error kind, sorted by kind.

    Args:
        details: graded samples; pass the scored ones for shares of what was scored.
        kinds: the kinds reported even where none occurred (0, or NaN for no samples), so every dataset of a
            task reports the same names; a kind that occurred is reported whether declared or not.
    """
    counts: dict[str, int] = dict.fromkeys(kinds, 0)
    for d in details:
        if not d.correct and d.error:
            kind = d.error.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
    return {k: percent(v, len(details)) for k, v in sorted(counts.items())}
