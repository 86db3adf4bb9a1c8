"""Task-level graders: a prediction and a structured gold in, a ``SampleScore`` out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .scoring import clean_prediction, keyword_hit, last_boxed, levenshtein_score, normalise_answer, strip_thinking

__all__ = [
    "SampleScore",
    "ScoreOptions",
    "grade_srt",
    "grade_mrt",
    "grade_boxed",
    "parse_int",
    "is_repetitive",
    "METRICS",
]

METRICS = ("keyword", "levenshtein")


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
    text = clean_prediction(prediction)
    return strip_thinking(text) if options.strip_think else text


def grade_srt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    text = prepare(prediction, options)
    keywords = gold["keywords"]
    match = gold.get("match", "normalised")
    if options.metric == "levenshtein":
        score = levenshtein_score(text, gold["needle"], keywords, options.alpha, match)
    else:
        score = 100.0 if keyword_hit(text, keywords, match) else 0.0
    correct = score == 100.0
    return SampleScore(score, correct, error=None if correct else ("empty" if not text.strip() else "missed"))


def grade_mrt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """Share of needles recalled; which positions were found goes into ``extras``."""
    text = prepare(prediction, options)
    found = []
    partial = []
    match = gold.get("match", "normalised")
    for needle in gold["needles"]:
        if options.metric == "levenshtein":
            partial.append(levenshtein_score(text, needle["needle"], needle["keywords"], options.alpha, match))
        else:
            partial.append(100.0 if keyword_hit(text, needle["keywords"], match) else 0.0)
        found.append(partial[-1] == 100.0)
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


def parse_int(answer: str) -> int | None:
    """An integer answer: "5", "5 generations", "第5代" and the words zero..twenty are the same answer."""
    m = re.search(r"-?\d+", answer.replace(",", ""))
    if m:
        return int(m.group())
    word = answer.strip().lower().split(" ")[0] if answer.strip() else ""
    return _NUMBER_WORDS.get(word)


def is_repetitive(text: str, n: int = 4, threshold: float = 0.3, min_grams: int = 60) -> bool:
    """Degenerate looping output: few distinct n-grams among many (words, or characters for Chinese)."""
    units = text.split() if len(text.split()) > len(text) / 8 else list(text.replace(" ", ""))
    grams = [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]
    return len(grams) >= min_grams and len(set(grams)) / len(grams) < threshold


def grade_boxed(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """ATC and M-RS: last balanced \\boxed{} against a name or an integer, with an error kind.

    Error kinds: ``no_boxed_answer`` (instruction following), ``repetition`` (looping output),
    ``stopped_early`` (a chain name between the asked person and the answer),
    ``wrong_chain_name`` (another chain name), ``hallucination`` (a name not in the context),
    ``wrong_distance`` (a wrong or unparsable number).
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


def reference_clean(answer: str) -> str:
    """A boxed answer cleaned the way OpenCompass's ATC postprocessor does (no case folding)."""
    if not answer:
        return "None"
    answer = _LATEX_BOX.sub(r"\1", _LATEX_TEXT.sub(r"\1", answer))
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
