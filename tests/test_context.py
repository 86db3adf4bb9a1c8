"""The length contract, needle placement and wrap-around, measured with real cl100k tokens."""

from __future__ import annotations

import re

import pytest

from needlebench.corpora import load_corpus
from needlebench.haystack import build_haystack, tokenize_corpus
from needlebench.sparse import SparseParams, generate_mrt, generate_srt
from needlebench.tokenizer import get_encoding

ENC = get_encoding("cl100k_base")
_EN_END = re.compile(r"[.!?][\"')\]]*$")


def _tolerance(budget: int) -> int:
    return max(64, int(0.02 * budget))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("task", ["srt", "mrt"])
def test_prompt_fits_budget_and_is_close(lang: str, task: str) -> None:
    gen = generate_srt if task == "srt" else generate_mrt
    p = SparseParams(
        lang=lang,
        lengths=(1000, 2000, 8000, 32000),
        depths=(0, 30, 100),
        repeats=2,
        buffer=500 if lang == "en" else 200,
    )
    for s in gen(p):
        real = len(ENC.encode_ordinary(s.prompt))
        budget = s.meta["length"] - s.meta["buffer"]
        assert real == s.meta["prompt_tokens"]
        assert real <= budget
        assert budget - real <= _tolerance(budget), (s.id, real, budget)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_million_tokens_wraps_around(lang: str) -> None:
    tc = tokenize_corpus(load_corpus(lang))
    p = SparseParams(lang=lang, lengths=(1_000_000,), depths=(50,), repeats=1, buffer=3000 if lang == "en" else 200)
    (s,) = list(generate_srt(p))
    real = len(ENC.encode_ordinary(s.prompt))
    budget = 1_000_000 - s.meta["buffer"]
    assert real == s.meta["prompt_tokens"] <= budget
    assert budget - real <= _tolerance(budget)
    if tc.total_tokens < 1_000_000:  # the English corpus is ~0.65M tokens: it must have wrapped
        assert s.meta["haystack_tokens"] > tc.total_tokens


def test_english_1k_in_32k_suite_still_has_haystack() -> None:
    """OpenCompass's 3000-token English buffer leaves its 1k prompts empty; ours keep filler."""
    from needlebench.opencompass.configs import needlebench_datasets

    (cfg,) = needlebench_datasets(suite="32k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[50], repeats=1)
    assert cfg["buffer"] == {1000: 250}
    params = {k: cfg[k] for k in ("lang", "lengths", "depths", "repeats", "buffer")}
    (s,) = list(
        generate_srt(SparseParams(**{**params, "lengths": tuple(params["lengths"]), "depths": tuple(params["depths"])}))
    )
    doc = _document(s.prompt, "en").replace(s.gold["needle"], "")
    assert len(ENC.encode_ordinary(doc)) >= 500
    assert s.meta["prompt_tokens"] <= 750


def test_buffer_shrinks_rather_than_eat_the_haystack() -> None:
    p = SparseParams(lang="en", lengths=(4000,), depths=(50,), repeats=1, buffer=3900)
    (s,) = list(generate_srt(p))
    assert s.meta["buffer_shrunk"] is True and s.meta["buffer"] < 3900
    assert s.meta["haystack_tokens"] >= 0.24 * 4000


def _document(prompt: str, lang: str) -> str:
    open_, close = ("<Document>\n", "\n</Document>") if lang == "en" else ("<文档>\n", "\n</文档>")
    return prompt.split(open_, 1)[1].rsplit(close, 1)[0]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_needles_start_at_sentence_boundaries_near_their_depth(lang: str) -> None:
    # Chinese news sentences average ~60 tokens (2% of a 4k haystack), so 2 points needs >= 8k there
    lengths = (4000, 16000, 64000) if lang == "en" else (8000, 16000, 64000)
    p = SparseParams(
        lang=lang, lengths=lengths, depths=tuple(range(0, 101, 10)), repeats=2, buffer=500 if lang == "en" else 200
    )
    for s in generate_srt(p):
        doc = _document(s.prompt, lang)
        needle = s.gold["needle"]
        at = doc.index(needle)
        before = doc[:at].rstrip(" ")
        if before:
            if lang == "en":
                assert before.endswith("\n") or _EN_END.search(before), (s.id, before[-40:])
            else:
                assert before[-1] in "。！？\n”’」』）", (s.id, before[-20:])
        # realised depth measured independently: filler tokens before the needle / all filler tokens
        filler_before = len(ENC.encode_ordinary(doc[:at]))
        filler_total = len(ENC.encode_ordinary(doc.replace(needle, "")))
        independent = 100.0 * filler_before / filler_total
        assert abs(independent - s.meta["realised_depth"]) <= 0.5, (s.id, independent, s.meta["realised_depth"])
        assert abs(s.meta["realised_depth"] - s.meta["depth"]) <= 2.0, (s.id, s.meta["realised_depth"])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_short_prompts_place_needles_within_one_sentence_of_target(lang: str) -> None:
    """At 1k the haystack has ~10-20 sentences; the needle sits at the nearest sentence start."""
    p = SparseParams(lang=lang, lengths=(1000,), depths=tuple(range(0, 101, 10)), repeats=3, buffer=200)
    hay_tc = tokenize_corpus(load_corpus(lang))
    for s in generate_srt(p):
        hay = build_haystack(hay_tc, 1000, "haystack", lang, s.meta["repeat"], 0)
        starts = [int(x) for x in hay.sentence_starts if x <= s.meta["haystack_tokens"]]
        target = s.meta["depth"] / 100 * s.meta["haystack_tokens"]
        nearest = min(starts, key=lambda k: abs(k - target))
        realised_tokens = s.meta["realised_depth"] / 100 * s.meta["haystack_tokens"]
        assert abs(realised_tokens - nearest) <= 1.0
        if lang == "en":
            assert abs(s.meta["realised_depth"] - s.meta["depth"]) <= 5.0


def test_same_repeat_shares_haystack_across_lengths_and_depths() -> None:
    p = SparseParams(lang="en", lengths=(2000, 8000), depths=(0, 100), repeats=2, buffer=200)
    samples = list(generate_srt(p))
    docs = {
        (s.meta["repeat"], s.meta["length"], s.meta["depth"]): _document(s.prompt, "en").replace(s.gold["needle"], "")
        for s in samples
    }
    short = docs[(0, 2000, 0)].strip()
    assert docs[(0, 8000, 100)].strip().startswith(short[:3000])
    assert docs[(0, 2000, 100)].strip()[:2000] == short[:2000]
    assert docs[(1, 2000, 0)][:500] != docs[(0, 2000, 0)][:500]  # repeats differ
    needles = {s.meta["needles"][0] for s in samples}
    assert len(needles) >= 3  # needles vary across repeats and lengths


def test_mrt_needles_distinct_and_ordered_by_depth() -> None:
    p = SparseParams(lang="zh", lengths=(8000,), depths=tuple(range(0, 101, 10)), repeats=2, buffer=200)
    for s in generate_mrt(p):
        doc = _document(s.prompt, "zh")
        positions = [doc.index(n["needle"]) for n in s.gold["needles"]]
        assert positions == sorted(positions)
        keys = [n["keywords"][0] for n in s.gold["needles"]]
        assert len(set(keys)) == len(keys) == 11
        assert "1. " in s.prompt and "11. " in s.prompt and "、" not in s.prompt.split("</文档>")[1][:0]
