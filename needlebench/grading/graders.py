"""Task-level graders: a prediction and a structured gold in, a ``SampleScore`` out.

Every grader is linear in the prediction (which ``clean_prediction`` caps at
``MAX_PREDICTION_CHARS``) and never raises on what a model returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .matching import KeywordMatcher, clean_prediction, last_boxed, levenshtein_score, normalise_answer, strip_thinking

__all__ = [
    "SampleScore",
    "ScoreOptions",
    "grade_srt",
    "grade_mrt",
    "grade_boxed",
    "parse_int",
    "is_repetitive",
    "METRICS",
    "REQUEST_FAILED",
    "request_failure",
]

METRICS = ("keyword", "levenshtein")

# What an inference backend returns for a request that never succeeded (see opencompass/api.py).
# NUL bytes never survive prediction cleaning, so no model answer can equal it.
REQUEST_FAILED = "\x00needlebench:request_failed\x00"


def request_failure(prediction: object) -> str | None:
    """The failure reason if ``prediction`` is a failed request's marker, else None."""
    if isinstance(prediction, str) and prediction.startswith(REQUEST_FAILED):
        return prediction[len(REQUEST_FAILED) :] or "request failed"
    return None


@dataclass(frozen=True)
class ScoreOptions:
    """Evaluator settings users choose in the config."""

    metric: str = "keyword"
    strip_think: bool = True
    alpha: float = 0.2
    lenient: bool = False


@dataclass(frozen=True)
class SampleScore:
    """One sample's result; ``score`` is 0..100, ``error`` names the failure kind."""

    score: float
    correct: bool
    format_failure: bool = False
    extracted: str | None = None
    error: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def prepare(prediction: object, options: ScoreOptions) -> str:
    """The text a grader reads: bounded and printable, thinking dropped unless disabled.

    Args:
        prediction: whatever the model returned.
        options: evaluator settings (``strip_think``).
    """
    text = clean_prediction(prediction)
    return strip_thinking(text) if options.strip_think else text


def _needle_score(text: str, matcher: KeywordMatcher, needle: dict, options: ScoreOptions) -> float:
    """One needle's score: 100 on a keyword hit, else 0 (keyword) or edit-distance credit (levenshtein)."""
    if options.metric == "levenshtein":
        return levenshtein_score(text, needle["needle"], needle["keywords"], options.alpha, matcher=matcher)
    return 100.0 if matcher.hit(needle["keywords"]) else 0.0


def grade_srt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """S-RT (and M-RS's multihop form): the needle's keyword in the answer.

    Args:
        prediction: the model output.
        gold: ``{"keywords": [...], "needle": sentence, "match": "exact" | "normalised"}``.
        options: evaluator settings (metric, alpha, strip_think).
    """
    text = prepare(prediction, options)
    score = _needle_score(text, KeywordMatcher(text, gold.get("match", "normalised")), gold, options)
    correct = score == 100.0
    return SampleScore(score, correct, error=None if correct else ("empty" if not text.strip() else "missed"))


def grade_mrt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """Share of needles recalled; which positions were found goes into ``extras``.

    Args:
        prediction: the model output.
        gold: ``{"needles": [{"keywords", "needle", "depth"}, ...], "match": ...}``.
        options: evaluator settings (metric, alpha, strip_think).
    """
    text = prepare(prediction, options)
    matcher = KeywordMatcher(text, gold.get("match", "normalised"))  # one normalisation for every needle
    partial = [_needle_score(text, matcher, needle, options) for needle in gold["needles"]]
    found = [x == 100.0 for x in partial]
    score = sum(partial) / len(partial) if partial else 0.0
    correct = all(found)
    return SampleScore(
        score,
        correct,
        error=None if correct else ("empty" if not text.strip() else "missed"),
        extras={"recalled": found},
    )


_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}


_INTEGER = re.compile(r"-?\d+")
MAX_INT_DIGITS = 18  # no generation count or distance is longer; int() of a megabyte of digits is quadratic


def parse_int(answer: str) -> int | None:
    """An integer answer: "5", "5 generations", "第5代" and the words zero..twenty are the same answer.

    The first run of digits counts; a run longer than ``MAX_INT_DIGITS`` is no answer (None).

    Args:
        answer: a normalised boxed answer.
    """
    m = _INTEGER.search(answer.replace(",", ""))
    if m:
        digits = m.group()
        return int(digits) if len(digits.lstrip("-")) <= MAX_INT_DIGITS else None
    head = answer.strip().lower()
    word = head.split(" ", 1)[0] if head else ""
    return _NUMBER_WORDS.get(word)


def is_repetitive(text: str, n: int = 4, threshold: float = 0.3, min_grams: int = 60) -> bool:
    """Degenerate looping output: few distinct n-grams among many (words, or characters for Chinese).

    Linear: one split, each n-gram hashed at most once, and the count stops as soon as the
    distinct n-grams reach the threshold (varied text is decided after a fraction of it).

    Args:
        text: the prepared prediction.
        n: the n-gram size.
        threshold: the distinct share under which the output counts as looping.
        min_grams: fewer n-grams than this never count (a short answer is not a loop).
    """
    words = text.split()
    chars = len(words) <= len(text) / 8
    units: str | list[str] = text.replace(" ", "") if chars else words
    total = len(units) - n + 1
    if total < min_grams:
        return False
    limit = threshold * total
    seen: set = set()
    for lo in range(0, total, _GRAM_CHUNK):
        hi = min(total, lo + _GRAM_CHUNK)
        if chars:  # 4-character strings hash faster than tuples of characters
            seen.update(units[i : i + n] for i in range(lo, hi))
        else:
            seen.update(zip(*(units[lo + i : hi + i] for i in range(n))))
        if len(seen) >= limit:
            return False
    return True


_GRAM_CHUNK = 8192


def grade_boxed(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """ATC and M-RS: last balanced \\boxed{} against a name or an integer, with an error kind.

    Error kinds: ``no_boxed_answer`` (instruction following), ``repetition`` (looping output),
    ``stopped_early`` (a chain name between the asked person and the answer),
    ``wrong_chain_name`` (another chain name), ``hallucination`` (a name not in the context),
    ``wrong_distance`` (a wrong or unparsable number).

    Args:
        prediction: the model's response (``<think>`` stripped per ``options``).
        gold: the sample's gold (``answer``, ``kind`` "name" or "int", ``subject``, ``chain_names``,
            ``match``: ``"normalised"``, or the reference rules ``"exact"`` (ATC) and ``"contains"`` (M-RS)).
        options: scoring settings.
    """
    text = prepare(prediction, options)
    boxed = last_boxed(text)
    if boxed is None:
        kind = "repetition" if is_repetitive(text) else "no_boxed_answer"
        return SampleScore(0.0, False, format_failure=True, error=kind)
    match = gold.get("match", "normalised")
    if match != "normalised" and _reference_match(boxed, str(gold["answer"]), match):
        return SampleScore(100.0, True, extracted=boxed)
    answer = normalise_answer(boxed)
    if gold["kind"] == "int":
        value = parse_int(answer)
        if match == "normalised" and value is not None and value == int(gold["answer"]):
            return SampleScore(100.0, True, extracted=boxed)
        return SampleScore(0.0, False, extracted=boxed, error="wrong_distance")
    if match == "normalised" and answer == normalise_answer(gold["answer"]):
        return SampleScore(100.0, True, extracted=boxed)
    chain = [normalise_answer(x) for x in gold.get("chain_names", [])]
    if answer in chain:
        subject = normalise_answer(gold.get("subject", ""))
        target = normalise_answer(gold["answer"])
        i, j, k = chain.index(answer), chain.index(subject) if subject in chain else -1, chain.index(target)
        between = j >= 0 and min(j, k) < i < max(j, k)
        kind = "stopped_early" if between else "wrong_chain_name"
    else:
        kind = "repetition" if is_repetitive(text) else "hallucination"
    return SampleScore(0.0, False, extracted=boxed, error=kind)


_LATEX_TEXT = re.compile(r"\\text\{([^}]+)\}")
_LATEX_BOX = re.compile(r"\\boxed\{([^}]+)\}")


def _sub_before_last_brace(pattern: re.Pattern[str], text: str) -> str:
    """``pattern.sub(r"\\1", text)`` for a ``\\cmd{([^}]+)}`` pattern, in linear time.

    Every match ends at a ``}``, so none lies past the last one; searching only up to it
    keeps the regex from rescanning the tail once per opening (a run of unclosed
    ``\\text{`` is otherwise quadratic).
    """
    end = text.rfind("}") + 1
    return pattern.sub(r"\1", text[:end]) + text[end:] if end else text


def reference_clean(answer: str) -> str:
    """A boxed answer cleaned the way OpenCompass's ATC postprocessor does (no case folding).

    Args:
        answer: the boxed answer.
    """
    if not answer:
        return "None"
    answer = _sub_before_last_brace(_LATEX_BOX, _sub_before_last_brace(_LATEX_TEXT, answer))
    answer = re.sub(r"\\[\[\]]", "", answer).replace("\\", "")
    answer = re.sub(r"\s+", " ", answer).strip()
    return answer.replace('"', "").replace("'", "").replace("~", " ")


def _reference_match(boxed: str, gold: str, match: str) -> bool:
    """Reference scoring of a boxed answer.

    ``exact`` (ATC): the cleaned answer equals the gold, as OpenCompass's ATC evaluator compares.
    ``contains`` (M-RS): the gold name appears inside the box, the 2025 paper's Eq. 1 applied to
    the boxed content.
    """
    if match == "contains":
        return bool(gold) and gold in boxed
    return reference_clean(boxed).strip() == gold.strip()
