"""Aggregate metrics: task scores, ATC weighted score, ENL-50, suite overall.

Inputs are plain numbers (percentages). Missing cells are left out of means,
never counted as 0, with one exception the paper defines: the ATC weighted
score (Eq. 4) sums over every planned needle count, so a planned N without a
result counts as 0 there (and the tables flag it) instead of renormalising.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..grading.matching import levenshtein_score

__all__ = [
    "atc_weighted_score",
    "enl",
    "missing_needles",
    "overall_score",
    "levenshtein_score",
    "mean",
    "summarise_details",
    "error_shares",
    "PROFILES",
]

SHORT_CONTEXT_NEEDLES = 64  # ATC prompts up to ~2K tokens

PROFILES: dict[str, tuple[float, float, float]] = {
    "v2": (1 / 3, 1 / 3, 1 / 3),
    "v1": (0.4, 0.3, 0.3),
}


def mean(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else float("nan")


def atc_weighted_score(
    acc_by_needles: Mapping[int, float], max_needles: int | None = None, planned: Iterable[int] | None = None
) -> float:
    """sum(P_N * N) / sum(N) over the planned needle counts (up to ``max_needles``).

    Args:
        acc_by_needles: accuracy P_N per needle count N.
        max_needles: only N up to this (64 for the <=2K sub-score).
        planned: the N the config planned; a planned N with no (or a NaN)
            accuracy counts as 0, never renormalised away. Defaults to the N present.
    """
    acc = {int(n): float(p) for n, p in acc_by_needles.items()}
    counts = sorted({int(n) for n in (acc if planned is None else planned)})
    counts = [n for n in counts if max_needles is None or n <= max_needles]
    total = sum(counts)
    if total == 0:
        return float("nan")
    return sum(_or_zero(acc.get(n)) * n for n in counts) / total


def _or_zero(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else value


def missing_needles(
    acc_by_needles: Mapping[int, float], planned: Iterable[int], max_needles: int | None = None
) -> list[int]:
    """The planned N (up to ``max_needles``) that have no accuracy, so count as 0 in the weighted score."""
    have = {int(n) for n, p in acc_by_needles.items() if not math.isnan(float(p))}
    return sorted(n for n in {int(x) for x in planned} if n not in have and (max_needles is None or n <= max_needles))


def enl(acc_by_needles: Mapping[int, float], tau: float = 50.0) -> int:
    """Effective needle length: the largest N with accuracy >= tau, 0 if none (a missing N cannot pass)."""
    passing = [int(n) for n, p in acc_by_needles.items() if float(p) >= tau]
    return max(passing) if passing else 0


def overall_score(srt: float, mrt: float, mrs: float, profile: str = "v2") -> float:
    """Suite overall: equal weights (2025, "v2") or 0.4/0.3/0.3 (2024, "v1")."""
    try:
        w = PROFILES[profile]
    except KeyError:
        raise ValueError(f"profile: unknown {profile!r}; choose from {sorted(PROFILES)}") from None
    return w[0] * srt + w[1] * mrt + w[2] * mrs


def _group(details: Sequence[Mapping[str, Any]], key: str) -> dict[Any, list[float]]:
    out: dict[Any, list[float]] = defaultdict(list)
    for d in details:
        if d.get(key) is not None:
            out[d[key]].append(float(d["score"]))
    return out


def summarise_details(details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The numbers an evaluator reports for one dataset: score, failure rate, per length / needles."""
    if not details:
        return {"score": float("nan"), "format_failure_rate": float("nan"), "num_samples": 0}
    out: dict[str, float] = {
        "score": mean(float(d["score"]) for d in details),
        "accuracy": 100.0 * sum(bool(d["correct"]) for d in details) / len(details),
        "format_failure_rate": 100.0 * sum(bool(d.get("format_failure")) for d in details) / len(details),
        "num_samples": len(details),
    }
    for length, vals in sorted(_group(details, "length").items()):
        out[f"length_{length}"] = mean(vals)
    by_needles = {n: mean(vals) for n, vals in sorted(_group(details, "num_needles").items())}
    for n, value in by_needles.items():
        out[f"needles_{n}"] = value
    if by_needles and all(d.get("task") == "atc" for d in details):
        # over every planned N (a skipped N counts as 0, never renormalised); planned_n_missing says how many
        planned = sorted({int(n) for d in details for n in d.get("needle_counts") or ()} | set(by_needles))
        out["weighted_score"] = atc_weighted_score(by_needles, planned=planned)
        out["weighted_score_short"] = atc_weighted_score(by_needles, max_needles=SHORT_CONTEXT_NEEDLES, planned=planned)
        out["enl50"] = float(enl(by_needles))
        out["planned_n_missing"] = len(set(planned) - set(by_needles))
    for kind, share in error_shares(details).items():
        out[f"error_{kind}"] = share
    if all(d.get("task") == "needlechain" for d in details):
        out.update(chain_cells(details))
    return out


def chain_cells(details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """NeedleChain strict (and, where graded, plain) accuracy per (variant, k, question); error shares per (variant, k)."""
    out: dict[str, float] = {}
    cells: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    plain: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for d in details:
        cells[(d["variant"], d["k"], d["question"])].append(float(d["score"]))
        if d.get("plain_correct") is not None:
            plain[(d["variant"], d["k"], d["question"])].append(100.0 * bool(d["plain_correct"]))
        groups[(d["variant"], d["k"])].append(d)
    for (variant, k, question), vals in sorted(cells.items()):
        out[f"acc_{variant}_k{k}_{question}"] = mean(vals)
    for (variant, k, question), vals in sorted(plain.items()):
        out[f"plain_{variant}_k{k}_{question}"] = mean(vals)
    for (variant, k), rows in sorted(groups.items()):
        for kind, share in error_shares(rows).items():
            out[f"err_{variant}_k{k}_{kind}"] = share
    return out


def error_shares(details: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Percentage of all samples that failed with each error kind."""
    counts: dict[str, int] = defaultdict(int)
    for d in details:
        if not d.get("correct") and d.get("error"):
            counts[str(d["error"]).split(":")[0]] += 1
    return {k: 100.0 * v / len(details) for k, v in sorted(counts.items())} if details else {}
