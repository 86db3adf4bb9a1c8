"""Figures as PNG bytes (matplotlib, headless). Labels are ASCII so no CJK font is needed."""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..aggregate.metrics import enl, mean  # noqa: E402
from ..tasks.needlechain import position_profile  # noqa: E402

__all__ = ["heatmap_png", "mrt_position_png", "atc_curve_png", "chain_k_png", "chain_positions_png"]

_CMAP = "RdYlGn"


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _length_label(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def heatmap_png(table: pd.DataFrame, title: str, diverging: bool = False) -> bytes:
    """Depth (rows) x length (columns), with a bottom row of per-length means; missing cells hatched."""
    means = table.mean(axis=0, skipna=True)
    values = np.vstack([table.to_numpy(dtype=float), means.to_numpy(dtype=float)[None, :]])
    rows = [f"{d:g}" for d in table.index] + ["mean"]
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(table.columns), 1.0 + 0.38 * len(rows)))
    masked = np.ma.masked_invalid(values)
    if diverging:
        lim = max(1.0, float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
        im = ax.imshow(masked, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    else:
        im = ax.imshow(masked, cmap=_CMAP, vmin=0, vmax=100, aspect="auto")
    ax.set_facecolor("#dddddd")
    ax.set_xticks(range(len(table.columns)), [_length_label(int(c)) for c in table.columns])
    ax.set_yticks(range(len(rows)), rows)
    ax.axhline(len(rows) - 1.5, color="black", linewidth=1.5)
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            ax.text(j, i, "-" if math.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=8)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth (%)")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return _png(fig)


def mrt_position_png(records: Sequence[dict[str, Any]], title: str) -> bytes:
    """M-RT recall by needle position (1st, 2nd, ... in document order), one line per model."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    by_model: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for i, hit in enumerate(r.get("recalled") or []):
            by_model[r["model"]][i + 1].append(100.0 * bool(hit))
    for model, pos in sorted(by_model.items()):
        xs = sorted(pos)
        ax.plot(xs, [mean(pos[x]) for x in xs], marker="o", label=model)
    ax.set_ylim(-5, 105)
    ax.set_xlabel("needle position in the document")
    ax.set_ylabel("recall (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def atc_curve_png(records: Sequence[dict[str, Any]], title: str) -> bytes:
    """ATC accuracy vs needle count (log-2 axis), one line per model, ENL-50 marked."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    by_model: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_model[f"{r['model']} ({r['lang'].upper()})"][int(r["num_needles"])].append(float(r["score"]))
    for label, by_n in sorted(by_model.items()):
        xs = sorted(by_n)
        acc = {n: mean(by_n[n]) for n in xs}
        line = ax.plot(xs, [acc[n] for n in xs], marker="o", label=f"{label}, ENL-50={enl(acc)}")[0]
        e = enl(acc)
        if e:
            ax.axvline(e, color=line.get_color(), linestyle="--", alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.axhline(50, color="grey", linewidth=0.8, linestyle=":")
    ax.set_ylim(-5, 105)
    ax.set_xlabel("needles (log2)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def chain_k_png(records: Sequence[dict[str, Any]], model: str) -> bytes:
    """NeedleChain accuracy vs k per variant, one panel per question."""
    questions = sorted({r["question"] for r in records if r["model"] == model})
    fig, axes = plt.subplots(1, max(1, len(questions)), figsize=(5.2 * max(1, len(questions)), 3.4), squeeze=False)
    for ax, question in zip(axes[0], questions):
        by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in records:
            if r["model"] == model and r["question"] == question:
                by[r["variant"]][int(r["k"])].append(float(r["score"]))
        for variant in ("forward", "backward", "mixed", "stack"):
            if variant in by:
                xs = sorted(by[variant])
                ax.plot(xs, [mean(by[variant][x]) for x in xs], marker="o", label=variant)
        ax.set_xscale("log")
        ks = sorted({k for by_k in by.values() for k in by_k})
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_ylim(-5, 105)
        ax.set_xlabel("k (needles)")
        ax.set_ylabel("accuracy (%)")
        ax.set_title(f"{model}: {question} question", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return _png(fig)


def chain_positions_png(records: Sequence[dict[str, Any]], model: str, bins: int = 10) -> bytes:
    """Mention rate by position bin (x) and variant (y), by presented and by reasoning order."""
    mine = [r for r in records if r["model"] == model]
    k_max = max((int(r["k"]) for r in mine), default=0)
    profile = position_profile(mine, bins=bins, min_k=k_max)
    variants = [v for v in ("forward", "backward", "mixed", "stack") if v in profile]
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 1.6 + 0.5 * max(1, len(variants))), squeeze=False, constrained_layout=True
    )
    for ax, axis in zip(axes[0], ("presented", "reasoning")):
        data = np.array([profile[v][axis] for v in variants], dtype=float) if variants else np.full((1, bins), np.nan)
        im = ax.imshow(np.ma.masked_invalid(data), cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_yticks(range(len(variants)), variants)
        ax.set_xticks(
            range(bins), [f"{100 * i // bins}-{100 * (i + 1) // bins}%" for i in range(bins)], rotation=45, fontsize=7
        )
        ax.set_title(f"{model}, k={k_max}: names mentioned by {axis} order", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.04)
    return _png(fig)
