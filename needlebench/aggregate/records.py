"""What a per-sample record says about whether it counts.

A record is one line of ``<dataset>.samples.jsonl``: the sample's metadata,
its grade and the prediction. Shortened prompts and unanswered requests are
counted (planned) but never scored; every table uses these predicates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_shortened", "is_failed", "is_excluded"]


def is_shortened(record: Mapping[str, Any]) -> bool:
    """A prompt cut to fit the model: it is never reported as its nominal length."""
    return record.get("shortened_from") is not None


def is_failed(record: Mapping[str, Any]) -> bool:
    """A request the inference server never answered: not a wrong answer, and never scored."""
    return record.get("error") == "request_failed"


def is_excluded(record: Mapping[str, Any]) -> bool:
    """A sample that is counted but left out of every score (shortened, or its request failed)."""
    return is_shortened(record) or is_failed(record)
