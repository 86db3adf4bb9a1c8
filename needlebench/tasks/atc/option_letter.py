"""The option letter an answer names, read as OpenCompass's ``first_option_postprocess(text, "ABCD")`` reads it.

The same patterns, in the same order, with the same quirks, in linear time: each pattern is matched by a finder
that cannot backtrack over the whole text (the ATC multiple-choice grader, ``choice.grade_atc_mc``, reads it).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LETTERS", "first_option"]

LETTERS = "ABCD"

# OpenCompass's first_option_postprocess(text, options="ABCD") patterns, in order. The missing
# comma after the "故选" pattern is theirs: two patterns fused into one, kept as such.
_O = LETTERS
_OPTION_PATTERNS: tuple[str, ...] = (
    rf"答案是?\s*([{_O}])",
    rf"答案是?\s*：\s*([{_O}])",
    rf"答案是?\s*:\s*([{_O}])",
    rf"答案选项应?该?是\s*([{_O}])",
    rf"答案选项应?该?为\s*([{_O}])",
    rf"答案应该?是\s*([{_O}])",
    rf"答案应该?选\s*([{_O}])",
    rf"答案选项为?\s*：\s*([{_O}])",
    rf"答案选项为?\s+\(?\*?\*?([{_O}])\*?\*?\)?",
    rf"答案选项是?\s*:\s*([{_O}])",
    rf"答案为\s*([{_O}])",
    rf"答案选\s*([{_O}])",
    rf"选择?\s*([{_O}])",
    rf"故选?\s*([{_O}])" rf"只有选?项?\s?([{_O}])\s?是?对",
    rf"只有选?项?\s?([{_O}])\s?是?错",
    rf"只有选?项?\s?([{_O}])\s?不?正确",
    rf"只有选?项?\s?([{_O}])\s?错误",
    rf"说法不?对选?项?的?是\s?([{_O}])",
    rf"说法不?正确选?项?的?是\s?([{_O}])",
    rf"说法错误选?项?的?是\s?([{_O}])",
    rf"([{_O}])\s?是正确的",
    rf"([{_O}])\s?是正确答案",
    rf"选项\s?([{_O}])\s?正确",
    rf"所以答\s?([{_O}])",
    rf"所以\s?([{_O}][.。$]?$)",
    rf"所有\s?([{_O}][.。$]?$)",
    rf"[\s，：:,]([{_O}])[。，,\.]?$",
    rf"[\s，,：:][故即]([{_O}])[。\.]?$",
    rf"[\s，,：:]因此([{_O}])[。\.]?$",
    rf"[是为。]\s?([{_O}])[。\.]?$",
    rf"因此\s?([{_O}])[。\.]?$",
    rf"显然\s?([{_O}])[。\.]?$",
    r"答案是\s?(\S+)(?:。|$)",
    r"答案应该是\s?(\S+)(?:。|$)",
    r"答案为\s?(\S+)(?:。|$)",
    rf"(?i)ANSWER\s*:\s*([{_O}])",
    rf"[Tt]he answer is:?\s+\(?([{_O}])\)?",
    rf"[Tt]he answer is:?\s+\(?\*?\*?([{_O}])\*?\*?\)?",
    rf"[Tt]he answer is option:?\s+\(?([{_O}])\)?",
    rf"[Tt]he correct answer is:?\s+\(?([{_O}])\)?",
    rf"[Tt]he correct answer is option:?\s+\(?([{_O}])\)?",
    rf"[Tt]he correct answer is:?.*?boxed{{([{_O}])}}",
    rf"[Tt]he correct option is:?.*?boxed{{([{_O}])}}",
    rf"[Tt]he correct answer option is:?.*?boxed{{([{_O}])}}",
    rf"[Tt]he answer to the question is:?\s+\(?([{_O}])\)?",
    rf"^选项\s?([{_O}])",
    rf"^([{_O}])\s?选?项",
    rf"(\s|^)[{_O}][\s。，,：:\.$]",
    r"1.\s?(.*?)$",
    rf"1.\s?([{_O}])[.。$]?$",
    # cushion patterns
    rf"([{_O}]):",
    rf"([{_O}])",
)


# ----------------------------------------------------------------------------------------------
# Answer extraction
# ----------------------------------------------------------------------------------------------

_WS = re.compile(r"\s")
_BOXED_OPTION = re.compile(rf"boxed\{{([{LETTERS}])\}}")


def _lazy_boxed(prefix: str) -> Any:
    """``<prefix>:?.*?boxed{X}`` (DOTALL) without the regex engine's O(n^2) failure mode.

    The leftmost match starts at the first prefix; it exists iff a ``boxed{X}`` follows it,
    and the lazy ``.*?`` picks the first such box.
    """
    head = re.compile(prefix)

    def find(text: str) -> str | None:
        """The option letter in the first box after the first prefix match, or None."""
        m = head.search(text)
        if m is None:
            return None
        box = _BOXED_OPTION.search(text, m.end())
        return box.group(1) if box else None

    return find


def _answer_run(prefix: str) -> Any:
    r"""``<prefix>\s?(\S+)(?:。|$)`` on stripped text, in linear time.

    Python's backtracking engine is quadratic on a long run of prefixes; here each
    non-space run is scanned once. From the match start ``j`` the group is the whole
    run if the run reaches the end of the text, else the run up to its last 。.
    """

    def find(text: str) -> str | None:
        """The captured run after the first prefix that yields one, or None."""
        n, start, size = len(text), 0, len(prefix)
        while True:
            i = text.find(prefix, start)
            if i < 0:
                return None
            j = i + size
            if j < n and _WS.match(text, j):
                j += 1
            if j >= n or _WS.match(text, j):
                start = i + 1
                continue
            ws = _WS.search(text, j)
            end = ws.start() if ws else n
            if end == n:
                return text[j:]
            dot = text.rfind("。", j + 1, end)
            if dot > j:
                return text[j:dot]
            # Later prefixes inside this run start further right and fail the same way;
            # only one ending right before the space can reach the next run.
            start = max(i + 1, end - size)

    return find


def _regex(pattern: str, needs: str = "", tail: int = 0) -> Any:
    """A pattern searched as OpenCompass does (DOTALL; group 1, or the whole match if it is empty).

    ``needs``: a literal every match contains, checked first (a fast substring scan).
    ``tail``: for patterns anchored at the end whose matches are at most this long, only the
    last ``tail`` characters are searched (same leftmost match, no full scan).
    """
    compiled = re.compile(pattern, re.DOTALL)

    def find(text: str) -> str | None:
        """Group 1 of the pattern's first match (the whole match when group 1 is empty), or None."""
        if needs and needs not in text:
            return None
        m = compiled.search(text[-tail:] if tail else text)
        if m is None:
            return None
        return m.group(1) if m.group(1) else m.group(0)

    return find


_LEADING_OPTION = re.compile(rf"[{_O}][\s。，,：:\.$]")


def _space_or_start(text: str) -> str | None:
    r"""``(\s|^)X[...]``: only a match at the start yields a letter (group 1 is ""); any later
    match's group 1 is a space, which holds no option, so it is treated as no match."""
    m = _LEADING_OPTION.match(text)
    return m.group(0) if m else None


_END = 16  # longer than any end-anchored pattern's match
_SPECIAL = {
    r"答案是\s?(\S+)(?:。|$)": _answer_run("答案是"),
    r"答案应该是\s?(\S+)(?:。|$)": _answer_run("答案应该是"),
    r"答案为\s?(\S+)(?:。|$)": _answer_run("答案为"),
    rf"[Tt]he correct answer is:?.*?boxed{{([{_O}])}}": _lazy_boxed("[Tt]he correct answer is"),
    rf"[Tt]he correct option is:?.*?boxed{{([{_O}])}}": _lazy_boxed("[Tt]he correct option is"),
    rf"[Tt]he correct answer option is:?.*?boxed{{([{_O}])}}": _lazy_boxed("[Tt]he correct answer option is"),
    rf"(\s|^)[{_O}][\s。，,：:\.$]": _space_or_start,
}
_NEEDS = {
    rf"([{_O}])\s?是正确的": "是正确的",
    rf"([{_O}])\s?是正确答案": "是正确答案",
    rf"[Tt]he answer is:?\s+\(?([{_O}])\)?": "he answer is",
    rf"[Tt]he answer is:?\s+\(?\*?\*?([{_O}])\*?\*?\)?": "he answer is",
    rf"[Tt]he answer is option:?\s+\(?([{_O}])\)?": "he answer is option",
    rf"[Tt]he correct answer is:?\s+\(?([{_O}])\)?": "he correct answer is",
    rf"[Tt]he correct answer is option:?\s+\(?([{_O}])\)?": "he correct answer is option",
    rf"[Tt]he answer to the question is:?\s+\(?([{_O}])\)?": "he answer to the question is",
    rf"([{_O}]):": ":",
}
_TAIL_ANCHORED = frozenset(p for p in _OPTION_PATTERNS if p.endswith("$") and "*" not in p and "+" not in p)
_FINDERS = tuple(
    _SPECIAL.get(p) or _regex(p, _NEEDS.get(p, ""), _END if p in _TAIL_ANCHORED else 0) for p in _OPTION_PATTERNS
)


def first_option(text: str) -> str:
    """The option letter OpenCompass's ``first_option_postprocess(text, "ABCD")`` returns, or "".

    Same patterns, same order and same quirks (the first pattern that matches wins, and within
    its match the first of A, B, C, D present, in that order, not by position), in linear time.
    """
    text = text.strip()
    if not any(letter in text for letter in LETTERS):
        return ""  # every outcome is a substring of the text
    for find in _FINDERS:
        found = find(text)
        if found:
            for letter in LETTERS:
                if letter in found:
                    return letter
    return ""
