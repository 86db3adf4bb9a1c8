"""The recall graders and oracles of S-RT and M-RT (and M-RS's multihop form): a needle's keyword in the answer.

A needle scores 100 on a keyword hit, else 0 (``metric="keyword"``) or its edit-distance credit (``"levenshtein"``,
the 2024 paper's); M-RT's score is the share of needles recalled, which positions in ``extras``.
"""

from __future__ import annotations

from ...grading.matching import KeywordMatcher, levenshtein_score, prepare
from ...record import SampleScore
from ...scoring import ScoreOptions

__all__ = ["RECALL_ERRORS", "grade_mrt", "grade_srt", "oracle_mrt", "oracle_srt"]


def oracle_srt(gold: dict) -> str:
    """A perfect S-RT answer: a sentence holding the needle's first keyword, verbatim.

    Args:
        gold: the sample's gold (``keywords``).
    """
    return f"According to the document, the answer is {gold['keywords'][0]}."


def oracle_mrt(gold: dict) -> str:
    """A perfect M-RT answer: every needle's first keyword, one per line.

    Args:
        gold: the sample's gold (``needles``, each with ``keywords``).
    """
    lines = [f"{i}. {needle['keywords'][0]}" for i, needle in enumerate(gold["needles"], 1)]
    return "The answers, in order:\n" + "\n".join(lines)


def _needle_score(text: str, matcher: KeywordMatcher, needle: dict, options: ScoreOptions) -> float:
    """One needle's score: 100 on a keyword hit, else 0 (keyword) or edit-distance credit (levenshtein)."""
    if options.metric == "levenshtein":
        return levenshtein_score(
            text, needle["needle"], needle["keywords"], options.alpha, match=matcher.match, matcher=matcher
        )
    return 100.0 if matcher.hit(needle["keywords"]) else 0.0


RECALL_ERRORS = ("empty", "missed")  # the error kinds of the recall graders (S-RT, M-RT, v1 M-RS)


def grade_srt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """S-RT (and M-RS's multihop form): the needle's keyword in the answer.

    Args:
        prediction: the model output.
        gold: ``{"keywords": [...], "needle": sentence, "match": "exact" | "normalised"}``.
        options: evaluator settings (metric, alpha, strip_think).
    """
    match = gold["match"]
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
    match = gold["match"]
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
