"""OpenCompass evaluator for every needlebench task.

It grades with the task's own grader (looked up by the row's ``task``),
never crashes on a bad prediction, and writes one JSON line per sample
(metadata, extracted answer, score, failure kind) beside OpenCompass's
result file, for the summarizer and reports.
"""

from __future__ import annotations

import json
from typing import Any

from opencompass.openicl.icl_evaluator import BaseEvaluator

from ..aggregate.metrics import summarise_details
from ..errors import ConfigError
from ..grading.graders import METRICS, SampleScore, ScoreOptions, request_failure
from ..store import atomic_write
from ..tasks import get_task

__all__ = ["NeedleBenchEvaluator", "grade_rows"]

_META_KEYS = (
    "length",
    "depth",
    "depths",
    "repeat",
    "num_needles",
    "question_type",
    "k",
    "variant",
    "question",
    "point",
    "presented_positions",
    "prompt_tokens",
    "realised_depth",
    "realised_depths",
    "shortened_from",
    "protocol",
    "profile",
    "version",
    "buffer",
    "needle_counts",
    "circular_group",
    "rotation",
    "style",
    "circular_pattern",
)


def grade_rows(
    predictions: list[Any], references: list[str], test_set: Any, options: ScoreOptions
) -> list[dict[str, Any]]:
    """One detail record per sample: its metadata, grade and failure kind; never raises on a bad prediction.

    A prediction marked as a failed request is recorded as ``request_failed`` (never scored); a grader
    that raises is recorded as ``grader_error`` so the other samples are kept.

    Args:
        predictions: the model's outputs, in row order.
        references: each row's gold as JSON (the ``answer`` column).
        test_set: the dataset rows (``id``, ``task``, ``lang``, ``meta``), in the same order.
        options: scoring settings passed to each task's grader.
    """
    details = []
    for pred, ref, row in zip(predictions, references, test_set, strict=False):
        meta = json.loads(row["meta"])
        failure = request_failure(pred)
        if failure is not None:  # the server never answered: not the model's wrong answer, and never scored
            result = SampleScore(0.0, False, error="request_failed", extras={"request_failed": failure[:500]})
        else:
            try:
                gold = json.loads(ref)
                result = get_task(row["task"]).grade(pred, gold, options)
            except Exception as exc:  # a grader bug must not lose the other samples
                result = SampleScore(0.0, False, error=f"grader_error: {type(exc).__name__}: {exc}")
        detail = {
            "id": row["id"],
            "task": row["task"],
            "lang": row["lang"],
            **{k: meta[k] for k in _META_KEYS if k in meta},
            "score": result.score,
            "correct": result.correct,
            "format_failure": result.format_failure,
            "extracted": result.extracted,
            "error": result.error,
            **result.extras,
        }
        details.append(detail)
    return details


class NeedleBenchEvaluator(BaseEvaluator):
    """OpenCompass evaluator for every needlebench task: grades each row with its task's own grader.

    Args:
        metric: ``"keyword"`` (the 2025 metric) or ``"levenshtein"`` (the 2024 partial credit).
        strip_think: drop ``<think>`` blocks before grading.
        alpha: the weight of the Levenshtein partial credit.
        lenient: NeedleChain's lenient reading (the released scorer's: last number, no omission rule).
        pred_postprocessor: OpenCompass's prediction postprocessor, if any.

    Raises:
        ConfigError: an unknown metric.
    """

    def __init__(
        self,
        metric: str = "keyword",
        strip_think: bool = True,
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
        self._write_samples(details, predictions)
        metrics = summarise_details(details)
        for task in sorted({d["task"] for d in details}):  # one task per dataset; its own numbers and files
            mine = [d for d in details if d["task"] == task]
            results = get_task(task).aggregation()
            if results.dataset_metrics:
                metrics.update(results.dataset_metrics(mine))
            for suffix, text in (results.sidecars(mine) if results.sidecars else {}).items():
                self._write(suffix, [text])
        return {**metrics, "details": details}

    def _write(self, suffix: str, lines: Any) -> None:
        """Write ``<result>.<suffix>`` beside OpenCompass's result file, atomically."""
        out = getattr(self, "_out_dir", None)
        if not out:
            return
        with atomic_write(f"{out}.{suffix}") as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(lines)

    def _write_samples(self, details: list[dict[str, Any]], predictions: list[Any]) -> None:
        def line(detail: dict[str, Any], pred: Any) -> str:
            """One JSON line: the detail plus the prediction as text, cut to 4000 characters.

            Args:
                detail: the sample's detail record.
                pred: the model's output (None becomes "").
            """
            text = pred if isinstance(pred, str) else ("" if pred is None else str(pred))
            return json.dumps({**detail, "prediction": text[:4000]}, ensure_ascii=False) + "\n"

        self._write("samples.jsonl", (line(d, p) for d, p in zip(details, predictions, strict=False)))
