"""Per-sample scoring: keyword match, Levenshtein credit, boxed-answer extraction.

Every function takes whatever a model returned (``None``, bytes, megabytes
of noise) and never raises: a garbage prediction scores 0.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import Levenshtein

__all__ = [
    "clean_prediction",
    "strip_thinking",
    "keyword_hit",
    "keyword_score",
    "levenshtein_score",
    "last_boxed",
    "normalise_answer",
    "MAX_PREDICTION_CHARS",
]

MAX_PREDICTION_CHARS = 200_000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
_SPECIAL_TOKENS = re.compile(r"<\|(?:im_end|im_start|endoftext|eot_id|end)\|>|</s>")


def clean_prediction(prediction: object) -> str:
    """Turn any model output into bounded, printable text."""
    if prediction is None:
        return ""
    if isinstance(prediction, bytes):
        prediction = prediction.decode("utf-8", errors="replace")
    if isinstance(prediction, (list, tuple)):
        prediction = prediction[0] if prediction else ""
        return clean_prediction(prediction)
    text = str(prediction)
    if len(text) > MAX_PREDICTION_CHARS:
        text = text[:MAX_PREDICTION_CHARS]
    text = _SPECIAL_TOKENS.sub("", text)
    return _CONTROL.sub("", text)


def strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks; an unterminated block eats the rest.

    A response that is only ``...</think> answer`` (template opened the tag)
    keeps what follows the closing tag.
    """
    # one left-to-right scan (a lazy regex is quadratic over thousands of unclosed tags)
    low = text.lower()
    kept: list[str] = []
    i = 0
    while True:
        start = low.find("<think>", i)
        if start < 0:
            kept.append(text[i:])
            break
        kept.append(text[i:start])
        end = low.find("</think>", start + 7)
        if end < 0:
            break
        i = end + 8
    out = "".join(kept)
    low = out.lower()
    return out[low.rindex("</think>") + 8 :] if "</think>" in low else out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).casefold()


def keyword_hit(prediction: str, keywords: Sequence[str], match: str = "normalised") -> bool:
    """A core keyword appears in the prediction.

    Args:
        prediction: the model's (cleaned) answer.
        keywords: the gold's core keywords; any one is enough.
        match: ``"exact"`` (a plain substring, as OpenCompass and the 2025 paper's Eq. 1 score) or
            ``"normalised"`` (ignoring case, full/half width and whitespace).
    """
    if match == "exact":
        return any(k and k in prediction for k in keywords)
    squashed = _squash(prediction)
    return any(k and _squash(k) in squashed for k in keywords)


def keyword_score(prediction: str, keywords: Sequence[str]) -> float:
    """2025 metric: 100 if any core keyword appears, else 0."""
    return 100.0 if keyword_hit(prediction, keywords) else 0.0


def levenshtein_score(
    prediction: str, reference: str, keywords: Sequence[str], alpha: float = 0.2, match: str = "normalised"
) -> float:
    """2024 metric: 100 on a keyword hit, else partial credit by edit distance.

    score = 100 * alpha * (1 - d(P, R) / max(|P|, |R|)), with whitespace removed.
    """
    prediction = clean_prediction(prediction)
    if keyword_hit(prediction, keywords, match):
        return 100.0
    p = re.sub(r"\s+", "", prediction)
    r = re.sub(r"\s+", "", reference)
    longest = max(len(p), len(r))
    if longest == 0:
        return 0.0
    return 100.0 * alpha * (1.0 - Levenshtein.distance(p, r) / longest)


def last_boxed(text: str) -> str | None:
    """Content of the last balanced ``\\boxed{...}`` (``\\fbox`` too), or None."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth = 1
        i = start
        while i < len(text):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
            i += 1
    return None


def normalise_answer(answer: str) -> str:
    """Strip LaTeX text wrappers, quotes and spacing; casefold (names compare this way)."""
    prev = None
    while prev != answer:
        prev = answer
        answer = re.sub(r"\\(?:text|textbf|mathrm|mbox|emph)\s*\{([^{}]*)\}", r"\1", answer)
    answer = answer.replace("\\ ", " ").replace("~", " ")
    answer = unicodedata.normalize("NFKC", answer)
    answer = answer.strip().strip("\"'`“”‘’「」『』.。,，:：;； {}")
    return re.sub(r"\s+", " ", answer).casefold()
