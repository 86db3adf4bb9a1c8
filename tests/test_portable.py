"""Datasets that travel and predictions made elsewhere: Parquet export, `needlebench score`, the drill-down."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, launch_chromium

from needlebench.sample import DATASET_VERSION
from needlebench.tasks import get_task
from needlebench.terminal import Counting

CONFIG = "tests/configs/e2e_tiny.py"  # 5 samples: S-RT EN/ZH at depths 0 and 100, one M-RT EN


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_DATASETS_OFFLINE="1")
    return subprocess.run(
        [bin_path("needlebench"), *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "parquet"
    r = _run("export", CONFIG, "--format", "parquet", str(out))
    assert r.returncode == 0, r.stderr
    return out


def _rows(folder: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def test_parquet_export_round_trips_through_datasets(exported: Path, tmp_path: Path) -> None:
    import datasets

    jsonl = tmp_path / "rows.jsonl"
    assert _run("export", CONFIG, "-o", str(jsonl)).returncode == 0
    expected = {(r["dataset"], r["id"]): r for r in map(json.loads, jsonl.read_text().splitlines())}
    loaded = datasets.load_dataset("parquet", data_dir=str(exported))["train"]
    assert len(loaded) == len(expected) == 5
    for row in loaded:
        want = expected[(row["dataset"], row["id"])]
        assert row["prompt"] == want["prompt"] and row["task"] == want["task"] and row["lang"] == want["lang"]
        assert json.loads(row["gold"]) == want["gold"] and json.loads(row["meta"]) == want["meta"]
    card = (exported / "README.md").read_text()
    assert f"dataset version {DATASET_VERSION}" in card and "needlebench_mrt_en_4k" in card
    assert "Apache-2.0" in card and "MIT" in card  # the English and Chinese haystacks' licences
    assert sorted(p.name for p in exported.iterdir()) == [
        "README.md",
        "needlebench_mrt_en_4k.parquet",
        "needlebench_srt_en_4k.parquet",
        "needlebench_srt_zh_4k.parquet",
    ]


def _oracle_lines(rows: list[dict]) -> list[dict]:
    return [{"id": r["id"], "prediction": get_task(r["task"]).oracle(json.loads(r["gold"]))} for r in rows]


def test_score_reports_bad_lines_scores_the_rest_and_never_overwrites(exported: Path, tmp_path: Path) -> None:
    rows = _rows(exported)
    good = _oracle_lines(rows)
    srt_en = [g for g, r in zip(good, rows) if r["dataset"] == "needlebench_srt_en_4k"]
    zh = [g for g, r in zip(good, rows) if r["dataset"] == "needlebench_srt_zh_4k"]
    lines = [
        *srt_en,
        zh[0],
        {"id": "srt-en-1000-0-0-deadbeef", "prediction": "x"},  # not in the export
        {"id": "elsewhere-2", "prediction": "y"},
        zh[1],
        {**zh[1], "prediction": "another answer"},  # the same id twice: both lines left out
        {"id": rows[0]["id"], "prediction": "z", "version": "1.0"},  # M-RT, made for another dataset version
        "{not json",
    ]
    preds = _write(tmp_path / "preds.jsonl", lines)
    out = tmp_path / "scored"
    first = _run("score", str(preds), "--export", str(exported), "-o", str(out), "--model", "oracle")
    assert first.returncode == 0, first.stderr
    assert "2 prediction(s) name ids that are not in the export" in first.stderr
    assert "1 id(s) appear more than once" in first.stderr and "another dataset version" in first.stderr
    assert "1 line(s) are not" in first.stderr and "Traceback" not in first.stderr
    assert "scored 3 prediction(s); 2 sample(s) of the export had none" in first.stdout
    second = _run("score", str(preds), "--export", str(exported), "-o", str(out), "--model", "oracle")
    assert second.returncode == 0
    runs = sorted(out.iterdir())
    assert len(runs) == 2  # a second call writes a new folder; the first is untouched
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((runs[0] / "summary" / "needlebench_summary.csv").open())
    }
    assert float(table[("S-RT", "EN", "1000")]["oracle"]) == 100.0
    zh_row = table[("S-RT", "ZH", "1000")]
    assert float(zh_row["oracle"]) == 100.0 and zh_row["oracle complete"] == "False"
    assert zh_row["oracle failed"] == "1" and zh_row["oracle planned"] == "2"  # counted, never scored
    record = json.loads((runs[0] / "needlebench_score.json").read_text())
    assert record["scored"] == 3 and record["missing"] == 2 and len(record["problems"]) == 4
    samples = [
        json.loads(x)
        for f in (runs[0] / "results" / "oracle").glob("*.samples.jsonl")
        for x in f.read_text(encoding="utf-8").splitlines()
    ]
    absent = [s for s in samples if s["unscored"] == "no_prediction"]  # unscored, and no text stands in for it
    assert len(absent) == 2 and all(s["score"] is None and s["prediction"] == "" for s in absent)
    nothing = _write(tmp_path / "none.jsonl", [{"id": "nope", "prediction": "a"}])
    refused = _run("score", str(nothing), "--export", str(exported), "-o", str(out))
    assert refused.returncode == 2 and "none of 1 line(s)" in refused.stderr and len(list(out.iterdir())) == 2
    missing = _run("score", str(preds), "--export", str(tmp_path / "no_such_export"), "-o", str(out))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


def test_drilldown_lists_a_cells_samples_in_a_real_browser(exported: Path, tmp_path: Path) -> None:
    """Click every heatmap cell in headless Chromium; the listed ids are the cell's records in the results files."""
    from playwright.sync_api import sync_playwright

    rows = _rows(exported)
    lines = _oracle_lines(rows)
    for line, row in zip(lines, rows):
        if json.loads(row["meta"]).get("depth") == 100:  # a wrong answer at depth 100, to see both verdicts
            line["prediction"] = "I could not find it. <b>bold</b>"
    out = tmp_path / "scored"
    r = _run("score", str(_write(tmp_path / "p.jsonl", lines)), "--export", str(exported), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    (run,) = out.iterdir()
    records = [
        json.loads(x)
        for f in sorted((run / "results" / "external").glob("*.samples.jsonl"))
        for x in f.read_text().splitlines()
    ]
    page_path = run / "summary" / "report.html"
    errors: list[str] = []
    seen: dict[tuple[str, str], list[str]] = {}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.resolve().as_uri())
        cells = page.locator("td.hmc[data-cell]")
        for i in range(cells.count()):
            cell = cells.nth(i)
            key = (cell.get_attribute("data-hm"), cell.get_attribute("data-cell"))
            cell.click()
            page.wait_for_selector("#nb-drill tr[data-id]")
            seen[key] = page.locator("#nb-drill tr[data-id]").evaluate_all("rs => rs.map(r => r.dataset.id)")
            if key == ("heatmap_srt_en_external", "100|1000"):
                marks = page.locator("#nb-drill mark").all_inner_texts()
                verdicts = page.locator("#nb-drill td.verdict").all_inner_texts()
                answers = page.locator("#nb-drill td.text").all_inner_texts()
                if os.environ.get("NEEDLEBENCH_UPDATE_SCREENSHOTS"):
                    page.locator("body").screenshot(path=str(ROOT / "docs" / "images" / "drilldown.png"))
        browser.close()
    assert not errors, errors
    cells_in_files = {
        (f"heatmap_{r['task']}_{r['lang']}_external", f"{float(d):g}|{r['length']}")
        for r in records
        for d in (r.get("depths") if r["task"] == "mrt" else [r["depth"]])
    }
    assert set(seen) == cells_in_files and len(seen) == 6  # S-RT EN, ZH: 2 depths each; M-RT: 2 needles' depths
    for (hm, cell), ids in seen.items():
        _, task, lang = hm.split("_")[:3]
        depth, length = cell.split("|")
        expected = sorted(
            r["id"]
            for r in records
            if r["task"] == task
            and r["lang"] == lang
            and r["length"] == int(length)
            and float(depth) in [float(d) for d in (r["depths"] if task == "mrt" else [r["depth"]])]
        )
        assert sorted(ids) == expected, (hm, cell)
    gold = json.loads(next(r["gold"] for r in rows if r["id"] == seen[("heatmap_srt_en_external", "100|1000")][0]))
    assert marks == [gold["needle"]] and verdicts == ["wrong (0)"]
    assert "I could not find it. <b>bold</b>" in answers  # shown as text, never as markup


def test_progress_draws_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet_pipe, tty, silenced = io.StringIO(), Tty(), Tty()
    for stream, quiet in ((quiet_pipe, False), (tty, False), (silenced, True)):
        with Counting("samples", total=4, stream=stream, quiet=quiet) as bar:
            bar.update(3)
            bar.update()
        assert bar.count == 4
    assert quiet_pipe.getvalue() == "" and silenced.getvalue() == ""
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tty.getvalue())  # rich's colours and cursor moves
    assert "samples" in drawn and "4/4" in drawn and "/s" in drawn
