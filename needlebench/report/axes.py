"""Every axis a run varies a model along (a KV-cache press, a thinking budget, a RoPE factor), in one view.

The plan records each variant: its axis, setting, value and the model it varies
(:mod:`needlebench.planning.variants`); this module never reads a model's name. Per axis a table (per variant and
the model it varies, task, language and length: the axis's labels and value, the score over the samples that
count, how many counted of how many there were, and the axis's own facts from the records: the cache a press kept,
the reasoning a budget allowed) and, per varied model, task and language, the score against the value: a panel
per length, a line per series (press and query mode; RoPE kind), the varied model at the axis's neutral value
where it ran. A point is hollow where its score rests on fewer samples than the cell holds, or where some of its
answers did not run as the setting says (a cache kept otherwise than the ratio, reasoning past the budget).

A new axis adds its :class:`~needlebench.planning.variants.Axis` and, here, its :class:`View`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.effective_length import length_text
from ..aggregate.metrics import mean
from ..aggregate.plots import png, pyplot
from ..methods.kv_press import PressSpec
from ..planning.variants import AXES, Variant
from ..record import GradedSample
from ..tasks import get_task

__all__ = ["VIEWS", "View", "axis_curve_png", "axis_table", "board_labels", "expected_kept", "variants_of"]


def expected_kept(compressed: int, ratio: float) -> int:
    """The cache entries a ratio keeps of ``compressed`` tokens, as kvpress counts them (at least one).

    Args:
        compressed: the tokens prefilled under the press.
        ratio: the compression ratio.
    """
    return max(1, int(compressed * (1 - ratio))) if compressed else 0


def _kept(cache: Mapping[str, Any]) -> list[int]:
    kept = cache.get("kept")
    return [int(k) for k in kept] if isinstance(kept, list) else [int(kept or 0)]


def _press_facts(records: Sequence[GradedSample], setting: Mapping[str, Any] | None) -> dict[str, Any]:
    caches = [r.output.kv_cache for r in records if r.output.kv_cache is not None]
    ratio = float(setting["compression_ratio"]) if setting else 0.0
    shares = [np.mean(_kept(c)) / c["compressed_tokens"] for c in caches if c.get("compressed_tokens")]
    as_said = [all(abs(k - expected_kept(int(c["compressed_tokens"]), ratio)) <= 1 for k in _kept(c)) for c in caches]
    return {
        "compressed tokens p50": float(np.median([c["compressed_tokens"] for c in caches])) if caches else None,
        "kept share": float(np.mean(shares)) if shares else None,
        "kept as the ratio says": all(as_said) if caches else None,
        "question tokens uncompressed p50": (
            float(np.median([c.get("question_tokens", 0) for c in caches])) if caches else None
        ),
    }


def _budget_facts(records: Sequence[GradedSample], setting: Mapping[str, Any] | None) -> dict[str, Any]:
    tokens = [r.output.reasoning_tokens for r in records if r.output.reasoning_tokens is not None]
    return {
        "reasoning tokens p50": float(np.median(tokens)) if tokens else None,
        "reasoning tokens max": max(tokens) if tokens else None,
        "stopped at the budget": sum(r.output.budget_reached for r in records),
        "not enforced": sum(r.output.budget_ignored for r in records),
    }


def _false(value: Any) -> bool:
    """A table cell that says no (a missing or blank one does not)."""
    return value is not None and not pd.isna(value) and not bool(value)


@dataclass(frozen=True)
class View:
    """How one axis shows in the reports.

    Args:
        table: the table's name (``needlebench_methods.csv``).
        figure: the curves' name prefix.
        column: the value's column.
        kind: how the column writes a value (a budget is a whole number of tokens).
        facts: the axis's own columns of a cell, from its records and the setting.
        held: whether a row's answers ran as the setting says (a hollow point where not).
    """

    table: str
    figure: str
    column: str
    kind: Callable[[float], Any] = float
    facts: Callable[[Sequence[GradedSample], Mapping[str, Any] | None], dict[str, Any]] = lambda records, s: {}
    held: Callable[[Mapping[str, Any]], bool] = lambda row: True


VIEWS: dict[str, View] = {
    "press": View(
        "needlebench_methods",
        "kv_ratio",
        "ratio",
        float,
        _press_facts,
        lambda row: not _false(row["kept as the ratio says"]),
    ),
    "thinking": View(
        "needlebench_budgets",
        "budget",
        "budget",
        int,
        _budget_facts,
        lambda row: not row["not enforced"],
    ),
    "rope": View("needlebench_rope_factors", "rope_factor", "factor"),
}


def variants_of(planned: Mapping[str, Variant], records: Sequence[GradedSample]) -> dict[str, Variant]:
    """Each varied model's variant: the plan's, else (a run whose plan predates them) what its records say it ran
    (a press: its ``kv_cache``), with no model it varies.

    Args:
        planned: the plan's variants (``RunResults.variants``).
        records: the graded records.
    """
    out = dict(planned)
    for r in records:
        model = str(r.model)
        if model in out:
            continue
        if r.output.kv_cache is not None:
            c = r.output.kv_cache
            s = PressSpec.of({k: c[k] for k in ("press", "compression_ratio", "query", "settings") if k in c}).to_dict()
            out[model] = Variant("press", s, float(s["compression_ratio"]), AXES["press"].series(s), None)
    return out


def board_labels(model: str, variants: Mapping[str, Variant], models: Sequence[str]) -> dict[str, str]:
    """A board row's variant labels: a variant's setting (press, ratio, query), and the neutral setting of each axis
    other models of the run vary it along (``press: none``).

    Args:
        model: the row's model.
        variants: :func:`variants_of`'s value.
        models: the run's models.
    """
    axes = sorted({v.axis for v in variants.values() if v.of == model}) if model in models else []
    varied = {k: v for a in axes for k, v in AXES[a].labels(None).items()}
    return {**varied, **variants[model].labels} if model in variants else varied


def axis_table(records: Sequence[GradedSample], variants: Mapping[str, Variant], axis: str) -> pd.DataFrame:
    """Per variant on ``axis`` and each model they vary that ran, task, language and length: labels, value, score,
    counts and the axis's facts. Empty where no model of the run varies along it.

    Args:
        records: graded records (with ``model``).
        variants: :func:`variants_of`'s value.
        axis: one of :data:`VIEWS`.
    """
    ax, view = AXES[axis], VIEWS[axis]
    mine = {m: v for m, v in variants.items() if v.axis == axis}
    if not mine:
        return pd.DataFrame()
    present = {str(r.model) for r in records}
    varied = {v.of for v in mine.values() if v.of in present and v.of not in mine}
    groups: dict[tuple[str, str, str, Any], list[GradedSample]] = defaultdict(list)
    for r in records:
        if str(r.model) in mine or str(r.model) in varied:
            groups[(str(r.model), r.task, r.lang, r.get("length"))].append(r)
    rows = []
    for (model, task, lang, length), cell in sorted(groups.items(), key=lambda x: str(x[0])):
        v = mine.get(model)
        setting = v.setting if v else None
        value = v.value if v else ax.neutral
        counted = [r for r in cell if r.counts]
        rows.append(
            {
                "model": model,
                "baseline": (v.of or "") if v else model,
                **ax.labels(setting),
                view.column: None if value is None else view.kind(value),
                "series": v.series if v else "",
                "task": get_task(task).short,
                "lang": lang.upper(),
                "length": length,
                "score": mean(float(r.score) for r in counted),
                "scored": len(counted),
                "samples": len(cell),
                **view.facts(cell, setting),
            }
        )
    return pd.DataFrame(rows)


def axis_curve_png(table: pd.DataFrame, axis: str, baseline: str, task: str, lang: str) -> bytes | None:
    """Score against the axis's value for the variants of one model, task and language: a panel per length, a line
    per series, the varied model (and any variant at the neutral setting) starting every line.

    Args:
        table: :func:`axis_table`'s rows for ``axis``.
        axis: the axis.
        baseline: the model the variants vary (the table's ``baseline``).
        task: the task's short name (``S-RT``).
        lang: the language as the table writes it (``EN``).

    Returns:
        The PNG, or None where fewer than two values of it ran the task and language (no curve to draw).
    """
    view = VIEWS[axis]
    rows = table[(table["baseline"] == baseline) & (table["task"] == task) & (table["lang"] == lang)]
    values = sorted({x for x in rows[view.column] if pd.notna(x)})
    if len(values) < 2:
        return None
    x = {value: i for i, value in enumerate(values)}  # evenly spaced: budgets and factors double, ratios step
    lengths = sorted({n for n in rows["length"] if pd.notna(n)}) or [None]
    fig, axes = pyplot().subplots(1, len(lengths), figsize=(3.2 * len(lengths) + 0.8, 3.2), squeeze=False)
    series = sorted({s for s in rows["series"] if s}) or [""]
    hollow = False
    for ax, length in zip(axes[0], lengths):
        here = rows[rows["length"] == length] if length is not None else rows
        start = here[here["series"] == ""]  # the varied model, and a variant at the neutral setting
        for name in series:
            line_rows = pd.concat([start, here[here["series"] == name]]) if name else start
            line_rows = line_rows.drop_duplicates("model").sort_values(view.column)
            line_rows = line_rows[line_rows[view.column].notna()]
            xs, ys = [x[v] for v in line_rows[view.column]], list(line_rows["score"])
            (line,) = ax.plot(xs, ys, marker="o", label=name or "score")
            for xi, yi, (_, row) in zip(xs, ys, line_rows.iterrows()):
                if (row["scored"] < row["samples"] or not view.held(row)) and not pd.isna(yi):
                    hollow = True
                    ax.plot([xi], [yi], marker="o", markersize=9, markerfacecolor="white", color=line.get_color())
        ax.set_xticks(range(len(values)), [f"{v:g}" for v in values])
        ax.set_ylim(-5, 105)
        ax.set_xlabel(AXES[axis].title)
        ax.set_title(length_text(int(length)) if length is not None else "all", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("score")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"{task} {lang} - {baseline}: score by {AXES[axis].title}", fontsize=10)
    if hollow:
        fig.subplots_adjust(bottom=0.24)
        fig.text(
            0.5, 0.01, "hollow: fewer samples than the cell holds, or answers not run as set", ha="center", fontsize=7
        )
    return png(fig)
