"""Task-level graders: a prediction and a structured gold in, a ``SampleScore`` out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .scoring import clean_prediction, keyword_hit, levenshtein_score, strip_thinking

__all__ = ["SampleScore", "ScoreOptions", "grade_srt", "grade_mrt", "METRICS"]

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
    if options.metric == "levenshtein":
        score = levenshtein_score(text, gold["needle"], keywords, options.alpha)
    else:
        score = 100.0 if keyword_hit(text, keywords) else 0.0
    correct = score == 100.0
    return SampleScore(score, correct, error=None if correct else ("empty" if not text.strip() else "missed"))


def grade_mrt(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """Share of needles recalled; which positions were found goes into ``extras``."""
    text = prepare(prediction, options)
    found = []
    partial = []
    for needle in gold["needles"]:
        if options.metric == "levenshtein":
            partial.append(levenshtein_score(text, needle["needle"], needle["keywords"], options.alpha))
        else:
            partial.append(100.0 if keyword_hit(text, needle["keywords"]) else 0.0)
        found.append(partial[-1] == 100.0)
    score = sum(partial) / len(partial) if partial else 0.0
    correct = all(found)
    return SampleScore(
        score,
        correct,
        error=None if correct else ("empty" if not text.strip() else "missed"),
        extras={"recalled": found},
    )
