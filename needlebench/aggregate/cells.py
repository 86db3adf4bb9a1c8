"""Table cells every task's tables share: a value with its 95% interval beside it, a format-failure rate, the share
of outputs cut off at their budget and the note that says what was cut off."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..record import GradedSample
from .uncertainty import interval

__all__ = ["put_interval", "percent", "format_failure_rate", "truncated_rate", "output_notes", "NAN", "Estimate"]

NAN = float("nan")


@dataclass(frozen=True)
class Estimate:
    """One number of a leaderboard: its value, its 95% interval and whether it holds everything its label says.

    Attributes:
        value: the score (NaN when nothing was scored).
        low: the lower end of its 95% bootstrap interval (NaN without one: fewer than two samples).
        high: the upper end.
        complete: every sample, cell and part its label promises was scored (none shortened, skipped or failed).
        note: what is missing when it is not complete ("1 of 3 shortened (excluded)"), or what qualifies a
            complete one that is ``marked``.
        marked: complete, but resting on prompts past the model's context window (run under
            ``runtime(beyond_window="mark")``): its note is shown as an incomplete one's is.
    """

    value: float
    low: float = NAN
    high: float = NAN
    complete: bool = True
    note: str = ""
    marked: bool = False

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


def percent(count: int, total: int) -> float:
    """``count`` as a percentage of ``total``; NaN for a total of 0 (a share of nothing is no number).

    Args:
        count: how many of them.
        total: how many in all.
    """
    return 100.0 * count / total if total else NAN


def format_failure_rate(rows: Sequence[GradedSample]) -> float:
    """Percentage of records whose answer had no recognisable format (NaN for no records)."""
    return percent(sum(r.format_failure for r in rows), len(rows))


def truncated_rate(answered: Sequence[GradedSample]) -> float:
    """Percentage of a cell's answered records whose output was cut off at its budget (NaN for none).

    Args:
        answered: the cell's records that count or are left out only for being cut off (``GradedSample.answered``).
    """
    return percent(sum(r.output.truncated for r in answered), len(answered))


def output_notes(answered: Sequence[GradedSample], planned: int) -> list[str]:
    """What a cell's note says about its outputs: cut off (left out, or scored as written), think blocks left open,
    no answer because the budget ran out while the model reasoned (reasoning returned apart), a thinking budget
    the server did not enforce, and reasoning stopped at the thinking budget (cut by it, not under-thinking).

    Args:
        answered: the cell's records that count or are left out only for being cut off.
        planned: the cell's planned samples (the notes' denominator, as for the other counts).
    """
    excluded = sum(r.unscored == "truncated" for r in answered)
    scored = sum(r.output.truncated for r in answered) - excluded
    unclosed = sum(r.output.think_unclosed for r in answered)
    ran_out = sum(r.output.ran_out_reasoning for r in answered)
    notes = [f"{excluded} of {planned} truncated (excluded)"] if excluded else []
    notes += [f"{scored} of {planned} truncated (scored as written)"] if scored else []
    notes += [f"{unclosed} of {planned} left a think block open"] if unclosed else []
    notes += [f"{ran_out} of {planned} no answer: budget ran out while reasoning"] if ran_out else []
    ignored = sum(r.output.budget_ignored for r in answered)
    reached = sum(r.output.budget_reached for r in answered)
    notes += [f"{ignored} of {planned} thinking budget not enforced (reasoned past it)"] if ignored else []
    notes += [f"{reached} of {planned} reasoning stopped at the thinking budget"] if reached else []
    return notes
