"""An independent ATC / M-RS solver that reads only the prompt text.

It knows English and Chinese kinship words and their generation counts,
nothing of the generator's templates: in each statement the younger person
is the one whose possessive precedes the relationship word, the elder is the
other name. It rebuilds the chain and answers all four question types.
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
EN_NAME = r"[A-Z][a-zA-Z'\-]+ [A-Z][a-zA-Z'\-]+"
ZH_NAME = r"[\u4e00-\u9fff]{3}"


def _en_edges(text: str) -> list[tuple[str, str, int]]:
    edges = []
    term_alt = "|".join(sorted(EN_TERMS, key=len, reverse=True))
    for sentence in re.split(r"(?<=\.)\s+", text):
        m = re.search(rf"({EN_NAME})'s ({term_alt})\b", sentence)
        if not m:
            continue
        younger, term = m.group(1), m.group(2)
        others = {n.removesuffix("'s") for n in re.findall(EN_NAME, sentence)} - {younger}
        if len(others) != 1:
            continue
        edges.append((others.pop(), younger, EN_TERMS[term]))
    return edges


def _zh_edges(text: str) -> list[tuple[str, str, int]]:
    edges = []
    term_alt = "|".join(ZH_TERMS)
    for sentence in re.split(r"(?<=。)", text):
        m = re.search(rf"({ZH_NAME})的({term_alt})", sentence)
        if not m:
            continue
        younger, term = m.group(1), m.group(2)
        # the elder is the three-character run that is neither the younger nor made of function words
        stripped = sentence
        for word in sorted(ZH_TERMS, key=len, reverse=True):
            stripped = stripped.replace(word, "|")
        for word in (
            "不仅是",
            "也是",
            "既是",
            "作为",
            "身为",
            "一直是",
            "最信任的人",
            "的成长过程中",
            "的成长影响很大",
            "的老师",
            "的监护人",
            "教会了",
            "读书写字",
            "在",
            "对",
            "是",
            "的",
        ):
            stripped = stripped.replace(word, "|")
        names = {x for x in re.split(r"[^\u4e00-\u9fff]+", stripped) if re.fullmatch(ZH_NAME, x)}
        names.discard(younger)
        if len(names) != 1:
            continue
        edges.append((names.pop(), younger, ZH_TERMS[term]))
    return edges


def solve(prompt: str, lang: str) -> str:
    """Answer the prompt's kinship question from its text alone."""
    # worked examples (bulleted lines) are not part of this family
    body = "\n".join(line for line in prompt.splitlines() if not line.lstrip().startswith("- "))
    edges = _en_edges(body) if lang == "en" else _zh_edges(body)
    parent = {younger: (elder, g) for elder, younger, g in edges}
    child = {elder: (younger, g) for elder, younger, g in edges}
    q = [line for line in body.splitlines() if re.search(r"'[^']+'", line)][-1]
    quoted = re.findall(r"'([^']+)'", q)

    def up(person: str) -> tuple[str, int]:
        total = 0
        while person in parent:
            person, g = parent[person]
            total += g
        return person, total

    def down(person: str) -> tuple[str, int]:
        total = 0
        while person in child:
            person, g = child[person]
            total += g
        return person, total

    if "how many generations" in q or "相隔多少代" in q:
        old, young = quoted[0], quoted[1]
        top, dist = up(young)
        assert top == old
        return str(dist)
    if "descendant" in q or "后代" in q:
        bottom, _ = down(quoted[0])
        return bottom
    top, _ = up(quoted[0])
    return top
