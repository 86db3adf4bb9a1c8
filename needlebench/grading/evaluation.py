"""Grading one dataset's predictions: per-sample details, the dataset's numbers and its files.

OpenCompass's evaluator (``needlebench.opencompass.evaluator``) and ``needlebench score``
(predictions made elsewhere) both call these, so a prediction gets the same grade,
the same record line and the same numbers whichever way it arrives.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..aggregate.metrics import summarise_details
from ..files import atomic_write
from ..tasks import get_task
from .graders import SampleScore, ScoreOptions, request_failure

__all__ = ["grade_rows", "dataset_results", "write_results", "PREDICTION_CHARS", "GOLD_CHARS", "CONTEXT_CHARS"]

log = logging.getLogger(__name__)

PREDICTION_CHARS = 4000  # of each prediction kept in the per-sample record (reports show less)
# the evidence a reader judges a sample by, kept in the record and shown as is in the report's drill-down
GOLD_CHARS = 200  # of the gold answer
CONTEXT_CHARS = 120  # of haystack either side of each needle


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
        gold: Any = ref  # parsed once below when graded; the evidence reuses it
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
            **{k: meta[k] for k in get_task(row["task"]).record_keys if k in meta},
            "score": result.score,
            "correct": result.correct,
            "format_failure": result.format_failure,
            "extracted": result.extracted,
            "error": result.error,
            **result.extras,
            **_evidence(row, gold),
        }
        details.append(detail)
    return details


def _evidence(row: Any, gold: Any) -> dict[str, Any]:
    """What a reader needs to judge a sample by eye: the gold as an answer, the haystack around each needle.

    ``gold`` is the task oracle's answer; ``context`` holds ``[before, needle, after]`` with
    ``CONTEXT_CHARS`` either side of each needle's first occurrence in the prompt (never the whole prompt).
    """
    try:
        if isinstance(gold, str):  # not parsed by the grading step (a failed request)
            gold = json.loads(gold)
        spec = get_task(row["task"])
        out: dict[str, Any] = {"gold": spec.oracle(gold)[:GOLD_CHARS]} if spec.oracle else {}
        needles = spec.aggregation().needle_texts
        prompt = row["prompt"] if needles and "prompt" in row else ""
    except Exception as exc:  # evidence is for reading; a sample without it still counts
        log.warning("sample %s: no evidence for the report (%s: %s)", row.get("id"), type(exc).__name__, exc)
        return {}
    context = []
    for text in needles(gold) if prompt else ():
        at = prompt.find(text)
        if at >= 0:
            end = at + len(text)
            context.append([prompt[max(0, at - CONTEXT_CHARS) : at], text, prompt[end : end + CONTEXT_CHARS]])
    if context:
        out["context"] = context
    return out


def dataset_results(details: Sequence[dict[str, Any]]) -> tuple[dict[str, float], dict[str, str]]:
    """A dataset's numbers (the common ones plus its task's own) and its task's sidecar files.

    Args:
        details: the dataset's per-sample records from :func:`grade_rows`.

    Returns:
        ``(metrics, {suffix: text})``.
    """
    metrics = summarise_details(details)
    files: dict[str, str] = {}
    for task in sorted({d["task"] for d in details}):  # one task per dataset; its own numbers and files
        mine = [d for d in details if d["task"] == task]
        results = get_task(task).aggregation()
        if results.dataset_metrics:
            metrics.update(results.dataset_metrics(mine))
        if results.sidecars:
            files.update(results.sidecars(mine))
    return metrics, files


def write_results(
    prefix: str | Path, details: Sequence[dict[str, Any]], predictions: Sequence[Any]
) -> dict[str, float]:
    """Write ``<prefix>.samples.jsonl`` and the task's sidecars atomically; return the dataset's numbers.

    Args:
        prefix: the result file's path without ``.json`` (OpenCompass's ``results/<model>/<dataset>``).
        details: the per-sample records.
        predictions: the raw predictions, in the same order (kept up to ``PREDICTION_CHARS``).
    """
    metrics, files = dataset_results(details)

    def line(detail: dict[str, Any], pred: Any) -> str:
        text = pred if isinstance(pred, str) else ("" if pred is None else str(pred))
        return json.dumps({**detail, "prediction": text[:PREDICTION_CHARS]}, ensure_ascii=False) + "\n"

    files = {"samples.jsonl": "".join(line(d, p) for d, p in zip(details, predictions, strict=True)), **files}
    for suffix, text in files.items():
        with atomic_write(f"{prefix}.{suffix}") as tmp:
            tmp.write_text(text, encoding="utf-8")
    return metrics
