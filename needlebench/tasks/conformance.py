"""How a task's records depart from its reference suite: the wording every task's ``conformance`` shares.

A leaderboard row may sit beside a paper's row only when it was measured on what the paper measured: every
cell the suite plans, every repeat, and the reference value of every protocol option. Each task knows its
suite and its options (its ``conformance`` hook); these helpers turn what its records show into the short
phrases a row's note carries ("1 of 10 repeats", "2 of 4 lengths", "clarified options: budget=prompt").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..record import GradedSample
from ..taskspec import Conformance

__all__ = ["coverage", "count_coverage", "option_differences", "conformance"]


def _key(value: Any) -> Any:
    """A coordinate as compared: integral floats as ints, other floats to 6 decimals (v1 depths are 100*i/19)."""
    if isinstance(value, float) and math.isfinite(value):
        return int(value) if value.is_integer() else round(value, 6)
    return value


def _shown(values: Iterable[Any]) -> str:
    items = sorted(values, key=lambda v: (str(type(v)), v))
    text = ", ".join(str(v) for v in items[:6])
    return text + (", ..." if len(items) > 6 else "")


def coverage(name: str, found: Iterable[Any], planned: Iterable[Any]) -> tuple[list[str], list[str]]:
    """``(short, differs)`` for one coordinate: the suite's values the records lack, and values it never plans.

    Args:
        name: the coordinate's plural name in a note ("lengths", "depths", "needle counts").
        found: the values the records hold.
        planned: the values the reference suite plans.

    Returns:
        ``(["2 of 4 lengths"], [])`` when values are missing; ``([], ["lengths 5000 not in the suite"])`` when
        the records hold values the suite does not plan; ``([], ["needle counts 2, not 11"])`` when they hold
        none of the suite's values.
    """
    have, want = {_key(v) for v in found}, {_key(v) for v in planned}
    if have and want and not have & want:
        return [], [f"{name} {_shown(have)}, not {_shown(want)}"]
    short = [f"{len(have & want)} of {len(want)} {name}"] if want - have else []
    differs = [f"{name} {_shown(have - want)} not in the suite"] if have - want else []
    return short, differs


def count_coverage(name: str, found: int, planned: int) -> tuple[list[str], list[str]]:
    """``(short, differs)`` for a count such as repeats: "1 of 10 repeats", or "25 repeats, not 10".

    Args:
        name: the counted thing's plural name ("repeats", "data points").
        found: how many the records hold.
        planned: how many the reference suite plans.
    """
    if found < planned:
        return [f"{found} of {planned} {name}"], []
    if found > planned:
        return [], [f"{found} {name}, not {planned}"]
    return [], []


def option_differences(records: Sequence[GradedSample], reference: Mapping[str, str]) -> list[str]:
    """The protocol options of the records that are not the reference ones ("clarified options: budget=prompt").

    Args:
        records: one model's records of one task (each with the ``options`` it was made with).
        reference: each option's reference value (the papers' and OpenCompass's).
    """
    if not reference:
        return []
    seen: dict[str, set[str]] = {}
    unrecorded = 0
    for r in records:
        options = r.get("options")
        if not isinstance(options, Mapping):
            unrecorded += 1
            continue
        for name, value in options.items():
            if name in reference and str(value) != reference[name]:
                seen.setdefault(name, set()).add(str(value))
    out = []
    if seen:
        out.append("clarified options: " + ", ".join(f"{k}={'/'.join(sorted(v))}" for k, v in sorted(seen.items())))
    if unrecorded:
        out.append(f"protocol options not recorded ({unrecorded} of {len(records)} samples)")
    return out


def conformance(parts: Iterable[tuple[list[str], list[str]]], differs: Iterable[str] = ()) -> Conformance:
    """One :class:`~needlebench.taskspec.Conformance` from the ``(short, differs)`` of each coordinate.

    Args:
        parts: what :func:`coverage` and :func:`count_coverage` returned, one per coordinate.
        differs: further differences (:func:`option_differences`).
    """
    short: list[str] = []
    other: list[str] = []
    for s, d in parts:
        short += s
        other += d
    return Conformance(tuple(short), tuple(other + list(differs)))
