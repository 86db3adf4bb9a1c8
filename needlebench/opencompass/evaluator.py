"""OpenCompass evaluator for every needlebench task.

A thin layer over :mod:`needlebench.grading.evaluation`: it looks the dataset's task up
(one dataset is one task, named by its rows' ``task``), grades with the task's own grader,
never crashes on a bad prediction, and writes one JSON line per sample (metadata, extracted
answer, score, failure kind, unscored reason) beside OpenCompass's result file, for the
summarizer and reports.
"""

from __future__ import annotations

from typing import Any

from opencompass.openicl.icl_evaluator import BaseEvaluator

from ..errors import ConfigError
from ..grading.evaluation import dataset_results, grade_rows, write_results
from ..record import METRICS, ScoreOptions, unanswered
from ..tasks import get_task
from ..taskspec import TaskSpec

__all__ = ["NeedleBenchEvaluator", "grade_rows", "dataset_task"]


class NeedleBenchEvaluator(BaseEvaluator):
    """OpenCompass evaluator for every needlebench task: grades each row with its task's own grader.

    Args:
        metric: ``"keyword"`` (the 2025 metric) or ``"levenshtein"`` (the 2024 partial credit).
        strip_think: drop ``<think>`` blocks before grading; None (default): only where a sample's gold
            asks for the clarified reading (OpenCompass's own evaluators read the whole output).
        alpha: the weight of the Levenshtein partial credit.
        lenient: score NeedleChain the ``released`` way whatever the sample's ``scoring`` option says.
        pred_postprocessor: OpenCompass's prediction postprocessor, if any.

    Raises:
        ConfigError: an unknown metric.
    """

    def __init__(
        self,
        metric: str = "keyword",
        strip_think: bool | None = None,
        alpha: float = 0.2,
        lenient: bool = False,
        pred_postprocessor: dict | None = None,
    ) -> None:
        super().__init__(pred_postprocessor=pred_postprocessor)
        if metric not in METRICS:
            raise ConfigError(f"evaluator metric: {metric!r}; choose from {METRICS}")
        self.options = ScoreOptions(metric=metric, strip_think=strip_think, alpha=alpha, lenient=lenient)

    def score(self, predictions: list[Any], references: list[str], test_set: Any) -> dict[str, Any]:
        """Grade a dataset, write ``<result>.samples.jsonl`` (and task sidecars), return its metrics.

        Args:
            predictions: the model's outputs, in row order.
            references: each row's gold as JSON.
            test_set: the dataset rows.

        Returns:
            :func:`summarise_details`'s numbers plus the task's own dataset metrics and a ``details`` list;
            ``{"error": ...}`` when the counts of predictions and references differ.
        """
        if len(predictions) != len(references):
            return {"error": f"{len(predictions)} predictions for {len(references)} samples"}
        task = dataset_task(test_set)
        records = grade_rows(predictions, references, test_set, task, self.options) if task else []
        out = getattr(self, "_out_dir", None)  # set by OpenCompass's eval task: results/<model>/<dataset>
        metrics = write_results(out, records, task) if out else dataset_results(records, task)[0]
        return {**metrics, "details": [r.to_json(prediction=False) for r in records]}

    def group(self, n: int, details: list[dict[str, Any]], test_set: Any) -> dict[str, list[dict[str, Any]]]:
        """OpenCompass's grouping of the details by sample (``<subdivision>_<idx>``), reading two columns.

        ``BaseEvaluator.group`` keeps every row it groups, prompt included: a whole dataset's prompts in
        memory in the eval task (2.2 GB at 1 repeat of the 1000k suite). Its caller reads only each
        example's ``detail``; the groups and their order are the same (``tests/test_inferencer.py``).

        Args:
            n: samples per example (OpenCompass's repeated sampling).
            details: the evaluator's per-sample details, in row order.
            test_set: the dataset rows.
        """
        if hasattr(test_set, "select_columns"):
            test_set = test_set.select_columns(["subdivision", "idx"])
        return super().group(n, details, test_set)

    def pred_postprocess(self, predictions: list[Any]) -> list[Any]:
        """OpenCompass's prediction postprocessor on the answers; a failed request passes through as it is."""
        if getattr(self, "pred_postprocessor", None) is None:
            return predictions
        done = iter(super().pred_postprocess([p for p in predictions if unanswered(p) is None]))
        return [p if unanswered(p) is not None else next(done) for p in predictions]


def dataset_task(test_set: Any) -> TaskSpec | None:
    """The one task a dataset's rows belong to; None for a dataset without rows (every sample skipped).

    Args:
        test_set: the dataset rows (a ``datasets.Dataset`` with a ``task`` column, or a list of rows).

    Raises:
        ConfigError: rows of several tasks.
    """
    column = test_set["task"] if hasattr(test_set, "column_names") else [row["task"] for row in test_set]
    names = sorted(set(column))
    if len(names) > 1:
        raise ConfigError(f"a needlebench dataset holds one task's samples; found tasks {names}")
    return get_task(names[0]) if names else None
