"""Grading speed on hostile model outputs: every grader, 10,000 outputs, one process.

    python -m bench.hostile              # 10,000 outputs; target: under 5 s on 2 cores
    python -m bench.hostile --outputs 500

The outputs are ``bench.hostile_outputs.hostile_outputs`` (noise, digits, runs of unclosed or
nested ``\\boxed{``, unclosed ``<think>``, NUL bytes, lone surrogates, CJK repetition,
``## Answer:`` runs) at sizes from 100 to 30,000 characters (3,800 on average), each paired
with every grader path in turn; ``tests/test_hostile.py`` grades the megabyte-sized ones
one by one. Generating the golds and the texts is not timed. Every output must fail with a
failure kind and score 0 (under the Levenshtein metric: less than the partial-credit
ceiling, 100 * alpha); the script exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from typing import Any

from bench.hostile_outputs import hostile_outputs
from needlebench.opencompass.outputs import reference_strip
from needlebench.record import SampleScore
from needlebench.scoring import ScoreOptions
from needlebench.tasks import get_task, make_params

__all__ = ["grading_cases", "failed_safely", "SIZES", "main"]

SIZES = (100, 300, 1_000, 3_000, 10_000, 30_000)
_SPARSE = dict(lengths=[1000], depths=[50], repeats=1)


def _golds(task: str, **params: Any) -> list[dict]:
    """The golds of a small real dataset of ``task`` (so the cases follow the generators' format)."""
    return [s.gold for s in get_task(task).generate(make_params(task, **params))]


def grading_cases() -> list[tuple[str, str, dict, ScoreOptions]]:
    """``(label, task, gold, options)`` for every grader path: each task, metric and match mode.

    The multiple-choice gold is a rotation whose answer is D: the hostile ``## Answer:`` runs
    contain a capital A, which OpenCompass's option extraction rightly reads as option A.
    """
    srt = _golds("srt", lang="en", **_SPARSE)[0]
    mrt = _golds("mrt", lang="zh", num_needles=[2], **_SPARSE)[0]
    mrs = _golds("mrs", lang="en", num_needles=[2], **_SPARSE)[0]
    atc = _golds("atc", lang="zh", needle_counts=[3], repeats=1)
    chain = _golds("needlechain", k_values=[5], points=1, variants=["mixed"], questions=["total"])[0]
    atc_mc = next(g for g in _golds("atc_mc", lang="en", steps=[3], repeats=1, style="direct") if g["answer"] == "D")
    name = next(g for g in atc if g["kind"] == "name")
    distance = next(g for g in atc if g["kind"] == "int")
    multihop = {"form": "multihop", "keywords": srt["keywords"], "needle": srt["needle"], "match": "exact"}
    lev = ScoreOptions(metric="levenshtein")
    return [
        ("srt/keyword-exact", "srt", srt, ScoreOptions()),
        ("srt/keyword-normalised", "srt", {**srt, "match": "normalised"}, ScoreOptions()),
        ("srt/levenshtein", "srt", srt, lev),
        ("srt/no-strip-think", "srt", srt, ScoreOptions(strip_think=False)),
        ("srt/strip-think", "srt", srt, ScoreOptions(strip_think=True, reference_strip=reference_strip)),
        ("srt/strip-think-normalised", "srt", {**srt, "match": "normalised"}, ScoreOptions(strip_think=True)),
        ("mrt/keyword", "mrt", mrt, ScoreOptions()),
        ("mrt/levenshtein-normalised", "mrt", {**mrt, "match": "normalised"}, lev),
        ("mrs/kinship", "mrs", mrs, ScoreOptions()),
        ("mrs/kinship-normalised", "mrs", {**mrs, "match": "normalised"}, ScoreOptions()),
        ("mrs/kinship-contains", "mrs", {**mrs, "match": "contains"}, ScoreOptions()),
        ("mrs/multihop-words", "mrs", multihop, ScoreOptions()),
        ("mrs/multihop-normalised", "mrs", {**multihop, "match": "normalised"}, ScoreOptions()),
        ("atc/name-exact", "atc", name, ScoreOptions()),
        ("atc/name-normalised", "atc", {**name, "match": "normalised"}, ScoreOptions()),
        ("atc/distance", "atc", distance, ScoreOptions()),
        ("atc/distance-normalised", "atc", {**distance, "match": "normalised"}, ScoreOptions()),
        ("needlechain/released", "needlechain", chain, ScoreOptions()),
        ("needlechain/strict", "needlechain", {**chain, "scoring": "strict"}, ScoreOptions()),
        ("atc_mc", "atc_mc", atc_mc, ScoreOptions()),
    ]


def failed_safely(result: SampleScore, options: ScoreOptions) -> bool:
    """A hostile output's grade: wrong, with a failure kind, and no credit beyond partial credit.

    Args:
        result: the grade.
        options: the options it was graded with (Levenshtein gives up to ``100 * alpha`` for
            characters a garbage output happens to share with the needle).
    """
    ceiling = 100.0 * options.alpha if options.metric == "levenshtein" else 0.0
    return not result.correct and result.error is not None and 0.0 <= result.score <= ceiling


def main(argv: list[str] | None = None) -> int:
    """Grade the outputs and print the time, per grader path and in all.

    Args:
        argv: command-line arguments (default: ``sys.argv[1:]``).
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outputs", type=int, default=10_000, help="how many outputs to grade (default 10,000)")
    args = ap.parse_args(argv)
    cases = grading_cases()
    pool = [(name, text) for size in SIZES for name, text in hostile_outputs(size, seed=size).items()]
    chars = 0
    per_case: dict[str, float] = defaultdict(float)
    slowest = (0.0, "")
    nonzero: list[str] = []
    outputs = itertools.islice(itertools.cycle(itertools.product(pool, cases)), args.outputs)  # every pairing
    start = time.perf_counter()
    for (family, text), (label, task, gold, options) in outputs:
        t0 = time.perf_counter()
        result = get_task(task).grade(text, gold, options)
        spent = time.perf_counter() - t0
        per_case[label] += spent
        slowest = max(slowest, (spent, f"{label} on {family} ({len(text):,} chars)"))
        chars += len(text)
        if not failed_safely(result, options):
            nonzero.append(f"{label} on {family}: score {result.score}, error {result.error}")
    total = time.perf_counter() - start
    for label, spent in sorted(per_case.items(), key=lambda kv: -kv[1]):
        print(f"  {label:28s} {spent:7.3f} s")
    print(f"slowest single grade: {slowest[0] * 1000:.1f} ms ({slowest[1]})")
    print(f"graded {args.outputs:,} hostile outputs ({chars / 1e6:.1f} M characters) in {total:.2f} s")
    for line in nonzero[:10]:
        print(f"NOT ZERO: {line}")
    return 1 if nonzero else 0


if __name__ == "__main__":
    sys.exit(main())
