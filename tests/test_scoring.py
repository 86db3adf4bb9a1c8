"""Graders and the evaluator on hand-made predictions, garbage included."""

from __future__ import annotations

import json

import pytest

from needlebench.grading.matching import (
    clean_prediction,
    keyword_hit,
    last_boxed,
    levenshtein_score,
    normalise_answer,
    strip_thinking,
)
from needlebench.scoring import ScoreOptions
from needlebench.tasks.sparse.recall import grade_mrt, grade_srt

SRT_GOLD = {
    "keywords": ["Pothgon spyglass"],
    "needle": "The hidden treasure of Tailkolde Island is the Pothgon spyglass.",
    "match": "normalised",  # the rule the generator writes into every gold (here: the clarified one)
}


def test_keyword_hit_and_miss() -> None:
    kw = ScoreOptions(metric="keyword")
    assert grade_srt("It is the Pothgon spyglass.", SRT_GOLD, kw).score == 100.0
    assert grade_srt("the POTHGON   Spyglass", SRT_GOLD, kw).score == 100.0  # case and spacing
    miss = grade_srt("It is a golden compass.", SRT_GOLD, kw)
    assert miss.score == 0.0 and not miss.correct and miss.error == "missed"
    assert grade_srt("<think>Pothgon spyglass?</think>No idea.", SRT_GOLD, kw).score == 0.0
    assert grade_srt("<think>hmm</think>Pothgon spyglass", SRT_GOLD, kw).score == 100.0


def test_levenshtein_partial_credit_values() -> None:
    ref = "abcdefghij"
    assert levenshtein_score("xx abc", ref, ["zzz"]) == pytest.approx(
        100 * 0.2 * (1 - 9 / 10)
    )  # 2 deletions + 7 insertions
    assert levenshtein_score("abcdefghiX", ref, ["zzz"]) == pytest.approx(100 * 0.2 * 0.9)
    assert levenshtein_score("", ref, ["zzz"]) == 0.0
    assert levenshtein_score("... zzz ...", ref, ["zzz"]) == 100.0
    assert levenshtein_score("a b c d e f g h i j", ref, ["zzz"]) == pytest.approx(20.0)  # whitespace ignored
    lev = ScoreOptions(metric="levenshtein")
    partial = grade_srt("The hidden treasure of Tailkolde Island is the golden spyglass.", SRT_GOLD, lev)
    assert 0 < partial.score < 20 and not partial.correct


def test_mrt_share_of_needles() -> None:
    gold = {
        "needles": [
            {"keywords": ["alpha"], "needle": "a", "depth": 0},
            {"keywords": ["beta"], "needle": "b", "depth": 50},
            {"keywords": ["gamma"], "needle": "c", "depth": 100},
        ],
        "match": "normalised",
    }
    result = grade_mrt("1. alpha 2. gamma", gold, ScoreOptions())
    assert result.score == pytest.approx(200 / 3)
    assert result.extras["recalled"] == [True, False, True]
    assert not result.correct


# Each garbage prediction, the error its keyword grade names ("empty" where nothing printable is left after
# cleaning) and the characters of its cleaned text that line up with the needle's 55 (whitespace removed):
# the 2024 metric's partial credit is 0.2 * 100 * kept / 55, never a keyword hit.
GARBAGE = (
    (None, "empty", 0),
    ("", "empty", 0),
    (b"\xff\xfe\x00bytes", "missed", 3),  # "bytes": t, e, s of "...the ... treasure ..."
    ("\x00\x01\x02" * 1000, "empty", 0),  # control characters only
    ("x" * 5_000_000, "missed", 0),  # cut to 200,000 x's; the needle has no x
    (12345, "missed", 0),  # "12345": no digit in the needle
    (["list"], "missed", 4),  # "list": l, i, s, t of "Tailkolde Island is the"
    ("\ufffd" * 50, "empty", 0),  # replacement characters only
)


@pytest.mark.parametrize(("garbage", "error", "kept"), GARBAGE)
def test_garbage_predictions_score_zero_without_crashing(garbage: object, error: str, kept: int) -> None:
    """Zero by keyword, with the error named; the 2024 metric's partial credit exactly as its formula gives."""
    keyword = grade_srt(garbage, SRT_GOLD, ScoreOptions(metric="keyword"))
    assert (keyword.score, keyword.correct, keyword.error) == (0.0, False, error)
    partial = grade_srt(garbage, SRT_GOLD, ScoreOptions(metric="levenshtein"))
    assert partial.score == pytest.approx(0.2 * 100 * kept / 55) and not partial.correct
    assert partial.error == error
    assert len(clean_prediction("x" * 5_000_000)) == 200_000


def test_boxed_extraction_and_normalisation() -> None:
    assert last_boxed(r"so \boxed{Alice} and finally \boxed{\text{Bob Smith}}") == r"\text{Bob Smith}"
    assert last_boxed(r"\boxed{a{b}c}") == "a{b}c"
    assert last_boxed("no box here") is None
    assert last_boxed(r"\boxed{unclosed") is None
    assert normalise_answer(r"\text{ Bob  Smith }") == "bob smith"
    assert normalise_answer("“张伟”。") == "张伟"
    assert strip_thinking("<think>long\nthoughts</think>final") == "final"
    assert strip_thinking("answer<think>never closed") == "answer"
    assert strip_thinking("leftover</think> tail") == " tail"
    assert keyword_hit("ＡＢＣ", ["abc"])  # full-width folds


def test_evaluator_scores_rows_and_survives_bad_rows(tmp_path) -> None:
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator

    ev = NeedleBenchEvaluator(metric="keyword")
    ev._out_dir = str(tmp_path / "results" / "m" / "ds")
    meta = json.dumps({"length": 1000, "depth": 50, "repeat": 0})
    rows = [
        {"id": "a", "task": "srt", "lang": "en", "meta": meta},
        {"id": "b", "task": "srt", "lang": "en", "meta": meta},
        {"id": "c", "task": "srt", "lang": "en", "meta": meta},
    ]
    refs = [json.dumps(SRT_GOLD), json.dumps(SRT_GOLD), "{not json"]
    out = ev.score(["Pothgon spyglass", None, "Pothgon spyglass"], refs, rows)
    assert out["score"] == pytest.approx(100 / 3)
    assert out["length_1000"] == pytest.approx(100 / 3)
    assert out["details"][2]["error"].startswith("grader_error")
    lines = (tmp_path / "results" / "m" / "ds.samples.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["score"] == 100.0
    with pytest.raises(ValueError, match="metric"):
        NeedleBenchEvaluator(metric="bleu")


def test_the_haystack_around_a_needle_is_the_same_read_from_text_or_from_utf8_bytes() -> None:
    """The drill-down's context from a prompt's UTF-8 bytes (a row read column by column) is the context from its
    text: first occurrence, whole characters either side, at the prompt's edges and between multi-byte ones."""
    from needlebench.grading.evaluation import CONTEXT_CHARS, _around, _around_utf8

    wide = "草堂🌲é" * 200  # 3-, 4- and 2-byte characters
    for prompt, needle in [
        (wide + "NEEDLE 针" + wide + "NEEDLE 针", "NEEDLE 针"),  # twice: the first one
        ("针在这里" + wide, "针在这里"),  # at the very start
        (wide + "🌲end", "🌲end"),  # at the very end
        ("a" * (CONTEXT_CHARS - 5) + "x" + "b" * 3, "x"),  # windows shorter than CONTEXT_CHARS
        (wide, "absent"),
    ]:
        for cut in range(0, 7):  # the window edges fall inside a character at some of these shifts
            text = "é" * cut + prompt
            assert _around_utf8(text.encode("utf-8"), needle) == _around(text, needle), (needle, cut)


def test_the_scoring_options_are_declared_once_and_every_signature_follows_the_declaration() -> None:
    """``scoring.SCORING_OPTIONS`` names, defaults and checks every scoring option: ``ScoreOptions`` has exactly those
    fields and defaults, the evaluator takes them by name (declaring none itself), each dataset builder's scoring
    arguments are declared ones defaulting to None (the declared default), and a bad value is refused with the
    declaration's one message, by the builder when the config is read and by the evaluator alike."""
    import dataclasses
    import inspect

    from needlebench.errors import ConfigError
    from needlebench.opencompass import configs
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator
    from needlebench.scoring import SCORING_NAMES, SCORING_OPTIONS, ScoreOptions

    fields = [f for f in dataclasses.fields(ScoreOptions) if f.name != "reference_strip"]
    assert [(f.name, f.default) for f in fields] == [(o.name, o.default) for o in SCORING_OPTIONS]
    params = inspect.signature(NeedleBenchEvaluator.__init__).parameters
    assert not set(params) & set(SCORING_NAMES)
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    def declared_message(name: str, value: object) -> str:
        option = next(o for o in SCORING_OPTIONS if o.name == name)
        with pytest.raises(ValueError) as refused:
            option.check(value)
        return str(refused.value)

    for option in SCORING_OPTIONS:
        assert NeedleBenchEvaluator(**{option.name: option.default}).options == ScoreOptions()
        with pytest.raises(ConfigError) as refused:
            NeedleBenchEvaluator(**{option.name: "no-such-value"})
        assert str(refused.value) == f"evaluator {declared_message(option.name, 'no-such-value')}"
    with pytest.raises(ConfigError, match=r"unknown scoring option\(s\) \['metrik'\]; the options are \['metric'"):
        NeedleBenchEvaluator(metrik="keyword")
    builders = (
        configs.needlebench_datasets,
        configs.atc_datasets,
        configs.atc_mc_datasets,
        configs.needlechain_datasets,
    )
    for builder in builders:
        taken = [p for name, p in inspect.signature(builder).parameters.items() if name in SCORING_NAMES]
        assert {"truncated", "reasoning_apart"} <= {p.name for p in taken}, builder.__name__
        for p in taken:
            assert p.default is None, (builder.__name__, p.name)
            with pytest.raises(ConfigError) as refused:
                builder(**{p.name: "no-such-value"})
            assert str(refused.value) == declared_message(p.name, "no-such-value"), (builder.__name__, p.name)
