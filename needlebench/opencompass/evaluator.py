"""OpenCompass evaluator for every needlebench task.

A thin layer over :mod:`needlebench.grading.evaluation`: it looks the dataset's task up
(one dataset is one task, named by its rows' ``task``), grades with the task's own grader,
never crashes on a bad prediction, and writes one JSON line per sample (metadata, extracted
answer, score, failure kind, unscored reason) beside OpenCompass's result file, for the
summarizer and reports. Each record also says how its output ended (its length in tokens, whether it
was cut off at its budget, whether it left a ``<think>`` block open).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opencompass.openicl.icl_evaluator.icl_base_evaluator import BaseEvaluator  # the module: task_entry.py

from ..aggregate.effective_length import EffectiveRule
from ..cache.pages import RELEASE_EVERY, dataset_mappings, released_every, rows_on_demand
from ..errors import ConfigError
from ..grading.evaluation import (
    dataset_effective_length,
    dataset_results,
    grade_rows,
    metric_names,
    planned_lengths,
    write_results,
)
from ..planning.adaptive import DatasetLadder
from ..record import GradedSample, postprocessed
from ..request_cost import RequestCost
from ..runfolder.cost_log import dataset_costs
from ..scoring import ScoreOptions
from ..tasks import get_task
from ..taskspec import TaskSpec
from .outputs import output_meter, reference_strip

__all__ = ["NeedleBenchEvaluator", "grade_rows", "dataset_task", "SUMMARY_HEADLINE"]

# The numbers of a result file OpenCompass's summary shows by default, in this order, each under the words a
# reader needs no docs for (``summarizer``'s ``all_metrics=True`` shows every number, under its name): the score
# and what qualifies it. A dataset shows those it reports (the effective length: S-RT, M-RT, M-RS); the
# breakdowns (per length, errors, interval ends) stay in the result files and our tables.
SUMMARY_HEADLINE = (
    ("score", "score"),
    ("num_samples", "samples planned"),
    ("num_scored", "samples scored"),
    ("num_truncated", "answers cut off (truncated)"),
    ("num_failed", "samples failed (no answer)"),
    ("effective_length", "effective length (tokens)"),
)


class NeedleBenchEvaluator(BaseEvaluator):
    """OpenCompass evaluator for every needlebench task: grades each row with its task's own grader.

    Every record also says how its output ended (``output_tokens``, ``truncated``, ``think_unclosed``):
    the outputs are read as the model saved them (OpenCompass's eval task hands the saved predictions to
    ``score`` as ``prediction``, beside the postprocessed ``predictions``) and counted as the eval stage's
    partitioner says (``output_tokenizer``, ``max_out_len``: ``needlebench.opencompass.outputs``).

    Args:
        output_tokenizer: the model's tokenizer (path or hub name) outputs are counted with; None: cl100k.
        output_tokenizer_kwargs: the model config's ``tokenizer_kwargs``.
        max_out_len: the output budget the outputs were generated with (None: unknown).
        metric_names: the numbers the dataset reports, in order (the eval stage writes them from the dataset's
            planned samples, ``grading.evaluation.metric_names``, so every model reports the same names);
            None: named from the rows this model was given.
        pred_postprocessor: OpenCompass's prediction postprocessor, if any.
        planned_lengths: samples planned per length (the eval stage writes it from the dataset's planned
            samples): the effective length's completeness per length; None: the rows this model was given.
        effective_length: how the effective length is read (``summarizer``'s ``effective_length``, which the
            eval stage passes on); None: the default rule.
        ladder: an adaptive run's ladder for the dataset (``planning.run.ladder_config``, read as
            ``planning.adaptive.DatasetLadder``): each sample no round asked is written as a record left unscored
            (``not_sampled``), so the dataset's ``num_samples`` is its full grid's, and its effective length is
            the one the ladder decides from these records, as the summary's table takes it, not the full grid's
            walk over lengths it did not ask whole; None: a full grid.
        scoring: the scoring options, by name, as declared once in
            :data:`~needlebench.scoring.SCORING_OPTIONS` (``metric``, ``strip_think``, ``alpha``, ``truncated``,
            ``reasoning_apart``); the others take their declared defaults. ``strip_think=True`` on reference
            samples is OpenCompass's ``extract_non_reasoning_content``.

    Raises:
        ConfigError: a name that is no scoring option, or a value its option does not take.
    """

    def __init__(
        self,
        output_tokenizer: str | None = None,
        output_tokenizer_kwargs: dict | None = None,
        max_out_len: int | None = None,
        metric_names: list[str] | None = None,
        pred_postprocessor: dict | None = None,
        planned_lengths: dict | None = None,
        effective_length: dict | None = None,
        ladder: dict | None = None,
        **scoring: Any,
    ) -> None:
        super().__init__(pred_postprocessor=pred_postprocessor)
        try:
            self.options = ScoreOptions.of(scoring, reference_strip=reference_strip)
        except ValueError as exc:
            raise ConfigError(f"evaluator {exc}") from None
        self.output_tokenizer = output_tokenizer
        self.output_tokenizer_kwargs = dict(output_tokenizer_kwargs or {})
        self.max_out_len = max_out_len
        self.metric_names = list(metric_names) if metric_names is not None else None
        self.planned_lengths = {str(k): int(v) for k, v in (planned_lengths or {}).items()}
        self.effective_rule = EffectiveRule.of(None if effective_length is None else dict(effective_length))
        self.ladder = DatasetLadder.from_dict(ladder) if ladder else None

    def score(
        self, predictions: list[Any], references: list[str], test_set: Any, prediction: list[Any] | None = None
    ) -> dict[str, Any]:
        """Grade a dataset, write ``<result>.samples.jsonl`` (and task sidecars), return its metrics.

        Args:
            predictions: the model's outputs, in row order, after any postprocessor.
            references: each row's gold as JSON.
            test_set: the dataset rows.
            prediction: the outputs as the model saved them (OpenCompass passes its prediction files' own
                ``prediction`` field under this name); None: ``predictions``.

        Returns:
            :func:`needlebench.aggregate.metrics.summarise_details`'s numbers plus the task's own dataset
            metrics and a ``details`` list; ``{"error": ...}`` when the counts of predictions and references differ.
        """
        if len(predictions) != len(references):
            return {"error": f"{len(predictions)} predictions for {len(references)} samples"}
        raw = prediction if prediction is not None and len(prediction) == len(predictions) else predictions
        task = dataset_task(test_set)
        records = []
        if task:
            meter = output_meter(self.output_tokenizer, self.output_tokenizer_kwargs, self.max_out_len)
            # each row's prompt decoded once (for the evidence), the RSS a few prompts
            rows = released_every(rows_on_demand(test_set), dataset_mappings(test_set), every=RELEASE_EVERY)
            costs = self._costs(test_set)
            records = grade_rows(predictions, references, rows, task, self.options, raw=raw, meter=meter, costs=costs)
            if self.ladder and records:  # an adaptive run's samples no round asked: counted, never scored
                fields = self.ladder.fields
                records += [
                    GradedSample.not_sampled(
                        sid, task.name, records[0].lang, {**fields, **dict(zip(task.cell, at))}, None, None
                    )
                    for sid, at in self.ladder.unasked().items()
                ]
        names = self.metric_names
        if names is None and task is not None:
            names = metric_names(task, [json.loads(m) for m in _column(test_set, "meta")])
        out = getattr(self, "_out_dir", None)  # set by OpenCompass's eval task: results/<model>/<dataset>
        effective = None
        if names is not None and "effective_length" in names:
            model = Path(str(out)).parent.name if out else ""
            planned = self.planned_lengths or planned_lengths([json.loads(m) for m in _column(test_set, "meta")])
            decided = self.ladder.effective(records) if self.ladder and records else None
            effective = dataset_effective_length(records, planned, self.effective_rule, model, decided)
        if out:
            metrics = write_results(out, records, task, names, effective)
        else:
            metrics = dataset_results(records, task, names, effective)[0]
        return {**metrics, "details": [r.to_json(prediction=False) for r in records]}

    def _costs(self, test_set: Any) -> list[RequestCost | None] | None:
        """Each row's request cost, from its model's cost log (``runfolder.cost_log``) by sample id; None outside
        a run (no result folder: ``needlebench score``)."""
        out = getattr(self, "_out_dir", None)  # <run>/results/<model>/<dataset>
        if not out:
            return None
        result = Path(str(out))
        paid = dataset_costs(result.parent.parent.parent / "predictions" / result.parent.name, result.name)
        return [paid.get(str(i)) for i in _column(test_set, "id")] if paid else None

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
        if hasattr(test_set, "select_columns"):  # plain rows: OpenCompass's loop adds each row's detail to it
            test_set = [{"subdivision": s, "idx": i} for s, i in zip(test_set["subdivision"], test_set["idx"])]
        return super().group(n, details, test_set)

    def pred_postprocess(self, predictions: list[Any]) -> list[Any]:
        """OpenCompass's prediction postprocessor on the answers; a failed request passes through as it is,
        and an answer a server cut off is postprocessed as its text."""
        if getattr(self, "pred_postprocessor", None) is None:
            return predictions
        texts: list[Any] = []  # every text to postprocess, in the order postprocessed() asks for them

        def collect(text: Any) -> Any:
            texts.append(text)
            return text

        for p in predictions:
            postprocessed(p, collect)
        done = iter(super().pred_postprocess(texts))  # OpenCompass's own postprocessing, once for them all
        return [postprocessed(p, lambda _text: next(done)) for p in predictions]


def dataset_task(test_set: Any) -> TaskSpec | None:
    """The one task a dataset's rows belong to; None for a dataset without rows (every sample skipped).

    Args:
        test_set: the dataset rows (a ``datasets.Dataset`` with a ``task`` column, or a list of rows).

    Raises:
        ConfigError: rows of several tasks.
    """
    names = sorted(set(_column(test_set, "task")))
    if len(names) > 1:
        raise ConfigError(f"a needlebench dataset holds one task's samples; found tasks {names}")
    return get_task(names[0]) if names else None


def _column(test_set: Any, name: str) -> list[Any]:
    """One column of the dataset rows (a ``datasets.Dataset`` or a list of rows)."""
    return test_set[name] if hasattr(test_set, "column_names") else [row[name] for row in test_set]
