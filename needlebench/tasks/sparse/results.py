"""How S-RT, M-RT and M-RS results add up beyond the summary table: heatmap points and M-RT's recall by position.

The summary table itself is generic (:mod:`needlebench.report.tables`): these
tasks join it through their ``suite_weights``.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...aggregate.metrics import mean
from ...aggregate.plots import percent_axes, png, pyplot
from ...errors import ConfigError
from ...protocol import reference_values
from ...record import GradedSample
from ...taskspec import Conformance, ReportParts, Skipped, TaskResults
from ..conformance import conformance, count_coverage, coverage, option_differences
from ..profiles import Suite, get_suite

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "SINGLE",
    "MULTI",
    "REASONING",
    "depth_points",
    "needle_points",
    "needle_depths",
    "mrt_position_figure",
    "mrt_position_png",
    "sparse_conformance",
    "sparse_requests",
]


def depth_points(record: GradedSample) -> Iterable[tuple[float, float]]:
    """A record on the heatmap: its needle depth and its score."""
    if record.get("depth") is not None:
        yield float(record.fields["depth"]), float(record.score)


def needle_points(record: GradedSample) -> Iterable[tuple[float, float]]:
    """An M-RT record on the heatmap: each needle at its own depth, recalled or not."""
    if "recalled" in record.fields and record.get("depths"):
        for depth, hit in zip(record.fields["depths"], record.fields["recalled"]):
            yield float(depth), 100.0 * bool(hit)
    else:
        yield from depth_points(record)


def mrt_position_figure(records: Sequence[GradedSample], title: str) -> Figure:
    """M-RT recall by needle position (1st, 2nd, ... in document order), one line per model.

    Args:
        records: scored M-RT records (with ``model`` and ``recalled``).
        title: the figure's title.
    """
    fig, ax = pyplot().subplots(figsize=(6, 3.2))
    by_model: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for i, hit in enumerate(r.get("recalled") or []):
            by_model[r.model][i + 1].append(100.0 * bool(hit))
    for model, pos in sorted(by_model.items()):
        xs = sorted(pos)
        ax.plot(xs, [mean(pos[x]) for x in xs], marker="o", label=model)
    percent_axes(ax, "needle position in the document", "recall (%)", title)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # positions are 1st, 2nd, ...: no 1.5th needle
    return fig


def mrt_position_png(records: Sequence[GradedSample], title: str) -> bytes:
    """:func:`mrt_position_figure` as PNG bytes.

    Args:
        records: scored M-RT records (with ``model`` and ``recalled``).
        title: the figure's title.
    """
    return png(mrt_position_figure(records, title))


def _mrt_report(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> ReportParts:
    scored = [r for r in records if r.counts]
    if not scored:
        return ReportParts()
    return ReportParts(figures={"mrt_recall_by_position": mrt_position_png(scored, "M-RT recall by needle position")})


def needle_depths(record: GradedSample) -> list[float]:
    """Where a sample's needles sit, as the drill-down labels them: each needle's realised depth (percent of
    the haystack before it) where the record has it, else the depth(s) asked for."""
    realised = record.get("realised_depths") or (
        [record.fields["realised_depth"]] if record.get("realised_depth") is not None else []
    )
    if realised:
        return [round(float(d), 2) for d in realised]
    return list(record.get("depths") or ([record.fields["depth"]] if record.get("depth") is not None else []))


def single_needle(gold: Mapping[str, Any]) -> list[str]:
    """S-RT's needle (and M-RS multi-hop's answer sentence, when present)."""
    return [gold["needle"]] if isinstance(gold.get("needle"), str) else []


def many_needles(gold: Mapping[str, Any]) -> list[str]:
    """M-RT's needles, in gold order."""
    return [n["needle"] for n in gold.get("needles") or () if isinstance(n, Mapping) and n.get("needle")]


def kinship_names(gold: Mapping[str, Any]) -> list[str]:
    """M-RS's hidden relations, found by the names they link (the multi-hop form names its needle)."""
    return list(gold.get("chain_names") or ()) or single_needle(gold)


def _asked_depths(record: GradedSample) -> list[Any]:
    """The depths a record's cell was asked for: its depth, or (M-RT) every needle's depth."""
    return [record.fields["depth"]] if record.get("depth") is not None else list(record.get("depths") or ())


def sparse_conformance(
    spec: str,
    counts: Callable[[Suite], Sequence[int]] | None = None,
) -> Callable[[Sequence[GradedSample], str | None], Conformance]:
    """A sparse task's ``conformance``: its records against the suite's lengths, depths and repeats.

    The reference is the suite as OpenCompass's configs (and ``needlebench_datasets``) build it for the
    records' profile: its lengths and depths (``needlebench.tasks.profiles``), the task's repeats in that suite
    (``suite_defaults``), its needle counts, and the reference value of every protocol option.

    Args:
        spec: ``"module:attribute"`` of the task's ``TaskSpec`` in this package (imported when a check runs:
            the spec names these results the same way, so neither imports the other at load time).
        counts: the needle counts a suite plans for the task (M-RT: one needle per depth; M-RS: 2 to 5);
            None for a single-needle task.
    """
    from .retrieval import SPARSE_OPTIONS

    reference = reference_values(SPARSE_OPTIONS)

    def check(records: Sequence[GradedSample], suite: str | None) -> Conformance:
        if not records:
            return Conformance()
        options = option_differences(records, reference)
        if suite is None:
            return Conformance(differs=tuple(options))
        profile = str(records[0].get("profile") or "v2")
        try:
            planned = get_suite(suite, profile)
        except ConfigError as exc:
            return Conformance(differs=(str(exc), *options))
        module, attribute = spec.split(":")
        task = getattr(importlib.import_module(f".{module}", __package__), attribute)
        parts = [
            coverage("lengths", {r.get("length") for r in records}, planned.lengths),
            coverage("depths", {d for r in records for d in _asked_depths(r)}, planned.depths),
        ]
        if counts is not None:
            found = {r.fields["num_needles"] for r in records if r.get("num_needles") is not None}
            parts.append(coverage("needle counts", found, counts(planned)))
        for lang in sorted({r.lang for r in records}):
            repeats = {r.get("repeat") for r in records if r.lang == lang}
            want = task.suite_defaults(suite, lang, profile)["repeats"] if task.suite_defaults else len(repeats)
            parts.append(count_coverage("repeats", len(repeats), int(want)))
        merged = conformance(parts, options)
        return Conformance(tuple(dict.fromkeys(merged.short)), tuple(dict.fromkeys(merged.differs)))

    return check


def sparse_requests(spec: str, per_length: Callable[[Suite, int], int]) -> Callable[[str, str, str], dict[int, int]]:
    """A sparse task's ``suite_requests``: the prompts a suite plans at each of its lengths.

    Args:
        spec: ``"module:attribute"`` of the task's ``TaskSpec`` (its ``suite_defaults`` give the repeats).
        per_length: ``(suite, repeats) -> prompts`` at one length (S-RT: depths x repeats; M-RT: repeats, every
            depth a needle of one prompt; M-RS: depths x repeats x needle counts).
    """

    def requests(suite: str, lang: str, profile: str) -> dict[int, int]:
        planned = get_suite(suite, profile)
        module, attribute = spec.split(":")
        task = getattr(importlib.import_module(f".{module}", __package__), attribute)
        repeats = int(task.suite_defaults(suite, lang, profile)["repeats"])
        return {int(n): per_length(planned, repeats) for n in planned.lengths}

    return requests


def _mrs_counts(suite: Suite) -> Sequence[int]:
    from .mrs import MRS_COUNTS

    return MRS_COUNTS


SINGLE = TaskResults(
    heatmap_points=depth_points,
    needle_texts=single_needle,
    needle_depths=needle_depths,
    conformance=sparse_conformance("retrieval:SRT"),
    suite_requests=sparse_requests("retrieval:SRT", lambda suite, repeats: len(suite.depths) * repeats),
)
MULTI = TaskResults(
    heatmap_points=needle_points,
    report=_mrt_report,
    needle_texts=many_needles,
    needle_depths=needle_depths,
    conformance=sparse_conformance("retrieval:MRT", lambda suite: (len(suite.depths),)),
    suite_requests=sparse_requests("retrieval:MRT", lambda suite, repeats: repeats),
)
REASONING = TaskResults(
    heatmap_points=depth_points,
    needle_texts=kinship_names,
    needle_depths=needle_depths,
    conformance=sparse_conformance("mrs:MRS", _mrs_counts),
    suite_requests=sparse_requests(
        "mrs:MRS", lambda suite, repeats: len(suite.depths) * repeats * len(_mrs_counts(suite))
    ),
)
