"""The heatmap every task with ``heatmap_points`` gets; a task's own figures live with the task."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..aggregate.effective_length import length_text
from ..aggregate.plots import png, pyplot
from .cutoff import COLOUR, CutOff

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["heatmap_png", "heatmap_figure", "CUT_HATCH", "ALL_CUT_HATCH"]

_CMAP = "RdYlGn"
CUT_HATCH = "////"  # a cell some of whose answers were cut off at their output budget
ALL_CUT_HATCH = "xx"  # a cell whose every answer was cut off: it reads "cut off", on its own colour


def heatmap_png(
    table: pd.DataFrame,
    title: str,
    diverging: bool = False,
    cut_off: Mapping[tuple[float | None, int], CutOff] | None = None,
    unit: str | None = None,
    blank: str = "-",
) -> bytes:
    """Depth (rows) x length (columns), with a bottom row of per-length means; missing cells grey, marked "-".

    Args:
        table: scores indexed by depth, with token lengths as columns; NaN for a cell not run.
        title: the figure's title.
        diverging: a difference map (red-blue, centred on 0) instead of scores on 0-100.
        cut_off: per (depth, length) (depth None: a length's mean) how many answers were cut off at their
            budget, for the cells with any: see :func:`heatmap_figure`.
        unit: a cost map in this unit (``"s per request"``) instead of scores: colours from 0 to its largest cell.
        blank: what a cell without samples reads: ``-``, or ``not sampled`` where an adaptive run's ladder asked
            none of its prompts (never 0, never interpolated).

    Returns:
        The figure as PNG bytes.
    """
    return png(heatmap_figure(table, title, diverging, cut_off, unit, blank))


def heatmap_figure(
    table: pd.DataFrame,
    title: str,
    diverging: bool = False,
    cut_off: Mapping[tuple[float | None, int], CutOff] | None = None,
    unit: str | None = None,
    blank: str = "-",
) -> Figure:
    """The heatmap as a matplotlib figure (:func:`heatmap_png` saves it), for the tests to inspect.

    A cell with answers cut off at their output budget is hatched (``////``) and reads ``cut n/m`` under its
    score; one whose every answer was cut off is cross-hatched (``xx``) on its own colour and, where it
    scored 0, reads ``cut off``, never a plain 0. A line under the figure says what the hatching means and names the budget.

    Args:
        table: as for :func:`heatmap_png`.
        title: the figure's title.
        diverging: a difference map.
        cut_off: as for :func:`heatmap_png`; None or empty: no marks.
        unit: as for :func:`heatmap_png`.
        blank: what a cell without samples reads (an adaptive run's: ``not sampled``, never 0).
    """
    from matplotlib.patches import Rectangle

    cut_off = cut_off or {}
    means = table.mean(axis=0, skipna=True)
    values = np.vstack([table.to_numpy(dtype=float), means.to_numpy(dtype=float)[None, :]])
    rows = [f"{d:g}" for d in table.index] + ["mean"]
    fig, ax = pyplot().subplots(figsize=(1.0 + 0.75 * len(table.columns), 1.0 + 0.38 * len(rows)))
    masked = np.ma.masked_invalid(values)
    if unit is not None:
        top = float(np.nanmax(values)) if np.isfinite(values).any() else 1.0
        im = ax.imshow(masked, cmap="viridis", vmin=0, vmax=top or 1.0, aspect="auto")
    elif diverging:
        lim = max(1.0, float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0)
        im = ax.imshow(masked, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    else:
        im = ax.imshow(masked, cmap=_CMAP, vmin=0, vmax=100, aspect="auto")
    ax.set_facecolor("#dddddd")
    ax.set_xticks(range(len(table.columns)), [length_text(int(c)) for c in table.columns])
    ax.set_yticks(range(len(rows)), rows)
    ax.axhline(len(rows) - 1.5, color="black", linewidth=1.5)
    depths: list[float | None] = [float(d) for d in table.index] + [None]
    budgets: set[int] = set()
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            text = blank if math.isnan(v) else f"{v:.3g}" if unit is not None else f"{v:.0f}"
            cut = cut_off.get((depths[i], int(table.columns[j])))
            if cut is not None and cut.any:
                budgets.update(cut.budgets)
                every = cut.every
                ax.add_patch(
                    Rectangle(
                        (j - 0.5, i - 0.5),
                        1,
                        1,
                        facecolor=COLOUR if every else "none",
                        hatch=ALL_CUT_HATCH if every else CUT_HATCH,
                        edgecolor="#4b2a86",
                        linewidth=0,
                        alpha=0.9 if every else 0.55,
                        gid=f"cut {cut.share}",
                    )
                )
                text = f"cut off\n{cut.share}" if cut.hides(v) else f"{text}\ncut {cut.share}"
            marked = cut is not None and cut.any  # on a hatched ground: the text on a pale box, to be read
            box = dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.75) if marked else None
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5 if marked else 8, bbox=box)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("needle depth (%)")
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(im, ax=ax, fraction=0.04)
    if unit is not None:
        bar.set_label(unit)
    if any(c.any for c in cut_off.values()):
        budget = f"the {'/'.join(map(str, sorted(budgets)))}-token" if budgets else "their"
        ax.annotate(  # under the x axis label, wherever the figure's size puts it
            f"hatched 'cut n/m': n of m answers cut off at {budget} output budget (max_out_len);\n"
            "cross-hatched: every answer cut off ('cut off' where it scored 0: that 0 says nothing about the needle)",
            xy=(0.5, 0),
            xycoords=ax.xaxis.label,
            xytext=(0, -4),
            textcoords="offset points",
            fontsize=6.5,
            ha="center",
            va="top",
        )
    return fig
