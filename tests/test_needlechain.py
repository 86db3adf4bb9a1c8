"""NeedleChain: an independent solver, both protocols, the paper's prompt, the strict scorer and the taxonomy."""

from __future__ import annotations

import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import assert_linear, run_export

from needlebench.errors import ConfigError
from needlebench.record import GradedSample
from needlebench.scoring import ScoreOptions
from needlebench.tasks.kinship import load_name_pool
from needlebench.tasks.needlechain.answer import mentioned_positions, parse_answer
from needlebench.tasks.needlechain.task import (
    CLARIFIED,
    OPTION_CHOICES,
    REFERENCE,
    STACK_FACTORS,
    VARIANTS,
    ChainParams,
    DataPoint,
    chain_options,
    format_value,
    generate_needlechain,
    grade_needlechain,
    make_datapoint,
    render,
)

# The paper's Table 3 as it appears in the paper text (escapes and all), and Table 4's three chains; checked
# against the paper's own text (test_tables_3_and_4_are_the_papers_words), so the comparisons below hold the
# paper's words, not a transcription of them.
TABLE3 = (
    "**## System Prompt** You are a financial assistant AI skilled in calculating wages and solving "
    "salary-related queries. I will give you context with the facts about salary of several people. You need "
    "to answer the question based only on the information from the facts. Before you derive the final answer, "
    "provide me a brief explanation. Output your final verdict by strictly following this format: "
    "'## Answer: \\${your\\_answer}' **## Input Template** There are {num\\_names} workers in the office. "
    "Their names are as follows: {names} Salary for each worker is as follows: {chain} Now, respond to my "
    "question: {question} --- Table 3"
)


TABLE4_NAMES = ("Cairo", "Ramon", "Nala", "Kase", "Ryker")
TABLE4_FORWARD = (
    "Cairo received $1600 last week.\nRamon earns twice as much as Cairo.\nNala earns the same salary as Ramon.\n"
    "Kase earns the same salary as Nala.\nRyker earns twice as much as Kase."
)
TABLE4_MIXED = (
    "Ramon earns twice as much as Cairo.\nRyker earns twice as much as Kase.\nNala earns the same salary as Ramon.\n"
    "Cairo received $1600 last week.\nKase earns the same salary as Nala."
)


def squash(text: str) -> str:
    return " ".join(text.split())


def solve(user_prompt: str) -> Fraction:
    """Read only the facts and the question (either layout); compute the asked salary or total exactly."""
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

    roster = re.search(r"There are (\d+) workers: (.+)\.\n", user_prompt) or re.search(
        r"There are (\d+) workers in the office\.\nTheir names are as follows: (.+)\n", user_prompt
    )
    names = roster.group(2).split(", ")
    assert len(names) == int(roster.group(1)) == len(facts)
    question = re.search(r"(?:Question: |respond to my question:\n)(.+)", user_prompt).group(1)
    if re.match(r"(What|How much) is the total salary", question):
        return sum((salary(n) for n in names), Fraction(0))
    who = re.fullmatch(r"What is (.+)'s salary\?|How much salary did (.+) get\?", question)
    return salary(who.group(1) or who.group(2))


def facts_of(user: str) -> list[str]:
    """The fact lines of either layout."""
    m = re.search(r"(?:Salary facts:|Salary for each worker is as follows:)\n(.+?)\n\n", user, re.S)
    return m.group(1).splitlines()


def roster_of(user: str) -> list[str]:
    m = re.search(r"workers: (.+)\.\n", user) or re.search(r"Their names are as follows: (.+)\n", user)
    return m.group(1).split(", ")


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
        assert meta["protocol"] == "reference"  # the default
        assert meta["options"] == {
            "prompt_style": "reference",
            "roster": "paper",
            "names": "single",
            "values": "released",
            "scoring": "released",
        }


@pytest.mark.parametrize("protocol", ["reference", "clarified"])
def test_solver_matches_gold_in_process(protocol: str) -> None:
    for s in generate_needlechain(ChainParams(k_values=(5, 50), points=3, protocol=protocol)):
        assert solve(s.prompt) == Fraction(s.gold["value"]), s.id
        assert s.meta["protocol"] == protocol


def test_protocol_and_options_are_recorded_and_overridable() -> None:
    params = ChainParams(k_values=(5,), points=1, variants=("forward",), questions=("single",), roster="shuffled")
    (s,) = generate_needlechain(params)
    assert s.meta["protocol"] == "reference"
    assert s.meta["options"] == {
        "prompt_style": "reference",
        "roster": "shuffled",
        "names": "single",
        "values": "released",
        "scoring": "released",
    }
    assert chain_options("clarified") == CLARIFIED == ChainParams(protocol="clarified").chain_options()
    assert chain_options("clarified", names="single") == CLARIFIED.__class__(
        "clarified", "shuffled", "single", "bounded", "strict"
    )
    assert chain_options("reference", values="") == REFERENCE


@pytest.mark.parametrize(
    ("field", "value"),
    [("protocol", "paper"), ("prompt_style", "terse"), ("roster", "sorted"), ("names", "surname"), ("values", "any")],
)
def test_unknown_protocol_or_option_names_the_choices(field: str, value: str) -> None:
    choices = ("reference", "clarified") if field == "protocol" else OPTION_CHOICES[field]
    with pytest.raises(ConfigError) as info:
        list(generate_needlechain(ChainParams(k_values=(5,), points=1, **{field: value})))
    message = str(info.value)
    assert field in message and repr(value) in message
    assert all(c in message for c in choices), message


# --- the reference protocol: the paper's prompt and the released generator ---


def test_tables_3_and_4_are_the_papers_words(paper_texts: Path) -> None:
    """The prompt (Table 3) and the three chains (Table 4) the tests below hold are in the paper's text."""
    paper = (paper_texts / "needlechain.txt").read_text(encoding="utf-8")
    assert TABLE3 in squash(paper)
    backward = "\n".join(TABLE4_FORWARD.split("\n")[::-1])
    assert TABLE4_FORWARD in paper and backward in paper and TABLE4_MIXED in paper
    assert f"Their names are as follows: {', '.join(TABLE4_NAMES)}" in paper


def test_reference_prompt_matches_paper_table3() -> None:
    paper = TABLE3.replace("\\$", "$").replace("\\_", "_")
    system_t, user_t = (
        paper.removeprefix("**## System Prompt** ").removesuffix(" --- Table 3").split(" **## Input Template** ")
    )
    dp = make_datapoint(10, 4, 0)
    for variant in VARIANTS:
        for question in ("single", "total"):
            system, user, _, _ = render(dp, variant, question)
            facts = "\n".join(facts_of(user))
            ask = user.rsplit("\n", 1)[1]
            expected = (
                user_t.replace("{num_names}", "10")
                .replace("{names}", ", ".join(dp.names))
                .replace("{chain}", facts)
                .replace("{question}", ask)
            )
            assert squash(system) == squash(system_t)
            assert squash(user) == squash(expected)
    assert system.endswith("'## Answer: ${your_answer}' ")  # the released prompt's trailing space
    assert system.count("\n") == 4 and not user.endswith("\n")
    assert user.startswith("There are 10 workers in the office.\nTheir names are as follows: ")
    assert "\n\nSalary for each worker is as follows:\n" in user and "\n\nNow, respond to my question:\n" in user


def test_reference_rendering_reproduces_paper_table4() -> None:
    salaries = tuple(Fraction(v) for v in (1600, 3200, 3200, 3200, 6400))
    dp = DataPoint(5, 0, TABLE4_NAMES, ("twice", "same", "same", "twice"), 1600, salaries, (1, 4, 2, 0, 3), (0, 1, 2, 3, 4),
                   (0, 1, 2, 3, 4), salaries)  # fmt: skip
    forward, chaotic = TABLE4_FORWARD, TABLE4_MIXED
    head = "There are 5 workers in the office.\nTheir names are as follows: Cairo, Ramon, Nala, Kase, Ryker\n\n"
    tail = "\n\nNow, respond to my question:\nHow much salary did Ryker get?"
    for variant, chain in (
        ("forward", forward),
        ("backward", "\n".join(forward.split("\n")[::-1])),
        ("mixed", chaotic),
    ):
        _, user, gold, asked = render(dp, variant, "single")
        assert user == f"{head}Salary for each worker is as follows:\n{chain}{tail}"
        assert (gold, asked) == (6400, "Ryker")


def test_reference_values_follow_the_released_generator() -> None:
    shares: Counter[str] = Counter()
    left_window = False
    for k in (5, 20, 200):
        for index in range(40):
            dp = make_datapoint(k, index, 0)
            assert dp.base == 1600 and dp.salaries[0] == 1600
            assert dp.chain_needles()[0] == f"{dp.names[0]} received $1600 last week."
            assert 25 <= dp.salaries[-1] <= 102400  # only the final value is bounded (then redrawn) ...
            left_window |= any(not 25 <= s <= 102400 for s in dp.salaries)  # ... running values may leave it
            shares.update(dp.relations)
            assert all(s / 1600 in STACK_FACTORS for s in dp.stack_salaries)
            for variant in VARIANTS:
                for question in ("single", "total"):
                    _, _, gold, _ = render(dp, variant, question)
                    assert Fraction(format_value(gold)) == gold
            _, _, total, _ = render(dp, "stack", "total")
            assert total == sum(dp.stack_salaries)
            _, _, single, _ = render(dp, "stack", "single")
            assert single == dp.stack_salaries[-1]
            _, _, chain_total, _ = render(dp, "mixed", "total")
            assert chain_total == sum(dp.salaries)
    assert left_window
    n = sum(shares.values())
    assert set(shares) == {"twice", "half", "same"}
    assert all(abs(c / n - 1 / 3) < 0.03 for c in shares.values()), shares
    stack_factors = Counter(
        s / 1600 for k in (50, 200) for i in range(10) for s in make_datapoint(k, i, 0).stack_salaries
    )
    assert set(stack_factors) == set(STACK_FACTORS)


def test_reference_stack_uses_float_wording_and_exact_gold() -> None:
    dp = make_datapoint(20, 1, 0)
    _, user, gold, _ = render(dp, "stack", "total")
    values = re.findall(r"received \$([\d.]+) last week", user)
    assert values and all(v.endswith(".0") for v in values)  # the released str(float) rendering
    assert sorted(Fraction(v) for v in values) == sorted(dp.stack_salaries)
    assert format_value(gold) == str(sum(dp.stack_salaries).numerator)  # gold stays exact, no ".0"
    stack_names = [re.match(r"(.+) received", f).group(1) for f in facts_of(user)]
    assert sorted(stack_names) == sorted(dp.names) and stack_names != list(dp.names)  # a seeded permutation


def test_reference_names_are_single_distinct_and_in_reasoning_order() -> None:
    first = set(load_name_pool("en").first)
    for k in (5, 200):
        for index in range(10):
            dp = make_datapoint(k, index, 0)
            assert len(set(dp.names)) == k and all(" " not in n and n in first for n in dp.names)
            for variant in VARIANTS:
                _, user, _, asked = render(dp, variant, "single")
                assert roster_of(user) == list(dp.names)  # the paper's roster: reasoning order
                assert asked == dp.names[-1] and user.endswith(f"How much salary did {dp.names[-1]} get?")
                _, user, _, _ = render(dp, variant, "total")
                assert user.endswith("How much is the total salary of the referenced people?")
    assert make_datapoint(20, 3, 0).names != make_datapoint(20, 4, 0).names


def test_datapoints_are_pure_functions_of_their_coordinates() -> None:
    for options in (REFERENCE, CLARIFIED):
        assert make_datapoint(50, 7, 3, options) == make_datapoint(50, 7, 3, options)
        assert make_datapoint(50, 7, 3, options) != make_datapoint(50, 7, 4, options)


# --- the clarified protocol: today's behaviour ---


def test_clarified_values_stay_in_window_and_are_exact() -> None:
    for k in (5, 50, 200):
        for index in range(20):
            dp = make_datapoint(k, index, 0, CLARIFIED)
            assert dp.stack_salaries == dp.salaries
            assert all(" " in n for n in dp.names)  # "First Last"
            for s in dp.salaries:
                assert Fraction(dp.base, 64) <= s <= dp.base * 64
                assert Fraction(format_value(s)) == s


def test_clarified_renderings_share_facts_and_names() -> None:
    dp = make_datapoint(20, 3, 0, CLARIFIED)
    fact_sets = {}
    for variant in VARIANTS:
        system, user, _, asked = render(dp, variant, "single")
        assert "payroll assistant" in system and user.rstrip().endswith("'## Answer: <value>'.")
        assert f"Question: What is {asked}'s salary?" in user and asked == dp.names[-1]
        fact_sets[variant] = facts_of(user)
        roster = roster_of(user)
        assert sorted(roster) == sorted(dp.names)
        assert roster != list(dp.names)  # the roster leaks no order
    assert fact_sets["forward"] != fact_sets["backward"]
    assert set(fact_sets["forward"]) == set(fact_sets["backward"]) == set(fact_sets["mixed"])
    assert fact_sets["backward"] == fact_sets["forward"][::-1]
    stack_names = {re.match(r"(.+) received", f).group(1) for f in fact_sets["stack"]}
    assert stack_names == set(dp.names)
    assert not any(re.search(r"\$\d+\.0 ", f) for f in fact_sets["stack"])  # exact decimals, no float quirk


def test_reference_facts_are_shared_across_chain_variants() -> None:
    dp = make_datapoint(20, 3, 0)
    facts = {v: facts_of(render(dp, v, "single")[1]) for v in VARIANTS}
    assert facts["backward"] == facts["forward"][::-1]
    assert sorted(facts["mixed"]) == sorted(facts["forward"]) and facts["mixed"] != facts["forward"]


# --- scoring ---

GOLD = {
    "value": "1600",
    "names": ["Ann Lee", "Bo Park", "Cy Moss", "Di Ward"],
    "variant": "forward",
    "question": "single",
    "asked": "Di Ward",
    "scoring": "strict",
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
        ("Di Ward earns 1600.\n## Answer: 1600", False, "needle_omission"),  # a lucky guess
        (f"<think>{ALL} maybe 800</think>{ALL}\n## Answer: 1600", True, None),
        ("<think>Ann Lee, Bo Park, Cy Moss</think>Di Ward.\n## Answer: 1600", False, "needle_omission"),
        (f"{ALL}\n## Answer: 1600.5", False, "calculation_error"),
        (f"{ALL}\n## Answer: -1600", False, "calculation_error"),
    ],
)
def test_scorer_on_hand_written_responses(response: object, correct: bool, error: str | None) -> None:
    r = grade_needlechain(response, GOLD, ScoreOptions())
    assert r.correct is correct and r.error == error, (response, r)
    assert r.score == (100.0 if correct else 0.0)
    assert isinstance(r.extras["plain_correct"], bool) and len(r.extras["mentioned"]) == 4


def test_right_value_with_missing_names_is_needle_omission_unless_released() -> None:
    response = "Ann Lee gets 1600 and so does Di Ward.\n## Answer: 1600"
    strict = grade_needlechain(response, GOLD, ScoreOptions())
    assert (strict.score, strict.correct, strict.error) == (0.0, False, "needle_omission")
    assert strict.extras["plain_correct"] is True and strict.extras["missing_positions"] == [2, 3]
    released = grade_needlechain(response, {**GOLD, "scoring": "released"}, ScoreOptions())
    assert (released.score, released.correct, released.error) == (100.0, True, None)
    assert released.extras["plain_correct"] is True
    wrong = grade_needlechain(f"{ALL}\n## Answer: 800", GOLD, ScoreOptions())
    assert wrong.extras["plain_correct"] is False


def test_ignoring_the_chain_and_answering_the_first_salary_scores_zero() -> None:
    index = next(i for i in range(200) if make_datapoint(10, i, 0).salaries[-1] == 1600)
    dp = make_datapoint(10, index, 0)
    for variant in ("forward", "backward", "mixed"):
        _, _, gold_value, asked = render(dp, variant, "single")
        gold = {"value": format_value(gold_value), "names": list(dp.names), "variant": variant,
                "question": "single", "asked": asked, "scoring": "strict"}  # fmt: skip
        assert gold["value"] == "1600"
        r = grade_needlechain("## Answer: 1600", gold, ScoreOptions())
        assert r.score == 0.0 and r.error == "needle_omission" and r.extras["plain_correct"] is True
        assert r.extras["missing_positions"] == list(range(1, 11))
        explained = " ".join(dp.names) + "\n## Answer: 1600"
        assert grade_needlechain(explained, gold, ScoreOptions()).correct


def test_stack_single_needs_only_the_asked_person_and_stack_total_needs_all() -> None:
    single = {**GOLD, "variant": "stack"}
    assert grade_needlechain("Di Ward received 1600.\n## Answer: 1600", single, ScoreOptions()).correct
    total = {**GOLD, "variant": "stack", "question": "total"}
    r = grade_needlechain("Di Ward received 1600.\n## Answer: 1600", total, ScoreOptions())
    assert r.error == "needle_omission" and r.extras["missing_positions"] == [1, 2, 3]


def test_mentions_match_whole_words_in_any_case() -> None:
    names = ["Arianna", "Ana", "Bo", "Cy"]
    assert mentioned_positions("Marianna and Anastasia met Bob and Cyril.", names) == [False] * 4
    assert mentioned_positions("ARIANNA's pay, ana: 5; bo-cy", names) == [True] * 4
    gold = {
        "value": "1600",
        "names": names,
        "variant": "mixed",
        "question": "single",
        "asked": "Cy",
        "scoring": "strict",
    }
    r = grade_needlechain("Marianna, Ana, Bo and Cy.\n## Answer: 1600", gold, ScoreOptions())
    assert r.error == "needle_omission" and r.extras["missing_positions"] == [1]


def test_first_name_mention_counts_only_when_unambiguous() -> None:
    assert mentioned_positions("Ann, Bo, Cy and Di all earn it.", GOLD["names"]) == [True] * 4
    assert grade_needlechain("Ann, Bo, Cy and Di.\n## Answer: 1600", GOLD, ScoreOptions()).correct
    shared = ["Ann Lee", "Ann Park", "Cy Moss", "Di Ward"]
    assert mentioned_positions("Ann, Cy Moss and Di.", shared) == [False, False, True, True]
    assert mentioned_positions("Ann Lee, Cy and Di.", shared) == [True, False, True, True]
    assert mentioned_positions("Lee and Park are surnames, not first names.", GOLD["names"]) == [False] * 4
    gold = {**GOLD, "names": shared}
    r = grade_needlechain("Ann, Cy Moss and Di Ward.\n## Answer: 1600", gold, ScoreOptions())
    assert r.error == "needle_omission" and r.extras["missing_positions"] == [1, 2]


def test_mention_detection_is_linear_in_the_response() -> None:
    dp = make_datapoint(200, 0, 0, CLARIFIED)
    chunk = " ".join(dp.names[::2]) + " and then some filler words. "
    text = chunk * (1_000_000 // len(chunk))
    mentioned = mentioned_positions(text, dp.names)
    assert sum(mentioned) >= 100 and all(mentioned[::2])
    assert_linear(lambda t: mentioned_positions(t, dp.names), chunk * (125_000 // len(chunk)), text)


def test_fractional_gold_compares_exactly() -> None:
    gold = {**GOLD, "value": "12.5"}
    for text in ("## Answer: 12.5", "## Answer: 25/2", "## Answer: $12.50"):
        assert grade_needlechain(f"{ALL} {text}", gold, ScoreOptions()).correct, text
    assert not grade_needlechain(f"{ALL} ## Answer: 12", gold, ScoreOptions()).correct
    assert parse_answer("## Answer: 0.048828125")[0] == Fraction(25, 512)


def test_released_scoring_reads_the_value_the_released_way() -> None:
    gold, options = {**GOLD, "value": "12.5", "scoring": "released"}, ScoreOptions()
    assert grade_needlechain("so about $12.5", gold, options).correct  # no marker needed, no omission rule
    assert not grade_needlechain("so about 12.5", gold, options).correct  # "about12" holds no integer
    assert not grade_needlechain(f"{ALL} ## Answer: 12", gold, options).correct  # the gold is not truncated
    assert not grade_needlechain(f"{ALL} ## Answer: 12", {**gold, "scoring": "strict"}, options).correct


def test_position_profile_bins_by_reasoning_and_presented_order() -> None:
    from needlebench.tasks.needlechain.results import position_profile

    fields = {
        "k": 4,
        "variant": "backward",
        "mentioned": [True, True, False, False],
        "presented_positions": [3, 2, 1, 0],
    }
    details = [GradedSample("a", "needlechain", "en", fields, 50.0)]
    prof = position_profile(details, bins=2)
    assert prof["backward"]["reasoning"] == [100.0, 0.0]
    assert prof["backward"]["presented"] == [0.0, 100.0]


def test_position_profile_reads_grader_mentions() -> None:
    from needlebench.tasks.needlechain.results import position_profile

    r = grade_needlechain("Ann Lee and Bo Park.\n## Answer: 1600", GOLD, ScoreOptions())
    detail = GradedSample("a", "needlechain", "en", {"k": 4, "variant": "forward", **r.extras}, r.score)
    assert position_profile([detail], bins=2)["forward"]["reasoning"] == [100.0, 0.0]


def test_omitting_two_names_is_needle_omission_with_positions() -> None:
    r = grade_needlechain("Ann Lee earns 1600, so Cy Moss too.\n## Answer: 100", GOLD, ScoreOptions())
    assert r.error == "needle_omission"
    assert r.extras["missing_positions"] == [2, 4]
    assert r.extras["mentioned"] == [True, False, True, False]
    stack = {**GOLD, "variant": "stack"}
    r = grade_needlechain("Di Ward received 100.\n## Answer: 100", stack, ScoreOptions())
    assert r.error == "calculation_error"  # stack single needs only the asked person
