"""Grading one dataset's predictions: per-sample details, the dataset's numbers and its files.

OpenCompass's evaluator (``needlebench.opencompass.evaluator``) and ``needlebench score``
(predictions made elsewhere) both call these, so a prediction gets the same grade,
the same record line and the same numbers whichever way it arrives. One dataset is one
task: the caller looks its ``TaskSpec`` up and passes it in (grading never imports the tasks).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..aggregate.effective_length import METRICS as EFFECTIVE_METRICS
from ..aggregate.effective_length import EffectiveRule, effective_length, length_cell, sampled_effective_length
from ..aggregate.metrics import COMMON_METRICS, GRADER_ERROR, summarise_details
from ..errors import ConfigError
from ..files import atomic_write
from ..record import DETAIL_CHARS, RESERVED_KEYS, GradedSample, OutputFacts, SampleScore, scored_text, unanswered
from ..request_cost import RequestCost
from ..scoring import ScoreOptions
from ..taskspec import planned_values
from .outputs import OutputMeter, measure, tiktoken_meter

if TYPE_CHECKING:
    from ..taskspec import TaskSpec

__all__ = [
    "grade_rows",
    "dataset_results",
    "metric_names",
    "write_results",
    "PREDICTION_CHARS",
    "GOLD_CHARS",
    "CONTEXT_CHARS",
]

log = logging.getLogger(__name__)

PREDICTION_CHARS = 4000  # of each prediction kept in the per-sample record (reports show less)
# the evidence a reader judges a sample by, kept in the record and shown as is in the report's drill-down
GOLD_CHARS = 200  # of the gold answer
CONTEXT_CHARS = 120  # of haystack either side of each needle


def grade_rows(
    predictions: Sequence[Any],
    references: Sequence[str],
    test_set: Any,
    task: TaskSpec,
    options: ScoreOptions,
    raw: Sequence[Any] | None = None,
    meter: OutputMeter | None = None,
    costs: Sequence[RequestCost | None] | None = None,
) -> list[GradedSample]:
    """One :class:`GradedSample` per row: its metadata, grade and failure kind; never raises on a bad prediction.

    A prediction that never came (:class:`~needlebench.record.Unanswered`, or a model wrapper's
    :func:`~needlebench.record.failed_prediction`) is recorded unscored with its reason and never
    graded; a shortened prompt is graded but unscored; a grader that raises is scored 0 as
    ``grader_error`` so the other samples are kept. Every answered record says how its output ended
    (``output_tokens``, ``truncated``, ``think_unclosed``: :mod:`needlebench.grading.outputs`); a cut-off
    output is graded and, where ``options.truncated_policy`` says ``unscored``, left out as ``truncated``.

    Args:
        predictions: the model's outputs, in row order, as the grader reads them (after any postprocessor).
        references: each row's gold as JSON (the ``answer`` column).
        test_set: the dataset rows (``id``, ``task``, ``lang``, ``meta``), in the same order.
        task: the dataset's task (every row must be one of its samples).
        options: scoring settings passed to the task's grader.
        raw: the outputs as the model wrapper saved them, before any postprocessor (think blocks, finish
            reasons), in the same order; default ``predictions``.
        meter: how outputs are counted and their budget; default cl100k counts, no budget.
        costs: each row's request cost (``runfolder.cost_log``), in the same order, None for a row without one
            (an answer carried over); None: none kept (predictions made elsewhere).

    Raises:
        ConfigError: a row of another task than ``task``.
    """
    records = []
    raw = predictions if raw is None else raw
    paid = iter(costs if costs is not None and len(costs) == len(predictions) else [None] * len(predictions))
    meter = meter or tiktoken_meter()
    for pred, ref, row, out in zip(predictions, references, test_set, raw, strict=False):
        if row["task"] != task.name:
            raise ConfigError(f"sample {row['id']}: task {row['task']!r} in a dataset graded as {task.name!r}")
        meta = json.loads(row["meta"])
        gold: Any = ref  # parsed once below when graded; the evidence reuses it
        missing = unanswered(pred) or unanswered(out)
        # an answer a server cut off arrives with its finish reason; one whose reasoning came apart is scored
        # as the options say (its answer alone by default, OpenCompass's joined text under "joined")
        pred = scored_text(pred, options.reasoning_apart)
        facts = measure(out, meter) if missing is None else OutputFacts()
        cost = next(paid, None)
        if cost is not None:  # a failed request cost too: the ledger counts what was spent
            facts = replace(facts, cost=cost)
        detail: str | None = None
        if missing is not None:  # no answer to grade: not the model's wrong answer, and never scored
            result, detail = None, missing.detail[:DETAIL_CHARS]
        else:
            try:
                gold = json.loads(ref)
                result = task.grade(pred, gold, options)
                clash = sorted(set(result.extras) & RESERVED_KEYS)
                if clash:
                    raise ValueError(f"the grader's extras {clash} would overwrite the record's own keys")
            except Exception as exc:  # a grader bug must not lose the other samples
                log.warning("sample %s: grader error %s: %s", row["id"], type(exc).__name__, exc)
                result = SampleScore(0.0, False, error=f"grader_error: {type(exc).__name__}: {exc}")
        reason = "shortened" if meta.get("shortened_from") is not None else missing.reason if missing else None
        if reason is None and facts.truncated and options.truncated_policy(meta.get("protocol")) == "unscored":
            reason = "truncated"
        evidence = _evidence(row, gold, task)
        records.append(
            GradedSample(
                id=row["id"],
                task=row["task"],
                lang=row["lang"],
                fields={**{k: meta[k] for k in task.record_keys if k in meta}, **(result.extras if result else {})},
                score=result.score if result else None,
                correct=result.correct if result else False,
                format_failure=result.format_failure if result else False,
                extracted=result.extracted if result else None,
                error=result.error if result else missing.reason if missing else None,
                error_detail=detail,
                unscored=reason,
                gold=evidence.get("gold"),
                context=evidence.get("context"),
                prediction="" if missing else _text(pred)[:PREDICTION_CHARS],
                output=facts
                if facts.reasoning is None
                else replace(facts, reasoning=_ends(facts.reasoning, PREDICTION_CHARS)),
            )
        )
    return records


def _ends(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and its tail, with how much was left out between.

    Reasoning is read for where it started and where it stopped (under-thinking); the middle goes first.
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... [{len(text) - 2 * half:,} characters] ... {text[-half:]}"


def _text(prediction: Any) -> str:
    """The prediction as the record keeps it: text as returned, ``None`` as empty, anything else as ``str``."""
    return prediction if isinstance(prediction, str) else ("" if prediction is None else str(prediction))


def _evidence(row: Any, gold: Any, spec: TaskSpec) -> dict[str, Any]:
    """What a reader needs to judge a sample by eye: the gold as an answer, the haystack around each needle.

    ``gold`` is the task oracle's answer; ``context`` holds ``(before, needle, after)`` with
    ``CONTEXT_CHARS`` either side of each needle's first occurrence in the prompt (never the whole prompt).
    """
    try:
        if isinstance(gold, str):  # not parsed by the grading step (a failed request)
            gold = json.loads(gold)
        out: dict[str, Any] = {"gold": spec.oracle(gold)[:GOLD_CHARS]} if spec.oracle else {}
        needles = spec.aggregation().needle_texts
        utf8 = getattr(row, "utf8", None)  # a row read column by column can hand over a column's bytes undecoded
        prompt: str | bytes = "" if not needles or "prompt" not in row else utf8("prompt") if utf8 else row["prompt"]
    except Exception as exc:  # evidence is for reading; a sample without it still counts
        log.warning("sample %s: no evidence for the report (%s: %s)", row.get("id"), type(exc).__name__, exc)
        return {}
    around = _around_utf8 if isinstance(prompt, bytes) else _around
    context = [found for text in (needles(gold) if prompt else ()) if (found := around(prompt, text)) is not None]
    if context:
        out["context"] = tuple(context)
    return out


def _around(prompt: str, text: str) -> tuple[str, str, str] | None:
    """``(before, text, after)`` at ``text``'s first occurrence, ``CONTEXT_CHARS`` either side; None if absent."""
    at = prompt.find(text)
    if at < 0:
        return None
    end = at + len(text)
    return prompt[max(0, at - CONTEXT_CHARS) : at], text, prompt[end : end + CONTEXT_CHARS]


def _around_utf8(prompt: bytes, text: str) -> tuple[str, str, str] | None:
    """:func:`_around` on the prompt's UTF-8 bytes, decoding only the two windows (a 1M-token prompt is 4 MB).

    UTF-8 is self-synchronising, so the first match of the needle's bytes is its first occurrence in the
    text; each window is cut to whole characters (4 bytes at most each) before it is decoded.
    """
    wanted = text.encode("utf-8", "surrogatepass")
    at = prompt.find(wanted)
    if at < 0:
        return None
    end, span = at + len(wanted), 4 * CONTEXT_CHARS + 4
    start, stop = max(0, at - span), min(len(prompt), end + span)
    while start < at and prompt[start] & 0xC0 == 0x80:  # a continuation byte: not a character's start
        start += 1
    while stop > end and stop < len(prompt) and prompt[stop] & 0xC0 == 0x80:
        stop -= 1
    before = prompt[start:at].decode("utf-8", "surrogatepass")[-CONTEXT_CHARS:]
    return before, text, prompt[end:stop].decode("utf-8", "surrogatepass")[:CONTEXT_CHARS]


def metric_names(task: TaskSpec, metas: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Every number a dataset of ``task`` reports, in order, from its planned samples' metadata.

    The names depend on what was planned (lengths, needle counts, NeedleChain's cells) and on the error kinds
    the task declares, never on outcomes: every model's result file of one dataset names the same numbers
    (OpenCompass's summary requires it to put models side by side), a model whose prompts were skipped or
    whose answers never failed some way included.

    Args:
        task: the dataset's task.
        metas: the metadata of every sample the dataset plans (before any model's over-length limit).
    """
    lengths = [f"length_{v}" for v in planned_values(metas, "length")]
    errors = [f"error_{kind}" for kind in sorted({*task.error_kinds, GRADER_ERROR})]
    results = task.aggregation()
    own = results.metric_names(metas) if results.metric_names else ()
    effective = EFFECTIVE_METRICS if task.suite_weights and lengths else ()  # the summary's tasks, over lengths
    return (*COMMON_METRICS, *lengths, *errors, *own, *effective)


def planned_lengths(metas: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Samples planned per length (as text: the eval stage writes it into the evaluator's config).

    Args:
        metas: the metadata of every sample the dataset plans.
    """
    out: dict[str, int] = {}
    for meta in metas:
        if meta.get("length") is not None:
            out[str(meta["length"])] = out.get(str(meta["length"]), 0) + 1
    return out


def dataset_effective_length(
    records: Sequence[GradedSample],
    planned: Mapping[str, int],
    rule: EffectiveRule,
    model: str = "",
    decided: tuple[int | None, str, int | None] | None = None,
) -> dict[str, float]:
    """A dataset's effective-length numbers (``aggregate.effective_length.METRICS``) over its planned lengths.

    A length is complete when every sample planned there was scored; the bootstrap is seeded by (model, task,
    language), as the summary's ``needlebench_effective_length.csv`` seeds it, so the two agree.

    Args:
        records: the dataset's graded samples (one task and language).
        planned: samples planned per length (:func:`planned_lengths`).
        rule: which scores pass.
        model: the model's abbr (the result file's folder).
        decided: an adaptive run's ladder decision for the dataset (``planning.adaptive.DatasetLadder.effective``):
            the number and edge are the ladder's, the interval the bootstrap over the sampled prompts, as the
            summary's table takes them.
    """
    if not records or not planned:
        return {}
    scores: dict[int, list[float]] = {int(n): [] for n in planned}
    for r in records:
        length = r.get("length")
        if r.counts and length is not None and int(length) in scores:
            scores[int(length)].append(float(r.score))
    cells = [length_cell(n, s, planned[str(n)]) for n, s in scores.items()]
    identity = (model, records[0].task, records[0].lang)
    if decided is not None:
        return sampled_effective_length(cells, rule, decided, *identity).metrics()
    return effective_length(cells, rule, *identity).metrics()


def dataset_results(
    records: Sequence[GradedSample],
    task: TaskSpec | None,
    names: Sequence[str] | None = None,
    effective: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """A dataset's numbers (the common ones plus its task's own) and its task's sidecar files.

    Args:
        records: the dataset's graded samples from :func:`grade_rows`.
        task: the dataset's task; None for a dataset without rows (the common numbers only).
        names: the numbers the dataset reports (:func:`metric_names` of its planned samples), in this order,
            NaN where nothing counted; a number computed but not named (a task that declares too little)
            follows them, with a warning. None: the numbers computed, as they come.
        effective: its effective-length numbers (:func:`dataset_effective_length`), where computed.

    Returns:
        ``(metrics, {suffix: text})``.
    """
    metrics = summarise_details(records, task.error_kinds if task else ())
    files: dict[str, str] = {}
    results = task.aggregation() if task else None
    if results and results.dataset_metrics:
        metrics.update(results.dataset_metrics(records))
    metrics.update(effective or {})
    if results and results.sidecars:
        files.update(results.sidecars(records))
    if names is not None:
        extra = [k for k in metrics if k not in set(names)]
        if extra:
            log.warning("task %s reports numbers it does not declare: %s", task.name if task else None, extra)
        metrics = {**{n: metrics.get(n, math.nan) for n in names}, **{k: metrics[k] for k in extra}}
    return metrics, files


# a model's text may hold lone surrogates (a server's "\\ud800" escape): no UTF-8 file can, and writing one would
# lose the whole dataset's records; each becomes U+FFFD, one for one (in a JSON line they only occur in strings)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_results(
    prefix: str | Path,
    records: Sequence[GradedSample],
    task: TaskSpec | None,
    names: Sequence[str] | None = None,
    effective: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Write ``<prefix>.samples.jsonl`` (one :meth:`GradedSample.to_json` a line) and the task's sidecars.

    Every file is written atomically. Returns the dataset's numbers.

    Args:
        prefix: the result file's path without ``.json`` (OpenCompass's ``results/<model>/<dataset>``).
        records: the graded samples.
        task: the dataset's task; None for a dataset without rows.
        names: the numbers it reports (see :func:`dataset_results`).
        effective: its effective-length numbers (see :func:`dataset_results`).
    """
    metrics, files = dataset_results(records, task, names, effective)
    lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
    for suffix, text in {"samples.jsonl": lines, **files}.items():
        with atomic_write(f"{prefix}.{suffix}") as tmp:  # a lone surrogate (no UTF-8 form) is shown as U+FFFD
            tmp.write_text(_LONE_SURROGATE.sub("\ufffd", text), encoding="utf-8")
    return metrics
