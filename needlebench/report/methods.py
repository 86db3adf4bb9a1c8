"""KV-cache compression as an axis: the method view of a run of ``kvpress_sweep`` models.

Each record of a press model keeps what its cache kept (``GradedSample.kv_cache``: press, ratio, query mode,
the tokens compressed, the entries kept per layer, the question tokens prefilled after compression). This
module lays the records out by method: which model is which method and which model is its uncompressed
baseline (``<abbr>`` beside ``<abbr>@<press>-<ratio>-<query>``), a table per (model, task, language, length)
with the score over the samples that count, how many counted of how many there were, and the cache kept
against what the ratio says; and, per task and language, the score against the compression ratio, a panel
per length and a line per press and query mode, the baseline at ratio 0. A point whose samples did not all
count is drawn hollow: its score rests on fewer samples than the cell holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.metrics import mean
from ..aggregate.plots import length_label, png, pyplot
from ..record import GradedSample
from ..tasks import get_task

__all__ = ["methods_of", "baselines", "method_table", "ratio_curve_png", "method_labels", "expected_kept"]

NONE = "none"  # the baseline's press in the tables and on the leaderboard


def methods_of(records: Sequence[GradedSample]) -> dict[str, dict[str, Any]]:
    """Each press model's method (press, ratio, query mode, settings), as its records say.

    Args:
        records: graded records with ``model``.
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.kv_cache is not None and str(r.model) not in out:
            c = r.kv_cache
            out[str(r.model)] = {
                "press": c.get("press"),
                "compression_ratio": c.get("compression_ratio"),
                "query": c.get("query"),
                "settings": dict(c.get("settings") or {}),
            }
    return dict(sorted(out.items()))


def baselines(models: Sequence[str], methods: Mapping[str, Any]) -> dict[str, str]:
    """Each press model's uncompressed baseline in the run: the model its name was swept from (the part
    before ``@``), where that model ran without a press.

    Args:
        models: the run's models.
        methods: :func:`methods_of`'s value.
    """
    plain = set(models) - set(methods)
    out = {}
    for m in methods:
        base = m.split("@", 1)[0]
        if base != m and base in plain:
            out[m] = base
    return out


def method_labels(model: str, methods: Mapping[str, Mapping[str, Any]], bases: Mapping[str, str]) -> dict[str, str]:
    """A leaderboard row's method labels (press, ratio, query); the baseline of a sweep reads ``none``.

    Args:
        model: the row's model.
        methods: :func:`methods_of`'s value.
        bases: :func:`baselines`' value.
    """
    if model in methods:
        m = methods[model]
        return {"press": str(m["press"]), "ratio": f"{float(m['compression_ratio']):.2f}", "query": str(m["query"])}
    if model in bases.values():
        return {"press": NONE, "ratio": "0.00", "query": ""}
    return {}


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


def method_table(
    records: Sequence[GradedSample], methods: Mapping[str, Mapping[str, Any]], bases: Mapping[str, str]
) -> pd.DataFrame:
    """Per press model and its baseline, task, language and length: score, counts and the cache kept.

    Empty where the run has no press model.

    Args:
        records: graded records (with ``model``).
        methods: :func:`methods_of`'s value for them.
        bases: :func:`baselines`' value for the run's models.
    """
    if not methods:
        return pd.DataFrame()
    shown = set(methods) | set(bases.values())
    groups: dict[tuple[str, str, str, Any], list[GradedSample]] = defaultdict(list)
    for r in records:
        if str(r.model) in shown:
            groups[(str(r.model), r.task, r.lang, r.get("length"))].append(r)
    rows = []
    for (model, task, lang, length), mine in sorted(groups.items(), key=lambda x: str(x[0])):
        method = methods.get(model)
        counted = [r for r in mine if r.counts]
        caches = [r.kv_cache for r in mine if r.kv_cache is not None]
        ratio = float(method["compression_ratio"]) if method else 0.0
        shares = [np.mean(_kept(c)) / c["compressed_tokens"] for c in caches if c.get("compressed_tokens")]
        as_said = [
            all(abs(k - expected_kept(int(c["compressed_tokens"]), ratio)) <= 1 for k in _kept(c)) for c in caches
        ]
        rows.append(
            {
                "model": model,
                "baseline": bases.get(model, model if not method else ""),
                "press": method["press"] if method else NONE,
                "ratio": ratio,
                "query": method["query"] if method else "",
                "task": get_task(task).short,
                "lang": lang.upper(),
                "length": length,
                "score": mean(float(r.score) for r in counted),
                "scored": len(counted),
                "samples": len(mine),
                "compressed tokens p50": float(np.median([c["compressed_tokens"] for c in caches])) if caches else None,
                "kept share": float(np.mean(shares)) if shares else None,
                "kept as the ratio says": (all(as_said) if caches else None),
                "question tokens uncompressed p50": (
                    float(np.median([c.get("question_tokens", 0) for c in caches])) if caches else None
                ),
            }
        )
    return pd.DataFrame(rows)


def ratio_curve_png(table: pd.DataFrame, baseline: str, task: str, lang: str) -> bytes | None:
    """Score against the compression ratio for one baseline's methods, task and language: a panel per length,
    a line per press and query mode starting from the baseline at ratio 0.

    Args:
        table: :func:`method_table`'s rows.
        baseline: the uncompressed model the methods were swept from.
        task: the task's short name (``S-RT``).
        lang: the language as the table writes it (``EN``).

    Returns:
        The PNG, or None where no method of it ran the task and language.
    """
    mine = table[(table["baseline"] == baseline) & (table["task"] == task) & (table["lang"] == lang)]
    pressed = mine[mine["press"] != NONE]
    if pressed.empty:
        return None
    lengths = sorted({x for x in mine["length"] if pd.notna(x)}) or [None]
    fig, axes = pyplot().subplots(1, len(lengths), figsize=(3.2 * len(lengths) + 0.8, 3.2), squeeze=False)
    base = mine[mine["press"] == NONE]
    for ax, length in zip(axes[0], lengths):
        start = base[base["length"] == length] if length is not None else base
        here = pressed[pressed["length"] == length] if length is not None else pressed
        for (press, query), rows in here.groupby(["press", "query"]):
            rows = pd.concat([start, rows]).sort_values("ratio")
            xs, ys = list(rows["ratio"]), list(rows["score"])
            (line,) = ax.plot(xs, ys, marker="o", label=f"{str(press).removesuffix('Press')} {query}")
            for xi, yi, scored, samples in zip(xs, ys, rows["scored"], rows["samples"]):
                if scored < samples and not (isinstance(yi, float) and math.isnan(yi)):
                    ax.plot([xi], [yi], marker="o", markersize=9, markerfacecolor="white", color=line.get_color())
        ax.set_ylim(-5, 105)
        ax.set_xlabel("compression ratio")
        ax.set_title(length_label(int(length)) if length is not None else "all", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("score")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"{task} {lang} - {baseline}: score by KV-cache compression ratio", fontsize=10)
    return png(fig)
