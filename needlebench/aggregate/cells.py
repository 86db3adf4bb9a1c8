"""Table cells every task's tables share: a value with its 95% interval beside it, a format-failure rate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .uncertainty import interval

__all__ = ["put_interval", "format_failure_rate", "NAN"]

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
