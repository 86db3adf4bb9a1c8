"""Table cells every task's tables share: a value with its 95% interval beside it, a format-failure rate, the share
of outputs cut off at their budget and the note that says what was cut off."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..record import unscored_reason
from .records import is_truncated
from .uncertainty import interval

__all__ = ["put_interval", "format_failure_rate", "truncated_rate", "output_notes", "NAN"]

NAN = float("nan")


def put_interval(row: dict[str, Any], column: str, draws: np.ndarray | None) -> None:
    """Put the 95% interval of ``column`` beside it (``<column> ci_low`` / ``ci_high``; NaN without draws).

    Args:
        row: the table row being built.
        column: the value's column.
        draws: the value's bootstrap draws, or None when it has no samples.
    """
    lo, hi = interval(draws) if draws is not None else (NAN, NAN)
    row[f"{column} ci_low"], row[f"{column} ci_high"] = lo, hi


def format_failure_rate(rows: Sequence[dict[str, Any]]) -> float:
    """Percentage of records whose answer had no recognisable format (NaN for no records)."""
    return 100.0 * sum(bool(r.get("format_failure")) for r in rows) / len(rows) if rows else NAN


def truncated_rate(answered: Sequence[dict[str, Any]]) -> float:
    """Percentage of a cell's answered records whose output was cut off at its budget (NaN for none).

    Args:
        answered: the cell's records that count or are left out only for being cut off (``is_answered``).
    """
    return 100.0 * sum(is_truncated(r) for r in answered) / len(answered) if answered else NAN


def output_notes(answered: Sequence[dict[str, Any]], planned: int) -> list[str]:
    """What a cell's note says about its outputs: cut off (left out, or scored as written), think blocks left open.

    Args:
        answered: the cell's records that count or are left out only for being cut off.
        planned: the cell's planned samples (the notes' denominator, as for the other counts).
    """
    excluded = sum(unscored_reason(r) == "truncated" for r in answered)
    scored = sum(is_truncated(r) for r in answered) - excluded
    unclosed = sum(bool(r.get("think_unclosed")) for r in answered)
    notes = [f"{excluded} of {planned} truncated (excluded)"] if excluded else []
    notes += [f"{scored} of {planned} truncated (scored as written)"] if scored else []
    notes += [f"{unclosed} of {planned} left a think block open"] if unclosed else []
    return notes
