"""An independent ATC / M-RS solver that reads only the prompt text.

It knows English and Chinese kinship words and their generation counts, and
how a kinship sentence names the younger person, nothing of the generator's
code: in most statements the younger person is the one whose possessive
precedes the relationship word ("B's mother", "B的母亲"); in the "friend" and
"mentor" forms there is no possessive and the younger is the person the
sentence is "for" ("For B, A is not just a mother, ...", "A对B来说，不只是一个
母亲，..."). The elder is the other name. Statements may be joined with no
space at all, so English sentences end at every "." and Chinese ones at "。".
It rebuilds the chain and answers all four question types, in our wording and
in OpenCompass's.
"""

from __future__ import annotations

import re

EN_TERMS = {
    "maternal grandmother": 2,
    "maternal grandfather": 2,
    "paternal grandmother": 2,
    "paternal grandfather": 2,
    "grandmother": 2,
    "grandfather": 2,
    "mother": 1,
    "father": 1,
    "mom": 1,
    "dad": 1,
}
ZH_TERMS = {
    "爷爷": 2,
    "奶奶": 2,
    "姥姥": 2,
    "姥爷": 2,
    "外公": 2,
    "外婆": 2,
    "父亲": 1,
    "母亲": 1,
    "爸爸": 1,
    "妈妈": 1,
}
# capitalised words that open a sentence or clause and are never a first name
_EN_NOT_A_NAME = ("During", "For", "As", "In", "If", "The", "Given", "Now", "So", "Then", "And", "But", "Example")
EN_NAME = r"\b(?!(?:" + "|".join(_EN_NOT_A_NAME) + r")\b)[A-Z][a-zA-Z'\-]+ [A-Z][a-zA-Z'\-]+"
ZH_NAME = r"[\u4e00-\u9fff]{3}"
_EN_TERM_ALT = "|".join(sorted(EN_TERMS, key=len, reverse=True))
_ZH_TERM_ALT = "|".join(ZH_TERMS)
# words around the names in Chinese kinship sentences (ours and OpenCompass's), longest first
_ZH_FUNCTION_WORDS = sorted(
    (
        "不仅仅是",
        "不只是一个",
        "还是一个朋友",
        "不仅是",
        "也是",
        "既是",
        "还是",
        "作为",
        "身为",
        "一直是",
        "最信任的人",
        "的成长过程中",
        "的成长影响很大",
        "的成长有重要影响",
        "的老师",
        "的监护人",
        "的榜样",
        "教会了",
        "读书写字",
        "来说",
        "在",
        "对",
        "是",
        "的",
    ),
    key=len,
    reverse=True,
)
# a worked example of the prompt, not part of this family
_EXAMPLE_LINE = re.compile(r"^\s*(?:- |Example \d|例子\d)")


def _en_edges(text: str) -> list[tuple[str, str, int]]:
    edges = []
    for sentence in re.split(r"(?<=\.)|\n", text):
        m = re.search(rf"({EN_NAME})'s ({_EN_TERM_ALT})\b", sentence)
        if m:
            younger, term = m.group(1), m.group(2)
        else:  # "For B, A is not just a mother, but also a friend." / "... more than just a mother; ..."
            m = re.match(rf"\s*For ({EN_NAME}), ", sentence)
            t = re.search(rf"\b({_EN_TERM_ALT})\b", sentence)
            if not (m and t):
                continue
            younger, term = m.group(1), t.group(1)
        others = {n.removesuffix("'s") for n in re.findall(EN_NAME, sentence)} - {younger}
        if len(others) != 1:
            continue
        edges.append((others.pop(), younger, EN_TERMS[term]))
    return edges


def _zh_edges(text: str) -> list[tuple[str, str, int]]:
    edges = []
    for sentence in re.split(r"(?<=。)|\n", text):
        m = re.search(rf"({ZH_NAME})的({_ZH_TERM_ALT})", sentence)
        if m:
            younger, term = m.group(1), m.group(2)
        else:  # "A对B来说，不只是一个母亲，还是一个朋友。"
            m = re.search(rf"({ZH_NAME})来说", sentence)
            t = re.search(_ZH_TERM_ALT, sentence)
            if not (m and t):
                continue
            younger, term = m.group(1), t.group(0)
        # the elder is the three-character run that is neither the younger nor made of function words
        stripped = sentence.replace(younger, "|")
        for word in (*sorted(ZH_TERMS, key=len, reverse=True), *_ZH_FUNCTION_WORDS):
            stripped = stripped.replace(word, "|")
        names = {x for x in re.split(r"[^\u4e00-\u9fff]+", stripped) if re.fullmatch(ZH_NAME, x)}
        if len(names) != 1:
            continue
        edges.append((names.pop(), younger, ZH_TERMS[term]))
    return edges


def solve(prompt: str, lang: str) -> str:
    """Answer the prompt's kinship question from its text alone."""
    body = "\n".join(line for line in prompt.splitlines() if not _EXAMPLE_LINE.match(line))
    edges = _en_edges(body) if lang == "en" else _zh_edges(body)
    parent = {younger: (elder, g) for elder, younger, g in edges}
    child = {elder: (younger, g) for elder, younger, g in edges}
    name = EN_NAME if lang == "en" else ZH_NAME
    # the question: the last line that quotes a person's name
    q = [line for line in body.splitlines() if re.search(rf"'{name}'", line)][-1]
    quoted = re.findall(rf"'({name})'", q)

    def up(person: str) -> tuple[str, int]:
        total = 0
        while person in parent:
            person, g = parent[person]
            total += g
        return person, total

    def climb(person: str, ancestor: str) -> int | None:
        total = 0
        while person != ancestor:
            if person not in parent:
                return None
            person, g = parent[person]
            total += g
        return total

    def down(person: str) -> tuple[str, int]:
        total = 0
        while person in child:
            person, g = child[person]
            total += g
        return person, total

    if any(w in q for w in ("how many generations", "relationship distance", "相隔多少代", "关系距离")):
        a, b = quoted[0], quoted[1]
        dist = climb(b, a)
        if dist is None:  # the elder may be named second
            dist = climb(a, b)
        assert dist is not None, (a, b)
        return str(dist)
    if any(w in q for w in ("descendant", "后代", "子孙")):
        bottom, _ = down(quoted[0])
        return bottom
    top, _ = up(quoted[0])
    return top
