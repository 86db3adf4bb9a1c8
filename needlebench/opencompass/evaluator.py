"""OpenCompass evaluator for every needlebench task.

A thin layer over :mod:`needlebench.grading.evaluation`: it grades with the task's
own grader (looked up by the row's ``task``), never crashes on a bad
prediction, and writes one JSON line per sample (metadata, extracted answer,
score, failure kind) beside OpenCompass's result file, for the summarizer and reports.
"""

from __future__ import annotations

from typing import Any

from opencompass.openicl.icl_evaluator import BaseEvaluator

from ..errors import ConfigError
from ..grading.evaluation import dataset_results, grade_rows, write_results
from ..grading.graders import METRICS, ScoreOptions

__all__ = ["NeedleBenchEvaluator", "grade_rows"]


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
        details = grade_rows(predictions, references, test_set, self.options)
        out = getattr(self, "_out_dir", None)  # set by OpenCompass's eval task: results/<model>/<dataset>
        metrics = write_results(out, details, predictions) if out else dataset_results(details)[0]
        return {**metrics, "details": details}
