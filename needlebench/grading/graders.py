"""Task-level graders: a prediction and a structured gold in, a ``SampleScore`` out.

Every grader is linear in the prediction and never raises on what a model returned.
A gold's ``match`` says which rule scores it: the reference rules (``"exact"``) read the
text as OpenCompass 0.5.4's evaluators do (as returned, nothing dropped, the same answer
extraction and comparison), so the same output gets OpenCompass's per-sample score
(``tests/test_differential_scoring.py``); the clarified rules (``"normalised"``) read
``clean_prediction``'s text (chat tokens and control characters dropped, capped at
``MAX_PREDICTION_CHARS``) and compare leniently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .matching import (
    KeywordMatcher,
    as_text,
    clean_prediction,
    last_boxed,
    levenshtein_score,
    normalise_answer,
    reference_boxed,
    strip_thinking,
)

__all__ = [
    "SampleScore",
    "ScoreOptions",
    "grade_srt",
    "grade_mrt",
    "grade_boxed",
    "grade_words",
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
    """Evaluator settings users choose in the config.

    Args:
        metric: ``"keyword"`` or ``"levenshtein"`` (sparse tasks).
        strip_think: drop ``<think>`` blocks before grading; None (the default) drops them under the
            clarified rules only, as OpenCompass's evaluators read the whole output (an OpenCompass
            model config that strips thinking itself corresponds to ``True``).
        alpha: the weight of the Levenshtein partial credit.
        lenient: score NeedleChain the ``released`` way whatever the sample says (see ``needlechain.py``).
    """

    metric: str = "keyword"
    strip_think: bool | None = None
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


def prepare(prediction: object, options: ScoreOptions, clean: bool = True) -> str:
    """The text a grader reads.

    Args:
        prediction: whatever the model returned.
        options: evaluator settings (``strip_think``: None strips only when ``clean``).
        clean: the clarified reading (bounded, printable, no chat tokens); False reads the output as
            OpenCompass's evaluators do, unchanged.
    """
    text = clean_prediction(prediction) if clean else as_text(prediction)
    strip = clean if options.strip_think is None else options.strip_think
    return strip_thinking(text) if strip else text


def _needle_score(text: str, matcher: KeywordMatcher, needle: dict, options: ScoreOptions) -> float:
    """One needle's score: 100 on a keyword hit, else 0 (keyword) or edit-distance credit (levenshtein)."""
    if options.metric == "levenshtein":
        return levenshtein_score(
            text, needle["needle"], needle["keywords"], options.alpha, match=matcher.match, matcher=matcher
        )
    return 100.0 if matcher.hit(needle["keywords"]) else 0.0


def grade_srt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """S-RT (and M-RS's multihop form): the needle's keyword in the answer.

    Args:
        prediction: the model output.
        gold: ``{"keywords": [...], "needle": sentence, "match": "exact" | "normalised"}``.
        options: evaluator settings (metric, alpha, strip_think).
    """
    match = gold.get("match", "normalised")
    text = prepare(prediction, options, clean=match != "exact")
    score = _needle_score(text, KeywordMatcher(text, match), gold, options)
    correct = score == 100.0
    return SampleScore(score, correct, error=None if correct else ("empty" if not text.strip() else "missed"))


def grade_mrt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """Share of needles recalled; which positions were found goes into ``extras``.

    Args:
        prediction: the model output.
        gold: ``{"needles": [{"keywords", "needle", "depth"}, ...], "match": ...}``.
        options: evaluator settings (metric, alpha, strip_think).
    """
    match = gold.get("match", "normalised")
    text = prepare(prediction, options, clean=match != "exact")
    matcher = KeywordMatcher(text, match)  # one normalisation for every needle
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
    """ATC and M-RS: the boxed answer against a name or an integer, with an error kind.

    Error kinds: ``no_boxed_answer`` (instruction following), ``repetition`` (looping output),
    ``stopped_early`` (a chain name between the asked person and the answer),
    ``wrong_chain_name`` (another chain name), ``hallucination`` (a name not in the context),
    ``wrong_distance`` (a wrong or unparsable number).

    Args:
        prediction: the model's response (``<think>`` stripped per ``options``).
        gold: the sample's gold (``answer``, ``kind`` "name" or "int", ``subject``, ``chain_names``,
            ``match``: ``"exact"``, OpenCompass's ATC postprocessor and evaluator (its box extraction,
            its cleaning, then equality); ``"normalised"``, the last balanced ``\\boxed{}`` or ``\\fbox{}``
            of the clarified text, names ignoring case and punctuation, integers as numbers;
            ``"contains"``, that box holding the gold name anywhere).
        options: scoring settings.
    """
    match = gold.get("match", "normalised")
    text = prepare(prediction, options, clean=match != "exact")
    boxed = reference_boxed(text) if match == "exact" else last_boxed(text)
    if boxed is None:
        kind = "repetition" if is_repetitive(text) else "no_boxed_answer"
        return SampleScore(0.0, False, format_failure=True, error=kind)
    if _boxed_right(boxed, gold, match):
        return SampleScore(100.0, True, extracted=boxed)
    answer = normalise_answer(boxed)
    if gold["kind"] == "int":
        return SampleScore(0.0, False, extracted=boxed, error="wrong_distance")
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


def _boxed_right(boxed: str, gold: dict, match: str) -> bool:
    """Whether a boxed answer is right under the gold's rule (see ``grade_boxed``)."""
    expected = str(gold["answer"])
    if match == "exact":  # needlebench_atc_postprocess_v2 ('None' for an empty box), then NeedleBenchATCEvaluator
        return (reference_clean(boxed) if boxed else "None").strip() == expected.strip()
    if match == "contains":
        return bool(expected) and expected in boxed
    answer = normalise_answer(boxed)
    if gold["kind"] == "int":
        value = parse_int(answer)
        return value is not None and value == int(expected)
    return answer == normalise_answer(expected)


def grade_words(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """The 2024 multi-hop M-RS form: a share of the answer's words, as OpenCompass v1 scores it.

    ``NeedleBenchMultiEvaluator`` lowercases the answer and the prediction, splits the answer on
    whitespace and gives each word found in the prediction (as a substring) an equal share of 100.
    Under the clarified rule (``match`` "normalised") the whole answer must appear, ignoring case,
    width and whitespace, as for S-RT.

    Args:
        prediction: the model output.
        gold: ``{"keywords": [answer], "needle": answer, "match": ...}``.
        options: evaluator settings (strip_think).
    """
    if gold.get("match", "normalised") != "exact":
        return grade_srt(prediction, gold, options)
    text = prepare(prediction, options, clean=False).lower()
    words = str(gold["keywords"][0]).lower().split()
    found = [w in text for w in words]
    score = sum(found) * (100 / len(words)) if words else 0
    correct = bool(words) and all(found)
    error = None if correct else ("empty" if not text.strip() else "missed")
    return SampleScore(float(score), correct, error=error, extras={"recalled": found})


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
