"""How S-RT, M-RT and M-RS results add up beyond the summary table: heatmap points and M-RT's recall by position.

The summary table itself is generic (:mod:`needlebench.report.tables`): these
tasks join it through their ``suite_weights``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.ticker import MaxNLocator

from ..aggregate.metrics import mean
from ..aggregate.plots import percent_axes, plt, png
from ..aggregate.records import is_excluded
from ..taskspec import ReportParts, Skipped, TaskResults

__all__ = [
    "SINGLE",
    "MULTI",
    "REASONING",
    "depth_points",
    "needle_points",
    "needle_depths",
    "mrt_position_figure",
    "mrt_position_png",
]


def depth_points(record: Mapping[str, Any]) -> Iterable[tuple[float, float]]:
    """A record on the heatmap: its needle depth and its score."""
    if record.get("depth") is not None:
        yield float(record["depth"]), float(record["score"])


def needle_points(record: Mapping[str, Any]) -> Iterable[tuple[float, float]]:
    """An M-RT record on the heatmap: each needle at its own depth, recalled or not."""
    if "recalled" in record and record.get("depths"):
        for depth, hit in zip(record["depths"], record["recalled"]):
            yield float(depth), 100.0 * bool(hit)
    else:
        yield from depth_points(record)


def mrt_position_figure(records: Sequence[dict[str, Any]], title: str) -> plt.Figure:
    """M-RT recall by needle position (1st, 2nd, ... in document order), one line per model.

    Args:
        records: scored M-RT records (with ``model`` and ``recalled``).
        title: the figure's title.
    """
    fig, ax = plt.subplots(figsize=(6, 3.2))
    by_model: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for i, hit in enumerate(r.get("recalled") or []):
            by_model[r["model"]][i + 1].append(100.0 * bool(hit))
    for model, pos in sorted(by_model.items()):
        xs = sorted(pos)
        ax.plot(xs, [mean(pos[x]) for x in xs], marker="o", label=model)
    percent_axes(ax, "needle position in the document", "recall (%)", title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are 1st, 2nd, ...: no 1.5th needle
    return fig


def mrt_position_png(records: Sequence[dict[str, Any]], title: str) -> bytes:
    """:func:`mrt_position_figure` as PNG bytes.

    Args:
        records: scored M-RT records (with ``model`` and ``recalled``).
        title: the figure's title.
    """
    return png(mrt_position_figure(records, title))


def _mrt_report(records: Sequence[dict[str, Any]], models: Sequence[str], skipped: Skipped) -> ReportParts:
    scored = [r for r in records if not is_excluded(r)]
    if not scored:
        return ReportParts()
    return ReportParts(figures={"mrt_recall_by_position": mrt_position_png(scored, "M-RT recall by needle position")})


def needle_depths(record: Mapping[str, Any]) -> list[float]:
    """Where a sample's needles sit, as the drill-down labels them: each needle's realised depth (percent of
    the haystack before it) where the record has it, else the depth(s) asked for."""
    realised = record.get("realised_depths") or (
        [record["realised_depth"]] if record.get("realised_depth") is not None else []
    )
    if realised:
        return [round(float(d), 2) for d in realised]
    return list(record.get("depths") or ([record["depth"]] if record.get("depth") is not None else []))


def single_needle(gold: Mapping[str, Any]) -> list[str]:
    """S-RT's needle (and M-RS multi-hop's answer sentence, when present)."""
    return [gold["needle"]] if isinstance(gold.get("needle"), str) else []


def many_needles(gold: Mapping[str, Any]) -> list[str]:
    """M-RT's needles, in gold order."""
    return [n["needle"] for n in gold.get("needles") or () if isinstance(n, Mapping) and n.get("needle")]


def kinship_names(gold: Mapping[str, Any]) -> list[str]:
    """M-RS's hidden relations, found by the names they link (the multi-hop form names its needle)."""
    return list(gold.get("chain_names") or ()) or single_needle(gold)


SINGLE = TaskResults(heatmap_points=depth_points, needle_texts=single_needle, needle_depths=needle_depths)
MULTI = TaskResults(
    heatmap_points=needle_points, report=_mrt_report, needle_texts=many_needles, needle_depths=needle_depths
)
REASONING = TaskResults(heatmap_points=depth_points, needle_texts=kinship_names, needle_depths=needle_depths)
