"""Reading a NeedleChain answer: the value it states and the names its explanation mentions, in linear time.

``parse_answer`` reads the clarified protocol's answer (the first number after the last ``## Answer:`` marker);
``released_value`` reads it as the released evaluator does; ``mentioned_positions`` says which of the chain's
names the explanation mentions and ``needed_positions`` which it must (the grader, ``task.grade_needlechain``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from ...grading.matching import last_match

__all__ = [
    "INT_DIGIT_LIMIT",
    "RELEASED_MARKER",
    "mentioned_positions",
    "needed_positions",
    "parse_answer",
    "released_value",
]

_NUMBER = re.compile(r"-?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?")
_DIGIT = re.compile(r"\d")
_MARKER = re.compile(r"##\s*answer\s*:", re.I)
MAX_NUMBER_CHARS = 64  # longer than any salary or total; Fraction() of a megabyte of digits is quadratic


def _first_number(tail: str) -> re.Match[str] | None:
    """``_NUMBER.search(tail)`` in linear time.

    The regex's ``\\s*`` before the digits makes a plain search quadratic over a long run of
    spaces with no digit after it. The leftmost match always has its digits at the first
    digit of the text, so the start is found by stepping back over the optional
    ``-``, ``$`` and whitespace, and matched from there once.
    """
    digit = _DIGIT.search(tail)
    if digit is None:
        return None
    start = len(tail[: digit.start()].rstrip())
    if start and tail[start - 1] == "$":
        start -= 1
    if start and tail[start - 1] == "-":
        start -= 1
    return _NUMBER.match(tail, start)


def parse_answer(text: str) -> tuple[Fraction | None, str | None]:
    """The first number after the last '## Answer:' marker, or (None, why not).

    Accepts ``$``, thousands separators, decimals and simple fractions; a
    multiplier or percentage ("4x", "50%") is no determinate value, and a number
    longer than ``MAX_NUMBER_CHARS`` is no number. Linear in the text.

    Args:
        text: the prepared response.
    """
    last = last_match(_MARKER, text)
    if last is None:
        return None, "no_marker"
    tail = text[last.end() :]
    m = _first_number(tail)
    if not m:
        return None, "no_number"
    if tail[m.end() : m.end() + 2].lstrip()[:1] in ("x", "X", "×", "%"):
        return None, "indeterminate"
    raw = m.group().replace("$", "").replace(",", "").replace(" ", "")
    if len(raw) > MAX_NUMBER_CHARS:
        return None, "no_number"
    try:
        if "/" in raw:
            num, den = raw.split("/")
            return Fraction(num) / Fraction(den), None
        return Fraction(raw), None
    except (ValueError, ZeroDivisionError):
        return None, "no_number"


RELEASED_MARKER = "## Answer:"
# The released scorer's integer: a run of digits, or 1-3 digits with ",ddd" groups, on word boundaries.
_RELEASED_INTEGER = re.compile(r"\b(?:\d{1,3}(?:,\d{3})+|\d+)\b")
_DECIMALS = re.compile(r"\.(\d+)")
INT_DIGIT_LIMIT = 4300  # Python's int() refuses longer digit strings (sys.int_info.default_max_str_digits)


def released_value(text: str) -> tuple[Fraction | None, str | None]:
    """The value the answer states, found where the released ``evaluate.py`` finds it, or (None, why not).

    The released scorer keeps what follows the last ``## Answer:`` (the whole response without one),
    removes spaces and newlines, and takes the first integer on word boundaries (``1,600`` is 1600;
    ``x1600`` and ``1600x`` hold none, as the letters touch the digits). It then truncates both that
    integer and the gold with ``int()``; we keep the decimals the answer writes right after the
    integer (``$12.5`` states 12.5) and compare exactly, so a fractional gold is neither given away to
    ``12`` nor unreachable. Linear in the text.

    Args:
        text: the response as read for scoring.

    Returns:
        ``(value, None)``, or ``(None, "no_number")`` when no integer is found (or its significant digits,
        leading zeros of the integer and trailing zeros of the decimals aside, are more than
        ``MAX_NUMBER_CHARS``: no salary or total is that long).
    """
    at = text.rfind(RELEASED_MARKER)
    tail = text[at + len(RELEASED_MARKER) :] if at >= 0 else text
    tail = tail.replace("\n", "").replace(" ", "")
    m = _RELEASED_INTEGER.search(tail)
    if m is None:
        return None, "no_number"
    # leading zeros of the integer and trailing zeros of the decimals change no value: "3200." followed by
    # seventy zeros states 3200, as the released scorer reads it, however long the written number is
    digits = m.group().replace(",", "").lstrip("0") or "0"
    decimals = _DECIMALS.match(tail, m.end())
    fraction = decimals.group(1).rstrip("0") if decimals else ""
    if len(digits) + len(fraction) > MAX_NUMBER_CHARS:
        return None, "no_number"
    value = Fraction(int(digits))
    if fraction:
        value += Fraction(int(fraction), 10 ** len(fraction))
    return value, None


# Words and single punctuation marks: a name matches only as whole tokens, so "Arianna" is not
# found inside "Marianna", while "Ryker's" and "Mary-Jane" still match.
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.casefold()))


def mentioned_positions(text: str, names: Sequence[str]) -> list[bool]:
    """Which chain names (reasoning order) the response mentions, on word boundaries, any case.

    A full name ("First Last") also counts as mentioned by its first name
    alone when no other chain name contains that word. Linear in the
    response: one tokenisation, one set of its tokens, and n-grams only for
    the name lengths whose every word occurs at all.

    Args:
        text: the prepared response.
        names: the chain's names in reasoning order.
    """
    words = [name.split() for name in names]
    owners = Counter(w for ws in words for w in {x.casefold() for x in ws})
    keys: list[list[tuple[str, ...]]] = []
    for ws in words:
        seqs = [_tokens(" ".join(ws))]
        if len(ws) > 1 and owners[ws[0].casefold()] == 1:
            seqs.append(_tokens(ws[0]))
        keys.append([s for s in seqs if s])
    tokens = _TOKEN.findall(text.casefold())
    present = set(tokens)
    candidates = {s for seqs in keys for s in seqs if present.issuperset(s)}
    grams: set[tuple[str, ...]] = set()  # a one-word name is found once its word is present
    for length in {len(s) for s in candidates} - {1}:
        grams.update(zip(*(itertools.islice(tokens, i, None) for i in range(length))))
    return [any(s in candidates and (len(s) == 1 or s in grams) for s in seqs) for seqs in keys]


def needed_positions(gold: dict) -> list[int]:
    """0-based reasoning positions whose names a sound explanation must mention.

    Every name for the chains and for NeedleStack's total; only the asked
    person for NeedleStack's single question (the rest is haystack).
    """
    names = gold["names"]
    if gold["variant"] == "stack" and gold["question"] == "single":
        return [names.index(gold["asked"])]
    return list(range(len(names)))
