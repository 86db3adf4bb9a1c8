"""NeedleChain: an independent solver, rendering invariants, the scorer and the error taxonomy."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from conftest import run_export

from needlebench.chains import VARIANTS, format_value, grade_needlechain, make_datapoint, parse_answer, render
from needlebench.graders import ScoreOptions


def solve(user_prompt: str) -> Fraction:
    """Read only the facts and the question; compute the asked salary or total exactly."""
    facts = re.findall(
        r"^(.+?) (received \$([\d.]+) last week|earns (twice|half) as much as (.+?)|"
        r"earns the same salary as (.+?))\.$",
        user_prompt,
        re.M,
    )
    absolute: dict[str, Fraction] = {}
    relative: dict[str, tuple[Fraction, str]] = {}
    for name, _, value, rel, ref1, ref2 in facts:
        if value:
            absolute[name] = Fraction(value)
        else:
            factor = {"twice": Fraction(2), "half": Fraction(1, 2), "": Fraction(1)}[rel]
            relative[name] = (factor, ref1 or ref2)

    def salary(name: str, depth: int = 0) -> Fraction:
        if name in absolute:
            return absolute[name]
        assert depth < 10_000
        factor, ref = relative[name]
        return factor * salary(ref, depth + 1)

    roster = re.search(r"There are (\d+) workers: (.+)\.\n", user_prompt)
    names = roster.group(2).split(", ")
    assert len(names) == int(roster.group(1))
    question = re.search(r"Question: (.+)", user_prompt).group(1)
    if question.startswith("What is the total salary"):
        return sum((salary(n) for n in names), Fraction(0))
    who = re.match(r"What is (.+)'s salary\?", question).group(1)
    return salary(who)


@pytest.fixture(scope="module")
def chain_export(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_export("tests/configs/export_chain.py", tmp_path_factory.mktemp("chain") / "chain.jsonl")


def test_independent_solver_matches_gold_everywhere(chain_export: list[dict]) -> None:
    assert len(chain_export) == 6 * 3 * 4 * 2
    for row in chain_export:
        assert row["task"] == "needlechain" and "## Answer:" in row["system"]
        assert solve(row["prompt"]) == Fraction(row["gold"]["value"]), row["id"]
        meta = row["meta"]
        assert {
            "k",
            "variant",
            "question",
            "names_reasoning_order",
            "names_presented_order",
            "relations",
            "base_value",
        } <= set(meta)
        assert len(meta["relations"]) == meta["k"] - 1


def test_values_stay_in_window_and_are_exact() -> None:
    for k in (5, 50, 200):
        for index in range(20):
            dp = make_datapoint(k, index, 0)
            for s in dp.salaries:
                assert Fraction(dp.base, 64) <= s <= dp.base * 64
                assert Fraction(format_value(s)) == s


def test_renderings_share_facts_and_names() -> None:
    dp = make_datapoint(20, 3, 0)
    fact_sets = {}
    for variant in VARIANTS:
        _, user, _, _ = render(dp, variant, "single")
        facts = user.split("Salary facts:\n")[1].split("\n\nQuestion")[0].splitlines()
        fact_sets[variant] = facts
        roster = re.search(r"workers: (.+)\.\n", user).group(1).split(", ")
        assert sorted(roster) == sorted(dp.names)
        assert roster != list(dp.names)  # the roster leaks no order
    assert fact_sets["forward"] != fact_sets["backward"]
    assert set(fact_sets["forward"]) == set(fact_sets["backward"]) == set(fact_sets["mixed"])
    assert fact_sets["backward"] == fact_sets["forward"][::-1]
    stack_names = {re.match(r"(.+) received", f).group(1) for f in fact_sets["stack"]}
    assert stack_names == set(dp.names)


GOLD = {
    "value": "1600",
    "names": ["Ann Lee", "Bo Park", "Cy Moss", "Di Ward"],
    "variant": "forward",
    "question": "single",
    "asked": "Di Ward",
}
ALL = "Ann Lee, Bo Park, Cy Moss and Di Ward."


@pytest.mark.parametrize(
    ("response", "correct", "error"),
    [
        (f"{ALL}\n## Answer: 1600", True, None),
        (f"{ALL}\n## Answer: $1,600.00", True, None),
        (f"{ALL}\n## Answer: 1600 dollars", True, None),
        (f"{ALL}\n## Answer: $1600", True, None),
        (f"{ALL}\n## Answer:1600", True, None),
        (f"{ALL}\n## Answer: 1,600", True, None),
        (f"{ALL}\n## Answer: 3200/2", True, None),
        (f"{ALL}\n## answer: 1600", True, None),
        (f"{ALL}\n## Answer: 800\n...wait\n## Answer: 1600", True, None),
        (f"{ALL}\n## Answer: 1600\n...wait\n## Answer: 800", False, "calculation_error"),
        (f"{ALL}\n## Answer: 1601", False, "calculation_error"),
        (f"{ALL}\n## Answer: 16000", False, "calculation_error"),
        (f"{ALL}\n## Answer: 4x", False, "instruction_not_followed"),
        (f"{ALL}\n## Answer: 50%", False, "instruction_not_followed"),
        (f"{ALL}\nThe answer is 1600.", False, "instruction_not_followed"),
        (f"{ALL}\n## Answer: unknown", False, "instruction_not_followed"),
        ("", False, "instruction_not_followed"),
        (None, False, "instruction_not_followed"),
        ("Di Ward earns 800.\n## Answer: 800", False, "needle_omission"),
        (f"<think>{ALL} maybe 800</think>{ALL}\n## Answer: 1600", True, None),
        (f"{ALL}\n## Answer: 1600.5", False, "calculation_error"),
        (f"{ALL}\n## Answer: -1600", False, "calculation_error"),
    ],
)
def test_scorer_on_hand_written_responses(response: object, correct: bool, error: str | None) -> None:
    r = grade_needlechain(response, GOLD, ScoreOptions())
    assert r.correct is correct and r.error == error, (response, r)


def test_fractional_gold_compares_exactly() -> None:
    gold = {**GOLD, "value": "12.5"}
    for text in ("## Answer: 12.5", "## Answer: 25/2", "## Answer: $12.50"):
        assert grade_needlechain(f"{ALL} {text}", gold, ScoreOptions()).correct, text
    assert not grade_needlechain(f"{ALL} ## Answer: 12", gold, ScoreOptions()).correct
    assert parse_answer("## Answer: 0.048828125")[0] == Fraction(25, 512)


def test_lenient_mode_mimics_released_scorer() -> None:
    gold = {**GOLD, "value": "12.5"}
    lenient = ScoreOptions(lenient=True)
    assert grade_needlechain(f"{ALL} so about 12", gold, lenient).correct  # integer part, no marker needed
    assert not grade_needlechain(f"{ALL} ## Answer: 12", gold, ScoreOptions()).correct


def test_position_profile_bins_by_reasoning_and_presented_order() -> None:
    from needlebench.chains import position_profile

    details = [
        {
            "task": "needlechain",
            "k": 4,
            "variant": "backward",
            "mentioned": [True, True, False, False],
            "presented_positions": [3, 2, 1, 0],
        }
    ]
    prof = position_profile(details, bins=2)
    assert prof["backward"]["reasoning"] == [100.0, 0.0]
    assert prof["backward"]["presented"] == [0.0, 100.0]


def test_omitting_two_names_is_needle_omission_with_positions() -> None:
    r = grade_needlechain("Ann Lee earns 1600, so Cy Moss too.\n## Answer: 100", GOLD, ScoreOptions())
    assert r.error == "needle_omission"
    assert r.extras["missing_positions"] == [2, 4]
    assert r.extras["mentioned"] == [True, False, True, False]
    stack = {**GOLD, "variant": "stack"}
    r = grade_needlechain("Di Ward received 100.\n## Answer: 100", stack, ScoreOptions())
    assert r.error == "calculation_error"  # stack single needs only the asked person
