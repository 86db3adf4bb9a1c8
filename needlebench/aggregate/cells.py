"""Table cells every task's tables share: a value with its 95% interval beside it, a format-failure rate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .uncertainty import interval

__all__ = ["put_interval", "format_failure_rate", "NAN", "Estimate"]

NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    """One number of a leaderboard: its value, its 95% interval and whether it holds everything its label says.

    Attributes:
        value: the score (NaN when nothing was scored).
        low: the lower end of its 95% bootstrap interval (NaN without one: fewer than two samples).
        high: the upper end.
        complete: every sample, cell and part its label promises was scored (none shortened, skipped or failed).
        note: what is missing when it is not complete ("1 of 3 shortened (excluded)").
    """

    value: float
    low: float = NAN
    high: float = NAN
    complete: bool = True
    note: str = ""

    @property
    def known(self) -> bool:
        """Whether there is a value at all."""
        return not math.isnan(self.value)

    @property
    def has_interval(self) -> bool:
        """Whether the value has a 95% interval."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    @classmethod
    def of(cls, value: float, draws: np.ndarray | None, complete: bool = True, note: str = "") -> Estimate:
        """An estimate with the interval of its bootstrap draws.

        Args:
            value: the score.
            draws: its bootstrap draws (None: no interval).
            complete: whether it holds everything its label says.
            note: what it lacks.
        """
        lo, hi = interval(draws) if draws is not None else (NAN, NAN)
        return cls(float(value), lo, hi, complete, note)


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
