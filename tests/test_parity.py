"""ATC statements use every one of OpenCompass 0.5.4's sentence templates.

Whole-prompt parity (S-RT, M-RT, M-RS, ATC, byte for byte from the same data
files) lives in ``test_differential_prompts.py``; the masked comparisons that
were here could not see the haystack, the needles or the names.
"""

from __future__ import annotations

import re

import pytest

from needlebench.tasks import get_task, make_params

_STORY = {
    "en": ("provided below:\n", "\n\nGiven the scrambled"),
    "zh": ("打乱的家族关系文本如下：\n", "\n\n在上面提供的"),
}


def _ours(task: str, **kwargs: object) -> list:
    return list(get_task(task).generate(make_params(task, **kwargs)))


def _template_patterns(lang: str) -> list[re.Pattern[str]]:
    """OpenCompass's own sentence templates as regexes (any name, any of its terms)."""
    from opencompass.datasets.needlebench_v2 import atc

    templates = atc.relationship_templates_en if lang == "en" else atc.relationship_templates_zh_CN
    terms = atc.relationship_terms_en if lang == "en" else atc.relationship_terms_zh_CN
    term_alt = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    out = []
    for t in templates:
        pattern = re.escape(t).replace(r"\{A\}", "(.+?)").replace(r"\{B\}", "(.+?)")
        out.append(re.compile(pattern.replace(r"\{relationship\}", f"(?:{term_alt})")))
    return out


def _statements(sample: object) -> list[str]:
    """Our chain's statements in presented order, rebuilt from the prompt story (one per link)."""
    lang = sample.lang  # type: ignore[attr-defined]
    start, end = _STORY[lang]
    story = sample.prompt.split(start, 1)[1].split(end, 1)[0]  # type: ignore[attr-defined]
    names = sample.gold["chain_names"]  # type: ignore[attr-defined]
    out, rest = [], story
    while rest:
        cut = _first_end(rest, names, lang)
        out.append(rest[:cut])
        rest = rest[cut:]
    return out


def _first_end(text: str, names: list[str], lang: str) -> int:
    """Where the first statement of ``text`` ends: its full stop (names hold none)."""
    return text.index("。" if lang == "zh" else ".") + 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_atc_statements_use_opencompass_templates(lang: str) -> None:
    patterns = _template_patterns(lang)
    samples = _ours("atc", lang=lang, needle_counts=(64,), question_types=("eldest_ancestor",), repeats=2)
    forms_seen: set[int] = set()
    for s in samples:
        for statement in _statements(s):
            hits = [i for i, p in enumerate(patterns) if p.fullmatch(statement)]
            assert hits, statement
            forms_seen.update(hits)
    assert forms_seen == set(range(len(patterns)))  # every template, the "friend" form included
