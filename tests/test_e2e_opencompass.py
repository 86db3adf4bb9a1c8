"""A real ``opencompass`` run with the real tiny model, checked end to end."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from conftest import bin_path

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tiny_run(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("oc_e2e")
    result = subprocess.run(
        [bin_path("opencompass"), "tests/configs/e2e_tiny.py", "-w", str(work)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return run_dir


def test_summary_csv_matches_per_sample_results(tiny_run: Path) -> None:
    (summary,) = list((tiny_run / "summary").glob("summary_*.csv"))
    rows = list(csv.DictReader(summary.open(encoding="utf-8")))
    model = "smollm2-135m-instruct"
    scores = {(r["dataset"], r["metric"]): r[model] for r in rows}
    for abbr, n in (("needlebench_srt_en_4k", 1), ("needlebench_srt_zh_4k", 1), ("needlebench_mrt_en_4k", 1)):
        samples = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        assert len(samples) == n
        expected = sum(s["score"] for s in samples) / n
        assert float(scores[(abbr, "score")]) == pytest.approx(expected, abs=0.01)
        assert float(scores[(abbr, "num_samples")]) == n
        preds = json.loads((tiny_run / "predictions" / model / f"{abbr}.json").read_text())
        assert len(preds) == n
        for s in samples:
            assert s["prompt_tokens"] <= 1000 and s["length"] == 1000
    mrt = json.loads((tiny_run / "results" / model / "needlebench_mrt_en_4k.samples.jsonl").read_text().splitlines()[0])
    assert len(mrt["recalled"]) == 2


def test_needlebench_summary_csv_and_report_from_real_run(tiny_run: Path) -> None:
    model = "smollm2-135m-instruct"
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((tiny_run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }

    def sample_score(abbr: str) -> float:
        (s,) = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        return s["score"]

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


@pytest.fixture(scope="module")
def dense_run(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("oc_dense")
    result = subprocess.run(
        [bin_path("opencompass"), "tests/configs/e2e_dense.py", "-w", str(work)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return run_dir


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
    for s in samples:
        assert s["correct"] or s["error"] in {
            "no_boxed_answer",
            "repetition",
            "stopped_early",
            "wrong_chain_name",
            "hallucination",
            "wrong_distance",
        }


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
