"""Result tables as pandas DataFrames: the summary, ATC and NeedleChain tables.

Cells with no samples are NaN (shown as missing), never 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .metrics import SHORT_CONTEXT_NEEDLES, atc_weighted_score, enl, mean, overall_score

__all__ = ["summary_table", "atc_table", "chain_table", "grid", "difference_table", "SPARSE_ORDER", "TASK_LABELS"]

SPARSE_ORDER = ("srt", "mrt", "mrs")
TASK_LABELS = {"srt": "S-RT", "mrt": "M-RT", "mrs": "M-RS", "atc": "ATC", "needlechain": "NeedleChain"}
_NAN = float("nan")


def _rate(rows: Sequence[dict[str, Any]]) -> float:
    return 100.0 * sum(bool(r.get("format_failure")) for r in rows) / len(rows) if rows else _NAN


def summary_table(records: Sequence[dict[str, Any]], models: Sequence[str]) -> pd.DataFrame:
    """Rows per (task, lang, length), per-task EN / ZH / overall, and the suite overall (v2 and v1)."""
    by: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("task") in SPARSE_ORDER:
            by[(r["model"], r["task"], r["lang"], r.get("length"))].append(r)
            by[(r["model"], r["task"], r["lang"], "all")].append(r)
    rows: list[dict[str, Any]] = []
    task_overall: dict[tuple[str, str], float] = {}
    for task in SPARSE_ORDER:
        langs = sorted({k[2] for k in by if k[1] == task})
        if not langs:
            continue
        for lang in langs:
            lengths = sorted({k[3] for k in by if k[1] == task and k[2] == lang and k[3] != "all"})
            for length in [*lengths, "all"]:
                row: dict[str, Any] = {"task": TASK_LABELS[task], "lang": lang.upper(), "length": length}
                for m in models:
                    cell = by.get((m, task, lang, length), [])
                    row[m] = mean(float(c["score"]) for c in cell) if cell else _NAN
                    row[f"{m} fmt_fail%"] = _rate(cell)
                rows.append(row)
        row = {"task": TASK_LABELS[task], "lang": "OVERALL", "length": "all"}
        for m in models:
            per_lang = [
                mean(float(c["score"]) for c in by[(m, task, lang, "all")])
                for lang in langs
                if by.get((m, task, lang, "all"))
            ]
            value = mean(per_lang) if len(per_lang) == len(langs) else _NAN
            row[m] = value
            row[f"{m} fmt_fail%"] = _rate([c for lang in langs for c in by.get((m, task, lang, "all"), [])])
            task_overall[(m, task)] = value
        rows.append(row)
    if all(any((m, t) in task_overall for m in models) for t in SPARSE_ORDER):
        for profile in ("v2", "v1"):
            row = {"task": f"OVERALL ({profile})", "lang": "OVERALL", "length": "all"}
            for m in models:
                parts = [task_overall.get((m, t), _NAN) for t in SPARSE_ORDER]
                row[m] = _NAN if any(math.isnan(p) for p in parts) else overall_score(*parts, profile=profile)
                row[f"{m} fmt_fail%"] = _NAN
            rows.append(row)
    return pd.DataFrame(rows)


def atc_table(records: Sequence[dict[str, Any]], models: Sequence[str]) -> pd.DataFrame:
    """Per-N accuracy per model and language, then weighted score, short-context weighted score, ENL-50."""
    rows = []
    for m in models:
        for lang in sorted({r["lang"] for r in records if r["model"] == m and r["task"] == "atc"}):
            mine = [r for r in records if r["model"] == m and r["task"] == "atc" and r["lang"] == lang]
            by_n: dict[int, list[float]] = defaultdict(list)
            for r in mine:
                by_n[int(r["num_needles"])].append(float(r["score"]))
            acc = {n: mean(v) for n, v in sorted(by_n.items())}
            row: dict[str, Any] = {"model": m, "lang": lang.upper()}
            row.update({f"N={n}": v for n, v in acc.items()})
            row["weighted"] = atc_weighted_score(acc)
            row["weighted_short"] = atc_weighted_score(acc, max_needles=SHORT_CONTEXT_NEEDLES)
            row["ENL-50"] = enl(acc)
            row["fmt_fail%"] = _rate(mine)
            rows.append(row)
    return pd.DataFrame(rows)


def chain_table(records: Sequence[dict[str, Any]], models: Sequence[str]) -> pd.DataFrame:
    """Accuracy per (variant, k, question) per model, with the error-type shares of each cell."""
    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("task") == "needlechain":
            cells[(r["variant"], int(r["k"]), r["question"], r["model"])].append(r)
    keys = sorted(
        {k[:3] for k in cells},
        key=lambda k: (
            ("forward", "backward", "mixed", "stack").index(k[0])
            if k[0] in ("forward", "backward", "mixed", "stack")
            else 9,
            k[1],
            k[2],
        ),
    )
    rows = []
    for variant, k, question in keys:
        row: dict[str, Any] = {"variant": variant, "k": k, "question": question}
        for m in models:
            cell = cells.get((variant, k, question, m), [])
            row[m] = mean(float(c["score"]) for c in cell) if cell else _NAN
            for kind in ("instruction_not_followed", "needle_omission", "calculation_error"):
                row[f"{m} {kind}%"] = (100.0 * sum(c.get("error") == kind for c in cell) / len(cell)) if cell else _NAN
        rows.append(row)
    return pd.DataFrame(rows)


def grid(records: Sequence[dict[str, Any]], model: str, task: str, lang: str) -> pd.DataFrame:
    """Mean score over depth (rows) x length (columns); M-RT uses each needle's own depth and recall."""
    cells: dict[tuple[float, int], list[float]] = defaultdict(list)
    for r in records:
        if r["model"] != model or r["task"] != task or r["lang"] != lang or r.get("length") is None:
            continue
        if task == "mrt" and "recalled" in r and r.get("depths"):
            for depth, hit in zip(r["depths"], r["recalled"]):
                cells[(float(depth), int(r["length"]))].append(100.0 * bool(hit))
        elif r.get("depth") is not None:
            cells[(float(r["depth"]), int(r["length"]))].append(float(r["score"]))
    if not cells:
        return pd.DataFrame()
    depths = sorted({d for d, _ in cells})
    lengths = sorted({L for _, L in cells})
    data = [[mean(cells[(d, L)]) if cells.get((d, L)) else _NAN for L in lengths] for d in depths]
    return pd.DataFrame(data, index=depths, columns=lengths)


def difference_table(summary: pd.DataFrame, base: str, other: str) -> pd.DataFrame:
    """``other - base`` for every summary row both have."""
    out = summary[["task", "lang", "length"]].copy()
    out[base] = summary[base]
    out[other] = summary[other]
    out[f"{other} - {base}"] = summary[other] - summary[base]
    return out
