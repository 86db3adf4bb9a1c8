"""Hostile model output: every grader stays linear, never raises, and scores it 0 with a failure kind.

The inputs are ``needlebench.grading.matching.hostile_outputs`` at full size (1 MB of noise and of digits,
70k unclosed or nested ``\\boxed{``, 40k unclosed ``<think>``, NUL bytes, lone surrogates, 50k CJK
characters, 50k ``## Answer:``), each graded by every grader path of ``bench.hostile``. The
time bounds are generous (a linear grader needs milliseconds); the per-function tests below
each took seconds or raised on the former quadratic code.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's bench package

from bench.hostile import failed_safely, grading_cases  # noqa: E402
from needlebench.grading.graders import is_repetitive, parse_int, reference_clean  # noqa: E402
from needlebench.grading.matching import (  # noqa: E402
    clean_prediction,
    hostile_outputs,
    last_boxed,
    levenshtein_score,
    normalise_answer,
    reference_boxed,
    strip_thinking,
)
from needlebench.tasks import get_task  # noqa: E402
from needlebench.tasks.needlechain import mentioned_positions, parse_answer, released_value  # noqa: E402

OUTPUTS = hostile_outputs()
# Generous bounds that only a super-linear parser misses (the former versions took from several seconds to a
# minute on these inputs; a linear one needs milliseconds), so a loaded CI machine does not fail them.
BOUND_S = 5.0  # per input and grader
FAST_S = 5.0  # per call of a formerly slow function


@pytest.fixture(scope="module")
def cases() -> list:
    return grading_cases()


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_every_grader_fails_hostile_output_fast_and_safely(name: str, cases: list) -> None:
    text = OUTPUTS[name]
    for label, task, gold, options in cases:
        start = time.perf_counter()
        result = get_task(task).grade(text, gold, options)
        spent = time.perf_counter() - start
        assert spent < BOUND_S, f"{label} took {spent:.2f} s on {name}"
        assert failed_safely(result, options), f"{label} on {name}: {result}"
        if options.metric != "levenshtein":
            assert result.score == 0.0


def test_hostile_outputs_are_as_large_as_promised() -> None:
    assert len(OUTPUTS["noise"]) == len(OUTPUTS["digits"]) == 1_000_000
    assert OUTPUTS["boxed_unclosed"].count("\\boxed{") >= 70_000
    assert OUTPUTS["think_unclosed"].count("<think>") == 40_000
    assert OUTPUTS["cjk_repeated"] == "的" * 50_000
    assert OUTPUTS["answer_markers"].count("## Answer:") == 50_000
    assert "\x00" in OUTPUTS["nul_bytes"] and "\ud800" in OUTPUTS["lone_surrogates"]


def _timed(fn, *args):  # noqa: ANN001, ANN202 - any function, any result
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def test_last_boxed_is_linear_on_a_run_of_unclosed_boxes() -> None:
    # the former version rescanned to the end from every opening: 61 s for 70k
    result, spent = _timed(last_boxed, "\\boxed{" * 70_000)
    assert result is None and spent < FAST_S
    result, spent = _timed(last_boxed, "\\boxed{ok}" + "\\boxed{" * 70_000)
    assert result == "ok" and spent < FAST_S
    result, spent = _timed(last_boxed, "\\boxed{" * 70_000 + "x" + "}" * 70_000)
    assert result == "x" and spent < FAST_S


def test_last_boxed_keeps_its_meaning() -> None:
    assert last_boxed("\\boxed{a \\boxed{b}}") == "b"
    assert last_boxed("\\boxed{A} then \\boxed{B") == "A"
    assert last_boxed("\\fbox {x{y}z} and \\boxed{c}") == "c"
    assert last_boxed("\\boxed{x \\boxed{y}") == "y"
    assert last_boxed("}\\boxed{{}}{") == "{}"
    assert last_boxed("no box") is None


def test_reference_boxed_is_linear_on_runs_of_boxes_and_braces() -> None:
    for text, expected in (
        ("\\boxed{" * 70_000, None),
        ("\\boxed{" * 70_000 + "x" + "}" * 70_000, "x"),
        ("\\boxed" + "{" * 1_000_000, None),
        ("\\boxed" + "{" * 500_000 + "}" * 500_000, "{" * 499_998 + "}" * 499_998),
    ):
        result, spent = _timed(reference_boxed, text)
        assert result == expected and spent < FAST_S


def test_released_value_is_linear_on_digit_runs_and_markers() -> None:
    for text, expected in (
        ("$" + "9" * 1_000_000 + "x", None),  # the letter touches the digits: no integer on word boundaries
        ("$" + "9" * 1_000_000, None),  # longer than any value
        ("1," * 500_000, 1),
        ("1,000" * 200_000, 1),  # "1,0001": the group needs a boundary after it
        ("## Answer:" * 100_000, None),
        ("." * 1_000_000, None),
    ):
        result, spent = _timed(released_value, text)
        assert result[0] == expected and spent < FAST_S, text[:20]


def test_normalise_answer_is_linear_on_nested_wrappers() -> None:
    # the former version peeled one level per regex pass over the whole text
    nested = "\\text{" * 70_000 + "Ann Lee" + "}" * 70_000
    result, spent = _timed(normalise_answer, nested)
    assert result == "ann lee" and spent < FAST_S
    assert normalise_answer("\\textbf{\\text{Bob}}.") == "bob"
    assert normalise_answer("\\text{a{b}} c") == "\\text{a{b}} c"  # a brace group inside: kept


def test_reference_clean_is_linear_on_unclosed_text_wrappers() -> None:
    # ``\\text{([^}]+)}`` rescanned to the end from every unclosed opening
    result, spent = _timed(reference_clean, "\\text{" * 70_000)
    assert spent < FAST_S and result == "text{" * 70_000
    assert reference_clean('\\text{Ann~Lee} "x"') == "Ann Lee x"


def test_parse_answer_is_linear_on_spaces_after_the_marker() -> None:
    # ``-?\\$?\\s*\\d`` retried the whole run of spaces from each of its positions: 10 s for 20k
    result, spent = _timed(parse_answer, "## Answer:" + " " * 200_000 + "x")
    assert result == (None, "no_number") and spent < FAST_S
    assert parse_answer("## Answer: -$ 1,600.5") == (Fraction(-32010, 20), None)
    assert parse_answer("## Answer: $-5")[0] == -5
    assert parse_answer("## Answer: " + "9" * 1_000)[1] == "no_number"  # longer than any value


def test_number_readers_survive_a_megabyte_of_digits() -> None:
    digits = "7" * 1_000_000
    # int() of 1 MB of digits raised ValueError; float() of it is inf, and int(inf) raised
    assert _timed(parse_int, digits)[0] is None
    assert _timed(released_value, digits)[0] == (None, "no_number")
    assert released_value("## Answer: $1,600.5 (x 2)") == (Fraction(3201, 2), None)
    assert parse_int("5 generations") == 5 and parse_int("five") == 5
    result, spent = _timed(parse_answer, "## Answer: " + digits)
    assert result == (None, "no_number") and spent < FAST_S


def test_other_passes_stay_fast_on_megabyte_inputs() -> None:
    names = ["Ann Lee", "Bo", "Cy Moss"]
    for text in OUTPUTS.values():
        for fn, args in (
            (clean_prediction, (text,)),
            (strip_thinking, (text[:200_000],)),
            (is_repetitive, (text[:200_000],)),
            (mentioned_positions, (text[:200_000], names)),
            (levenshtein_score, (text, "The hidden treasure is the Pothgon spyglass.", ["Pothgon spyglass"])),
        ):
            assert _timed(fn, *args)[1] < FAST_S, fn.__name__


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
def loaded() -> Iterator[list]:
    """Datasets as the infer task loads them, registered where the oracle looks."""
    from needlebench.opencompass import dataset

    before = len(dataset.LOADED)
    for task, params in ORACLE_DATASETS:
        dataset.NeedleBenchDataset.load(task, **params)
    yield dataset.LOADED[before:]
    del dataset.LOADED[before:]


def test_oracle_model_answers_every_prompt_with_full_marks(loaded: list) -> None:
    import json

    from needlebench.grading.graders import ScoreOptions
    from needlebench.opencompass.scripted import OracleModel

    oracle = OracleModel()
    for ds in loaded:
        for row in ds:
            gold = json.loads(row["answer"])
            chat = [{"role": "SYSTEM", "prompt": row["system"]}, {"role": "HUMAN", "prompt": row["prompt"]}]
            for prompt in (row["prompt"], chat):
                (answer,) = oracle.generate([prompt], max_out_len=16)
                for options in (ScoreOptions(), ScoreOptions(metric="levenshtein"), ScoreOptions(lenient=True)):
                    assert get_task(row["task"]).grade(answer, gold, options).score == 100.0, (row["id"], answer)


def test_oracle_model_refuses_a_prompt_it_does_not_know(loaded: list) -> None:
    from needlebench.opencompass.scripted import OracleModel

    with pytest.raises(LookupError, match="'What is the capital of France"):
        OracleModel().generate([[{"role": "HUMAN", "prompt": "What is the capital of France? " * 5}]], 16)


def test_garbage_model_scores_zero_on_every_task(loaded: list) -> None:
    import json

    from needlebench.grading.graders import ScoreOptions
    from needlebench.opencompass.scripted import GARBAGE_OUTPUTS, GarbageModel

    garbage = GarbageModel(size=20_000)
    for ds in loaded:
        rows = list(ds)
        answers = garbage.generate([r["prompt"] for r in rows] * len(GARBAGE_OUTPUTS), 16)
        for row, answer in zip(rows * len(GARBAGE_OUTPUTS), answers, strict=True):
            result = get_task(row["task"]).grade(answer, json.loads(row["answer"]), ScoreOptions())
            assert result.score == 0.0 and result.error, (row["id"], answer[:60])
