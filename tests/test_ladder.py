"""The adaptive length ladder (``needlebench/adaptive/``): exact bounds that hold at every look, and rounds that
are a function of the answers alone. Its agreement with the full grid over 400 scripted models is
``bench/adaptive_sim.py``'s (``bench/adaptive_sim.json``)."""

from __future__ import annotations

import math
import random

import pytest

from needlebench.adaptive.bounds import mean_bounds
from needlebench.adaptive.ladder import LadderSettings, next_round, sampling_order, schedule
from needlebench.aggregate.effective_length import EffectiveRule
from needlebench.errors import ConfigError

LENGTHS = (1000, 2000, 4000, 8000, 16000)
DEPTHS = tuple(float(d) for d in range(0, 101, 10))
GRID = {n: [(d, r) for d in DEPTHS for r in range(10)] for n in LENGTHS}
TOKENS = {n: float(n) for n in LENGTHS}


def _hypergeometric_tail(population: int, right: int, sampled: int, seen: int, upper: bool) -> float:
    """P(X <= seen) (or >= with ``upper``) for X hypergeometric, by enumeration."""
    xs = range(0, seen + 1) if not upper else range(seen, sampled + 1)
    total = math.comb(population, sampled)
    return sum(math.comb(right, x) * math.comb(population - right, sampled - x) for x in xs) / total


def test_binary_bounds_are_the_exact_hypergeometric_interval() -> None:
    population, alpha = 30, 0.05
    for sampled in (1, 5, 12, 30):
        for seen in range(sampled + 1):
            low, high = mean_bounds([1.0] * seen + [0.0] * (sampled - seen), population, alpha, 1)
            k_low = min(
                k for k in range(population + 1) if _hypergeometric_tail(population, k, sampled, seen, True) > alpha / 2
            )
            k_high = max(
                k
                for k in range(population + 1)
                if _hypergeometric_tail(population, k, sampled, seen, False) > alpha / 2
            )
            # never wider than what is certain: the seen right ones, plus every unseen one right
            assert low == pytest.approx(max(k_low, seen) / population)
            assert high == pytest.approx(min(k_high, seen + population - sampled) / population)
    assert mean_bounds([1.0] * 30, 30, alpha, 3) == (1.0, 1.0)  # the whole population: its mean, exactly
    assert mean_bounds([0.5, 0.25, 1.0], 3, alpha, 3) == pytest.approx((7 / 12, 7 / 12))  # any score, all asked


@pytest.mark.parametrize("scores", ["binary", "graded"])
def test_the_bounds_hold_at_every_look_at_once_in_the_ladders_own_order(scores: str) -> None:
    """Over 2,000 seeds of the ladder's own sampling order, on one length whose scores depend on depth (the middle
    depths fail: what a spread of depths would bias), the bounds miss the length's mean at some look in at most
    delta of them."""
    delta, rng = 0.1, random.Random(7)
    cells = GRID[1000]
    value = {c: float(not 30 <= c[0] <= 70 or c[1] < 3) for c in cells}
    if scores == "graded":
        value = {c: rng.random() * v for c, v in value.items()}
    mean = sum(value.values()) / len(cells)
    looks = schedule(len(cells), LadderSettings(delta=delta))
    missed = 0
    for seed in range(2000):
        order = [value[c] for c in sampling_order(1000, cells, LadderSettings(seed=seed))]
        bounds = [mean_bounds(order[:n], len(cells), delta, len(looks) - 1, scores == "graded") for n in looks]
        missed += any(not low - 1e-12 <= mean <= high + 1e-12 for low, high in bounds)
    assert missed / 2000 <= delta


def _answer(curve: dict[int, float]) -> dict[tuple[int, float, int], float]:
    """Every prompt answered: right at the lengths whose share of right answers ``curve`` gives, by repeat order."""
    return {(n, d, r): float(r < round(10 * curve[n])) for n in LENGTHS for d, r in GRID[n]}


def _climb(truth: dict, settings: LadderSettings) -> tuple[object, dict, int]:
    asked: dict = {}
    rounds = 0
    while (step := next_round(GRID, asked, TOKENS, settings)).asks:
        rounds += 1
        for n, cells in step.asks.items():
            for d, r in cells:
                assert (n, d, r) not in asked  # nothing is asked twice
                asked[(n, d, r)] = truth[(n, d, r)]
    return step, asked, rounds


def test_an_oracle_is_decided_at_every_length_with_a_share_of_the_grid() -> None:
    step, asked, _ = _climb(_answer({n: 1.0 for n in LENGTHS}), LadderSettings())
    assert step.effective == (16000, "at_least", None)
    assert {r.status for r in step.rungs} == {"pass"}
    assert all(r.answered < r.population / 2 for r in step.rungs)  # 32 of 110 decide a perfect length
    assert len(asked) < 0.35 * sum(len(c) for c in GRID.values())


def test_a_collapse_ends_the_climb_and_the_lengths_above_stay_sparse() -> None:
    step, asked, _ = _climb(_answer({1000: 1.0, 2000: 1.0, 4000: 0.0, 8000: 0.0, 16000: 1.0}), LadderSettings())
    assert step.effective == (2000, "exact", None)
    status = {r.length: r.status for r in step.rungs}
    assert status[4000] == "fail"
    assert sum(1 for k in asked if k[0] in (8000, 16000)) == 8  # the first round's four each, nothing more
    # a recovery past the first failure stays visible in its sparse prompts, as the full grid flags it
    assert all(asked[k] == 1.0 for k in asked if k[0] == 16000)


def test_the_rounds_are_a_function_of_the_answers_alone() -> None:
    truth = _answer({1000: 0.9, 2000: 0.8, 4000: 0.7, 8000: 0.5, 16000: 0.2})
    settings = LadderSettings(seed=3)
    first = next_round(GRID, {}, TOKENS, settings)
    answered = {(n, d, r): truth[(n, d, r)] for n, cells in first.asks.items() for d, r in cells}
    again = next_round(GRID, dict(reversed(list(answered.items()))), TOKENS, settings)
    assert again == next_round(GRID, answered, TOKENS, settings)  # a replay (verify) decides the same
    # a resume with half a round answered asks the rest of it only
    half = dict(list(answered.items())[: len(answered) // 2])
    rest = next_round(GRID, half, TOKENS, settings)
    assert {(n, *c) for n, cs in rest.asks.items() for c in cs} == set(answered) - set(half)
    # the order is a permutation of the length's prompts drawn by the seed: another seed, another order
    mine = sampling_order(1000, GRID[1000], settings)
    assert sorted(mine) == sorted(GRID[1000]) and sampling_order(1000, GRID[1000], LadderSettings(seed=4)) != mine


def test_a_prompt_left_unanswered_is_asked_next_and_nothing_twice() -> None:
    """A failed request leaves a gap in a round: the next round asks it, and no answered prompt again."""
    truth = _answer({n: 0.8 for n in LENGTHS})
    settings = LadderSettings()
    asked: dict = {}
    for _ in range(3):
        step = next_round(GRID, asked, TOKENS, settings)
        asked.update({(n, d, r): truth[(n, d, r)] for n, cells in step.asks.items() for d, r in cells})
    gap = next(iter(asked))
    del asked[gap]
    step = next_round(GRID, asked, TOKENS, settings)
    again = {(n, *c) for n, cells in step.asks.items() for c in cells}
    assert gap in again and not again & set(asked)


def test_a_budget_stops_the_ladder_with_the_lengths_left_undetermined() -> None:
    truth = _answer({n: 1.0 for n in LENGTHS})
    budget = 4 * sum(LENGTHS) + 5 * 1000  # the first round, and a little
    step, asked, _ = _climb(truth, LadderSettings(budget=budget))
    assert sum(TOKENS[k[0]] for k in asked) <= budget
    assert step.effective[1] == "undetermined" and "budget" in step.reason


def test_the_absolute_rule_decides_against_its_threshold() -> None:
    step, _, _ = _climb(
        _answer({1000: 1.0, 2000: 1.0, 4000: 0.7, 8000: 0.7, 16000: 0.7}),
        LadderSettings(rule=EffectiveRule("absolute")),
    )
    assert step.effective == (2000, "exact", None)


@pytest.mark.parametrize(
    ("option", "value"), [("delta", 0.0), ("delta", 0.6), ("first", 0), ("growth", 1.0), ("budget", -1.0)]
)
def test_a_setting_out_of_range_is_refused(option: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"adaptive {option}"):
        LadderSettings(**{option: value})


def test_the_ladder_climbs_past_the_suite_only_once_every_length_passed() -> None:
    extended = {**GRID, **{n: [(d, r) for d in DEPTHS for r in range(10)] for n in (32000, 64000)}}
    tokens = {n: float(n) for n in extended}
    settings = LadderSettings(extend=(32000, 64000))

    def climb(curve: dict[int, float]) -> tuple[object, dict]:
        truth = {(n, d, r): float(r < round(10 * curve[n])) for n in extended for d, r in extended[n]}
        asked: dict = {}
        while (step := next_round(extended, asked, tokens, settings)).asks:
            for n, cells in step.asks.items():
                asked.update({(n, d, r): truth[(n, d, r)] for d, r in cells})
        return step, asked

    step, asked = climb({n: 1.0 for n in extended})
    assert step.effective == (64000, "at_least", None) and [r.length for r in step.rungs][-2:] == [32000, 64000]
    step, asked = climb({**{n: 1.0 for n in LENGTHS}, 32000: 0.0, 64000: 1.0})
    assert step.effective == (16000, "exact", None)
    assert not any(k[0] == 64000 for k in asked)  # never climbed: not sampled, and no rung of it
    assert [r.length for r in step.rungs][-1] == 32000
    step, asked = climb({1000: 1.0, 2000: 0.0, 4000: 1.0, 8000: 1.0, 16000: 1.0, 32000: 1.0, 64000: 1.0})
    assert step.effective == (1000, "exact", None) and not any(k[0] > 16000 for k in asked)
    with pytest.raises(ConfigError, match="adaptive extend"):
        LadderSettings(extend=(0,))


def test_a_task_whose_scores_may_lie_between_gets_the_bounds_for_any_score_from_the_first_look() -> None:
    """Whether a dataset's scores are right-or-wrong is the task's word for its parameters and scoring options
    (``TaskSpec.binary``), kept in the plan's grid: S-RT and the kinship M-RS by keyword are 0 or 100; M-RT (a
    share of needles) and any Levenshtein score are not. A graded grid's rungs take the wider bounds for any
    score even while every score seen is 0 or 100, so an oracle's lengths are not passed on bounds that hold
    for right-or-wrong answers alone."""
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.planning.adaptive import LadderGrid, decide, ladder_grid

    grid = dict(suite="4k", langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
    graded = {d["abbr"]: ladder_grid(d, None).graded for d in needlebench_datasets(**grid)}  # type: ignore[union-attr]
    assert graded == {"needlebench_srt_en_4k": False, "needlebench_mrt_en_4k": True, "needlebench_mrs_en_4k": False}
    (levenshtein,) = needlebench_datasets(**grid, tasks=["srt"], metric="levenshtein")
    assert ladder_grid(levenshtein, None).graded is True  # type: ignore[union-attr]
    # the same answers (all right) on a right-or-wrong grid and on a graded one
    cells = {n: tuple((d, f"{n}-{d}-{r}", i, n) for i, (d, r) in enumerate(GRID[n])) for n in LENGTHS}
    binary, partial = LadderGrid("srt", cells), LadderGrid("mrt", cells, graded=True)
    assert LadderGrid.from_dict({"task": "srt", "cells": cells}).graded is False  # a plan from before the field
    settings = LadderSettings()
    first, asks = decide(binary, {}, settings)
    scores = dict.fromkeys(asks, 100.0)
    (b, _), (p, _) = (decide(g, scores, settings, asks) for g in (binary, partial))
    assert [r.answered for r in b.rungs] == [r.answered for r in p.rungs]
    assert all(rp.low < rb.low for rb, rp in zip(b.rungs, p.rungs, strict=True)), (b.rungs, p.rungs)
