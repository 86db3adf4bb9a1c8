"""A real ``opencompass`` run with the real tiny model, checked end to end."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, run_opencompass

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_opencompass("tests/configs/e2e_tiny.py", tmp_path_factory.mktemp("oc_e2e"))


def test_summary_csv_matches_per_sample_results(tiny_run: Path) -> None:
    (summary,) = list((tiny_run / "summary").glob("summary_*.csv"))
    rows = list(csv.DictReader(summary.open(encoding="utf-8")))
    model = "smollm2-135m-instruct"
    scores = {(r["dataset"], r["metric"]): r[model] for r in rows}
    for abbr, n in (("needlebench_srt_en_4k", 2), ("needlebench_srt_zh_4k", 2), ("needlebench_mrt_en_4k", 1)):
        samples = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        assert len(samples) == n
        expected = sum(s["score"] for s in samples) / n
        assert float(scores[(abbr, "score")]) == pytest.approx(expected, abs=0.01)
        assert float(scores[(abbr, "num_samples")]) == n
        folder = tiny_run / "predictions" / model
        files = (
            [folder / f"{abbr}.json"] if (folder / f"{abbr}.json").exists() else sorted(folder.glob(f"{abbr}_*.json"))
        )
        assert sum(len(json.loads(f.read_text())) for f in files) == n  # whole, or the parts of a split dataset
        for s in samples:
            assert s["prompt_tokens"] <= 1000 and s["length"] == 1000
    mrt = json.loads((tiny_run / "results" / model / "needlebench_mrt_en_4k.samples.jsonl").read_text().splitlines()[0])
    assert len(mrt["recalled"]) == 2


def test_split_dataset_was_sharded_and_merged(tiny_run: Path, tmp_path: Path) -> None:
    """The prediction files are exactly the partitioner's plan, and a split dataset was scored whole."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    model = "smollm2-135m-instruct"
    cfg = Config.fromfile("tests/configs/e2e_tiny.py")
    plan = NeedleBenchPartitioner(out_dir=str(tmp_path), num_shards=2).partition(
        [{"models": [dict(m) for m in cfg["models"]], "datasets": [dict(d) for d in cfg["datasets"]]}],
        work_dir=str(tmp_path),
        out_dir=str(tmp_path),
    )
    chunks = [c for task in plan for c in task["datasets"][0]]
    split = {c["abbr"].rsplit("_", 1)[0] for c in chunks if c["reader_cfg"].get("test_range")}
    assert len(plan) == 2 and split  # 5 prompts in 3 datasets over 2 shards: one dataset is cut in two
    folder = tiny_run / "predictions" / model
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(f"{c['abbr']}.json" for c in chunks)
    for abbr in split:
        parts = sorted(folder.glob(f"{abbr}_*.json"))
        samples = (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        assert len(parts) == 2 and len(samples) == sum(len(json.loads(p.read_text())) for p in parts)


def test_needlebench_summary_csv_and_report_from_real_run(tiny_run: Path) -> None:
    model = "smollm2-135m-instruct"
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((tiny_run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }

    def sample_score(abbr: str) -> float:
        rows = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        return sum(r["score"] for r in rows) / len(rows)

    en, zh = sample_score("needlebench_srt_en_4k"), sample_score("needlebench_srt_zh_4k")
    assert float(table[("S-RT", "EN", "1000")][model]) == pytest.approx(en, abs=0.01)
    assert float(table[("S-RT", "ZH", "all")][model]) == pytest.approx(zh, abs=0.01)
    assert float(table[("S-RT", "OVERALL", "all")][model]) == pytest.approx((en + zh) / 2, abs=0.01)
    assert float(table[("M-RT", "EN", "1000")][model]) == pytest.approx(sample_score("needlebench_mrt_en_4k"), abs=0.01)
    # M-RT ran in English only, so its overall is the English score
    assert float(table[("M-RT", "OVERALL", "all")][model]) == pytest.approx(
        sample_score("needlebench_mrt_en_4k"), abs=0.01
    )
    assert (tiny_run / "summary" / "report.html").stat().st_size > 1000
    assert list((tiny_run / "summary" / "figures").glob("heatmap_srt_en_*.png"))


def test_predictions_scored_outside_opencompass_give_the_same_tables(tiny_run: Path, tmp_path: Path) -> None:
    """The run's own answers, exported as a predictions file and scored against a Parquet export of the same
    config, give the same per-sample grades and the same summary table as OpenCompass did."""
    model = "smollm2-135m-instruct"
    records = {
        r["id"]: r
        for f in (tiny_run / "results" / model).glob("*.samples.jsonl")
        for r in map(json.loads, f.read_text().splitlines())
    }
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": r["prediction"]}) + "\n" for i, r in records.items()))
    export = tmp_path / "export"
    assert (
        subprocess.run(
            [bin_path("needlebench"), "export", "tests/configs/e2e_tiny.py", "--format", "parquet", str(export), "-q"],
            cwd=ROOT,
            timeout=600,
        ).returncode
        == 0
    )
    r = subprocess.run(
        [
            bin_path("needlebench"),
            "score",
            str(preds),
            "--export",
            str(export),
            "-o",
            str(tmp_path / "scored"),
            "--model",
            model,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    (run,) = (tmp_path / "scored").iterdir()
    rescored = {
        x["id"]: x
        for f in (run / "results" / model).glob("*.samples.jsonl")
        for x in map(json.loads, f.read_text().splitlines())
    }
    assert set(rescored) == set(records)
    for i, x in rescored.items():
        assert (x["score"], x["correct"], x["extracted"], x["error"]) == (
            records[i]["score"],
            records[i]["correct"],
            records[i]["extracted"],
            records[i]["error"],
        ), i
    ours = (run / "summary" / "needlebench_summary.csv").read_text()
    assert ours == (tiny_run / "summary" / "needlebench_summary.csv").read_text()


@pytest.fixture(scope="module")
def dense_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_opencompass("tests/configs/e2e_dense.py", tmp_path_factory.mktemp("oc_dense"))


def test_atc_run_reports_per_n_accuracy_weighted_score_and_enl(dense_run: Path) -> None:
    model = "smollm2-135m-instruct"
    result = json.loads((dense_run / "results" / model / "needlebench_atc_en.json").read_text())
    samples = [
        json.loads(x)
        for x in (dense_run / "results" / model / "needlebench_atc_en.samples.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 2
    by_n = {s["num_needles"]: s["score"] for s in samples}
    assert result["needles_2"] == by_n[2] and result["needles_4"] == by_n[4]
    assert result["weighted_score"] == pytest.approx((2 * by_n[2] + 4 * by_n[4]) / 6)
    assert result["enl50"] == max([n for n, v in by_n.items() if v >= 50], default=0)
    predictions = json.loads((dense_run / "predictions" / model / "needlebench_atc_en.json").read_text())
    assert len(predictions) == len(samples)
    for s, pred in zip(samples, (predictions[k] for k in sorted(predictions, key=int)), strict=True):
        assert s["error"] == _atc_error(pred["prediction"], json.loads(pred["gold"])), (s, pred["prediction"])


def _atc_error(output: str, gold: dict) -> str | None:
    """The error class an eldest-ancestor answer of a few dozen tokens earns, read off the output and the chain:
    none when its last box holds the answer; no box at all (too short to loop); a chain name before the answer
    (between the asked person and it: stopped early) or another chain name; a name not in the chain."""
    boxes = re.findall(r"\\boxed\{([^{}]*)\}", output)
    if not boxes:
        return "no_boxed_answer"
    named = boxes[-1].strip()
    if named == gold["answer"]:
        return None
    chain = gold["chain_names"]
    if named not in chain:
        return "hallucination"
    asked, answer, at = chain.index(gold["subject"]), chain.index(gold["answer"]), chain.index(named)
    return "stopped_early" if min(asked, answer) < at < max(asked, answer) else "wrong_chain_name"


def test_needlechain_run_reports_cells_and_error_shares(dense_run: Path) -> None:
    model = "smollm2-135m-instruct"
    base = dense_run / "results" / model / "needlechain"
    result = json.loads(base.with_suffix(".json").read_text())
    samples = [json.loads(x) for x in base.with_suffix(".samples.jsonl").read_text().splitlines()]
    assert len(samples) == 8
    for variant in ("forward", "backward", "mixed", "stack"):
        for question in ("single", "total"):
            cell = [s["score"] for s in samples if s["variant"] == variant and s["question"] == question]
            assert result[f"acc_{variant}_k5_{question}"] == pytest.approx(sum(cell) / len(cell))
        wrong = [s for s in samples if s["variant"] == variant and not s["correct"]]
        shares = sum(v for k, v in result.items() if k.startswith(f"err_{variant}_k5_"))
        assert shares == pytest.approx(100.0 * len(wrong) / 2)
    positions = json.loads((dense_run / "results" / model / "needlechain.positions.json").read_text())
    assert set(positions["all_k"]) == {"forward", "backward", "mixed", "stack"}
    backward = next(s for s in samples if s["variant"] == "backward")
    assert backward["presented_positions"] == [4, 3, 2, 1, 0]


def test_every_task_leaves_the_output_budget_to_the_model(tmp_path: Path) -> None:
    """A model config's max_out_len=32768 reaches every request (reasoning models are not cut short)."""
    run = run_opencompass("tests/configs/e2e_budget.py", tmp_path)
    folder = run / "predictions" / "budget-recorder"
    files = sorted(folder.glob("*.json"))
    names = {f.stem for f in files}
    assert {"needlebench_srt_en_4k", "needlebench_mrt_en_4k", "needlebench_mrs_en_4k"} <= names
    assert {"needlebench_atc_en", "needlechain", "needlebench_atc_v1_en_direct"} <= names
    predictions = [p["prediction"] for f in files for p in json.loads(f.read_text()).values()]
    assert predictions and all(p == "budget=32768" for p in predictions), set(predictions)


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the garbage model is tests/garbage_model.py (its hostile texts bench/hostile_outputs.py)
    path = os.pathsep.join(filter(None, [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    return run_opencompass("tests/configs/e2e_oracle.py", tmp_path_factory.mktemp("oc_oracle"), env=env)


def _table(run: Path, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader((run / "summary" / f"{name}.csv").open(encoding="utf-8")))


def _numbers(rows: list[dict[str, str]], columns: list[str]) -> list[float]:
    values = [float(r[c]) for r in rows for c in columns]
    assert values, columns
    return values


@pytest.mark.parametrize(("model", "expected"), [("oracle", 100.0), ("garbage", 0.0)])
def test_oracle_scores_100_and_garbage_0_in_every_table(scripted_run: Path, model: str, expected: float) -> None:
    """The install check: across shards, templates, graders and the summarizer nothing is lost or mixed up."""
    summary = _table(scripted_run, "needlebench_summary")
    tasks = {r["task"] for r in summary}
    assert {"S-RT", "M-RT", "M-RS"} <= tasks and {r["lang"] for r in summary} >= {"EN", "ZH"}
    assert set(_numbers(summary, [model])) == {expected}
    atc = [r for r in _table(scripted_run, "needlebench_atc") if r["model"] == model]
    score_columns = [c for c in atc[0] if c.startswith("N=") or c in ("weighted", "weighted_short")]
    assert {"N=2", "N=4", "weighted"} <= set(score_columns)
    assert set(_numbers(atc, score_columns)) == {expected}
    assert set(_numbers(atc, ["ENL-50"])) == {4.0 if expected else 0.0}
    chain = _table(scripted_run, "needlechain_summary")
    assert len(chain) == 8  # 4 variants x 2 questions at k=5
    assert set(_numbers(chain, [model, f"{model} plain"])) == {expected}
    v1 = [r for r in _table(scripted_run, "needlebench_atc_v1") if r["model"] == model]
    assert set(_numbers(v1, ["2", "3", "weighted"])) == {expected}
    # nothing lost on the way: every table says its cells are complete
    for rows, column in (
        (summary, f"{model} complete"),
        (atc, "complete"),
        (chain, f"{model} complete"),
        (v1, "complete"),
    ):
        assert {r[column] for r in rows} == {"True"}, column
    samples = [
        json.loads(line)
        for f in sorted((scripted_run / "results" / model).glob("*.samples.jsonl"))
        for line in f.read_text(encoding="utf-8").splitlines()
    ]
    assert len({s["task"] for s in samples}) == 6
    assert {s["score"] for s in samples} == {expected}
    assert all(s["correct"] == bool(expected) and (expected or s["error"]) for s in samples)


def test_scripted_run_logs_hold_no_traceback(scripted_run: Path) -> None:
    logs = [p for p in (scripted_run / "logs").rglob("*") if p.is_file()]
    assert logs
    for log in logs:
        assert "Traceback" not in log.read_text(encoding="utf-8", errors="replace"), log
