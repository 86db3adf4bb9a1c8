"""What a task is: its parameters, generator, grader, oracle and how its results add up, in typed records.

Task modules build their ``TaskSpec`` here and do not register it themselves:
``needlebench.tasks.registry`` lists them explicitly (and reads third-party tasks
from the ``needlebench.tasks`` entry-point group), so importing a task module has
no side effect and no module imports the registry back.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .aggregate.cells import Estimate
from .aggregate.metrics import breakdown
from .errors import ConfigError
from .protocol import Option
from .record import GradedSample, SampleScore
from .sample import RECORD_KEYS, Sample
from .scoring import ScoreOptions

__all__ = [
    "TaskSpec",
    "TaskResults",
    "ReportParts",
    "Skipped",
    "BoardRow",
    "Conformance",
    "Basis",
    "load_ref",
    "planned_values",
]

T = TypeVar("T")

# over-length skips per (model, task, lang, cell), as ``RunResults.skipped()`` counts them
Skipped = Mapping[tuple[str, str, str, Any], int]


@dataclass
class ReportParts:
    """A task's own tables and figures in a report.

    Attributes:
        tables: name -> pandas DataFrame (written as ``<name>.csv`` and shown in ``report.html``).
        figures: name -> PNG bytes (written as ``figures/<name>.png``).
    """

    tables: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)


# what a leaderboard number is made of, for paired differences between two rows: per leaf (a group of
# samples, e.g. one needle count) its weight in the number and each sample's score by (dataset, id), so that
# the number is sum(weight * mean(scores)) over the leaves
Basis = Mapping[Hashable, tuple[float, Mapping[tuple[str, str], float]]]


@dataclass(frozen=True)
class BoardRow:
    """One model's row of a task's own leaderboard board (the task's table in a paper's shape).

    Attributes:
        board: the board's title; rows with one title share a table.
        model: the model.
        columns: ``(key, header)`` per column, in display order; keys are the published tables' column keys
            (``P/2``, ``weighted_score``, ``k5/stack``), so a paper's rows line up with measured ones.
        cells: the numbers by column key (a column without a cell was not run).
        rank_by: the column the board ranks by.
        layouts: the published tables' ``layout`` names this board sits beside.
        labels: what tells apart rows of one model on the board (``{"lang": "EN"}``).
        planned: the samples the row's numbers were meant to rest on.
        scored: the samples they rest on.
        basis: the rank column's number as weighted sample scores (see :data:`Basis`), for paired differences.
    """

    board: str
    model: str
    columns: tuple[tuple[str, str], ...]
    cells: Mapping[str, Estimate]
    rank_by: str
    layouts: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    planned: int = 0
    scored: int = 0
    basis: Basis = field(default_factory=dict)


@dataclass(frozen=True)
class Conformance:
    """How a task's records depart from its reference suite (what a paper's table was measured on).

    Attributes:
        short: where they hold less than the suite plans ("1 of 10 repeats", "2 of 4 lengths"): the row is
            incomplete, and not comparable.
        differs: where they differ otherwise ("clarified options: budget=prompt", "25 repeats, not 10").
    """

    short: tuple[str, ...] = ()
    differs: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskResults:
    """How a task's per-sample results add up; each part is optional.

    The evaluator and the report call these for the task's own records (:class:`~needlebench.record.GradedSample`,
    each saying whether it counts) and never branch on a task's name, so a new task brings its metrics,
    tables and figures with it.

    Attributes:
        dataset_metrics: ``records -> {name: value}``: numbers of one evaluated dataset beyond the
            common ones (score, accuracy, per length, per needle count, error shares).
        metric_names: ``planned metadata -> names``: every name ``dataset_metrics`` can report for a dataset
            whose planned samples have this metadata, in its order; a dataset reports each of them (NaN where
            nothing counted), so every model's result file of the dataset names the same numbers.
        sidecars: ``records -> {suffix: text}``: extra files written beside a dataset's results.
        report: ``(records, models, skipped) -> ReportParts``: the task's tables and figures. It gets
            every record of the task, shortened and failed ones included, and decides what counts.
        heatmap_points: ``record -> [(depth, score), ...]``: where a record lands on the depth x length
            heatmap; a task without it has no heatmap.
        needle_texts: ``gold -> [text, ...]``: what was hidden in the prompt, so a report can show the
            haystack around each needle; a task without a haystack leaves it out.
        needle_depths: ``record -> [depth, ...]``: where the needles sit (percent of the document), shown
            beside each sample in the report's drill-down; a task without depths leaves it out.
        board: ``(records, models, skipped) -> [BoardRow]``: the task's leaderboard rows in its paper table's
            shape; a task whose numbers sit in the summary table (it has ``suite_weights``) needs none.
        conformance: ``(records, suite) -> Conformance``: how one model's records of the task depart from the
            task's reference suite (``suite``: the suite the leaderboard row is labelled with, for the tasks
            that have suites; else None): repeats, cells and protocol options.
        suite_requests: ``(suite, lang, profile) -> {length: prompts}``: the prompts a whole suite plans for the
            task at each length (the report's forecast of a suite's cost); a task without suites has none.
    """

    dataset_metrics: Callable[[Sequence[GradedSample]], dict[str, float]] | None = None
    metric_names: Callable[[Sequence[Mapping[str, Any]]], tuple[str, ...]] | None = None
    sidecars: Callable[[Sequence[GradedSample]], dict[str, str]] | None = None
    report: Callable[[Sequence[GradedSample], Sequence[str], Skipped], ReportParts] | None = None
    heatmap_points: Callable[[GradedSample], Iterable[tuple[float, float]]] | None = None
    needle_texts: Callable[[Mapping[str, Any]], list[str]] | None = None
    needle_depths: Callable[[GradedSample], list[float]] | None = None
    board: Callable[[Sequence[GradedSample], Sequence[str], Skipped], list[BoardRow]] | None = None
    conformance: Callable[[Sequence[GradedSample], str | None], Conformance] | None = None
    suite_requests: Callable[[str, str, str], dict[int, int]] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A task: its parameters, generator, grader and aggregation.

    Attributes:
        name: the registry name (``task=`` in a dataset config); unique.
        family: ``"sparse"`` (a haystack that can be shortened to fit a model) or ``"dense"``.
        params: the parameter dataclass; ``make_params`` builds it from a config.
        generate: ``params -> samples``, pure and deterministic.
        grade: ``(prediction, gold, options) -> SampleScore``.
        title: the task's name in prose.
        oracle: maps a sample's structured gold to a perfect answer in the task's answer format
            (the scripted oracle model answers with it, so a run can be checked to score 100).
        label: the task's short name in tables (``S-RT``); the name in capitals when empty.
        suite_weights: profile -> the task's weight in the suite overall (``OVERALL (v2)``), as the
            profile records it (``profiles.Profile.weights``). Tasks with weights are the rows of the
            summary table, in registry order.
        results: ``"module:attribute"`` of the task's :class:`TaskResults`, imported when results are
            read (so generating samples never imports pandas or matplotlib).
        suite_defaults: ``(suite, lang, profile) -> {parameter: value}``: the task's defaults inside a
            suite (``needlebench_datasets`` builds every task that has them), e.g. repeats and buffer.
        score_options: the grading options a suite config sets for this task (``("metric",)``).
        meta_keys: the task's own metadata copied from each sample into its graded record (beside the
            generic :data:`needlebench.sample.RECORD_KEYS`); the record is what the report reads back.
        cell: the metadata keys of a sample's cell, the coarse coordinate first (length, needle count, chain
            length) and the depth second when the task has one; over-length cells are recorded by them.
        breakdowns: ``{metadata key: metric prefix}``: the dataset's mean score per value of each key, beside
            the common numbers (``{"num_needles": "needles"}`` gives ``needles_2``, ``needles_4``, ...).
        error_kinds: the error kinds its grader can give (``SampleScore.error``); a dataset reports the share
            of each (``error_<kind>``), 0 where none occurred.
        report_text: HTML sentences for the report's "How to read" part: what the task's numbers mean.
        prefix_group: ``(lang, meta) -> (group, position)``: samples of one group open with the same text up to
            ``position`` tokens (a shared haystack up to the first needle), so the partitioner sends them
            together for an engine's prefix cache; ``(None, 0.0)`` for a sample without one. A task without
            it keeps its datasets whole in the request stream.
        inputs: ``params -> {role: path}``: the data files the generator reads (needles, names, ...); the
            dataset cache key holds their contents, so an edited file builds new rows.
        binary: ``(params, options) -> bool``: every sample's score is 0 or 100 under these parameters and
            scoring options (S-RT's keyword hit), so the adaptive ladder's exact bounds for right-or-wrong
            answers hold; None: a score may lie between (a share of needles, an edit distance), where only
            bounds for any score in [0, 100] hold.
    """

    name: str
    family: str
    params: type
    generate: Callable[[Any], Iterator[Sample]]
    grade: Callable[[object, dict, ScoreOptions], SampleScore]
    title: str
    oracle: Callable[[dict], str] | None = None
    label: str = ""
    suite_weights: Mapping[str, float] = field(default_factory=dict)
    results: str | None = None
    suite_defaults: Callable[[str, str, str], dict[str, Any]] | None = None
    score_options: tuple[str, ...] = ()
    meta_keys: tuple[str, ...] = ()
    cell: tuple[str, ...] = ("length",)
    breakdowns: Mapping[str, str] = field(default_factory=dict)
    error_kinds: tuple[str, ...] = ()
    report_text: str = ""
    prefix_group: Callable[[str, Mapping[str, Any]], tuple[Hashable, float]] | None = None
    inputs: Callable[[Any], Mapping[str, str]] | None = None
    binary: Callable[[Any, ScoreOptions], bool] | None = None

    @property
    def options(self) -> Mapping[str, Option]:
        """The task's protocol options, each declared once by its parameters (``ProtocolParams.OPTIONS``)."""
        return getattr(self.params, "OPTIONS", {})

    @property
    def short(self) -> str:
        """The task's name in tables."""
        return self.label or self.name.upper()

    @property
    def record_keys(self) -> tuple[str, ...]:
        """The metadata a graded record keeps: the generic keys and the task's own, each once."""
        return tuple(dict.fromkeys((*RECORD_KEYS, *self.meta_keys)))

    def cell_of(self, meta: Mapping[str, Any]) -> tuple[Any, Any]:
        """A sample's cell from its metadata: ``(coarse coordinate, depth or None)``.

        Args:
            meta: the sample's metadata (or its graded record).
        """
        coarse, *rest = self.cell
        return meta.get(coarse), (meta.get(rest[0]) if rest else None)

    def aggregation(self) -> TaskResults:
        """The task's :class:`TaskResults` (empty when it declares none), its ``breakdowns`` in its dataset metrics."""
        return _with_breakdowns(self.results, tuple(self.breakdowns.items()))


def load_ref(ref: str, kind: type[T]) -> T:
    """The object a ``"module:attribute"`` reference names, checked to be a ``kind``.

    Args:
        ref: ``"package.module:attribute"`` (as in ``BUILTIN_TASKS``, entry points and ``results=``).
        kind: the type it must have.

    Raises:
        ConfigError: the module or attribute does not exist, or is not a ``kind``.
    """
    module, _, attr = ref.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{ref!r}: cannot load it ({exc})") from exc
    if not isinstance(found, kind):
        raise ConfigError(f"{ref!r} is not a {kind.__name__}")
    return found


@functools.cache
def _load_results(ref: str) -> TaskResults:
    return load_ref(ref, TaskResults)


@functools.cache
def _with_breakdowns(ref: str | None, breakdowns: tuple[tuple[str, str], ...]) -> TaskResults:
    """The results ``ref`` names with the declared per-key means added to its dataset metrics."""
    results = _load_results(ref) if ref else TaskResults()
    if not breakdowns:
        return results
    own = results.dataset_metrics

    own_names = results.metric_names

    def dataset_metrics(details: Sequence[GradedSample]) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, prefix in breakdowns:
            out.update(breakdown(details, key, prefix))
        return {**out, **own(details)} if own else out

    def metric_names(metas: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        names = [f"{prefix}_{value}" for key, prefix in breakdowns for value in planned_values(metas, key)]
        return (*names, *(own_names(metas) if own_names else ()))

    return dataclasses.replace(results, dataset_metrics=dataset_metrics, metric_names=metric_names)


def planned_values(metas: Iterable[Mapping[str, Any]], key: str) -> list[Any]:
    """The values one metadata key takes over a dataset's planned samples, sorted (as the breakdowns sort them).

    Args:
        metas: the planned samples' metadata.
        key: the key (``length``, ``num_needles``, ...).
    """
    return sorted({m[key] for m in metas if m.get(key) is not None})
