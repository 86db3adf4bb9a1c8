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

Whatever counts, a record says how its output ended: ``output_tokens`` (and which tokenizer
counted them), ``truncated`` (cut off at ``max_out_len``) and ``think_unclosed`` (a ``<think>``
block never closed), so a cut-off answer is never mistaken for a wrong one.

A grader that raises is *scored* 0 with error ``grader_error: ...``: the model's answer was
there, and the error share shows the bug instead of shrinking the denominator unseen
(the numbers OpenCompass's summary and ours have always given for it).

A failed request travels from the model wrapper to the evaluator as a structured
prediction (:func:`failed_prediction`), never as text a model could also have written; so does
an answer an API cut off (:func:`cut_prediction`, ``finish_reason="length"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ScoreOptions",
    "ScoringOption",
    "SCORING_OPTIONS",
    "SCORING_NAMES",
    "SampleScore",
    "GradedSample",
    "METRICS",
    "DETAIL_CHARS",
    "UNSCORED_REASONS",
    "FAILED_REASONS",
    "TRUNCATED_POLICIES",
    "REASONING_APART",
    "RESERVED_KEYS",
    "Unanswered",
    "failed_prediction",
    "unanswered",
    "cut_prediction",
    "server_prediction",
    "finish_reason",
    "prediction_text",
    "answer_content",
    "scored_text",
    "postprocessed",
    "reasoning_text",
    "server_output_tokens",
    "server_reasoning_tokens",
    "thinking_budget_asked",
    "kv_cache_kept",
]

METRICS = ("keyword", "levenshtein")

UNSCORED_REASONS = ("shortened", "request_failed", "no_prediction", "skipped", "truncated", "unreadable")
# the reasons the tables count as "failed": the sample was sent (or meant to be) and got no answer
FAILED_REASONS = ("request_failed", "no_prediction")
# what a cut-off output counts as: "scored" as its text reads (OpenCompass, reference), "unscored" (clarified)
TRUNCATED_POLICIES = ("scored", "unscored")
# what is scored of an answer whose reasoning a server returned apart (``reasoning_content``): the "answer"
# alone (the default, every protocol), or OpenCompass's "joined" text (reasoning, think tag, answer)
REASONING_APART = ("answer", "joined")

# the key of a structured prediction that says the request failed (see ``failed_prediction``)
_FAILED_KEY = "needlebench_request_failed"
# the key of a structured prediction that carries the server's finish reason (see ``cut_prediction``)
_FINISH_KEY = "needlebench_finish_reason"
# keys of a structured prediction whose reasoning the server returned apart (see ``server_prediction``)
_REASONING_KEY = "needlebench_reasoning"
_THINK_TAG_KEY = "needlebench_think_tag"
_OUTPUT_TOKENS_KEY = "needlebench_output_tokens"
# the reasoning tokens the server reported, and the thinking budget the request asked for (see ``server_prediction``)
_REASONING_TOKENS_KEY = "needlebench_reasoning_tokens"
_THINKING_BUDGET_KEY = "needlebench_thinking_budget"
# what a KV-cache press kept of the prompt's cache (``methods/compressed_generation.KeptCache.to_dict``)
_KV_CACHE_KEY = "needlebench_kv_cache"
# the key of a postprocessed server answer's other reading: OpenCompass's joined text, postprocessed
_JOINED_KEY = "needlebench_joined"
_SERVER_KEYS = (
    _FINISH_KEY,
    _REASONING_KEY,
    _OUTPUT_TOKENS_KEY,
    _JOINED_KEY,
    _REASONING_TOKENS_KEY,
    _THINKING_BUDGET_KEY,
    _KV_CACHE_KEY,
)
DETAIL_CHARS = 500  # of a failure message kept in the record


@dataclass(frozen=True)
class ScoringOption:
    """One scoring option, declared once (:data:`SCORING_OPTIONS`): every dataset builder that takes it, the
    OpenCompass evaluator, ``needlebench export`` and ``needlebench score`` read its name, default and values here,
    and :class:`ScoreOptions` checks a value against it, the one check.

    Attributes:
        name: the option's name, as a builder or an evaluator config takes it.
        default: its value when none is given.
        choices: the values it takes; None: any number (``alpha``).
        meaning: what it decides, for the docs and the messages.
    """

    name: str
    default: Any
    choices: tuple[Any, ...] | None
    meaning: str

    def check(self, value: Any) -> None:
        """Refuse a value the option does not take.

        Raises:
            ValueError: naming the option, the value and the values it takes.
        """
        if self.choices is None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{self.name}: {value!r}; give a number ({self.meaning})")
        elif not any(value is c or (value == c and type(value) is type(c)) for c in self.choices):
            raise ValueError(f"{self.name}: {value!r}; choose from {self.choices} ({self.meaning})")


SCORING_OPTIONS: tuple[ScoringOption, ...] = (
    ScoringOption("metric", "keyword", METRICS, "how a sparse task's answer is scored"),
    ScoringOption(
        "strip_think",
        None,
        (None, True, False),
        "drop <think> blocks before grading; None: only under the clarified rules",
    ),
    ScoringOption("alpha", 0.2, None, "the weight of the Levenshtein partial credit"),
    ScoringOption("truncated", None, (None, *TRUNCATED_POLICIES), "how a cut-off output counts; None: by the protocol"),
    ScoringOption(
        "reasoning_apart",
        "answer",
        REASONING_APART,
        "what is scored of an answer whose reasoning the server returned apart",
    ),
)
SCORING_NAMES = tuple(o.name for o in SCORING_OPTIONS)
_NOT_NONE = frozenset(o.name for o in SCORING_OPTIONS if o.default is not None)  # None given: the default


@dataclass(frozen=True)
class ScoreOptions:
    """The scoring options of one dataset (:data:`SCORING_OPTIONS` declares them; each field is one, checked there).

    Args:
        metric: ``"keyword"`` or ``"levenshtein"`` (sparse tasks).
        strip_think: drop ``<think>`` blocks before grading; None (the default) drops them under the
            clarified rules only, as OpenCompass's evaluators read the whole output. ``True`` on a
            reference sample applies ``reference_strip`` (OpenCompass's ``extract_non_reasoning_content``,
            what its reasoning-model configs attach); on a clarified one our own strip (case-blind tags,
            an unclosed block is no answer).
        alpha: the weight of the Levenshtein partial credit.
        truncated: how a cut-off output counts: ``"scored"`` (as its text reads, as OpenCompass scores it),
            ``"unscored"`` (left out of every number as ``truncated``); None: by the sample's protocol
            (``unscored`` under clarified). Cut-off outputs are flagged and counted either way.
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` (the default under every protocol: the server said which
            part is reasoning) or ``"joined"`` (OpenCompass's ``OpenAISDK`` text: reasoning, ``</think>``,
            answer; a measurement bug kept for parity checks, docs/protocol/differences.md).
        reference_strip: OpenCompass's own think strip, which only its adapter layer may import
            (``needlebench.opencompass.outputs.reference_strip``); needed by ``strip_think=True`` on
            reference samples. Not a scoring option a config sets.
    """

    metric: str = "keyword"
    strip_think: bool | None = None
    alpha: float = 0.2
    truncated: str | None = None
    reasoning_apart: str = "answer"
    reference_strip: Callable[[str], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for option in SCORING_OPTIONS:
            option.check(getattr(self, option.name))

    @classmethod
    def of(cls, settings: Mapping[str, Any], reference_strip: Callable[[str], str] | None = None) -> ScoreOptions:
        """The options a config gives by name (the others at their defaults).

        Args:
            settings: option name -> value; None for an option whose default is not None means its default.
            reference_strip: see the class.

        Raises:
            ValueError: a name that is no scoring option, or a value its option does not take.
        """
        unknown = sorted(set(settings) - set(SCORING_NAMES))
        if unknown:
            raise ValueError(f"unknown scoring option(s) {unknown}; the options are {list(SCORING_NAMES)}")
        given = {k: v for k, v in settings.items() if v is not None or k not in _NOT_NONE}
        return cls(**given, reference_strip=reference_strip)

    def truncated_policy(self, protocol: object) -> str:
        """``"scored"`` or ``"unscored"`` for a cut-off output of a sample made under ``protocol``.

        Args:
            protocol: the sample's ``protocol`` metadata (``"reference"``, ``"clarified"`` or None).
        """
        if self.truncated is not None:
            return self.truncated
        return "unscored" if protocol == "clarified" else "scored"


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
        "output_tokens",
        "output_tokenizer",
        "truncated",
        "think_unclosed",
        "reasoning",
        "ran_out_reasoning",
        "reasoning_tokens",
        "thinking_budget",
        "budget_ignored",
        "budget_reached",
        "kv_cache",
        "model",
        "dataset",
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
        output_tokens: the whole output's length in tokens (None: no output, or not counted).
        output_tokenizer: what counted them: the model's tokenizer (its path) or ``tiktoken:cl100k_base``
            where the model has none the evaluator could load.
        truncated: the output was cut off at its budget (an API's ``finish_reason="length"``, or
            ``output_tokens`` in the model's own tokenizer reaching ``max_out_len``).
        think_unclosed: the output opened a ``<think>`` block it never closed.
        reasoning: the reasoning a server returned apart from the answer (``reasoning_content`` or vLLM's
            ``reasoning``), its head and
            tail where long (the predictions file keeps it whole); None when the server returned none apart.
        ran_out_reasoning: the output budget ran out while the model was still reasoning: reasoning returned
            apart, no answer, ``finish_reason="length"``.
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
    output_tokens: int | None = None
    output_tokenizer: str | None = None
    truncated: bool = False
    think_unclosed: bool = False
    reasoning: str | None = None
    ran_out_reasoning: bool = False
    reasoning_tokens: int | None = None
    thinking_budget: int | None = None
    budget_ignored: bool = False
    budget_reached: bool = False
    kv_cache: Mapping[str, Any] | None = None
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
        out.update(
            output_tokens=self.output_tokens,
            output_tokenizer=self.output_tokenizer,
            truncated=self.truncated,
            think_unclosed=self.think_unclosed,
        )
        if self.reasoning is not None:  # only where a server returned reasoning apart
            out["ran_out_reasoning"] = self.ran_out_reasoning
            if prediction:
                out["reasoning"] = self.reasoning
        if self.reasoning_tokens is not None:
            out["reasoning_tokens"] = self.reasoning_tokens
        if self.thinking_budget is not None:  # only where the request asked for a thinking budget
            out.update(
                thinking_budget=self.thinking_budget,
                budget_ignored=self.budget_ignored,
                budget_reached=self.budget_reached,
            )
        if self.kv_cache is not None:  # only a KV-cache press's sample
            out["kv_cache"] = dict(self.kv_cache)
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
            output_tokens=None if data.get("output_tokens") is None else int(data["output_tokens"]),
            output_tokenizer=data.get("output_tokenizer"),
            truncated=bool(data.get("truncated")),
            think_unclosed=bool(data.get("think_unclosed")),
            reasoning=None if data.get("reasoning") is None else str(data["reasoning"]),
            ran_out_reasoning=bool(data.get("ran_out_reasoning")),
            reasoning_tokens=None if data.get("reasoning_tokens") is None else int(data["reasoning_tokens"]),
            thinking_budget=None if data.get("thinking_budget") is None else int(data["thinking_budget"]),
            budget_ignored=bool(data.get("budget_ignored")),
            budget_reached=bool(data.get("budget_reached")),
            kv_cache=dict(data["kv_cache"]) if isinstance(data.get("kv_cache"), Mapping) else None,
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


def failed_prediction(reason: str) -> dict[str, str]:
    """The prediction a model wrapper returns for a request that never succeeded.

    A JSON object, which OpenCompass's inferencer saves as it is (a prediction may be a dict with a
    ``prediction`` key, which its length accounting reads) and its eval task hands to the evaluator
    unchanged; no text a model writes can be mistaken for it.

    Args:
        reason: what failed (the exception), kept in the record.
    """
    return {"prediction": "", _FAILED_KEY: reason[:DETAIL_CHARS] or "request failed"}


def unanswered(prediction: object) -> Unanswered | None:
    """What stood in for an answer: an :class:`Unanswered`, :func:`failed_prediction`'s value, or None.

    Args:
        prediction: a prediction as OpenCompass's eval task or ``needlebench score`` passes it.
    """
    if isinstance(prediction, Unanswered):
        return prediction
    if isinstance(prediction, Mapping) and _FAILED_KEY in prediction:
        return Unanswered("request_failed", str(prediction[_FAILED_KEY])[:DETAIL_CHARS] or "request failed")
    return None


def server_prediction(
    content: str,
    finish: str | None = None,
    reasoning: str | None = None,
    output_tokens: int | None = None,
    think_tag: str = "</think>",
    reasoning_tokens: int | None = None,
    thinking_budget: int | None = None,
    kv_cache: Mapping[str, Any] | None = None,
    opencompass_text: str | None = None,
) -> dict[str, Any]:
    """The prediction a model wrapper returns for a server's answer that carries more than its text.

    A JSON object like :func:`failed_prediction`'s, with the answer (``content``) as ``prediction``, which
    OpenCompass's length accounting reads. What OpenCompass's ``OpenAISDK`` would have returned for the
    same response is :func:`prediction_text`'s value (the reasoning, the think tag, the answer), so the
    reference protocol scores the same text, while the reasoning stays apart for a reader.

    Args:
        content: the answer (the message's ``content``; empty when the budget ran out while reasoning).
        finish: the server's ``finish_reason`` (``"length"``: cut off at ``max_tokens``), if kept.
        reasoning: the reasoning the server returned apart (``reasoning_content``), if any.
        output_tokens: the server's ``usage.completion_tokens`` (reasoning included), if it reported them.
        think_tag: what OpenCompass puts between the reasoning and the answer (``OpenAISDK.think_tag``).
        reasoning_tokens: the server's ``usage.completion_tokens_details.reasoning_tokens``, if it reported them.
        thinking_budget: the thinking budget the request asked for, if any.
        kv_cache: what a KV-cache press kept of the prompt's cache, for a ``kvpress_model``'s answer.
        opencompass_text: the text ``OpenAISDK`` returned where it is not the reasoning, tag and answer joined
            (a server that returns the reasoning in a field it does not read: the answer alone); None: joined.
    """
    out: dict[str, Any] = {"prediction": content}
    if opencompass_text is not None:
        out[_JOINED_KEY] = opencompass_text
    if finish is not None:
        out[_FINISH_KEY] = finish
    if reasoning:
        out[_REASONING_KEY] = reasoning
        out[_THINK_TAG_KEY] = think_tag
    if output_tokens is not None:
        out[_OUTPUT_TOKENS_KEY] = int(output_tokens)
    if reasoning_tokens is not None:
        out[_REASONING_TOKENS_KEY] = int(reasoning_tokens)
    if thinking_budget is not None:
        out[_THINKING_BUDGET_KEY] = int(thinking_budget)
    if kv_cache is not None:
        out[_KV_CACHE_KEY] = dict(kv_cache)
    return out


def cut_prediction(text: str, reason: str = "length") -> dict[str, str]:
    """The prediction a model wrapper returns for an answer the server ended with ``finish_reason``.

    A JSON object like :func:`failed_prediction`'s, with the text as ``prediction``: OpenCompass saves it as
    it is, a model ``pred_postprocessor`` wrapped by ``needlebench.opencompass.api.keep_unanswered`` gets
    the text, and the evaluator reads the reason from the saved prediction.

    Args:
        text: the answer as the server returned it.
        reason: the server's ``finish_reason`` (``"length"``: cut off at ``max_tokens``).
    """
    return {"prediction": text, _FINISH_KEY: reason}


def finish_reason(prediction: object) -> str | None:
    """The finish reason a structured prediction carries (:func:`cut_prediction`), or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _FINISH_KEY)
    return None if value is None else str(value)


def _server_field(prediction: object, key: str) -> Any:
    """One field a structured prediction carries (None where it is not one, or lacks the field)."""
    return prediction.get(key) if isinstance(prediction, Mapping) else None


def _from_server(prediction: object) -> bool:
    return isinstance(prediction, Mapping) and any(k in prediction for k in _SERVER_KEYS)


def prediction_text(prediction: object) -> object:
    """The text a structured prediction stands for; anything else unchanged.

    For :func:`cut_prediction` its text; for :func:`server_prediction` what OpenCompass's ``OpenAISDK``
    returns for that response: the reasoning, the think tag and the answer (the reasoning alone when there
    is no answer), or the text it kept as ``opencompass_text``, so every reader that scores text scores what
    OpenCompass scores.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer or after a postprocessor.
    """
    if not _from_server(prediction):
        return prediction
    if _JOINED_KEY in prediction:  # type: ignore[operator]
        return prediction[_JOINED_KEY]  # type: ignore[index]
    content, reasoning = answer_content(prediction), reasoning_text(prediction)
    if not reasoning:
        return content
    if not content:
        return reasoning
    tag = _server_field(prediction, _THINK_TAG_KEY)
    return f"{reasoning}{'</think>' if tag is None else tag}{content}"


def answer_content(prediction: object) -> object:
    """The answer alone: a :func:`server_prediction`'s ``content`` (no reasoning); anything else as
    :func:`prediction_text` gives it.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    if _from_server(prediction):
        return prediction.get("prediction") or ""  # type: ignore[union-attr]
    return prediction


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
    grader scores the one :attr:`ScoreOptions.reasoning_apart` names; anything else is postprocessed as the
    text :func:`prediction_text` gives.

    Args:
        prediction: one saved prediction.
        proc: the postprocessor, text in, text out.
    """
    if unanswered(prediction) is not None:
        return prediction
    if isinstance(prediction, Mapping) and _JOINED_KEY in prediction:  # postprocessed once already: both again
        return {"prediction": proc(prediction.get("prediction") or ""), _JOINED_KEY: proc(prediction[_JOINED_KEY])}
    if reasoning_text(prediction) is None:
        return proc(prediction_text(prediction))  # type: ignore[arg-type]
    joined = proc(prediction_text(prediction))  # type: ignore[arg-type]
    return {"prediction": proc(answer_content(prediction)), _JOINED_KEY: joined}  # type: ignore[arg-type]


def reasoning_text(prediction: object) -> str | None:
    """The reasoning a server returned apart from the answer, or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _REASONING_KEY)
    return str(value) if value else None


def server_reasoning_tokens(prediction: object) -> int | None:
    """The reasoning tokens the server reported (``usage.completion_tokens_details.reasoning_tokens``), or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _REASONING_TOKENS_KEY)
    return None if value is None else int(value)


def thinking_budget_asked(prediction: object) -> int | None:
    """The thinking budget the request asked the server for, or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _THINKING_BUDGET_KEY)
    return None if value is None else int(value)


def kv_cache_kept(prediction: object) -> dict[str, Any] | None:
    """What a KV-cache press kept of the prompt's cache (a ``kvpress_model``'s answer), or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _KV_CACHE_KEY)
    return dict(value) if isinstance(value, Mapping) else None


def server_output_tokens(prediction: object) -> int | None:
    """The output tokens the server reported (``usage.completion_tokens``, reasoning included), or None.

    Args:
        prediction: a prediction as saved by OpenCompass's inferencer.
    """
    value = _server_field(prediction, _OUTPUT_TOKENS_KEY)
    return None if value is None else int(value)
