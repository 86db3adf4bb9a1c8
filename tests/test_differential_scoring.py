"""Differential scoring: every generated output gets OpenCompass 0.5.4's per-sample score under reference.

For each task family, golds come from our own generators (small parameters) and at least
``PER_FAMILY`` outputs are generated around them (``prediction_variants``: right answers, near
misses, formatting variants, think blocks, chat tokens, truncations, hostile texts). Each output is
scored twice: by OpenCompass's evaluator and post-processor, imported from the installed package
and configured as its NeedleBench configs configure them, and by our grader with the sample's
reference gold. A disagreement fails the test unless it is a listed exception
(``EXCEPTIONS``: none today); the counts per family and per exception are printed.

Which OpenCompass code scores which family (the configs under ``configs/datasets/needlebench_v2``
and ``configs/datasets/needlebench``):

* v2 S-RT: ``NeedleBenchOriginEvaluator`` (keyword substring), no post-processing.
* v2 M-RT: ``NeedleBenchParallelEvaluator`` (share of keywords found).
* v2 M-RS and ATC: ``needlebench_atc_postprocess_v2`` then ``NeedleBenchATCEvaluator``.
* v1 S-RT: v1 ``NeedleBenchOriginEvaluator`` (Levenshtein partial credit, ``use_trim=False``).
* v1 M-RT: v1 ``NeedleBenchParallelEvaluator`` (keyword only).
* v1 M-RS: ``NeedleBenchMultiEvaluator`` (share of the answer's lowercased words).
* v1 ATC multiple choice: ``first_option_postprocess(options="ABCD")`` then ``CircularEvaluator``.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stdout
from fractions import Fraction
from pathlib import Path
from typing import Any

import Levenshtein
import pytest

pytest.importorskip("opencompass")

from opencompass.datasets.needlebench import multi as oc_v1_multi  # noqa: E402
from opencompass.datasets.needlebench import origin as oc_v1_origin  # noqa: E402
from opencompass.datasets.needlebench import parallel as oc_v1_parallel  # noqa: E402
from opencompass.datasets.needlebench_v2 import origin as oc_origin  # noqa: E402
from opencompass.datasets.needlebench_v2 import parallel as oc_parallel  # noqa: E402
from opencompass.datasets.needlebench_v2.atc import (  # noqa: E402
    NeedleBenchATCEvaluator,
    needlebench_atc_postprocess_v2,
)
from opencompass.openicl.icl_evaluator import CircularEvaluator  # noqa: E402
from opencompass.utils.text_postprocessors import extract_non_reasoning_content, first_option_postprocess  # noqa: E402
from prediction_variants import boxed_outputs, chain_outputs, keyword_outputs, letter_outputs  # noqa: E402

from needlebench.record import GradedSample  # noqa: E402
from needlebench.scoring import ScoreOptions
from needlebench.tasks.atc.choice import AtcMcParams, generate_atc_mc, grade_atc_mc  # noqa: E402
from needlebench.tasks.atc.open_answer import AtcParams, generate_atc  # noqa: E402
from needlebench.tasks.needlechain.answer import INT_DIGIT_LIMIT  # noqa: E402
from needlebench.tasks.needlechain.task import (  # noqa: E402
    ChainParams,
    generate_needlechain,
    grade_needlechain,
)
from needlebench.tasks.sparse.mrs import generate_mrs, grade_mrs  # noqa: E402
from needlebench.tasks.sparse.recall import grade_mrt, grade_srt
from needlebench.tasks.sparse.retrieval import SparseParams, generate_mrt, generate_srt  # noqa: E402  # noqa: E402

PER_FAMILY = 10_000
# (family, why) -> a predicate over (prediction, gold) that says the disagreement is that exception.
EXCEPTIONS: dict[tuple[str, str], Callable[[str, dict], bool]] = {}
REFERENCE = ScoreOptions()  # the evaluator's defaults; the golds carry the reference rules


class _Quiet(io.TextIOBase):
    """A stdout that drops everything: OpenCompass's parallel evaluators print every prediction."""

    def write(self, text: str) -> int:
        return len(text)


def _spread(golds: list[dict], n: int) -> list[tuple[int, int]]:
    """(gold index, seed) pairs: ``n`` outputs shared evenly over the golds."""
    return [(i % len(golds), i // len(golds)) for i in range(n)]


def _compare(family: str, rows: list[tuple[str, dict, float, float]]) -> Counter:
    """Count agreements, listed exceptions and unlisted disagreements; print them; return the counter."""
    counts: Counter = Counter()
    unlisted = []
    for pred, gold, ours, theirs in rows:
        if ours == theirs:
            counts["identical"] += 1
            continue
        why = next((w for (f, w), test in EXCEPTIONS.items() if f == family and test(pred, gold)), None)
        if why is None:
            unlisted.append((pred[:300], gold, ours, theirs))
        counts[why or "UNLISTED"] += 1
    print(f"{family}: {len(rows)} predictions, {dict(counts)}", file=sys.stderr)
    assert not unlisted, f"{family}: {len(unlisted)} unlisted disagreements, e.g. {unlisted[:3]}"
    return counts


def _sparse(lang: str, repeats: int = 2, **kw: object) -> SparseParams:
    return SparseParams(lang=lang, lengths=(600,), depths=(0, 50, 100), repeats=repeats, buffer=100, **kw)


@pytest.fixture(scope="module")
def golds() -> dict[str, list[dict]]:
    """Reference golds made by our generators, both languages."""
    out: dict[str, list[dict]] = {}
    out["srt"] = [s.gold for lang in ("en", "zh") for s in generate_srt(_sparse(lang))]
    out["mrt"] = [s.gold for lang in ("en", "zh") for s in generate_mrt(_sparse(lang))]
    out["mrs"] = [s.gold for lang in ("en", "zh") for s in generate_mrs(_sparse(lang, num_needles=(2, 3, 5)))]
    out["atc"] = [
        s.gold for lang in ("en", "zh") for s in generate_atc(AtcParams(lang=lang, needle_counts=(2, 8), repeats=3))
    ]
    # v1 (``profile="v1"``): S-RT as above; M-RT with the 4k suite's 20 depths, as OpenCompass v1 asks them
    out["srt_v1"] = [s.gold for lang in ("en", "zh") for s in generate_srt(_sparse(lang, profile="v1"))]
    out["mrt_v1"] = [s.gold for lang in ("en", "zh") for s in generate_mrt(_v1_mrt(lang))]
    return out


def _v1_mrt(lang: str) -> SparseParams:
    from needlebench.tasks.profiles import get_suite

    depths = get_suite("4k", "v1").depths
    return SparseParams(lang=lang, lengths=(4000,), depths=depths, repeats=3, buffer=1000, profile="v1")


def _others_keywords(golds: list[dict]) -> list[str]:
    return sorted({k for g in golds for k in (g.get("keywords") or [k for n in g["needles"] for k in n["keywords"]])})


def test_srt_v2_matches_origin_evaluator(golds: dict[str, list[dict]]) -> None:
    srt = golds["srt"]
    assert all(g["match"] == "exact" for g in srt)
    others = _others_keywords(srt)
    preds, refs, gs = [], [], []
    for i, seed in _spread(srt, PER_FAMILY):
        g = srt[i]
        (pred,) = keyword_outputs(g["keywords"], others, 1, seed * 1000 + i, long_every=1 if seed % 97 == 5 else 0)
        preds.append(pred)
        refs.append(f"{g['needle']}*{g['keywords'][0]}")
        gs.append(g)
    theirs = [d["score"] for d in oc_origin.NeedleBenchOriginEvaluator().score(preds, refs)["details"]]
    rows = [(p, g, grade_srt(p, g, REFERENCE).score, float(t)) for p, g, t in zip(preds, gs, theirs, strict=True)]
    counts = _compare("S-RT v2", rows)
    assert counts["identical"] >= PER_FAMILY
    clarified = [grade_srt(p, {**g, "match": "normalised"}, REFERENCE).score for p, g, _, _ in rows]
    assert sum(c != r[3] for c, r in zip(clarified, rows, strict=True)) > 500  # the corpus tells the rules apart
    assert any(len(p) > 200_000 and t == 100 for p, _, _, t in rows)  # a keyword after 200,000 characters


def test_mrt_matches_parallel_evaluators(golds: dict[str, list[dict]]) -> None:
    mrt = golds["mrt"]
    others = _others_keywords(mrt)
    rows_v2, rows_v1 = [], []
    evaluators = (oc_parallel.NeedleBenchParallelEvaluator(), oc_v1_parallel.NeedleBenchParallelEvaluator())
    for i, seed in _spread(mrt, PER_FAMILY):
        g = mrt[i]
        keywords = [n["keywords"][0] for n in g["needles"]]
        (pred,) = keyword_outputs(keywords, others, 1, seed * 1000 + i, long_every=0)
        ref = "*".join(keywords) + "#" + "*".join(str(d) for d in range(len(keywords)))  # distinct depths
        with redirect_stdout(_Quiet()):
            v2, v1 = (float(e.score([pred], [ref])["average_score"]) for e in evaluators)
        ours = grade_mrt(pred, g, REFERENCE).score
        rows_v2.append((pred, g, ours, v2))
        rows_v1.append((pred, g, ours, v1))
    assert _compare("M-RT v2", rows_v2)["identical"] >= PER_FAMILY
    assert _compare("M-RT v1", rows_v1)["identical"] >= PER_FAMILY
    assert {r[3] for r in rows_v2} > {0.0, 100.0}  # partial recall happens


def _atc_rows(family: str, golds: list[dict], seed0: int) -> Counter:
    preds, refs, gs = [], [], []
    for i, seed in _spread(golds, PER_FAMILY):
        g = golds[i]
        others = [n for n in g["chain_names"] if n != g["answer"]]
        (pred,) = boxed_outputs(str(g["answer"]), others, 1, seed0 + seed * 1000 + i)
        preds.append(pred)
        refs.append(str(g["answer"]))
        gs.append(g)
    details = NeedleBenchATCEvaluator().score([needlebench_atc_postprocess_v2(p) for p in preds], refs)["details"]
    grade = grade_mrs if family.startswith("M-RS") else _grade_atc
    rows = [
        (p, g, grade(p, g, REFERENCE).score, 100.0 if d["correct"] else 0.0)
        for p, g, d in zip(preds, gs, details, strict=True)
    ]
    counts = _compare(family, rows)
    clarified = [grade(p, {**g, "match": "normalised"}, REFERENCE).score for p, g, _, _ in rows]
    assert sum(c != r[3] for c, r in zip(clarified, rows, strict=True)) > 500  # the corpus tells the rules apart
    right = sum(r[3] == 100.0 for r in rows)
    assert 0.1 * len(rows) < right < 0.9 * len(rows)  # the variants are neither all right nor all wrong
    return counts


def _grade_atc(pred: str, gold: dict, options: ScoreOptions) -> object:
    from needlebench.tasks.registry import get_task

    return get_task("atc").grade(pred, gold, options)


def test_mrs_v2_matches_atc_evaluator(golds: dict[str, list[dict]]) -> None:
    mrs = golds["mrs"]
    assert all(g["match"] == "exact" for g in mrs)
    assert _atc_rows("M-RS v2", mrs, 1)["identical"] >= PER_FAMILY


def test_atc_v2_matches_atc_evaluator(golds: dict[str, list[dict]]) -> None:
    atc = golds["atc"]
    assert all(g["match"] == "exact" for g in atc)
    assert _atc_rows("ATC v2", atc, 2)["identical"] >= PER_FAMILY


def test_issue_examples_score_as_opencompass() -> None:
    """The cases issue 22 lists, scored as OpenCompass scores them (reference) and ours (clarified)."""
    gold = {"answer": "Jasmine Lane", "kind": "name", "subject": "Kai", "chain_names": ["Jasmine Lane", "Kai"]}
    oc_right = ["\\boxed{Jasmine~Lane}", "\\boxed{Jasmine\\ Lane}", "\\boxed{Jasmine  Lane}", "\\boxed{{Jasmine Lane}}"]
    oc_wrong = [
        "\\boxed{Jasmine Lane (great-grandmother)}",
        "\\boxed{Jasmine Lanes}",
        "\\boxed {Jasmine Lane}",
        "\\fbox{Jasmine Lane}",
        "\\boxed{Jasmine Lane} then \\boxed{Jasmine",
        "\\boxed{Jasmine Lane}. I used \\boxed as told.",
    ]
    for pred in oc_right + oc_wrong:
        theirs = NeedleBenchATCEvaluator().score([needlebench_atc_postprocess_v2(pred)], ["Jasmine Lane"])["score"]
        assert grade_mrs(pred, {**gold, "match": "exact"}, REFERENCE).score == theirs == (100 * (pred in oc_right))
    clarified = [grade_mrs(p, {**gold, "match": "normalised"}, REFERENCE).correct for p in oc_wrong]
    assert clarified == [False, False, True, True, True, True]
    keyword = {"keywords": ["Pothgon spyglass"], "needle": "The treasure is the Pothgon spyglass."}
    assert grade_srt("x" * 250_000 + "Pothgon spyglass", {**keyword, "match": "exact"}, REFERENCE).correct
    assert not grade_srt("Pothgon<|im_end|> spyglass", {**keyword, "match": "exact"}, REFERENCE).correct
    assert grade_srt("Pothgon<|im_end|> spyglass", {**keyword, "match": "normalised"}, REFERENCE).correct


def test_srt_v1_matches_levenshtein_origin_evaluator(golds: dict[str, list[dict]]) -> None:
    """OpenCompass's pure-Python edit distance is checked on 300 outputs; the rest use the same distance in C."""
    srt = golds["srt_v1"]
    assert all(g["match"] == "exact" for g in srt)
    others = _others_keywords(srt)
    preds, refs, gs = [], [], []
    for i, seed in _spread(srt, PER_FAMILY):
        g = srt[i]
        (pred,) = keyword_outputs(g["keywords"], others, 1, 7 + seed * 1000 + i, long_every=0)
        preds.append(pred[:3000])  # the pure-Python distance is quadratic
        refs.append(f"{g['needle']}*{g['keywords'][0]}")
        gs.append(g)
    evaluator = oc_v1_origin.NeedleBenchOriginEvaluator()
    with redirect_stdout(_Quiet()):
        pure = evaluator.score(preds[:300], refs[:300])["details"]
        evaluator.levenshtein_distance = Levenshtein.distance  # type: ignore[method-assign]
        fast = evaluator.score(preds, refs)["details"]
    assert [d["score"] for d in pure] == [d["score"] for d in fast[:300]]
    lev = ScoreOptions(metric="levenshtein")
    rows = [(p, g, grade_srt(p, g, lev).score, float(d["score"])) for p, g, d in zip(preds, gs, fast, strict=True)]
    counts = _compare("S-RT v1 (Levenshtein)", rows)
    assert counts["identical"] >= PER_FAMILY
    assert any(0 < r[3] < 20 for r in rows)  # partial credit happens


def test_mrt_v1_golds_match_parallel_evaluator(golds: dict[str, list[dict]]) -> None:
    """v1 M-RT golds (20 needles at the 4k suite's depths) in OpenCompass v1's answer form, keyword credit per depth."""
    mrt = golds["mrt_v1"]
    assert all(len(g["needles"]) == 20 for g in mrt)
    others = _others_keywords(mrt)
    evaluator = oc_v1_parallel.NeedleBenchParallelEvaluator()
    rows = []
    for i, seed in _spread(mrt, PER_FAMILY):
        g = mrt[i]
        keywords = [n["keywords"][0] for n in g["needles"]]
        (pred,) = keyword_outputs(keywords, others, 1, 29 + seed * 1000 + i, long_every=0)
        ref = "*".join(keywords) + "#" + "*".join(str(n["depth"]) for n in g["needles"])  # its answer column
        with redirect_stdout(_Quiet()):
            theirs = float(evaluator.score([pred], [ref])["average_score"])
        rows.append((pred, g, grade_mrt(pred, g, REFERENCE).score, theirs))
    assert _compare("M-RT v1 (v1 golds)", rows)["identical"] >= PER_FAMILY
    assert len({r[3] for r in rows}) > 3  # partial recall happens


def test_mrs_v1_matches_multi_evaluator(tmp_path: Path) -> None:
    """The 2024 multi-hop form, both languages, from stand-ins of ``multi_needle_reasoning_{en,zh}.json``."""
    from bench.standin import multihop_records

    mrs, answers = [], []
    for lang in ("en", "zh"):
        records = multihop_records(lang)
        answers += [r["answer"] for r in records] + ["the Pothgon spyglass", "Mount Everest Base Camp"]
        path = tmp_path / f"multi_needle_reasoning_{lang}.json"
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
        p = _sparse(lang, repeats=6, needle_file=str(path), num_needles=(2, 3, 5), profile="v1")
        mrs += [s.gold for s in generate_mrs(p)]
    answers += ["Jasmine Lane", "Ryker", "北京"]
    assert all(g["form"] == "multihop" and g["match"] == "exact" for g in mrs)
    preds, refs, gs = [], [], []
    for i, seed in _spread(mrs, PER_FAMILY):
        g = mrs[i]
        words = g["keywords"][0].split()
        (pred,) = keyword_outputs(words, answers, 1, 11 + seed * 1000 + i, long_every=0)
        preds.append(pred)
        refs.append(f"{g['keywords'][0]}*{g['keywords'][0]}")
        gs.append(g)
    details = oc_v1_multi.NeedleBenchMultiEvaluator().score(preds, refs)["details"]
    rows = [(p, g, grade_mrs(p, g, REFERENCE).score, float(d["score"])) for p, g, d in zip(preds, gs, details)]
    counts = _compare("M-RS v1 (words)", rows)
    assert counts["identical"] >= PER_FAMILY
    assert any(0 < r[3] < 100 for r in rows)  # per-word credit happens


def test_atc_mc_v1_matches_circular_evaluator() -> None:
    """Every rotation's letter as ``first_option_postprocess`` reads it; every question as ``CircularEvaluator``."""
    samples = [
        s
        for lang in ("en", "zh")
        for s in generate_atc_mc(AtcMcParams(lang=lang, steps=(2, 5, 19), repeats=2, style="direct", shots=1))
    ]
    assert {s.meta["options"]["chain_draw"] for s in samples} == {"opencompass"}  # the reference draw
    groups: dict[str, list] = {}
    for s in samples:
        groups.setdefault(s.meta["circular_group"], []).append(s)
    rows, agree_circular, n = [], 0, 0
    group_list = list(groups.values())
    for q in range(PER_FAMILY // 4):
        group = group_list[q % len(group_list)]
        preds = [letter_outputs(s.gold["answer"], 1, q * 10 + j)[0] for j, s in enumerate(group)]
        letters = [first_option_postprocess(p, "ABCD") for p in preds]
        ours = [grade_atc_mc(p, s.gold, REFERENCE) for p, s in zip(preds, group, strict=True)]
        for p, s, o, letter in zip(preds, group, ours, letters, strict=True):
            rows.append((p, s.gold, o.score, 100.0 if letter == s.gold["answer"] else 0.0))
        refs = [f"{q}--{s.gold['answer']}--{s.meta['circular_pattern']}" for s in group]
        theirs = CircularEvaluator().score(letters, refs)
        n += 1
        agree_circular += (theirs["perf_4"] == 100.0) == all(o.correct for o in ours)
    counts = _compare("ATC multiple choice v1 (per rotation)", rows)
    print(f"ATC multiple choice v1 (circular): {n} questions, {agree_circular} identical", file=sys.stderr)
    assert counts["identical"] >= PER_FAMILY and agree_circular == n


# ---- NeedleChain against the released scorer (evaluate.py of the authors' repository) ----

_RELEASED_INTEGERS = re.compile(r"\b(?:\d{1,3}(?:,\d{3})+|\d+)\b")


def released_correct(generated: str, target: str) -> bool:
    """The released ``evaluate.py``'s verdict on one response, as its ``main`` loop computes it.

    After the last ``## Answer:`` (the whole response without one), spaces and newlines removed, every
    word-bounded integer is converted and the first compared, after ``int()``, with ``int(float(target))``;
    any exception (no integer; one longer than Python's int() digit limit) is a wrong answer.
    """
    hyp = generated.split("## Answer:")[-1].replace("\n", "").replace(" ", "")
    try:
        numbers = [int(m.replace(",", "")) for m in _RELEASED_INTEGERS.findall(hyp)]
        return int(float(target)) == int(numbers[0])
    except Exception:  # the released scorer's bare except
        return False


def released_exact(generated: str, target: str) -> bool:
    """The released scorer's verdict without its ``int()``: the same integer, read at the same place, with the
    decimals written right after it, compared exactly with the exact gold (``$20,000.5`` states 20000.5)."""
    hyp = generated.split("## Answer:")[-1].replace("\n", "").replace(" ", "")
    first = _RELEASED_INTEGERS.search(hyp)
    if first is None:
        return False
    decimals = re.match(r"\.(\d+)", hyp[first.end() :])
    digits = first.group().replace(",", "") + "." + (decimals.group(1) if decimals else "0")
    try:
        return Fraction(digits) == Fraction(target)
    except ValueError:  # past the int() digit limit, as the released scorer fails too
        return False


def _truncation_fix(pred: str, gold: dict) -> bool:
    """The listed fix: only an output whose verdict the released scorer's ``int()`` changes (it truncates the
    gold and the stated value; we compare them exactly)."""
    return released_correct(pred, gold["value"]) != released_exact(pred, gold["value"])


def _digit_limit(pred: str, gold: dict) -> bool:
    """Released measurement bug: a later integer past Python's int() limit raises, and the answer counts as wrong."""
    hyp = pred.split("## Answer:")[-1].replace("\n", "").replace(" ", "")
    return any(len(m.replace(",", "")) > INT_DIGIT_LIMIT for m in _RELEASED_INTEGERS.findall(hyp))


for _family in ("NeedleChain", "NeedleChain (paper-style answers)"):
    EXCEPTIONS[(_family, "int() truncation of gold and answer (our listed fix)")] = _truncation_fix
    EXCEPTIONS[(_family, "released int() digit limit raises (measurement bug)")] = _digit_limit


def _chain_rows(paper_styles: bool, seed0: int) -> list[tuple[str, dict, float, float]]:
    """Reference NeedleChain golds (the released generator's values, fractional totals included) x responses."""
    golds = [
        s.gold
        for s in generate_needlechain(ChainParams(k_values=(5, 10, 20, 50), points=6, questions=("single", "total")))
    ]
    assert all(g["scoring"] == "released" for g in golds)
    assert any(Fraction(g["value"]).denominator > 1 for g in golds)  # fractional golds are in the corpus
    rows = []
    for i, seed in _spread(golds, PER_FAMILY):
        g = golds[i]
        (pred,) = chain_outputs(g["value"], g["names"], 1, seed0 + seed * 1000 + i, paper_styles)
        theirs = 100.0 if released_correct(pred, g["value"]) else 0.0
        rows.append((pred, g, grade_needlechain(pred, g, REFERENCE).score, theirs))
    return rows


def _agreement(rows: list[tuple[str, dict, float, float]], label: str) -> tuple[float, float]:
    """(share of our right answers the released scorer also marks right, and the other way round), printed."""
    both = sum(r[2] == r[3] == 100.0 for r in rows)
    ours, theirs = both / sum(r[2] == 100.0 for r in rows), both / sum(r[3] == 100.0 for r in rows)
    print(
        f"{label}: {ours:.4f} of ours-right released-right, {theirs:.4f} of released-right ours-right", file=sys.stderr
    )
    return ours, theirs


def test_needlechain_reference_scoring_matches_released_scorer() -> None:
    """Every variant (near misses, half-off values, decimals, frames, hostile text): only listed disagreements."""
    rows = _chain_rows(paper_styles=False, seed0=13)
    counts = _compare("NeedleChain", rows)
    assert counts["identical"] >= 0.9 * PER_FAMILY and counts["int() truncation of gold and answer (our listed fix)"]
    _agreement(rows, "NeedleChain agreement (all variants)")


def test_needlechain_agrees_with_released_scorer_on_paper_style_answers() -> None:
    """Answers written as the paper shows models writing them: >= 99.6% agreement both ways."""
    rows = _chain_rows(paper_styles=True, seed0=17)
    _compare("NeedleChain (paper-style answers)", rows)
    ours, theirs = _agreement(rows, "NeedleChain agreement (paper-style answers)")
    assert ours >= 0.996 and theirs >= 0.996


def test_needlechain_issue_examples() -> None:
    """The responses issue 22 lists, read as the released scorer reads them; strict omission as an option."""
    names = ["Cairo", "Ramon", "Nala", "Kase", "Ryker"]
    gold = {"value": "3200", "names": names, "variant": "forward", "question": "single", "asked": "Ryker"}
    released = {**gold, "scoring": "released"}
    for pred in ("...so 3200.\n## Answer: $3200", "## Answer: $3200 (Ryker = 2 x 1600)", "Ryker gets $3200"):
        assert released_correct(pred, "3200")
        assert grade_needlechain(pred, released, REFERENCE).correct, pred
    omitted = grade_needlechain("## Answer: 3200", released, REFERENCE)
    assert omitted.correct and omitted.extras["plain_correct"] and not omitted.extras["strict_correct"]
    strict = grade_needlechain("## Answer: 3200", {**gold, "scoring": "strict"}, REFERENCE)
    assert not strict.correct and strict.error == "needle_omission"
    fractional = {**released, "value": "12.5"}
    assert (
        released_correct("## Answer: 12", "12.5")
        and not grade_needlechain("## Answer: 12", fractional, REFERENCE).correct
    )
    assert grade_needlechain("## Answer: $12.50", fractional, REFERENCE).correct
    late = "## Answer: 3200 (ref: " + "9" * 5000 + ")"
    assert not released_correct(late, "3200") and grade_needlechain(late, released, REFERENCE).correct


RELEASED_FILE_HEAD = 100  # evaluate.py: ``result = read_jsonl(os.path.join(results_dir, item))[:100]``


def released_file_accuracy(verdicts: list[bool]) -> float:
    """The number the released ``evaluate.py`` prints for one results file (one model, variant, k and question,
    its responses in data order): ``np.mean`` of the verdicts of the file's first 100 responses only."""
    head = verdicts[:RELEASED_FILE_HEAD]
    return 100.0 * sum(head) / len(head)


def test_needlechain_released_scorer_averages_only_a_files_first_100_responses() -> None:
    """Listed difference: the released scorer averages the first 100 responses of each results file, though its
    data files hold 200 points per k (the paper's count); ours averages every point asked for. ``points=100``
    makes the first 100 of the same points, so its accuracy is the number the released scorer prints."""
    from needlebench.tasks.needlechain.results import chain_cells

    cell = dict(k_values=(5,), variants=("forward",), questions=("single",))
    full = sorted(generate_needlechain(ChainParams(points=200, **cell)), key=lambda s: s.meta["point"])
    head = sorted(generate_needlechain(ChainParams(points=RELEASED_FILE_HEAD, **cell)), key=lambda s: s.meta["point"])
    assert [(s.id, s.prompt) for s in head] == [(s.id, s.prompt) for s in full[:RELEASED_FILE_HEAD]]
    # right on every third point of the first 100 and on every point after them
    answers = [
        f"## Answer: {s.gold['value'] if s.meta['point'] % 3 == 0 or s.meta['point'] >= 100 else '1'}" for s in full
    ]

    def ours(samples: list) -> float:
        details = [
            GradedSample(s.id, s.task, s.lang, s.meta, grade_needlechain(a, s.gold, REFERENCE).score)
            for s, a in zip(samples, answers, strict=False)
        ]
        return chain_cells(details)["acc_forward_k5_single"]

    released = released_file_accuracy([released_correct(a, s.gold["value"]) for s, a in zip(full, answers)])
    assert released == ours(head) == pytest.approx(34.0)
    assert ours(full) == pytest.approx(67.0) != released


def test_needlechain_trailing_zeros_are_read_as_the_released_scorer_reads_them() -> None:
    """``## Answer: 3200.`` and seventy zeros states 3200 (the released scorer: right); so do seventy leading zeros;
    seventy decimals that are not zeros state another value (the released scorer's int() drops them: listed)."""
    gold = {"value": "3200", "names": ["Ann"], "variant": "forward", "question": "single", "asked": "Ann"}
    gold["scoring"] = "released"
    for pred in ("## Answer: 3200." + "0" * 70, "## Answer: " + "0" * 70 + "3200", "## Answer: $3,200.00" + "0" * 70):
        assert grade_needlechain(pred, gold, REFERENCE).correct and released_correct(pred, "3200"), pred
        assert not _truncation_fix(pred, gold)
    for other in ("## Answer: 3200." + "3" * 70, "## Answer: $3,200.50" + "0" * 70):
        assert released_correct(other, "3200") and not grade_needlechain(other, gold, REFERENCE).correct
        assert _truncation_fix(other, gold)
    # a decimal that is no binary fraction is a value too (its grading once raised ValueError)
    assert grade_needlechain("## Answer: 1600.3", gold, REFERENCE).extracted == "1600.3"


def test_v1_suites_score_each_task_as_opencompass_v1_configs_do() -> None:
    """OpenCompass v1: Levenshtein credit for S-RT (``NeedleBenchOriginEvaluator``), keywords only for M-RT."""
    from needlebench.opencompass.configs import needlebench_datasets

    metrics = {d["abbr"]: d["eval_cfg"]["evaluator"].get("metric") for d in needlebench_datasets("4k", profile="v1")}
    assert {a: m for a, m in metrics.items() if a.startswith("needlebench_srt")} == {
        "needlebench_srt_en_4k": "levenshtein",
        "needlebench_srt_zh_4k": "levenshtein",
    }
    assert {m for a, m in metrics.items() if a.startswith("needlebench_mrt")} == {"keyword"}
    v2 = needlebench_datasets("4k", profile="v2")
    assert {d["eval_cfg"]["evaluator"].get("metric") for d in v2 if "_mrs_" not in d["abbr"]} == {"keyword"}


def test_box_extraction_and_cleaning_equal_opencompass_on_random_latex() -> None:
    """The extracted, cleaned answer itself (not only the verdict) equals ``needlebench_atc_postprocess_v2``'s."""
    import random

    from needlebench.grading.matching import reference_boxed
    from needlebench.tasks.kinship_answer import reference_clean

    pieces = ("\\boxed", "\\fbox", "\\boxed ", "{", "}", "{{", "}}", "\n", "Ann", " ", "~", "'", '"', "\\text{", "\\")
    rng = random.Random(5)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 16)))
        boxed = reference_boxed(text)
        assert (reference_clean(boxed) if boxed else "None") == needlebench_atc_postprocess_v2(text), repr(text)


# ---- thinking: OpenCompass's reasoning chain (issue 31) ------------------------------------------------
# OpenCompass's reasoning-model configs attach extract_non_reasoning_content as the model's pred_postprocessor;
# its eval task applies it before the evaluator. Ours: the same model config from ``reasoning()``, applied by
# OpenCompass's own eval-task code, then our evaluator; and our evaluator with strip_think=True on the raw output.

THINK_PER_FAMILY = 2_700  # 300 per variant
# (answer, wrong answer, thought) -> a response; each a way reasoning models (or their templates) write
THINK_VARIANTS: dict[str, Callable[[str, str, str], str]] = {
    "closed_then_answer": lambda a, w, t: f"<think>{t} Maybe {w}?</think>\n{a}",
    "answer_only_inside": lambda a, w, t: f"<think>{t} So: {a}</think>\nI cannot tell.",
    "unclosed": lambda a, w, t: f"<think>{t} so it is {a}",
    "only_closing_tag": lambda a, w, t: f"{t} maybe {w}</think>\n\n{a}",
    "two_blocks": lambda a, w, t: f"<think>{w}</think> wait <think>{t}</think>{a}",
    "answer_between_blocks": lambda a, w, t: f"<think>{t}</think>{a}<think>or {w}</think>",
    "upper_case_tags": lambda a, w, t: f"<THINK>{t} {w}</THINK>{a}",
    "nested_blocks": lambda a, w, t: f"<think>{t}<think>{w}</think>{a}</think>done.",
    "stray_closing_tag": lambda a, w, t: f"{a}</think>x<think>{w}</think>z",
}


def _think_samples(family: str) -> list[Any]:
    """Our reference samples of a family, both languages (as the ``golds`` fixture draws them)."""
    if family == "S-RT":
        return [s for lang in ("en", "zh") for s in generate_srt(_sparse(lang))]
    if family == "M-RT":
        return [s for lang in ("en", "zh") for s in generate_mrt(_sparse(lang))]
    if family == "M-RS":
        return [s for lang in ("en", "zh") for s in generate_mrs(_sparse(lang, num_needles=(2, 3, 5)))]
    return [s for lang in ("en", "zh") for s in generate_atc(AtcParams(lang=lang, needle_counts=(2, 8), repeats=3))]


def _think_outputs(family: str, gold: dict, others: list[str], seed: int) -> tuple[str, str, str]:
    """(answer, wrong answer, thought): our seeded outputs for the family's answer format, right or near."""
    if family in ("S-RT", "M-RT"):
        keywords = gold.get("keywords") or [n["keywords"][0] for n in gold["needles"]]
        (answer,) = keyword_outputs(keywords, others, 1, seed, long_every=0)
        (wrong,) = keyword_outputs(others[:3] or ["nothing"], [], 1, seed + 1, long_every=0)
    else:
        names = [n for n in gold["chain_names"] if n != gold["answer"]]
        (answer,) = boxed_outputs(str(gold["answer"]), names, 1, seed)
        wrong = f"\\boxed{{{names[seed % len(names)] if names else 'Nobody'}}}"
    return answer, wrong, f"Let me trace it. {wrong} is mentioned."


def _opencompass_chain(family: str, texts: list[str], golds: list[dict]) -> list[float]:
    """OpenCompass's scores: the model's think strip, then the family's evaluator (as its v2 configs set it)."""
    stripped = [extract_non_reasoning_content(t) for t in texts]
    if family == "S-RT":
        refs = [f"{g['needle']}*{g['keywords'][0]}" for g in golds]
        return [float(d["score"]) for d in oc_origin.NeedleBenchOriginEvaluator().score(stripped, refs)["details"]]
    if family == "M-RT":
        out = []
        for text, g in zip(stripped, golds, strict=True):
            keywords = [n["keywords"][0] for n in g["needles"]]
            ref = "*".join(keywords) + "#" + "*".join(str(d) for d in range(len(keywords)))
            with redirect_stdout(_Quiet()):
                out.append(float(oc_parallel.NeedleBenchParallelEvaluator().score([text], [ref])["average_score"]))
        return out
    details = NeedleBenchATCEvaluator().score(
        [needlebench_atc_postprocess_v2(t) for t in stripped], [str(g["answer"]) for g in golds]
    )["details"]
    return [100.0 if d["correct"] else 0.0 for d in details]


def _our_chains(samples: list[Any], texts: list[str]) -> tuple[list[float], list[float], list[float]]:
    """Our scores three ways: the reasoning model config through OpenCompass's eval-task code then our evaluator;
    our evaluator with strip_think=True on the raw outputs; our clarified reading (gold match ``normalised``)."""
    from opencompass.tasks.openicl_eval import OpenICLEvalTask

    from needlebench.opencompass.evaluator import NeedleBenchEvaluator
    from needlebench.opencompass.models import reasoning, vllm_model

    rows = [
        {"id": s.id, "task": s.task, "lang": s.lang, "prompt": s.prompt, "meta": json.dumps(s.meta)} for s in samples
    ]
    refs = [json.dumps(s.gold) for s in samples]
    task = OpenICLEvalTask.__new__(OpenICLEvalTask)
    task.model_cfg, task.eval_cfg = reasoning(vllm_model("r1", "org/r1", 32768)), {}
    evaluator = NeedleBenchEvaluator()
    processed = evaluator.pred_postprocess(task._process_predictions(list(texts)))
    chain = [d["score"] for d in evaluator.score(processed, refs, rows, prediction=list(texts))["details"]]
    strip = [d["score"] for d in NeedleBenchEvaluator(strip_think=True).score(list(texts), refs, rows)["details"]]
    clarified = [json.dumps({**s.gold, "match": "normalised"}) for s in samples]
    ours = [d["score"] for d in NeedleBenchEvaluator().score(list(texts), clarified, rows)["details"]]
    return chain, strip, ours


@pytest.mark.parametrize("family", ["S-RT", "M-RT", "M-RS", "ATC"])
def test_think_variants_score_as_opencompass_reasoning_chain(family: str) -> None:
    """Every think variant, every family: our reasoning model config (OpenCompass's extract_non_reasoning_content
    as its postprocessor) and our strip_think=True give OpenCompass's score for every output, under reference."""
    samples = _think_samples(family)
    assert all(s.gold["match"] == "exact" for s in samples)
    golds = [s.gold for s in samples]
    others = _others_keywords(golds) if family in ("S-RT", "M-RT") else []
    picked, texts, variants = [], [], []
    for i in range(THINK_PER_FAMILY):
        name = list(THINK_VARIANTS)[i % len(THINK_VARIANTS)]
        k = (i // len(THINK_VARIANTS)) % len(samples)
        answer, wrong, thought = _think_outputs(family, samples[k].gold, others, 31_000 + i)
        picked.append(samples[k])
        texts.append(THINK_VARIANTS[name](answer, wrong, thought))
        variants.append(name)
    theirs = _opencompass_chain(family, texts, [s.gold for s in picked])
    chain, strip, clarified = _our_chains(picked, texts)
    counts: dict[str, Counter] = {name: Counter() for name in THINK_VARIANTS}
    wrong = []
    for name, text, t, c, s, o in zip(variants, texts, theirs, chain, strip, clarified, strict=True):
        counts[name]["n"] += 1
        counts[name]["right"] += t == 100.0
        counts[name]["clarified differs"] += o != t
        if c != t or s != t:
            counts[name]["DISAGREE"] += 1
            wrong.append((name, text[:200], t, c, s))
    for name, n in counts.items():
        print(f"think {family} {name}: {dict(n)}", file=sys.stderr)
    assert not wrong, f"{family}: {len(wrong)} disagreements with OpenCompass's chain, e.g. {wrong[:3]}"
    assert all(n["n"] >= 300 for n in counts.values())
    assert 0 < sum(n["right"] for n in counts.values()) < THINK_PER_FAMILY  # right and wrong answers both
    assert sum(n["clarified differs"] for n in counts.values()) > 0  # our clarified strip is another rule
