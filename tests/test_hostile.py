"""Hostile model output: every grader stays linear, never raises, and scores it 0 with a failure kind.

The inputs are ``bench.hostile_outputs.hostile_outputs`` at full size (1 MB of noise and of digits,
70k unclosed or nested ``\\boxed{``, 40k unclosed ``<think>``, NUL bytes, lone surrogates, 50k CJK
characters, 50k ``## Answer:``), each graded by every grader path of ``bench.hostile``. Speed is checked as a ratio: each input
eight times larger must cost under 32 times as long (linear: 8, quadratic: 64), never as a
wall-clock limit; the per-function tests below each took seconds or raised on the former
quadratic code.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import pytest
from conftest import assert_linear
from garbage_model import GARBAGE_OUTPUTS, GarbageModel

from bench.hostile import failed_safely, grading_cases
from bench.hostile_outputs import hostile_outputs
from needlebench.grading.matching import (
    clean_prediction,
    is_repetitive,
    last_boxed,
    levenshtein_score,
    normalise_answer,
    parse_int,
    reference_boxed,
    strip_thinking,
)
from needlebench.opencompass.dataset import NeedleBenchDataset
from needlebench.tasks import config_params, get_task
from needlebench.tasks.kinship_answer import reference_clean
from needlebench.tasks.needlechain.answer import mentioned_positions, parse_answer, released_value

OUTPUTS = hostile_outputs()
SMALL = hostile_outputs(1_000_000 // 8)  # the same outputs an eighth as long, for the linear-time ratios


def _linear(fn: Callable[[str], object], make: Callable[[int], str], n: int, label: str = "") -> None:
    """``fn`` on ``make(n)`` costs at most linearly more than on ``make(n // 8)``."""
    assert_linear(fn, make(n // 8), make(n), label=label or getattr(fn, "__name__", ""))


@pytest.fixture(scope="module")
def cases() -> list:
    """Every grader path of ``bench.hostile``: at least one per registered task."""
    from needlebench.tasks import task_names

    out = grading_cases()
    assert {task for _, task, _, _ in out} == set(task_names()), out
    return out


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_every_grader_fails_hostile_output_fast_and_safely(name: str, cases: list) -> None:
    text = OUTPUTS[name]
    for label, task, gold, options in cases:
        grade = get_task(task).grade
        result = grade(text, gold, options)
        assert failed_safely(result, options), f"{label} on {name}: {result}"
        if len(text) > 10_000:  # the short fixed outputs have no size to scale
            grade_one = lambda t, g=grade, gold=gold, o=options: g(t, gold, o)  # noqa: E731
            assert_linear(grade_one, SMALL[name], text, label=f"{label} on {name}")
        if options.metric != "levenshtein":
            assert result.score == 0.0


def test_hostile_outputs_are_as_large_as_promised() -> None:
    assert len(OUTPUTS["noise"]) == len(OUTPUTS["digits"]) == 1_000_000
    assert OUTPUTS["boxed_unclosed"].count("\\boxed{") >= 70_000
    assert OUTPUTS["think_unclosed"].count("<think>") == 40_000
    assert OUTPUTS["cjk_repeated"] == "的" * 50_000
    assert OUTPUTS["answer_markers"].count("## Answer:") == 50_000
    assert "\x00" in OUTPUTS["nul_bytes"] and "\ud800" in OUTPUTS["lone_surrogates"]


def test_last_boxed_is_linear_on_a_run_of_unclosed_boxes() -> None:
    # the former version rescanned to the end from every opening: 61 s for 70k
    assert last_boxed("\\boxed{" * 70_000) is None
    assert last_boxed("\\boxed{ok}" + "\\boxed{" * 70_000) == "ok"
    assert last_boxed("\\boxed{" * 70_000 + "x" + "}" * 70_000) == "x"
    _linear(last_boxed, lambda k: "\\boxed{" * k, 70_000)
    _linear(last_boxed, lambda k: "\\boxed{ok}" + "\\boxed{" * k, 70_000)
    _linear(last_boxed, lambda k: "\\boxed{" * k + "x" + "}" * k, 70_000)


def test_last_boxed_keeps_its_meaning() -> None:
    assert last_boxed("\\boxed{a \\boxed{b}}") == "b"
    assert last_boxed("\\boxed{A} then \\boxed{B") == "A"
    assert last_boxed("\\fbox {x{y}z} and \\boxed{c}") == "c"
    assert last_boxed("\\boxed{x \\boxed{y}") == "y"
    assert last_boxed("}\\boxed{{}}{") == "{}"
    assert last_boxed("no box") is None


def test_reference_boxed_is_linear_on_runs_of_boxes_and_braces() -> None:
    for make, n, expected in (
        (lambda k: "\\boxed{" * k, 70_000, lambda k: None),
        (lambda k: "\\boxed{" * k + "x" + "}" * k, 70_000, lambda k: "x"),
        (lambda k: "\\boxed" + "{" * k, 1_000_000, lambda k: None),
        (
            lambda k: "\\boxed" + "{" * (k // 2) + "}" * (k // 2),
            1_000_000,
            lambda k: "{" * (k // 2 - 2) + "}" * (k // 2 - 2),
        ),
    ):
        assert reference_boxed(make(n)) == expected(n)
        _linear(reference_boxed, make, n)


def test_released_value_is_linear_on_digit_runs_and_markers() -> None:
    for make, expected in (
        (lambda k: "$" + "9" * k + "x", None),  # the letter touches the digits: no integer on word boundaries
        (lambda k: "$" + "9" * k, None),  # longer than any value
        (lambda k: "1," * (k // 2), 1),
        (lambda k: "1,000" * (k // 5), 1),  # "1,0001": the group needs a boundary after it
        (lambda k: "## Answer:" * (k // 10), None),
        (lambda k: "." * k, None),
    ):
        assert released_value(make(1_000_000))[0] == expected, make(20)
        _linear(released_value, make, 1_000_000, label=make(20))


def test_normalise_answer_is_linear_on_nested_wrappers() -> None:
    # the former version peeled one level per regex pass over the whole text
    def nested(k: int) -> str:
        return "\\text{" * k + "Ann Lee" + "}" * k

    assert normalise_answer(nested(70_000)) == "ann lee"
    _linear(normalise_answer, nested, 70_000)
    assert normalise_answer("\\textbf{\\text{Bob}}.") == "bob"
    assert normalise_answer("\\text{a{b}} c") == "\\text{a{b}} c"  # a brace group inside: kept


def test_reference_clean_is_linear_on_unclosed_text_wrappers() -> None:
    # ``\\text{([^}]+)}`` rescanned to the end from every unclosed opening
    assert reference_clean("\\text{" * 70_000) == "text{" * 70_000
    _linear(reference_clean, lambda k: "\\text{" * k, 70_000)
    assert reference_clean('\\text{Ann~Lee} "x"') == "Ann Lee x"


def test_parse_answer_is_linear_on_spaces_after_the_marker() -> None:
    # ``-?\\$?\\s*\\d`` retried the whole run of spaces from each of its positions: 10 s for 20k
    assert parse_answer("## Answer:" + " " * 200_000 + "x") == (None, "no_number")
    _linear(parse_answer, lambda k: "## Answer:" + " " * k + "x", 200_000)
    assert parse_answer("## Answer: -$ 1,600.5") == (Fraction(-32010, 20), None)
    assert parse_answer("## Answer: $-5")[0] == -5
    assert parse_answer("## Answer: " + "9" * 1_000)[1] == "no_number"  # longer than any value


def test_number_readers_survive_a_megabyte_of_digits() -> None:
    digits = "7" * 1_000_000
    # int() of 1 MB of digits raised ValueError; float() of it is inf, and int(inf) raised
    assert parse_int(digits) is None
    assert released_value(digits) == (None, "no_number")
    assert released_value("## Answer: $1,600.5 (x 2)") == (Fraction(3201, 2), None)
    assert parse_int("5 generations") == 5 and parse_int("five") == 5
    assert parse_answer("## Answer: " + digits) == (None, "no_number")
    _linear(parse_answer, lambda k: "## Answer: " + "7" * k, 1_000_000)


def test_other_passes_stay_linear_on_megabyte_inputs() -> None:
    names = ["Ann Lee", "Bo", "Cy Moss"]
    large = {name: text for name, text in OUTPUTS.items() if len(text) > 10_000}
    assert len(large) >= 6, sorted(large)  # the megabyte outputs the module docstring lists
    for name, text in large.items():
        small = SMALL[name]
        for fn, cut in (
            (clean_prediction, None),
            (strip_thinking, 200_000),
            (is_repetitive, 200_000),
            (lambda t: mentioned_positions(t, names), 200_000),
            (
                lambda t: levenshtein_score(t, "The hidden treasure is the Pothgon spyglass.", ["Pothgon spyglass"]),
                None,
            ),
        ):
            big = text if cut is None else text[:cut]
            little = small if cut is None else small[: cut // 8]
            assert_linear(fn, little, big, label=f"{getattr(fn, '__name__', fn)} on {name}")


def test_clean_prediction_drops_nul_bytes_and_lone_surrogates() -> None:
    assert clean_prediction("a\x00b\ud800c\udfff") == "abc"
    assert strip_thinking("İİ<think>x</think> answer") == "İİ answer"  # lowering İ lengthens the text
    assert strip_thinking("İ<think>x") == "İ"


# ---- the scripted models (the install check's oracle and garbage model) ----

ORACLE_DATASETS = (
    ("srt", dict(lang="zh", lengths=[1000], depths=[0, 100], repeats=1)),
    ("mrt", dict(lang="en", lengths=[1000], depths=[50], repeats=1, num_needles=[3], protocol="clarified")),
    ("mrs", dict(lang="en", lengths=[1000], depths=[50], repeats=1, num_needles=[2])),
    ("atc", dict(lang="zh", needle_counts=[2, 4], repeats=1)),
    ("needlechain", dict(k_values=[5], points=1)),
    ("atc_mc", dict(lang="en", steps=[2], repeats=1, style="direct")),
)


@pytest.fixture(scope="module")
def loaded() -> list[dict]:
    """The dataset configs the oracle is given, their rows in the cache as the infer task loads them."""
    from needlebench.opencompass.configs import task_dataset

    configs = [task_dataset(f"oracle_{task}", task, params, None) for task, params in ORACLE_DATASETS]
    for cfg in configs:
        cfg["rows"] = list(NeedleBenchDataset.load(cfg["task"], **config_params(cfg)))
        assert cfg["rows"], cfg["abbr"]  # every test below loops over them: none may pass on an empty dataset
    return configs


def test_oracle_model_answers_every_prompt_with_full_marks(loaded: list[dict]) -> None:
    import json

    from needlebench.opencompass.scripted import OracleModel
    from needlebench.scoring import ScoreOptions

    oracle = OracleModel(datasets=[{k: v for k, v in cfg.items() if k != "rows"} for cfg in loaded])
    for cfg in loaded:
        for row in cfg["rows"]:
            gold = json.loads(row["answer"])
            chat = [{"role": "SYSTEM", "prompt": row["system"]}, {"role": "HUMAN", "prompt": row["prompt"]}]
            for prompt in (row["prompt"], chat):
                (answer,) = oracle.generate([prompt], max_out_len=16)
                for options in (ScoreOptions(), ScoreOptions(metric="levenshtein")):
                    assert get_task(row["task"]).grade(answer, gold, options).score == 100.0, (row["id"], answer)


def test_oracle_model_refuses_a_prompt_it_does_not_know(loaded: list[dict]) -> None:
    """A prompt of no dataset it was given is an error, never a wrong answer; so is any prompt without datasets."""
    from needlebench.opencompass.scripted import OracleModel

    known = [{k: v for k, v in cfg.items() if k != "rows"} for cfg in loaded]
    with pytest.raises(LookupError, match="'What is the capital of France"):
        OracleModel(datasets=known).generate([[{"role": "HUMAN", "prompt": "What is the capital of France? " * 5}]], 16)
    with pytest.raises(LookupError, match="none of its 0 datasets"):
        OracleModel().generate([loaded[0]["rows"][0]["prompt"]], 16)


def test_garbage_model_scores_zero_on_every_task(loaded: list[dict]) -> None:
    import json

    from needlebench.scoring import ScoreOptions

    garbage = GarbageModel(size=20_000)
    for cfg in loaded:
        rows = cfg["rows"]
        answers = garbage.generate([r["prompt"] for r in rows] * len(GARBAGE_OUTPUTS), 16)
        for row, answer in zip(rows * len(GARBAGE_OUTPUTS), answers, strict=True):
            result = get_task(row["task"]).grade(answer, json.loads(row["answer"]), ScoreOptions())
            assert result.score == 0.0 and result.error, (row["id"], answer[:60])
