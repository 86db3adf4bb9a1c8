"""The heatmap every task with ``heatmap_points`` gets; a task's own figures live with the task."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..aggregate.plots import length_label, png, pyplot

__all__ = ["heatmap_png"]

_CMAP = "RdYlGn"


def heatmap_png(table: pd.DataFrame, title: str, diverging: bool = False) -> bytes:
    """Depth (rows) x length (columns), with a bottom row of per-length means; missing cells grey, marked "-".

    Args:
        table: scores indexed by depth, with token lengths as columns; NaN for a cell not run.
        title: the figure's title.
        diverging: a difference map (red-blue, centred on 0) instead of scores on 0-100.

    Returns:
        The figure as PNG bytes.
    """
    means = table.mean(axis=0, skipna=True)
    values = np.vstack([table.to_numpy(dtype=float), means.to_numpy(dtype=float)[None, :]])
    rows = [f"{d:g}" for d in table.index] + ["mean"]
    fig, ax = pyplot().subplots(figsize=(1.0 + 0.75 * len(table.columns), 1.0 + 0.38 * len(rows)))
    masked = np.ma.masked_invalid(values)
    if diverging:
        lim = max(1.0, float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
        im = ax.imshow(masked, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    else:
        im = ax.imshow(masked, cmap=_CMAP, vmin=0, vmax=100, aspect="auto")
    ax.set_facecolor("#dddddd")
    ax.set_xticks(range(len(table.columns)), [length_label(int(c)) for c in table.columns])
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
    return png(fig)
