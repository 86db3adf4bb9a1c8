"""The thinking budget as an axis: score against the budget asked for, per length, and whether it held.

A run of ``thinking_sweep`` has one model per budget (``<abbr>@think-<N>``); each record keeps the budget its
request asked for, the reasoning tokens the server reported, and whether the reasoning ran past the budget
(``budget_ignored``) or stopped at it (``budget_reached``). This module lays those records out by budget: a
table (per model, budget, task, language and length: the score over the samples that count, the reasoning
tokens, how many ran past the budget and how many stopped at it) and, per swept model, task and language, the
score against the budget with a line per length. A point some of whose samples ran past their budget is drawn
hollow: that score is not the budget's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.plots import length_label, percent_axes, png, pyplot
from ..record import GradedSample
from ..tasks import get_task

__all__ = ["SWEPT", "budget_curve_png", "budget_table", "swept_model"]

SWEPT = "@think-"  # how thinking_sweep names each budget's model: <abbr>@think-<N>


def swept_model(model: str) -> str:
    """The model a budget's model was swept from (``qwen@think-1024`` -> ``qwen``); a model's own name otherwise.

    Args:
        model: a model's name in the records.
    """
    return model.split(SWEPT, 1)[0]


def budget_table(records: Sequence[GradedSample]) -> pd.DataFrame:
    """Per model, budget, task, language and length: the score and how the budget held (empty without budgets).

    Args:
        records: graded records (with ``model``); those whose request asked for no budget are passed over.
    """
    groups: dict[tuple[str, int, str, str, Any], list[GradedSample]] = defaultdict(list)
    for r in records:
        if r.thinking_budget is not None and r.answered:
            groups[(str(r.model), int(r.thinking_budget), r.task, r.lang, r.get("length"))].append(r)
    rows = []
    for (model, budget, task, lang, length), mine in sorted(groups.items(), key=lambda x: str(x[0])):
        counted = [r for r in mine if r.counts]
        tokens = [r.reasoning_tokens for r in mine if r.reasoning_tokens is not None]
        rows.append(
            {
                "model": model,
                "swept from": swept_model(model),
                "budget": budget,
                "task": get_task(task).short,
                "lang": lang.upper(),
                "length": length,
                "score": float(np.mean([float(r.score) for r in counted])) if counted else float("nan"),
                "scored": len(counted),
                "answered": len(mine),
                "reasoning tokens p50": float(np.median(tokens)) if tokens else float("nan"),
                "reasoning tokens max": max(tokens) if tokens else None,
                "stopped at the budget": sum(r.budget_reached for r in mine),
                "not enforced": sum(r.budget_ignored for r in mine),
            }
        )
    return pd.DataFrame(rows)


def budget_curve_png(table: pd.DataFrame, swept: str, task: str, lang: str) -> bytes | None:
    """Score against the thinking budget for one swept model, task and language, a line per length.

    Args:
        table: :func:`budget_table`'s rows.
        swept: the model the budgets were swept from (``swept from``).
        task: the task's short name (``S-RT``).
        lang: the language as the table writes it (``EN``).

    Returns:
        The PNG, or None where the table holds fewer than two budgets for it (no curve to draw).
    """
    mine = table[(table["swept from"] == swept) & (table["task"] == task) & (table["lang"] == lang)]
    budgets = sorted(set(mine["budget"]))
    if len(budgets) < 2:
        return None
    fig, ax = pyplot().subplots(figsize=(5.5, 3.4))
    x = {b: i for i, b in enumerate(budgets)}  # evenly spaced: budgets often double, and 0 is one of them
    for length, rows in mine.groupby("length", dropna=False):
        rows = rows.sort_values("budget")
        xs, ys = [x[b] for b in rows["budget"]], list(rows["score"])
        label = length_label(int(length)) if pd.notna(length) else "all"
        (line,) = ax.plot(xs, ys, marker="o", label=label)
        for xi, yi, ignored in zip(xs, ys, rows["not enforced"]):
            if ignored:  # some samples reasoned past this budget: the point is not the budget's score
                ax.plot([xi], [yi], marker="o", markersize=9, markerfacecolor="white", color=line.get_color())
    ax.set_xticks(range(len(budgets)), [str(b) for b in budgets])
    percent_axes(ax, "thinking budget (tokens)", "score", f"{task} {lang} - {swept}: score by thinking budget")
    ax.legend(title="length", fontsize=7, title_fontsize=7)
    if mine["not enforced"].any():
        ax.annotate(
            "hollow: some answers reasoned past this budget (not enforced)",
            xy=(0.5, 0),
            xycoords=ax.xaxis.label,
            xytext=(0, -4),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=7,
        )
    return png(fig)
