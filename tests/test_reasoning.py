"""ATC and M-RS: an independent solver agrees with the gold; determinism; metric check values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_export
from kinship_solver import solve

from needlebench.errors import ConfigError
from needlebench.report.tables import suite_weights
from needlebench.scoring import ScoreOptions
from needlebench.tasks.atc.open_answer import AtcParams, generate_atc
from needlebench.tasks.atc.open_answer_results import atc_weighted_score, enl
from needlebench.tasks.kinship import QUESTION_TYPES, load_name_pool, make_chain, ordinal
from needlebench.tasks.kinship_answer import grade_boxed
from needlebench.tasks.sparse.mrs import generate_mrs, needle_depths
from needlebench.tasks.sparse.retrieval import SparseParams

ATC_CONFIG = "tests/configs/export_atc.py"  # the default protocol, reference
PROTOCOLS = ("reference", "clarified")
# ATC as in ATC_CONFIG, plus a small M-RS grid
_EXPORT_CONFIG = """_base_ = []
from needlebench.opencompass.configs import atc_datasets, needlebench_datasets

datasets = atc_datasets(needle_counts=[2, 4, 8, 16, 32, 64], repeats=3, protocol={protocol!r})
datasets += needlebench_datasets(
    suite="4k", tasks=["mrs"], lengths=[2000], depths=[0, 50, 95], repeats=2, protocol={protocol!r}
)
"""


@pytest.fixture(scope="module", params=PROTOCOLS)
def atc_export(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, list]:
    """(protocol, config, exported rows) of ATC and M-RS under each protocol."""
    folder = tmp_path_factory.mktemp(f"export-{request.param}")
    config = folder / "export.py"
    config.write_text(_EXPORT_CONFIG.format(protocol=request.param))
    return request.param, str(config), run_export(str(config), folder / "rows.jsonl")


def test_independent_solver_agrees_on_every_exported_sample(atc_export: tuple[str, str, list]) -> None:
    protocol, _, rows = atc_export
    atc = [r for r in rows if r["task"] == "atc"]
    mrs = [r for r in rows if r["task"] == "mrs"]
    assert {r["meta"]["protocol"] for r in rows} == {protocol}
    assert {r["lang"] for r in atc} == {r["lang"] for r in mrs} == {"en", "zh"}
    assert {r["meta"]["question_type"] for r in atc} == set(QUESTION_TYPES)
    assert {r["meta"]["num_needles"] for r in atc} == {2, 4, 8, 16, 32, 64}
    assert len(atc) == 2 * 6 * 4 * 3 and len(mrs) == 2 * 4 * 3 * 2
    for row in rows:
        assert solve(row["prompt"], row["lang"]) == row["gold"]["answer"], row["id"]
        meta = row["meta"]
        assert len(meta["chain"]) == meta["num_needles"]
        assert meta["generations"] == sum(link["generations"] for link in meta["chain"])
        assert meta["names_reasoning_order"][0] == meta["chain"][0]["elder"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_solver_agrees_at_512_needles(lang: str, protocol: str) -> None:
    samples = list(generate_atc(AtcParams(lang=lang, needle_counts=(512,), repeats=1, protocol=protocol)))
    assert len(samples) == 4
    for s in samples:
        assert solve(s.prompt, lang) == s.gold["answer"]
        assert len(set(s.meta["names_reasoning_order"])) == 513


def test_atc_export_identical_across_processes(tmp_path: Path, atc_export: tuple[str, str, list]) -> None:
    protocol, config, rows = atc_export
    assert run_export(config, tmp_path / "again.jsonl") == rows
    if protocol == "reference":  # the committed config, with the default protocol, exports the same ATC rows
        assert run_export(ATC_CONFIG, tmp_path / "committed.jsonl") == [r for r in rows if r["task"] == "atc"]


# OpenCompass's "friend" and "mentor" sentences: no possessive before the term, the younger comes after "For "
# (English) or before "来说" (Chinese)
_FRIEND = {
    "en": re.compile(
        r"For [A-Z][\w'-]+ [A-Z][\w'-]+, [A-Z][\w'-]+ [A-Z][\w'-]+ is not just a [a-z ]+, but also a friend\."
    ),
    "zh": re.compile(r"[\u4e00-\u9fff]{3}对[\u4e00-\u9fff]{3}来说，不只是一个[\u4e00-\u9fff]{2}，还是一个朋友。"),
}
_MENTOR = re.compile(r"For [A-Z][\w'-]+ [A-Z][\w'-]+, ([A-Z][\w'-]+ [A-Z][\w'-]+) is more than just a [a-z ]+; \1 is a")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_reference_prompts_use_opencompass_sentences_and_stay_solvable(lang: str) -> None:
    atc = list(generate_atc(AtcParams(lang=lang, needle_counts=(2, 4, 8), repeats=3)))
    mrs = list(generate_mrs(SparseParams(lang=lang, lengths=(2000,), depths=(0, 50, 100), repeats=3, buffer=200)))
    assert len(atc) == 3 * 4 * 3 and len(mrs) == 3 * 4 * 3
    for samples in (atc, mrs):
        assert {s.meta["protocol"] for s in samples} == {"reference"}
        assert sum(bool(_FRIEND[lang].search(s.prompt)) for s in samples) >= 1
        if lang == "en":
            assert sum(bool(_MENTOR.search(s.prompt)) for s in samples) >= 1
        for s in samples:
            assert solve(s.prompt, lang) == s.gold["answer"], s.id
    # ATC statements are joined with nothing in between, one sentence per needle
    header, stop = ("provided below:\n", ".") if lang == "en" else ("文本如下：\n", "。")
    for s in atc:
        story = s.prompt.split(header, 1)[1].split("\n\n", 1)[0]
        assert story.count(stop) == s.meta["num_needles"] and story.endswith(stop), s.id
        assert not re.search(r"[.。]\s", story), s.id
    # and our clarified sentences never use those forms
    clarified = generate_atc(AtcParams(lang=lang, needle_counts=(2, 4, 8), repeats=3, protocol="clarified"))
    assert not any(_FRIEND[lang].search(s.prompt) for s in clarified)


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
    assert round(_overall({"srt": 99.38, "mrt": 97.45, "mrs": 29.64}, "v2"), 2) == 75.49
    assert round(_overall({"srt": 100, "mrt": 96.95, "mrs": 84.73}, "v1"), 2) == 94.50


GOLD = {
    "answer": "Ann Cole",
    "kind": "name",
    "subject": "Dan Ray",
    "question_type": "eldest_ancestor",
    "chain_names": ["Ann Cole", "Bo Hart", "Cy Lund", "Dan Ray"],
    "match": "normalised",  # the clarified rule, as the generator writes it into the gold
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


def test_mrs_needle_depths_follow_the_placement() -> None:
    # reference and spaced (OpenCompass v2's diff=10): the depth, then 10% further each, capped at the end
    # (nominal: on OpenCompass's haystack reference puts them where its multi.py does, test_opencompass_spacing)
    assert needle_depths(0, 5) == needle_depths(0, 5, "reference") == (0.0, 10.0, 20.0, 30.0, 40.0)
    assert needle_depths(0, 5, "spaced") == (0.0, 10.0, 20.0, 30.0, 40.0)
    assert needle_depths(50, 5) == (50.0, 60.0, 70.0, 80.0, 90.0)
    assert needle_depths(95, 3) == (95.0, 100.0, 100.0)
    assert needle_depths(100, 4) == (100.0, 100.0, 100.0, 100.0)
    # spread (clarified): distinct depths over the roomier side of the document
    assert needle_depths(0, 5, "spread") == (0.0, 20.0, 40.0, 60.0, 80.0)
    assert needle_depths(100, 4, "spread") == (25.0, 50.0, 75.0, 100.0)
    assert len(set(needle_depths(50, 5, "spread"))) == 5


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_reference_spacing_is_opencompass_and_spaced_counts_the_needle_once(lang: str) -> None:
    """OpenCompass's multi.py puts each next needle 10% of the haystack plus the previous needle's length
    further (which the needle then fills again when it goes in); ``placement="spaced"`` counts it once."""
    from needlebench.context.tokenizer import count_tokens

    base = dict(lang=lang, lengths=(8000,), depths=(10,), repeats=1, buffer=200, num_needles=(5,))
    ref = next(generate_mrs(SparseParams(**base)))
    spaced = next(generate_mrs(SparseParams(**base, placement="spaced")))
    assert (ref.meta["options"]["placement"], spaced.meta["options"]["placement"]) == ("reference", "spaced")
    assert ref.meta["statements"] == spaced.meta["statements"]  # the same chain, only moved
    sizes = [count_tokens(f"\n{t}\n") for t in ref.meta["statements"]]
    tokens = ref.meta["haystack_tokens"]
    assert tokens == spaced.meta["haystack_tokens"]
    at = {name: [d * tokens / 100 for d in s.meta["realised_depths"]] for name, s in (("ref", ref), ("sp", spaced))}
    for i in range(1, 5):  # gaps in haystack tokens; a needle moved off a split word moves by a few tokens
        assert at["sp"][i] - at["sp"][i - 1] == pytest.approx(tokens / 10, abs=8)
        assert at["ref"][i] - at["ref"][i - 1] == pytest.approx(tokens / 10 + sizes[i - 1], abs=8)
    assert ref.meta["depths"] == ref.meta["realised_depths"] and ref.meta["depths"][-1] > 50


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mrs_depths_are_placed_and_solvable(lang: str, protocol: str) -> None:
    # OpenCompass's M-RS asks only for the eldest ancestor; the clarified prompt asks every question type
    qtypes = ["eldest_ancestor"] if protocol == "reference" else list(QUESTION_TYPES)
    p = SparseParams(
        lang=lang,
        lengths=(4000,),
        depths=(0, 50, 100),
        repeats=2,
        buffer=200,
        protocol=protocol,
        extra={"question_types": qtypes},
    )
    samples = list(generate_mrs(p))
    assert len(samples) == 2 * 3 * 4
    asked = {s.meta["question_type"] for s in samples}
    assert asked == {"eldest_ancestor"} if protocol == "reference" else len(asked) >= 3
    placement = "reference" if protocol == "reference" else "spread"
    for s in samples:
        assert solve(s.prompt, lang) == s.gold["answer"], s.id
        assert s.meta["options"]["placement"] == placement
        depths = needle_depths(s.meta["depth"], s.meta["num_needles"], placement)
        realised = s.meta["realised_depths"]
        assert s.meta["depths"] == realised, s.id  # what the tables label: where each needle is
        assert realised == sorted(realised), s.id
        # distinct depths stay distinct (several needles may share depth 100 under reference)
        assert len(set(realised)) == len(set(depths)), s.id
        # the first needle at the requested depth; depth 100 may land a (long) sentence early, see
        # test_context.py::test_reference_depth_100_puts_the_needle_at_the_end
        assert depths[0] == 100 or abs(realised[0] - depths[0]) <= 2.0, s.id
        if placement == "reference":  # OpenCompass's spacing: each next needle 10% plus needle lengths further
            assert all(r >= d - 0.5 for r, d in zip(realised, depths, strict=True)), s.id
        else:
            assert all(abs(r - d) <= 2.0 for r, d in zip(realised, depths, strict=True) if d < 100), s.id
    if protocol == "reference":
        with pytest.raises(ConfigError, match="question_types"):
            list(generate_mrs(SparseParams(**{**p.__dict__, "extra": {"question_types": list(QUESTION_TYPES)}})))


def test_bring_your_own_multihop_needles(tmp_path: Path) -> None:
    from needlebench.tasks.sparse.mrs import grade_mrs

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


def test_v1_on_opencompass_files_reads_its_multihop_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCompass's 2024 configs read ``multi_needle_reasoning_{lang}.json``: so does ``profile="v1"`` with
    ``corpus="opencompass"`` when the data folder holds it; v2, and v1 on our packaged corpus, stay kinship."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.standin import build_standin
    from needlebench.cache.arrow_rows import cache_key

    data = build_standin(tmp_path)
    (data / "multi_needle_reasoning_en.json").unlink()  # the stand-in holds one: start without it
    monkeypatch.setenv("COMPASS_DATA_CACHE", str(tmp_path))
    base = dict(lang="en", lengths=(2000,), depths=(10,), repeats=1, buffer=200, num_needles=(2,))
    v1 = SparseParams(**base, profile="v1", corpus="opencompass")
    assert {s.gold["form"] for s in generate_mrs(v1)} == {"kinship"}  # no such file yet
    before = cache_key("mrs", v1)
    records = [
        {
            "derivation_count": 2,
            "derivations": ["Ab Cd built Ef.", "Ef lies in Gh."],
            "question": "Where?",
            "answer": "Gh",
        }
    ]
    (data / "multi_needle_reasoning_en.json").write_text(json.dumps(records), encoding="utf-8")
    samples = list(generate_mrs(v1))
    assert {s.gold["form"] for s in samples} == {"multihop"} and all("Ef lies in Gh." in s.prompt for s in samples)
    assert cache_key("mrs", v1) != before  # the file's contents are part of the dataset's identity
    v2 = SparseParams(**base, corpus="opencompass")
    packaged = SparseParams(**base, profile="v1")
    assert {s.gold["form"] for p in (v2, packaged) for s in generate_mrs(p)} == {"kinship"}


def _overall(scores: dict[str, float], profile: str) -> float:
    """The suite overall from the tasks' own weights (the paper's equal or 0.4/0.3/0.3 split)."""
    weights = suite_weights(profile)
    assert set(weights) == set(scores)
    return sum(weights[t] * v for t, v in scores.items())
