"""OpenCompass's haystack algorithm, written our way: document order, cut and needle insertion points.

``opencompass.datasets.needlebench_v2`` builds a prompt like this: the corpus
documents are shuffled with OpenCompass's global ``seed(counter)`` then ``shuffle(lines)`` on
one list, so repeat ``r``'s order is the shuffles of repeats 0..r applied in
turn; each document is encoded on its own and the token lists are joined with
no separator until they reach the target; the haystack is cut at exactly the
target token count; the needles' tokens go in at ``int(len * depth / 100)``
and the whole token list is decoded.

We reproduce those bytes (``protocol="reference"``) with one fix that
removes a measurement defect (``../shared/spec/needlebench.md`` section 8,
docs/protocol/differences.md): an
insertion point that would split a word or a multi-byte character moves to
the nearest token boundary that splits neither (:func:`safe_boundary`), not
to a sentence start. M-RS needles go where OpenCompass puts them
(:func:`opencompass_chain_positions`, its double-counted spacing included: it
moves a needle, not what is asked); the spacing it intended is the
``placement="spaced"`` option (:func:`chain_positions`).

The draws that decide the bytes use a private ``random.Random(counter)``,
the same sequence as OpenCompass's global ``seed(counter)``, never
the global state.
"""

from __future__ import annotations

import functools
import random
import unicodedata
from collections.abc import Sequence

from .haystack import Haystack

__all__ = [
    "document_order",
    "depth_index",
    "safe_boundary",
    "splits_text",
    "chain_positions",
    "opencompass_chain_positions",
]


@functools.lru_cache(maxsize=64)
def document_order(count: int, repeat: int) -> tuple[int, ...]:
    """Repeat ``repeat``'s document order: ``Random(c).shuffle`` for c = 0..repeat, applied to one list in turn.

    OpenCompass shuffles the same list in place for every repeat, so orders compound; memoised per
    (count, repeat), each repeat costs one shuffle on top of the previous repeat's order.

    Args:
        count: documents in the corpus file.
        repeat: the repeat number (OpenCompass's ``counter``).
    """
    order = list(document_order(count, repeat - 1)) if repeat > 0 else list(range(count))
    random.Random(repeat).shuffle(order)
    return tuple(order)


def depth_index(tokens: int, depth: float) -> int:
    """OpenCompass's insertion point: ``int(tokens * (depth / 100))``.

    Args:
        tokens: haystack tokens.
        depth: the depth in percent.
    """
    return int(tokens * (depth / 100))


def _word_char(ch: str) -> bool:
    """A letter or digit of a script that writes words with spaces (a CJK character is a word on its own)."""
    return ch.isalnum() and unicodedata.east_asian_width(ch) not in ("W", "F")


def splits_text(hay: Haystack, k: int, cut: int) -> bool:
    """Whether inserting text after the first ``k`` haystack tokens splits a character or a word.

    The ends of the cut haystack never split anything.

    Args:
        hay: the haystack.
        k: the token boundary.
        cut: haystack tokens kept.
    """
    if k <= 0 or k >= cut:
        return False
    off = hay.offset(k)
    data = hay.data
    if data[off] & 0xC0 == 0x80:
        return True  # inside a multi-byte character
    start = off - 1
    while start > 0 and data[start] & 0xC0 == 0x80:
        start -= 1
    before = data[start:off].decode("utf-8", errors="replace")
    end = off + 1
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end += 1
    after = data[off:end].decode("utf-8", errors="replace")
    return _word_char(before) and _word_char(after)


def safe_boundary(hay: Haystack, k: int, cut: int) -> int:
    """The token boundary nearest ``k`` (the earlier one on a tie) that splits neither a word nor a character.

    OpenCompass inserts needle tokens at a raw token index; cl100k splits words into several tokens and a
    Chinese character into up to three, so the raw index can land inside either. Moving to the nearest
    boundary that splits nothing is the smallest change that removes the defect; the walk is bounded by
    the length of one word.

    Args:
        hay: the haystack.
        k: the requested token index (0..cut).
        cut: haystack tokens kept.
    """
    k = max(0, min(k, cut))
    for step in range(cut + 1):
        for candidate in (k - step, k + step):
            if 0 <= candidate <= cut and not splits_text(hay, candidate, cut):
                return candidate
    return k  # pragma: no cover - 0 and cut never split


def opencompass_chain_positions(tokens: int, depth: float, needle_tokens: Sequence[int], diff: float) -> list[int]:
    """M-RS insertion points in haystack tokens, as OpenCompass's ``multi.py`` computes them (v2's kinship
    form and v1's multi-hop form place their needles the same way).

    It puts the first needle at ``int(tokens * depth / 100)`` and each next one at
    ``int(previous + len(previous needle) + tokens * diff / 100)``, capped at ``tokens`` plus the needles
    before it, then inserts the needles in turn, shifting every later point by each inserted needle's
    length. Counted in haystack tokens, a needle therefore sits the previous needle's length further than
    ``diff`` percent (the length is counted once in the sum and once by the shift), and a point past the
    haystack's end appends the needle there (Python slicing), in chain order.

    Args:
        tokens: haystack tokens.
        depth: the first needle's depth in percent.
        needle_tokens: each needle's token count, in insertion order.
        diff: percent of the haystack OpenCompass puts between consecutive needles (its ``diff``).
    """
    points: list[int] = []
    before = 0  # tokens of the needles inserted before this one
    for i, size in enumerate(needle_tokens):
        if i == 0:
            point = depth_index(tokens, depth)
        else:
            point = int(points[-1] + needle_tokens[i - 1] + tokens * (diff / 100))
        points.append(min(point, tokens + before))
        before += size
    return [min(point, tokens) for point in points]


def chain_positions(tokens: int, depth: float, count: int, diff: float) -> list[int]:
    """M-RS insertion points in haystack tokens: the first at the depth, each next ``diff`` percent further.

    The spacing OpenCompass's ``multi.py`` intends (``placement="spaced"``): it computes
    ``int(previous + len(previous needle) + tokens * diff / 100)`` and then shifts every later point by the
    previous needle's length again (:func:`opencompass_chain_positions`), so the gap holds the needle's
    length once too often. Here that first count is dropped; the cap (the end of the haystack) stays.

    Args:
        tokens: haystack tokens.
        depth: the first needle's depth in percent.
        count: needles in the chain.
        diff: percent of the haystack between consecutive needles.
    """
    points: list[int] = []
    for i in range(count):
        point = depth_index(tokens, depth) if i == 0 else int(points[-1] + tokens * (diff / 100))
        points.append(min(point, tokens))
    return points
