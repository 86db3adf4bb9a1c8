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
