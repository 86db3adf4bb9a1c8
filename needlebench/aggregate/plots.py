"""Figure plumbing: headless matplotlib and PNG bytes. Labels are ASCII so no CJK font is needed."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plt", "png", "length_label", "percent_axes"]


def png(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def length_label(n: int) -> str:
    """A token count as an axis label (``4000`` -> ``4k``)."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def percent_axes(ax: plt.Axes, xlabel: str, ylabel: str, title: str) -> None:
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
