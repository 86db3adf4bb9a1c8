"""What a per-sample record says about whether it counts.

A record is one line of ``<dataset>.samples.jsonl`` (a
:class:`~needlebench.record.GradedSample` written out): the sample's metadata,
its grade, the prediction and, when it is left out of the numbers, its ``unscored``
reason. Unscored samples are counted where they were planned but never scored;
every metric and table uses these predicates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..record import FAILED_REASONS, GradedSample, unscored_reason

__all__ = ["is_shortened", "is_failed", "is_skipped", "is_excluded", "is_truncated", "is_answered"]

Record = Mapping[str, Any] | GradedSample


def is_shortened(record: Record) -> bool:
    """A prompt cut to fit the model: it is never reported as its nominal length."""
    return unscored_reason(record) == "shortened"


def is_failed(record: Record) -> bool:
    """A sample without an answer (the request failed, or no prediction was given): not a wrong answer."""
    return unscored_reason(record) in FAILED_REASONS


def is_skipped(record: Record) -> bool:
    """A sample never sent because it did not fit the model."""
    return unscored_reason(record) == "skipped"


def is_excluded(record: Record) -> bool:
    """A sample that is counted but left out of every score (any ``unscored`` reason)."""
    return unscored_reason(record) is not None


def is_truncated(record: Record) -> bool:
    """An output cut off at its budget (``truncated`` in the record), whether it counts or is left out for it."""
    return bool(record.truncated if isinstance(record, GradedSample) else record.get("truncated"))


def is_answered(record: Record) -> bool:
    """A sample with an output of its nominal prompt: it counts, or is left out only because it was cut off.

    The samples a cell's ``truncated%`` is a share of.
    """
    return unscored_reason(record) in (None, "truncated")
