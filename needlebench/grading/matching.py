"""Per-sample scoring: keyword match, Levenshtein credit, boxed-answer extraction.

Every function takes whatever a model returned (``None``, bytes, megabytes
of noise) and never raises: a garbage prediction scores 0. Every function is
linear in its input (no regex that backtracks over a run, no rescan per
match): a hostile output costs what reading it costs.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Sequence

import Levenshtein

from ..errors import ConfigError
from ..scoring import ScoreOptions

__all__ = [
    "as_text",
    "clean_prediction",
    "strip_thinking",
    "prepare",
    "parse_int",
    "is_repetitive",
    "MAX_INT_DIGITS",
    "keyword_hit",
    "levenshtein_score",
    "last_boxed",
    "reference_boxed",
    "normalise_answer",
    "KeywordMatcher",
    "MAX_PREDICTION_CHARS",
    "last_match",
]

MAX_PREDICTION_CHARS = 200_000
# Control characters, replacement characters and lone surrogates (which no UTF-8 file can hold).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd\ud800-\udfff]")
_SPECIAL_TOKENS = re.compile(r"<\|(?:im_end|im_start|endoftext|eot_id|end)\|>|</s>")


def as_text(prediction: object) -> str:
    """Any model output as a string, unchanged otherwise (what OpenCompass's evaluators read).

    ``None`` is empty, bytes are decoded (bad bytes become U+FFFD), a list or tuple is its first item.

    Args:
        prediction: whatever the model returned.
    """
    while isinstance(prediction, (list, tuple)):
        prediction = prediction[0] if prediction else ""
    if prediction is None:
        return ""
    if isinstance(prediction, bytes):
        return prediction.decode("utf-8", errors="replace")
    return str(prediction)


def clean_prediction(prediction: object) -> str:
    """Turn any model output into bounded, printable text without chat-template tokens (clarified scoring).

    Args:
        prediction: whatever the model returned.
    """
    text = as_text(prediction)
    if len(text) > MAX_PREDICTION_CHARS:
        text = text[:MAX_PREDICTION_CHARS]
    text = _SPECIAL_TOKENS.sub("", text)
    return _CONTROL.sub("", text)


_THINK_OPEN = re.compile(re.escape("<think>"), re.I)
_THINK_CLOSE = re.compile(re.escape("</think>"), re.I)


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last of ``pattern``'s non-overlapping matches, in one pass without a list of them all.

    Args:
        pattern: a compiled pattern.
        text: the text to search.
    """
    tail = deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


def strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks; an unterminated block eats the rest.

    A response that is only ``...</think> answer`` (template opened the tag)
    keeps what follows the closing tag. One left-to-right scan: a lazy regex is
    quadratic over thousands of unclosed tags. The tags are found case-blind on
    the text itself (indices into ``text.lower()`` drift where lowering changes
    a character's length, as for "İ").

    Args:
        text: the cleaned prediction.
    """
    kept: list[str] = []
    i = 0
    while True:
        start = _THINK_OPEN.search(text, i)
        if start is None:
            kept.append(text[i:])
            break
        kept.append(text[i : start.start()])
        end = _THINK_CLOSE.search(text, start.end())
        if end is None:
            break
        i = end.end()
    out = "".join(kept)
    last = last_match(_THINK_CLOSE, out)
    return out[last.end() :] if last is not None else out


def prepare(prediction: object, options: ScoreOptions, clean: bool = True) -> str:
    """The text a grader reads.

    Args:
        prediction: whatever the model returned.
        options: evaluator settings (``strip_think``: None strips only when ``clean``; a strip of the
            unchanged reading is OpenCompass's own, ``options.reference_strip``).
        clean: the clarified reading (bounded, printable, no chat tokens); False reads the output as
            OpenCompass's evaluators do, unchanged.

    Raises:
        ConfigError: ``strip_think=True`` on the unchanged reading without ``options.reference_strip``.
    """
    text = clean_prediction(prediction) if clean else as_text(prediction)
    strip = clean if options.strip_think is None else options.strip_think
    if not strip:
        return text
    if clean:
        return strip_thinking(text)
    if options.reference_strip is None:
        raise ConfigError(
            "strip_think=True on a reference sample is OpenCompass's extract_non_reasoning_content: pass it as "
            "ScoreOptions(reference_strip=needlebench.opencompass.outputs.reference_strip)"
        )
    return options.reference_strip(text)


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
    return KeywordMatcher(prediction, match).hit(keywords)


class KeywordMatcher:
    """A prediction prepared once for many keyword look-ups (M-RT asks for up to a dozen needles).

    Normalising a 200k-character prediction per needle would repeat the same linear pass;
    substring search (``in``) is linear in the text for any keyword.

    Args:
        prediction: the model's (cleaned) answer.
        match: ``"exact"`` or ``"normalised"``, as for ``keyword_hit``.
    """

    def __init__(self, prediction: str, match: str = "normalised") -> None:
        self.match = match
        self.text = prediction if match == "exact" else _squash(prediction)

    def hit(self, keywords: Sequence[str]) -> bool:
        """Whether any of ``keywords`` appears (empty keywords never count)."""
        if self.match == "exact":
            return any(k and k in self.text for k in keywords)
        return any(k and _squash(k) in self.text for k in keywords)


def levenshtein_score(
    prediction: str,
    reference: str,
    keywords: Sequence[str],
    alpha: float = 0.2,
    match: str = "normalised",
    matcher: KeywordMatcher | None = None,
) -> float:
    """2024 metric: 100 on a keyword hit, else partial credit by edit distance.

    score = 100 * alpha * (1 - d(P, R) / max(|P|, |R|)), with whitespace removed.
    The distance is exact and linear in P: the library's bit-parallel algorithm costs
    O(|P| * ceil(|R| / 64)), about 6 ms for a 200k-character prediction against a needle.

    Args:
        prediction: the model's answer (read here as ``match`` says).
        reference: the needle sentence.
        keywords: the needle's core keywords (a hit scores 100).
        alpha: the weight of partial credit.
        match: keyword matching, as for ``keyword_hit``; ``"exact"`` also reads the prediction unchanged
            (OpenCompass v1's ``NeedleBenchOriginEvaluator``), the other rules read ``clean_prediction``'s text.
        matcher: the prediction already prepared for keyword look-ups (reused across needles).
    """
    prediction = as_text(prediction) if match == "exact" else clean_prediction(prediction)
    hit = matcher.hit(keywords) if matcher is not None else keyword_hit(prediction, keywords, match)
    if hit:
        return 100.0
    p = _WHITESPACE.sub("", prediction)
    r = _WHITESPACE.sub("", reference)
    longest = max(len(p), len(r))
    similarity = 100 * (1 - Levenshtein.distance(p, r) / longest) if longest else 100.0
    return alpha * similarity  # OpenCompass's order of operations: the same float


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


_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"[{}]")
_WHITESPACE = re.compile(r"\s+")


def _closing_brace(text: str, start: int, stop: int) -> int:
    """Index of the ``}`` that closes a group opened just before ``start``, searching ``[start, stop)``; -1 if none."""
    if text.find("}", start, stop) < 0:
        return -1  # the common hostile case (a run of unclosed boxes) costs one C-speed scan
    depth = 1
    for m in _BRACE.finditer(text, start, stop):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return m.start()
    return -1


def last_boxed(text: str) -> str | None:
    """Content of the last balanced ``\\boxed{...}`` (``\\fbox`` too), or None.

    "Last" is by where the box opens: the latest opening whose braces balance wins, so in
    ``\\boxed{a \\boxed{b}}`` it is ``b``, and an unclosed ``\\boxed{c`` after a closed box is
    skipped. Linear time: openings are tried from the last, and each is scanned only up to the
    next opening. A group opened earlier cannot close past a later opening that never closes:
    from that opening on, the braces never fall back below its level.

    Args:
        text: the cleaned prediction.
    """
    starts = [m.end() for m in _BOX_START.finditer(text)]
    stop = len(text)
    for start in reversed(starts):
        end = _closing_brace(text, start, stop)
        if end >= 0:
            return text[start:end]
        stop = start
    return None


def reference_boxed(text: str) -> str | None:
    """The boxed answer exactly as OpenCompass's ``extract_boxed_answer(text, strip_double_curly_brace=True)`` reads it.

    OpenCompass takes the *last* ``\\boxed`` in the text (a bare mention counts; ``\\fbox`` only when
    there is no ``\\boxed`` at all), follows its braces to the ``}`` that brings the count back to 0,
    and keeps the content only if the box reads exactly ``\\boxed{...}``: ``\\boxed {x}``, ``\\fbox{x}``,
    an unterminated last box and ``\\boxed`` without a brace give None, even when an earlier box
    closes. ``{{x}}`` loses one pair of braces when the inside holds no newline (its ``^\\{(.*)\\}$``).
    One left-to-right pass from the last ``\\boxed``; no regex that can backtrack.

    Args:
        text: the prediction as the evaluator sees it.
    """
    start = text.rfind("\\boxed")
    if start < 0:  # OpenCompass then tries the last \fbox, whose content it never keeps (not "\boxed{")
        return None
    if text.find("}", start) < 0:
        return None  # a run of unclosed boxes costs one C-speed scan
    depth, end = 0, -1
    for m in _BRACE.finditer(text, start):
        if m.group() == "{":
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            end = m.start()
            break
    if end < 0 or not text.startswith("\\boxed{", start):
        return None
    answer = text[start + len("\\boxed{") : end]
    body = answer[:-1] if answer.endswith("\n") else answer
    if len(body) >= 2 and body[0] == "{" and body[-1] == "}" and "\n" not in body:
        answer = body[1:-1]
    return answer


_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox|emph)\s*\{|[{}]")


def _unwrap_latex(answer: str) -> str:
    """Remove ``\\text{...}``-style wrappers whose content holds no other brace group, innermost first.

    The same result as substituting ``\\text{([^{}]*)}`` until nothing changes (the
    fixed point), in one pass: a stack of open groups, each remembering where its
    opening token sits in the output and whether a brace survives inside it.
    (Unlike the repeated substitution, a wrapper that only forms once an inner one
    is removed, as in ``\\te\\text{}xt{a}``, stays.)
    """
    out: list[str] = []
    stack: list[list] = []  # [output index of the opening token, is a wrapper, has a brace inside]
    pos = 0
    for m in _WRAPPER.finditer(answer):
        out.append(answer[pos : m.start()])
        pos = m.end()
        token = m.group()
        if token == "}":
            if not stack:
                out.append(token)
                continue
            index, wrapper, dirty = stack.pop()
            if wrapper and not dirty:
                out[index] = ""  # drop the opening token and this closing brace
                continue
            out.append(token)
            if stack:
                stack[-1][2] = True
            continue
        stack.append([len(out), token != "{", False])
        out.append(token)
    out.append(answer[pos:])
    return "".join(out)


def normalise_answer(answer: str) -> str:
    """Strip LaTeX text wrappers, quotes and spacing; casefold (names compare this way).

    Args:
        answer: a boxed answer or a gold name.
    """
    answer = _unwrap_latex(answer)
    answer = answer.replace("\\ ", " ").replace("~", " ")
    answer = unicodedata.normalize("NFKC", answer)
    answer = answer.strip().strip("\"'`“”‘’「」『』.。,，:：;； {}")
    return _WHITESPACE.sub(" ", answer).casefold()
