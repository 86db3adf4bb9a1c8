"""ATC and M-RS: an independent solver agrees with the gold; determinism; metric check values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_export
from kinship_solver import solve

from needlebench.atc import AtcParams, generate_atc
from needlebench.graders import ScoreOptions, grade_boxed
from needlebench.kinship import QUESTION_TYPES, load_name_pool, make_chain, ordinal
from needlebench.metrics import atc_weighted_score, enl, overall_score
from needlebench.reasoning import generate_mrs, needle_depths
from needlebench.sparse import SparseParams


@pytest.fixture(scope="module")
def atc_export(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_export("tests/configs/export_atc.py", tmp_path_factory.mktemp("atc") / "atc.jsonl")


def test_independent_solver_agrees_on_every_exported_sample(atc_export: list[dict]) -> None:
    assert {r["lang"] for r in atc_export} == {"en", "zh"}
    assert {r["meta"]["question_type"] for r in atc_export} == set(QUESTION_TYPES)
    assert {r["meta"]["num_needles"] for r in atc_export} == {2, 4, 8, 16, 32, 64}
    for row in atc_export:
        assert solve(row["prompt"], row["lang"]) == row["gold"]["answer"], row["id"]
        meta = row["meta"]
        assert len(meta["chain"]) == meta["num_needles"]
        assert meta["generations"] == sum(link["generations"] for link in meta["chain"])
        assert meta["names_reasoning_order"][0] == meta["chain"][0]["elder"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_solver_agrees_at_512_needles(lang: str) -> None:
    samples = list(generate_atc(AtcParams(lang=lang, needle_counts=(512,), repeats=1)))
    assert len(samples) == 4
    for s in samples:
        assert solve(s.prompt, lang) == s.gold["answer"]
        assert len(set(s.meta["names_reasoning_order"])) == 513


def test_atc_export_identical_across_processes(tmp_path: Path, atc_export: list[dict]) -> None:
    assert run_export("tests/configs/export_atc.py", tmp_path / "again.jsonl") == atc_export


def test_repeats_give_different_chains() -> None:
    pool = load_name_pool("en")
    a, b = (
        make_chain(pool, 8, "atc", 8, "eldest_ancestor", 0, 0),
        make_chain(pool, 8, "atc", 8, "eldest_ancestor", 1, 0),
    )
    assert a.names != b.names
    assert make_chain(pool, 8, "atc", 8, "eldest_ancestor", 0, 0) == a


def test_names_unique_and_free_of_relationship_words() -> None:
    for lang, banned in (("en", ("father", "mother", "dad", "mom", "grand")), ("zh", tuple("父母爸妈爷奶姥公婆"))):
        chain = make_chain(load_name_pool(lang), 300, "t", 1)
        assert len(set(chain.names)) == 301
        for name in chain.names:
            assert not any(b in name.lower() for b in banned), name


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "23rd",
        "101st",
        "111th",
    ]
    assert ordinal(5, "zh") == "第5代"


def test_metric_check_values() -> None:
    acc = dict(zip([2, 4, 8, 16, 32, 64, 128, 256, 512], [100, 100, 87.5, 95, 97.5, 90, 70, 65, 15]))
    assert round(atc_weighted_score(acc), 2) == 44.01
    assert round(atc_weighted_score(acc, max_needles=64), 2) == 92.86
    assert enl(acc) == 256
    assert enl({2: 40, 4: 10}) == 0
    assert round(overall_score(99.38, 97.45, 29.64, profile="v2"), 2) == 75.49
    assert round(overall_score(100, 96.95, 84.73, profile="v1"), 2) == 94.50


GOLD = {
    "answer": "Ann Cole",
    "kind": "name",
    "subject": "Dan Ray",
    "question_type": "eldest_ancestor",
    "chain_names": ["Ann Cole", "Bo Hart", "Cy Lund", "Dan Ray"],
}


@pytest.mark.parametrize(
    ("prediction", "correct", "error"),
    [
        (r"So the answer is \boxed{Ann Cole}.", True, None),
        (r"\boxed{\text{ann  cole}}", True, None),
        (r"First \boxed{Bo Hart}, no wait: \boxed{Ann Cole}", True, None),
        (r"\boxed{Ann Cole} ... actually \boxed{Bo Hart}", False, "stopped_early"),
        (r"\boxed{Dan Ray}", False, "wrong_chain_name"),
        (r"\boxed{Zed Quill}", False, "hallucination"),
        ("The eldest is Ann Cole.", False, "no_boxed_answer"),
        (r"<think>\boxed{Bo Hart}</think> \boxed{Ann Cole}", True, None),
        (r"<think>I think \boxed{Ann Cole} but never finish", False, "no_boxed_answer"),
        ("loop " * 200, False, "repetition"),
        (r"\boxed{{Ann Cole}}", True, None),
        (r"'\boxed{“Ann Cole”}'", True, None),
    ],
)
def test_boxed_grading(prediction: str, correct: bool, error: str | None) -> None:
    r = grade_boxed(prediction, GOLD, ScoreOptions())
    assert r.correct is correct and r.error == error


def test_distance_answers_compare_as_integers() -> None:
    gold = {**GOLD, "answer": "5", "kind": "int"}
    for text, ok in (
        (r"\boxed{5}", True),
        (r"\boxed{5 generations}", True),
        (r"\boxed{five}", True),
        (r"\boxed{第5代}", True),
        (r"\boxed{6}", False),
        (r"\boxed{}", False),
    ):
        assert grade_boxed(text, gold, ScoreOptions()).correct is ok, text
    assert grade_boxed(r"\boxed{6}", gold, ScoreOptions()).error == "wrong_distance"


def test_mrs_depths_are_distinct_and_solvable() -> None:
    assert needle_depths(0, 5) == (0.0, 20.0, 40.0, 60.0, 80.0)
    assert needle_depths(100, 4) == (25.0, 50.0, 75.0, 100.0)
    assert len(set(needle_depths(50, 5))) == 5
    for lang in ("en", "zh"):
        p = SparseParams(
            lang=lang,
            lengths=(4000,),
            depths=(0, 50, 100),
            repeats=2,
            buffer=200,
            extra={"question_types": list(QUESTION_TYPES)},
        )
        samples = list(generate_mrs(p))
        assert len(samples) == 2 * 3 * 4
        assert len({s.meta["question_type"] for s in samples}) >= 3
        for s in samples:
            assert solve(s.prompt, lang) == s.gold["answer"], s.id
            realised = s.meta["realised_depths"]
            assert realised == sorted(realised) and len(set(realised)) == len(realised)


def test_bring_your_own_multihop_needles(tmp_path: Path) -> None:
    from needlebench.reasoning import grade_mrs

    records = [
        {
            "derivation_count": 2,
            "derivations": ["Zorvik Hall was designed by Ilma Trask.", "Ilma Trask was born in the town of Quellmoor."],
            "question": "In which town was the designer of Zorvik Hall born?",
            "answer": "Quellmoor",
        }
    ]
    path = tmp_path / "multi_needle_reasoning_en.json"
    path.write_text(json.dumps(records))
    p = SparseParams(
        lang="en", lengths=(2000,), depths=(10, 60), repeats=1, buffer=200, needle_file=str(path), num_needles=(2,)
    )
    samples = list(generate_mrs(p))
    assert len(samples) == 2
    for s in samples:
        assert all(d in s.prompt for d in records[0]["derivations"])
        assert s.gold["form"] == "multihop"
        assert grade_mrs("It is Quellmoor.", s.gold, ScoreOptions()).correct
        assert not grade_mrs("Zorvik", s.gold, ScoreOptions()).correct
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    with pytest.raises(Exception, match="needle_file"):
        list(
            generate_mrs(
                SparseParams(
                    lang="en", lengths=(2000,), depths=(10,), repeats=1, needle_file=str(bad), num_needles=(2,)
                )
            )
        )
