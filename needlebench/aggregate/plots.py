"""Figure plumbing: headless matplotlib and PNG bytes. Labels are ASCII so no CJK font is needed.

matplotlib is imported when the first figure is drawn (:func:`pyplot`), not with the modules that draw:
every eval task imports the tasks' result modules to grade, and draws nothing (0.5 s of CPU each).
"""

from __future__ import annotations

import functools
import io
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["pyplot", "png", "percent_axes"]


@functools.cache
def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the headless Agg backend, imported the first time it is asked for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()


def percent_axes(ax: Axes, xlabel: str, ylabel: str, title: str) -> None:
    """The common finish of a line chart of percentages: 0-100 axis, labels, title, legend, light grid.

    Args:
        ax: the axes to finish.
        xlabel: the x axis label.
        ylabel: the y axis label (a percentage).
        title: the chart's title.
    """
    ax.set_ylim(-5, 105)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
