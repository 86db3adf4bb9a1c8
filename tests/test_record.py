"""The graded-sample record: its JSON round trip, its unscored states, and that no metric counts an unscored sample."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from needlebench.cache.rows import load_rows
from needlebench.grading.evaluation import dataset_results, grade_rows, write_results
from needlebench.record import GradedSample, OutputFacts, Unanswered, cut_prediction, failed_prediction, unanswered
from needlebench.scoring import ScoreOptions
from needlebench.tasks import get_task

# one small real dataset per task (as the install check's oracle runs them)
DATASETS = (
    ("srt", dict(lang="en", lengths=[1000, 2000], depths=[0, 50, 100], repeats=1)),
    ("mrt", dict(lang="en", lengths=[1000, 2000], depths=[50], repeats=3, num_needles=[3])),
    ("mrs", dict(lang="en", lengths=[1000], depths=[50], repeats=3, num_needles=[2, 3])),
    ("atc", dict(lang="en", needle_counts=[2, 4], repeats=3)),
    ("needlechain", dict(k_values=[5], points=2)),
    ("atc_mc", dict(lang="en", steps=[2], repeats=2, style="direct")),
)
# the counts every dataset reports beside its numbers, and the share of outputs cut off (which counts the ones
# left out for it): the only ones unscored samples may change
COUNTS = {"num_samples", "num_failed", "num_shortened", "num_truncated", "num_truncated_excluded", "truncated_rate"}


def _rows(task: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(r) for r in load_rows(task, **params)]


def test_record_round_trips_through_json() -> None:
    records = [
        GradedSample("a", "srt", "en", {"length": 1000, "depth": 50}, 100.0, True, gold="x", prediction="Pothgon"),
        GradedSample(
            "b",
            "mrt",
            "zh",
            {"length": 2000, "recalled": [True, False], "shortened_from": 2000},
            50.0,
            False,
            error="missed",
            unscored="shortened",
            context=(("before", "needle", "after"),),
        ),
        GradedSample(
            "c",
            "atc",
            "en",
            {"num_needles": 4},
            None,
            error="request_failed",
            error_detail="boom",
            unscored="request_failed",
        ),
        GradedSample(
            "d",
            "atc",
            "en",
            {"num_needles": 8},
            0.0,
            error="no_boxed_answer",
            unscored="truncated",
            output=OutputFacts(output_tokens=32768, output_tokenizer="/models/r1", truncated=True, think_unclosed=True),
        ),
    ]
    for r in records:
        line = json.dumps(r.to_json(), ensure_ascii=False)
        assert GradedSample.from_json(json.loads(line)) == r
        assert json.loads(line)["unscored"] == r.unscored  # explicit on disk, null when it counts
    assert "prediction" not in records[0].to_json(prediction=False)
    line = records[3].to_json()
    assert (line["output_tokens"], line["output_tokenizer"], line["truncated"], line["think_unclosed"]) == (
        32768,
        "/models/r1",
        True,
        True,
    )
    before = {k: v for k, v in records[0].to_json().items() if k not in ("output_tokens", "output_tokenizer")}
    assert GradedSample.from_json({**before, "truncated": None}) == records[0]  # a line from before these fields


def test_record_refuses_what_it_cannot_be() -> None:
    with pytest.raises(ValueError, match="unscored"):
        GradedSample("a", "srt", "en", {}, 0.0, unscored="lost")
    with pytest.raises(ValueError, match="needs a score"):
        GradedSample("a", "srt", "en", {})  # counts, but has no score
    with pytest.raises(ValueError, match="overwrite"):
        GradedSample("a", "srt", "en", {"score": 5}, 0.0)
    with pytest.raises(ValueError, match="not a graded sample"):
        GradedSample.from_json({"id": "a", "score": 1})


def test_lines_written_before_the_unscored_key_read_as_they_were_counted() -> None:
    old = {"id": "a", "task": "srt", "lang": "en", "length": 1000, "score": 0.0, "correct": False}
    assert GradedSample.from_json({**old, "error": "request_failed"}).unscored == "request_failed"
    assert GradedSample.from_json({**old, "error": "request_failed", "shortened_from": 2000}).unscored == "shortened"
    assert GradedSample.from_json({**old, "error": "missed"}).counts
    legacy = GradedSample.from_json({**old, "error": "request_failed"})
    assert legacy.unscored == "request_failed" and legacy.score is None  # the old 0 was never a grade


def test_a_failed_request_is_a_structured_prediction_no_model_text_can_equal() -> None:
    failed = failed_prediction("APIConnectionError: refused")
    assert json.loads(json.dumps(failed)) == failed  # survives OpenCompass's prediction file
    assert unanswered(failed) == Unanswered("request_failed", "APIConnectionError: refused")
    for text in ("", "\x00needlebench:request_failed\x00boom", json.dumps(failed), None, ["x"], {"prediction": "x"}):
        assert unanswered(text) is None
    with pytest.raises(ValueError, match="unanswered"):
        Unanswered("shortened")


@pytest.mark.parametrize("task,params", DATASETS, ids=[t for t, _ in DATASETS])
def test_every_metric_skips_unscored_samples(task: str, params: dict[str, Any], tmp_path: Path) -> None:
    """Unscored samples change only the counts: every dataset number (the common ones and the task's own)
    equals the number of the counted samples alone, though the unscored ones hold perfect answers (a
    shortened prompt) or none at all (a failed request, a missing prediction) and would move any mean."""
    spec = get_task(task)
    rows = _rows(task, params)
    assert len(rows) >= 6, task
    preds: list[Any] = []
    for i, row in enumerate(rows):
        perfect = spec.oracle(json.loads(row["answer"]))
        kind = i % 6
        if kind == 1:
            preds.append(failed_prediction("APITimeoutError: timed out"))
        elif kind == 3:
            preds.append(Unanswered("no_prediction", "not in the file"))
        elif kind == 5:  # a perfect answer to a prompt that was cut: graded, never counted
            row["meta"] = json.dumps({**json.loads(row["meta"]), "shortened_from": 9999})
            preds.append(perfect)
        elif kind == 4:  # a perfect answer the server cut off at its budget, with truncated="unscored"
            preds.append(cut_prediction(perfect))
        else:
            preds.append(perfect if kind == 0 else "I cannot tell from the text.")
    refs = [r["answer"] for r in rows]
    records = grade_rows(preds, refs, rows, spec, ScoreOptions(truncated="unscored"))
    states = [r.unscored for r in records]
    assert states[1] == "request_failed" and states[3] == "no_prediction" and states[5] == "shortened"
    assert states[4] == "truncated" and records[4].output.truncated and records[4].score == 100.0
    assert states[0] is None and records[0].score == 100.0 and records[5].score == 100.0
    assert records[1].score is None and records[1].error == "request_failed" and records[1].prediction == ""
    counted = [i for i, r in enumerate(records) if r.counts]
    assert counted == [i for i in range(len(records)) if i % 6 in (0, 2)]  # the answered kinds: perfect, wrong

    everything, _ = dataset_results(records, spec)
    alone, _ = dataset_results([records[i] for i in counted], spec)
    assert everything.keys() == alone.keys()
    for key, value in everything.items():
        if key in COUNTS:
            continue
        same = (math.isnan(value) and math.isnan(alone[key])) if isinstance(value, float) else False
        assert same or value == pytest.approx(alone[key]), (task, key, value, alone[key])
    n = len(records)
    assert everything["num_samples"] == n and everything["num_scored"] == len(counted)
    assert everything["num_failed"] == sum(s in ("request_failed", "no_prediction") for s in states)
    assert everything["num_shortened"] == states.count("shortened")
    assert everything["num_truncated_excluded"] == states.count("truncated") == len(range(4, len(records), 6))
    answered = [r for r in records if r.unscored in (None, "truncated")]
    assert (
        everything["num_truncated"] == sum(r.output.truncated for r in answered) >= everything["num_truncated_excluded"]
    )
    assert everything["truncated_rate"] == pytest.approx(100 * states.count("truncated") / len(answered))

    # the file the report reads holds the same records, unscored reasons and all
    write_results(tmp_path / "ds", records, spec)
    lines = (tmp_path / "ds.samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert [GradedSample.from_json(json.loads(x)) for x in lines] == records


def test_a_dataset_is_graded_as_one_task() -> None:
    from needlebench.errors import ConfigError

    rows = _rows(*DATASETS[0])
    with pytest.raises(ConfigError, match="graded as 'atc'"):
        grade_rows(["x"] * len(rows), [r["answer"] for r in rows], rows, get_task("atc"), ScoreOptions())


def test_a_models_text_postprocessor_never_sees_a_failed_request() -> None:
    """As OpenCompass's eval task applies a model's ``pred_postprocessor``: answers are processed, failures kept."""
    from opencompass.registry import TEXT_POSTPROCESSORS

    from needlebench.opencompass.evaluator import NeedleBenchEvaluator
    from needlebench.opencompass.models import api_model

    think = "opencompass.utils.text_postprocessors.extract_non_reasoning_content"
    cfg = api_model("m", "m", "http://127.0.0.1:1/v1", 4096, pred_postprocessor=dict(type=think))
    kwargs = dict(cfg["pred_postprocessor"])
    proc = TEXT_POSTPROCESSORS.get(kwargs.pop("type"))
    failed = failed_prediction("APITimeoutError: timed out")
    assert [proc(p, **kwargs) for p in (failed, "<think>hm</think>Paris")] == [failed, "Paris"]
    evaluator = NeedleBenchEvaluator(pred_postprocessor=dict(type=think))  # a dataset's postprocessor, too
    assert evaluator.pred_postprocess([failed, "<think>hm</think>Paris"]) == [failed, "Paris"]


def test_a_dataset_whose_every_sample_was_skipped_is_graded_as_empty(tmp_path: Path) -> None:
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator

    evaluator = NeedleBenchEvaluator()
    evaluator._out_dir = str(tmp_path / "ds")
    out = evaluator.score([], [], [])
    assert out["num_samples"] == 0 and math.isnan(out["score"]) and out["details"] == []
    assert (tmp_path / "ds.samples.jsonl").read_text(encoding="utf-8") == ""


def test_a_run_reads_back_as_graded_samples_of_its_model_and_dataset(tmp_path: Path) -> None:
    """What every table computes over: the evaluator's records, read back typed and tagged with their model and
    dataset; each written line is the record's own JSON, so a line's digest survives the round trip."""
    from needlebench.report.results import load_results

    task, params = DATASETS[1]  # M-RT: recalled needles as grader extras, depths as metadata
    spec = get_task(task)
    rows = _rows(task, params)
    perfect = [spec.oracle(json.loads(r["answer"])) for r in rows]
    preds = [failed_prediction("boom"), cut_prediction(perfect[1]), "no idea", *perfect[3:]]
    records = grade_rows(preds, [r["answer"] for r in rows], rows, spec, ScoreOptions(truncated="unscored"))
    write_results(tmp_path / "run" / "results" / "m1" / "ds", records, spec)
    found = load_results([tmp_path / "run"]).records
    assert all(isinstance(r, GradedSample) for r in found)
    assert [(r.model, r.dataset) for r in found] == [("m1", "ds")] * len(records)
    assert [dataclasses.replace(r, model=None, dataset=None) for r in found] == records
    lines = (tmp_path / "run" / "results" / "m1" / "ds.samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert [r.to_json() for r in found] == [{**json.loads(x), "model": "m1", "dataset": "ds"} for x in lines]
    assert not {"model", "dataset"} & set(json.loads(lines[0]))  # the evaluator writes neither
    states = [(r.counts, r.answered, r.failed, r.shortened) for r in found]
    assert states[:3] == [(False, False, True, False), (False, True, False, False), (True, True, False, False)]


def test_a_record_field_is_never_one_of_its_attributes() -> None:
    """``record.get`` reads the task's metadata and grader extras; the record's own facts are attributes, so a
    table can never read ``get("score")`` as a missing field."""
    r = GradedSample("a", "srt", "en", {"length": 1000}, 100.0, True, model="m")
    assert r.get("length") == 1000 and r.get("depth", 5) == 5
    for own in ("score", "correct", "task", "lang", "model", "dataset", "truncated"):
        with pytest.raises(KeyError, match="attribute"):
            r.get(own)
    with pytest.raises(ValueError, match="overwrite"):
        GradedSample("a", "srt", "en", {"model": "m"}, 0.0)


def test_a_server_answer_postprocessed_twice_keeps_both_readings() -> None:
    """A model's postprocessor and then a dataset's: the answer stays the answer and the joined text the joined
    text, each through both (a second pass never falls back to the joined text for the answer)."""
    from needlebench.record import ModelAnswer, postprocessed, scored_text

    once = postprocessed(ModelAnswer("answer", reasoning="reason", think_tag="</think>").to_prediction(), str.upper)
    twice = postprocessed(once, lambda text: f"[{text}]")
    assert scored_text(twice, "answer") == "[ANSWER]"
    assert scored_text(twice, "joined") == "[REASON</THINK>ANSWER]"
    assert postprocessed("plain", str.upper) == "PLAIN"


def test_a_model_answer_is_saved_as_the_prediction_json_of_before_and_read_back_whole() -> None:
    """The typed answer writes the prediction object older runs wrote (the same keys, in the same order, facts not
    set left out) and reads every fact back; a plain text is no answer record; a failed request is unanswered."""
    from needlebench.record import ModelAnswer, prediction_text, unanswered

    answer = ModelAnswer(
        "Paris",
        finish="stop",
        reasoning="think",
        think_tag="</think>",
        output_tokens=12,
        reasoning_tokens=5,
        thinking_budget=8,
        kv_cache={"press": "SnapKVPress", "kept": [3]},
    )
    saved = answer.to_prediction()
    assert list(saved) == [
        "prediction",
        "needlebench_finish_reason",
        "needlebench_reasoning",
        "needlebench_think_tag",
        "needlebench_output_tokens",
        "needlebench_reasoning_tokens",
        "needlebench_thinking_budget",
        "needlebench_kv_cache",
    ]
    assert ModelAnswer.of(json.loads(json.dumps(saved))) == answer
    assert prediction_text(saved) == "think</think>Paris"
    assert ModelAnswer("x", finish="length").to_prediction() == {
        "prediction": "x",
        "needlebench_finish_reason": "length",
    }
    assert ModelAnswer.of("plain text") is None and ModelAnswer.of({"prediction": "x"}) is None
    failed = ModelAnswer.failed("").to_prediction()
    assert failed == {"prediction": "", "needlebench_request_failed": "request failed"}
    assert unanswered(failed).detail == "request failed"  # type: ignore[union-attr]
