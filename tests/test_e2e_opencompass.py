"""A real ``opencompass`` run with the real tiny model, checked end to end."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, bin_path, graded, launch_chromium, run_opencompass

pytestmark = pytest.mark.e2e

# The main job's config (scripts/main.sh): S-RT EN/ZH at 1k and 2k tokens and depths 0/50/100, one M-RT EN
# sample, in two shards. The README shows an excerpt of its summary (test_readme_shows_what_the_main_job_writes).
MAIN_JOB = "configs/eval_needlebench_tiny.py"
SAMPLES = {"needlebench_srt_en_4k": 6, "needlebench_srt_zh_4k": 6, "needlebench_mrt_en_4k": 1}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the README's command itself: the `opencompass` script, not `needlebench run`'s lean start
    return run_opencompass(MAIN_JOB, tmp_path_factory.mktemp("oc_e2e"), command=[bin_path("opencompass")])


def test_readme_shows_what_the_main_job_writes(tiny_run: Path) -> None:
    """The README's (and the first-run page's) excerpt of needlebench_summary.csv is this run's, line for line.

    When generation, grading or the model's answers change, ``python -m tools.readme_excerpt`` rewrites it.
    """
    from tools.readme_excerpt import PAGES, excerpt, page_excerpt

    ran = excerpt((tiny_run / "summary" / "needlebench_summary.csv").read_text(encoding="utf-8"))
    for page in PAGES:
        assert page_excerpt(page) == ran, f"{page.name}: run python -m tools.readme_excerpt"


def test_summary_csv_matches_per_sample_results(tiny_run: Path) -> None:
    from needlebench.opencompass.evaluator import SUMMARY_HEADLINE

    (summary,) = list((tiny_run / "summary").glob("summary_*.csv"))
    rows = list(csv.DictReader(summary.open(encoding="utf-8")))
    model = "smollm2-135m-instruct"
    words = dict(SUMMARY_HEADLINE)  # the default summary's rows, each under the words a reader needs no docs for
    scores = {(r["dataset"], r["metric"]): r[model] for r in rows}
    for abbr, n in SAMPLES.items():
        samples = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        assert len(samples) == n
        expected = sum(s["score"] for s in samples) / n
        assert float(scores[(abbr, "score")]) == pytest.approx(expected, abs=0.01)
        assert float(scores[(abbr, words["num_samples"])]) == n
        folder = tiny_run / "predictions" / model
        files = (
            [folder / f"{abbr}.json"] if (folder / f"{abbr}.json").exists() else sorted(folder.glob(f"{abbr}_*.json"))
        )
        assert sum(len(json.loads(f.read_text())) for f in files) == n  # whole, or the parts of a split dataset
        for s in samples:
            assert s["prompt_tokens"] <= s["length"] and s["length"] in (1000, 2000)
    mrt = json.loads((tiny_run / "results" / model / "needlebench_mrt_en_4k.samples.jsonl").read_text().splitlines()[0])
    assert len(mrt["recalled"]) == 2


def test_opencompass_summary_is_a_headline_of_readable_rows(tiny_run: Path) -> None:
    """OpenCompass's own summary of the main job: per dataset its score and the numbers that qualify it (at most
    6 rows), each under words a reader needs no docs for, with the result file's number ("-" where it has none,
    OpenCompass's mark); the breakdowns stay in the result files (``all_metrics=True`` lists them:
    tests/test_summary_headline.py)."""
    from needlebench.opencompass.evaluator import SUMMARY_HEADLINE

    model = "smollm2-135m-instruct"
    (summary,) = list((tiny_run / "summary").glob("summary_*.csv"))
    rows = list(csv.DictReader(summary.open(encoding="utf-8")))
    shown = {abbr: [(r["metric"], r[model]) for r in rows if r["dataset"] == abbr] for abbr in SAMPLES}
    assert [r["dataset"] for r in rows] == [abbr for abbr in SAMPLES for _ in SUMMARY_HEADLINE]  # 6 rows each
    for abbr in SAMPLES:
        result = json.loads((tiny_run / "results" / model / f"{abbr}.json").read_text(encoding="utf-8"))
        # the score as OpenCompass writes it; every other headline number is a count of samples or tokens
        assert shown[abbr] == [
            (words, "-" if math.isnan(v) else f"{v:.2f}" if name == "score" else str(int(v)))
            for name, words in SUMMARY_HEADLINE
            for v in [result[name]]
        ]
        assert len(result) > 2 * len(SUMMARY_HEADLINE)  # every number is still in the result file
    assert [words for words, _ in shown["needlebench_srt_en_4k"]] == [
        "score",
        "samples planned",
        "samples scored",
        "answers cut off (truncated)",
        "samples failed (no answer)",
        "effective length (tokens)",
    ]
    for path in (tiny_run / "summary").glob("summary_*.*"):
        assert not re.search(r"\bnan\b", path.read_text(encoding="utf-8"), re.I), path


def test_no_none_or_nan_in_the_main_jobs_tables_and_pages(tiny_run: Path, tmp_path: Path) -> None:
    """An absent value is an empty cell in every table and page we write: our CSVs, report.html and the
    leaderboard's pages of the main job (images and the drill-down's compressed samples set aside)."""
    from needlebench.report.board_pages import write_leaderboard
    from needlebench.report.leaderboard import build_leaderboard

    pages = write_leaderboard(build_leaderboard([tiny_run], published=False), tmp_path / "board")
    ours = sorted((tiny_run / "summary").glob("needlebench_*.csv"))
    names = [
        "needlebench_cost.csv",
        "needlebench_cost_forecast.csv",
        "needlebench_effective_length.csv",
        "needlebench_summary.csv",
    ]
    assert [p.name for p in ours] == names
    tables = dict(zip(names, ours, strict=True))
    files = [*ours, tiny_run / "summary" / "report.html", *pages.values()]
    for path in files:
        text = path.read_text(encoding="utf-8")
        text = re.sub(r"base64,[A-Za-z0-9+/=]+|<script type='application/octet-stream'[^>]*>[^<]*</script>", "", text)
        found = re.findall(r"\b(?:None|nan|NaN|NA)\b|&lt;NA&gt;|<NA>", text)
        assert not found, (path.name, found)
    # the absent values the run has are there, as empty cells: M-RT's cells hold one sample each, so no interval
    # (README), and S-RT ZH, every answer cut off at 0 (README), has no effective length
    model = "smollm2-135m-instruct"
    summary = list(csv.DictReader(tables["needlebench_summary.csv"].open(encoding="utf-8")))
    assert [
        (r["task"], r["lang"], r["length"]) for r in summary if r[f"{model} ci_low"] == r[f"{model} ci_high"] == ""
    ] == [
        ("M-RT", "EN", "1000"),
        ("M-RT", "EN", "all"),
        ("M-RT", "OVERALL", "all"),
    ]
    lengths = csv.DictReader(tables["needlebench_effective_length.csv"].open(encoding="utf-8"))
    effective = {(r["task"], r["lang"]): r["effective_length"] for r in lengths}
    assert effective[("S-RT", "ZH")] == ""


def test_split_dataset_was_sharded_and_merged(tiny_run: Path, tmp_path: Path) -> None:
    """The prediction files are exactly the partitioner's plan, and a split dataset was scored whole."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    model = "smollm2-135m-instruct"
    cfg = Config.fromfile(MAIN_JOB)
    plan = NeedleBenchPartitioner(out_dir=str(tmp_path), num_shards=2).partition(
        [{"models": [dict(m) for m in cfg["models"]], "datasets": [dict(d) for d in cfg["datasets"]]}],
        work_dir=str(tmp_path),
        out_dir=str(tmp_path),
    )
    chunks = [c for task in plan for c in task["datasets"][0]]
    split = {c["abbr"].rsplit("_", 1)[0] for c in chunks if c["reader_cfg"].get("test_range")}
    assert len(plan) == 2 and split  # 13 prompts in 3 datasets over 2 shards: one dataset is cut in two
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

    def sample_score(abbr: str, length: int | None = None) -> float:
        rows = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        rows = [r for r in rows if length is None or r["length"] == length]
        return sum(r["score"] for r in rows) / len(rows)

    en, zh = sample_score("needlebench_srt_en_4k"), sample_score("needlebench_srt_zh_4k")
    for length in (1000, 2000):
        got = float(table[("S-RT", "EN", str(length))][model])
        assert got == pytest.approx(sample_score("needlebench_srt_en_4k", length), abs=0.01)
    assert float(table[("S-RT", "EN", "all")][model]) == pytest.approx(en, abs=0.01)
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
def scored_run(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run's own answers, exported as a predictions file and scored with ``needlebench score`` against
    a Parquet export of the same config: the run folder that command wrote."""
    tmp_path = tmp_path_factory.mktemp("scored")
    model = "smollm2-135m-instruct"
    records = {
        r["id"]: r
        for f in (tiny_run / "results" / model).glob("*.samples.jsonl")
        for r in map(json.loads, f.read_text().splitlines())
    }
    # OpenCompass's in-process HF model saves no finish reason: an output is cut off when its length in the
    # model's own tokens (its folder's tokenizer) reaches the 24-token budget; a harness elsewhere states
    # finish_reason
    from needlebench.opencompass.models import smollm2_folder

    assert {r["output_tokenizer"] for r in records.values()} == {smollm2_folder()}
    assert all(r["truncated"] == (r["output_tokens"] >= 24) for r in records.values())
    assert sum(r["truncated"] for r in records.values()) == 6  # every Chinese answer (the README: 6 of 12 truncated)
    lines = [
        {"id": i, "prediction": r["prediction"], "finish_reason": "length" if r["truncated"] else "stop"}
        for i, r in records.items()
    ]
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps(line) + "\n" for line in lines))
    export = tmp_path / "export"
    assert (
        subprocess.run(
            [bin_path("needlebench"), "export", MAIN_JOB, "--format", "parquet", str(export), "-q"],
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
    return run


def test_real_report_and_board_mark_every_cut_off_cell(tiny_run: Path, tmp_path: Path) -> None:
    """The main job's report (the summarizer's page) and a leaderboard of the run mark each number whose answers
    were cut off, at the budget its plan holds, with counts taken from the samples themselves; a zero made only
    of cut-off answers reads "cut off"."""
    from needlebench.report.board_pages import leaderboard_markdown
    from needlebench.report.cutoff import CutOff
    from needlebench.report.html import build
    from needlebench.report.leaderboard import build_leaderboard

    model = "smollm2-135m-instruct"
    plan = json.loads((tiny_run / "needlebench_plan.json").read_text(encoding="utf-8"))
    budgets = {abbr: limit["out_len"] for m in plan["models"] for abbr, limit in m["limits"].items()}
    _, rep = build([tiny_run], tmp_path / "report")
    board = leaderboard_markdown(build_leaderboard([tiny_run], published=False))
    srt = [hm for hm in rep.heatmaps if hm.key.startswith("heatmap_srt_")]
    assert srt
    for hm in srt:  # S-RT: one sample per (depth, length) cell
        lang = hm.key.split("_")[2]
        abbr = f"needlebench_srt_{lang}_4k"
        rows = [
            json.loads(x) for x in (tiny_run / "results" / model / f"{abbr}.samples.jsonl").read_text().splitlines()
        ]
        for r in rows:
            cut = hm.cut_off.get((float(r["depth"]), r["length"]))
            assert cut == (CutOff(1, 1, (budgets[abbr],)) if r["truncated"] else None), r["id"]
        n_cut = sum(r["truncated"] for r in rows)
        if n_cut:
            assert f"✂ {n_cut}/{len(rows)}" in board
        if n_cut == len(rows) and not any(r["score"] for r in rows):
            assert f"cut off (0.00 [0.00, 0.00]) ✂ {n_cut}/{n_cut}" in board
    marks = sum(len(hm.cut_off) for hm in rep.heatmaps)
    page = (tiny_run / "summary" / "report.html").read_text(encoding="utf-8")
    assert page.count("class='cutmark'") == marks + (1 if marks else 0)  # and one in the legend
    # as a reader sees them: the summarizer's own page and a leaderboard page of the run, in Chromium
    from playwright.sync_api import sync_playwright

    from needlebench.report.board_pages import write_leaderboard

    board_page = write_leaderboard(build_leaderboard([tiny_run], published=False), tmp_path / "board")["html"]
    shown_marks = """() => Array.from(document.querySelectorAll('table.hmgrid td .cutmark')).map(m => [
        m.textContent, m.closest('td').getAttribute('title') || '', m.closest('td').childNodes[0].textContent.trim(),
        m.getBoundingClientRect().width > 0])"""
    errors: list[str] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        view = browser.new_page(viewport={"width": 1400, "height": 1000})
        view.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        view.goto((tiny_run / "summary" / "report.html").resolve().as_uri())
        shown = view.evaluate(shown_marks)
        view.goto(board_page.resolve().as_uri())
        table = view.locator("table.board").first
        headers = table.locator("thead th").all_inner_texts()
        board_cells = {
            h: (td.inner_text(), td.get_attribute("title") or "")
            for h, td in zip(headers, table.locator("tbody tr.measured").first.locator("td").all())
        }
        browser.close()
    assert not errors, errors
    want = sorted(
        (f"✂ {c.cut}/{c.answered}", f"{c.cut} of {c.answered} answers cut off at the {c.budgets[0]}-token")
        for hm in rep.heatmaps
        for c in hm.cut_off.values()
    )
    assert len(shown) == marks and all(visible for *_, visible in shown), shown
    for (mark, title, _, _), (want_mark, want_title) in zip(sorted(shown), want, strict=True):
        assert mark == want_mark and want_title in title, (mark, title)
    # each marked cell reads its score, or "cut off" where every answer behind it was cut off and it scored 0:
    # per S-RT cell (one sample) and per length (the grid's mean row), from the samples (M-RT's one is not cut)
    expected = []
    for lang in ("en", "zh"):
        path = tiny_run / "results" / model / f"needlebench_srt_{lang}_4k.samples.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        for mine in [[r] for r in rows] + [[r for r in rows if r["length"] == n] for n in {r["length"] for r in rows}]:
            cut, mean = sum(r["truncated"] for r in mine), sum(r["score"] for r in mine) / len(mine)
            if cut:
                expected.append(
                    (f"✂ {cut}/{len(mine)}", "cut off" if cut == len(mine) and mean == 0 else f"{mean:.0f}")
                )
    assert sorted((mark, text) for mark, _, text, _ in shown) == sorted(expected)
    zh, zh_title = board_cells["S-RT ZH"]
    cut_zh = sum(
        r["truncated"]
        for r in map(json.loads, (tiny_run / "results" / model / "needlebench_srt_zh_4k.samples.jsonl").open())
    )
    assert (
        f"✂ {cut_zh}/6" in zh
        and f"{cut_zh} of 6 answers cut off at the {budgets['needlebench_srt_zh_4k']}-token" in zh_title
    )
    if cut_zh == 6:
        assert zh.startswith("cut off"), zh


def test_predictions_scored_outside_opencompass_give_the_same_tables(tiny_run: Path, scored_run: Path) -> None:
    """The run's own answers, exported as a predictions file and scored against a Parquet export of the same
    config, give the same per-sample grades and the same summary table as OpenCompass did."""
    model = "smollm2-135m-instruct"
    records = {
        r["id"]: r
        for f in (tiny_run / "results" / model).glob("*.samples.jsonl")
        for r in map(json.loads, f.read_text().splitlines())
    }
    rescored = {
        x["id"]: x
        for f in (scored_run / "results" / model).glob("*.samples.jsonl")
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
    ours = (scored_run / "summary" / "needlebench_summary.csv").read_text()
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


def test_a_record_that_cannot_be_read_is_counted_in_its_planned_cell(scripted_run: Path, tmp_path: Path) -> None:
    """``planned`` comes from the run's plan, not from the records that could be read: one line of the oracle's
    S-RT samples cut in half is counted as ``unreadable`` in its own cell (which says it is incomplete), every
    other cell and count stays as it was, and ``needlebench verify`` fails on the run."""
    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    samples = run / "results" / "oracle" / "needlebench_srt_en_4k.samples.jsonl"
    lines = samples.read_bytes().split(b"\n")
    lost = json.loads(lines[1])
    lines[1] = lines[1][: len(lines[1]) // 2]  # half a record: not JSON
    samples.write_bytes(b"\n".join(lines))
    done = subprocess.run([bin_path("needlebench"), "report", str(run)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    before = {(r["task"], r["lang"], r["length"]): r for r in _table(scripted_run, "needlebench_summary")}
    after = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((run / "needlebench_report" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    assert set(after) == set(before)
    cell, lang_row = ("S-RT", "EN", str(lost["length"])), ("S-RT", "EN", "all")
    for key, row in after.items():
        old = before[key]
        assert row["oracle planned"] == old["oracle planned"], key  # the plan's count, whatever was read
        if key in (cell, lang_row) or key[0].startswith("OVERALL") or key == ("S-RT", "OVERALL", "all"):
            assert row["oracle unreadable"] == "1" and row["oracle complete"] == "False", row
            assert int(row["oracle scored"]) == int(old["oracle scored"]) - 1
            assert "1 of " in row["oracle note"] and "record(s) unreadable (excluded)" in row["oracle note"], row
        else:
            assert row["oracle unreadable"] == "0" and row["oracle complete"] == old["oracle complete"], key
    verified = subprocess.run(
        [bin_path("needlebench"), "verify", str(run / "summary" / "results.json"), str(run)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert "1 planned record(s) of the run cannot be read back" in verified.stdout + verified.stderr
    assert f"{samples}:2: not a JSON line" in verified.stdout + verified.stderr


@pytest.mark.parametrize(("model", "expected"), [("oracle", 100.0), ("garbage", 0.0)])
def test_oracle_scores_100_and_garbage_0_in_every_table(scripted_run: Path, model: str, expected: float) -> None:
    """The install check: across shards, templates, graders and the summarizer nothing is lost or mixed up.

    The garbage model's 6k context skips its 2000-token sparse prompts: those cells are empty and
    incomplete (counted under ``skipped``), every other cell is 0."""
    summary = _table(scripted_run, "needlebench_summary")
    tasks = {r["task"] for r in summary}
    assert {"S-RT", "M-RT", "M-RS"} <= tasks and {r["lang"] for r in summary} >= {"EN", "ZH"}
    if model == "garbage":  # the 2000-token cells of M-RS and of Chinese S-RT / M-RT
        short = [r for r in summary if int(r[f"{model} skipped"])]
        assert {(r["task"], r["lang"]) for r in short if r["length"] == "2000"} == {
            ("S-RT", "ZH"),
            ("M-RT", "ZH"),
            ("M-RS", "EN"),
            ("M-RS", "ZH"),
        }
        for r in short:
            assert r[f"{model} complete"] == "False" and "skipped (over length)" in r[f"{model} note"], r
            assert (r[model] == "") == (r[f"{model} skipped"] == r[f"{model} planned"]), r
        summary = [r for r in summary if not int(r[f"{model} skipped"])]
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


def test_opencompass_summary_has_a_column_per_model_though_their_rows_differ(scripted_run: Path) -> None:
    """OpenCompass's own summary_<time>.csv is written for the three models (the garbage model's datasets hold
    fewer rows): every dataset reports the same numbers for each, "-" where nothing counted (``all_metrics=True``)."""
    (path,) = (scripted_run / "summary").glob("summary_*.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert {"oracle", "garbage", "thinker"} <= set(rows[0])
    scores = {(r["dataset"], r["metric"]): r for r in rows}
    srt = "needlebench_srt_zh_4k"  # the garbage model's 2000-token prompts skipped
    assert scores[(srt, "score")]["oracle"] == "100.00" and scores[(srt, "score")]["garbage"] == "0.00"
    assert scores[(srt, "length_2000")]["garbage"] == "-" and scores[(srt, "length_2000")]["oracle"] == "100.00"
    assert scores[(srt, "num_samples")]["garbage"] == "3.00" and scores[(srt, "num_samples")]["oracle"] == "6.00"
    # the oracle (200k context: nothing skipped) scores 100 in every score row; the garbage model 0, and "-" only
    # for the 2000-token cells its 6k context skipped whole (test_oracle_scores_100_and_garbage_0_in_every_table)
    skipped = {
        (f"needlebench_{t}_{lang}_4k", "length_2000")
        for t, lang in (("srt", "zh"), ("mrt", "zh"), ("mrs", "en"), ("mrs", "zh"))
    }
    for key, row in scores.items():
        if key[1].startswith(("score", "accuracy", "length_", "needles_", "acc_")):
            assert (row["oracle"], row["garbage"]) == ("100.00", "-" if key in skipped else "0.00"), (key, row)
    for model in ("oracle", "garbage", "thinker"):
        names = [
            [k for k in json.loads(f.read_text()) if k != "details"]
            for f in sorted((scripted_run / "results" / model).glob("*.json"))
        ]
        assert names == [
            [k for k in json.loads(f.read_text()) if k != "details"]
            for f in sorted((scripted_run / "results" / "oracle").glob("*.json"))
        ]
    logs = "".join(p.read_text(errors="replace") for p in (scripted_run / "logs").rglob("*") if p.is_file())
    assert "has different metrics" not in logs


def _share_columns(row: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """(share column, its count column, the columns whose sum is its denominator) of a table row."""
    out = []
    for column in row:
        if column.endswith("truncated%") and not column.startswith("wrong"):
            head = column[: -len("truncated%")]
            if f"{head}truncated" in row:
                out.append((column, f"{head}truncated", [f"{head}scored", f"{head}truncated_excluded"]))
            elif "wrong: truncated" in row:  # the ATC error table: a share of the wrong answers
                out.append((column, "wrong: truncated", ["wrong"]))
    return out


def assert_counts_agree(rows: list[dict[str, Any]]) -> int:
    """Every count beside a share of the same thing agrees with it: never a zero beside a non-zero share."""
    checked = 0
    for row in rows:
        for share, count, parts in _share_columns(row):
            if row[share] in ("", "nan") or (isinstance(row[share], float) and row[share] != row[share]):
                continue
            value, n = float(row[share]), int(float(row[count]))
            assert (n > 0) == (value > 0), (share, row)
            if all(p in row for p in parts):
                total = sum(int(float(row[p])) for p in parts)
                assert n == round(value * total / 100), (share, count, row)
            checked += 1
    return checked


def test_no_table_shows_a_zero_count_beside_a_non_zero_share(scripted_run: Path) -> None:
    """Every table of a run with cut-off outputs (scored as written) shows the cut-off count beside its share."""
    checked: dict[str, int] = {}
    for path in sorted((scripted_run / "summary").glob("*.csv")):
        if path.name.startswith("summary_"):
            continue
        checked[path.name] = assert_counts_agree(list(csv.DictReader(path.open(encoding="utf-8"))))
    # every cell with a share, for the three models: the summary's 3 tasks x (2 languages x (2 lengths + all) +
    # overall) + the v2 overall = 22 rows less the garbage model's 4 skipped cells, NeedleChain's 4 variants x 2
    # questions, one ATC and one ATC v1 row each, and the ATC error rows (N=2, N=4) of the two models with wrong
    # answers (the oracle's have no share)
    assert {name: n for name, n in checked.items() if n} == {
        "needlebench_summary.csv": 22 * 3 - 4,
        "needlechain_summary.csv": 8 * 3,
        "needlebench_atc.csv": 3,
        "needlebench_atc_errors.csv": 2 * 2,
        "needlebench_atc_v1.csv": 3,
    }
    (path,) = (scripted_run / "summary").glob("summary_*.csv")
    oc = {(r["dataset"], r["metric"]): r["thinker"] for r in csv.DictReader(path.open(encoding="utf-8"))}
    for (dataset, metric), value in oc.items():
        if metric == "truncated_rate" and value not in ("-", "nan"):
            assert (float(oc[(dataset, "num_truncated")]) > 0) == (float(value) > 0), dataset


def test_scripted_run_logs_hold_no_traceback(scripted_run: Path) -> None:
    logs = [p for p in (scripted_run / "logs").rglob("*") if p.is_file()]
    assert logs
    for log in logs:
        assert "Traceback" not in log.read_text(encoding="utf-8", errors="replace"), log


# ---- a scripted reasoning model (tests/thinking_model.py) in the same run ------------------------------------


def _thinker(run: Path) -> dict[str, list[tuple[dict, Any, dict]]]:
    """Per dataset, (saved prediction entry, the saved prediction, the graded record) in row order."""
    out = {}
    for path in sorted((run / "results" / "thinker").glob("*.samples.jsonl")):
        abbr = path.name.removesuffix(".samples.jsonl")
        records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        folder = run / "predictions" / "thinker"
        whole = folder / f"{abbr}.json"
        parts = (
            [whole]
            if whole.exists()
            else sorted(folder.glob(f"{abbr}_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
        )
        saved = [e for p in parts for _, e in sorted(json.loads(p.read_text()).items(), key=lambda kv: int(kv[0]))]
        assert len(saved) == len(records), abbr
        out[abbr] = [(e, e["prediction"], r) for e, r in zip(saved, records, strict=True)]
    return out


def _styled_cut(run: Path) -> int:
    """How many of the thinker's S-RT, M-RT and M-RS prompts its style (a hash of the prompt, read here from the
    saved prompts) cuts off at the budget."""
    from thinking_model import style_of

    from needlebench.opencompass.scripted import last_human_message
    from needlebench.tasks import get_task

    return sum(
        style_of(last_human_message(entry["origin_prompt"])) == "cut"
        for rows in _thinker(run).values()
        for entry, _, record in rows
        if get_task(record["task"]).short in ("S-RT", "M-RT", "M-RS")
    )


def test_reasoning_model_flags_every_cut_off_and_unclosed_output(scripted_run: Path) -> None:
    """Each record says what the scripted model did with its prompt: cut off at the budget (finish_reason
    "length", saved as such), a think block left open; the rest neither."""
    from thinking_model import STYLES, style_of

    from needlebench.context.tokenizer import get_encoding
    from needlebench.opencompass.scripted import last_human_message

    encoding = get_encoding("cl100k_base")
    seen = set()
    for abbr, rows in _thinker(scripted_run).items():
        for entry, saved, record in rows:
            style = style_of(last_human_message(entry["origin_prompt"]))
            seen.add(style)
            assert record["truncated"] == (style == "cut") == isinstance(saved, dict), (abbr, style)
            assert record["think_unclosed"] == (style in ("cut", "unclosed")), (abbr, style)
            text = saved["prediction"] if isinstance(saved, dict) else saved
            assert record["output_tokenizer"] == "tiktoken:cl100k_base"
            assert record["output_tokens"] == len(encoding.encode_ordinary(text)), (abbr, style)
            if style == "cut":  # cut at the 48-token budget; reference: scored as written
                assert record["output_tokens"] == 48 and record["unscored"] is None, (abbr, record)
    assert seen == set(STYLES)


def _cells(rows: list[dict], key: Any) -> dict[Any, list[dict]]:
    out: dict[Any, list[dict]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def _share(rows: list[dict]) -> float:
    return 100.0 * sum(r["truncated"] for r in rows) / len(rows)


def _notes_say(note: str, rows: list[dict], planned: int) -> None:
    cut = sum(r["truncated"] for r in rows)
    unclosed = sum(r["think_unclosed"] for r in rows)
    assert (f"{cut} of {planned} truncated (scored as written)" in note) == bool(cut), note
    assert (f"{unclosed} of {planned} left a think block open" in note) == bool(unclosed), note


def test_every_table_counts_the_reasoning_models_cut_off_outputs_cell_by_cell(scripted_run: Path) -> None:
    from needlebench.tasks import get_task

    records = [r for rows in _thinker(scripted_run).values() for _, _, r in rows]
    summary = [r for r in _table(scripted_run, "needlebench_summary") if r["lang"] in ("EN", "ZH")]
    cells = _cells(records, lambda r: (get_task(r["task"]).short, r["lang"].upper(), str(r.get("length"))))
    langs = _cells(records, lambda r: (get_task(r["task"]).short, r["lang"].upper(), "all"))
    checked = 0
    for row in summary:
        mine = (cells if row["length"] != "all" else langs)[(row["task"], row["lang"], row["length"])]
        assert float(row["thinker truncated%"]) == pytest.approx(_share(mine), abs=0.01), row
        _notes_say(row["thinker note"], mine, len(mine))
        assert row["thinker complete"] == "True" and int(row["thinker truncated_excluded"]) == 0
        assert int(row["thinker truncated"]) == sum(r["truncated"] for r in mine)
        checked += 1
    assert checked == 3 * 2 * 3  # S-RT, M-RT, M-RS x EN, ZH x 1000, 2000, all
    cells = [r for r in summary if r["length"] != "all"]  # each prompt counted once
    assert sum(int(r["thinker truncated"]) for r in cells) == _styled_cut(scripted_run) == 7
    atc = [r for r in records if r["task"] == "atc"]
    (row,) = [r for r in _table(scripted_run, "needlebench_atc") if r["model"] == "thinker"]
    assert float(row["truncated%"]) == pytest.approx(_share(atc), abs=0.01)
    _notes_say(row["note"], atc, len(atc))
    errors = [r for r in _table(scripted_run, "needlebench_atc_errors") if r["model"] == "thinker"]
    for row in errors:
        mine = [r for r in atc if r["num_needles"] == int(row["N"])]
        wrong = [r for r in mine if not r["correct"]]
        assert int(row["wrong"]) == len(wrong)
        if wrong:
            assert float(row["truncated%"]) == pytest.approx(100 * sum(r["truncated"] for r in wrong) / len(wrong))
    chain = _cells(
        [r for r in records if r["task"] == "needlechain"], lambda r: (r["variant"], str(r["k"]), r["question"])
    )
    for row in _table(scripted_run, "needlechain_summary"):
        mine = chain[(row["variant"], row["k"], row["question"])]
        assert float(row["thinker truncated%"]) == pytest.approx(_share(mine), abs=0.01)
    v1 = [r for r in records if r["task"] == "atc_mc"]
    (row,) = [r for r in _table(scripted_run, "needlebench_atc_v1") if r["model"] == "thinker"]
    assert float(row["truncated%"]) == pytest.approx(_share(v1), abs=0.01)
    assert "truncated%" in (scripted_run / "summary" / "report.html").read_text(encoding="utf-8")


def test_left_out_as_truncated_the_cut_off_outputs_move_no_score(scripted_run: Path) -> None:
    """The same saved outputs graded with truncated="unscored" (OpenCompass's eval-task processing with the
    model's think strip, then our evaluator): every summary cell is the mean of the samples that were not cut
    off, the cut-off ones are counted under ``truncated`` and the cell is marked incomplete."""
    from mmengine.config import Config
    from opencompass.tasks.openicl_eval import OpenICLEvalTask

    from needlebench.cache.rows import load_rows
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator
    from needlebench.report.tables import summary_table
    from needlebench.tasks import config_params, get_task

    cfg = Config.fromfile(str(ROOT / "tests" / "configs" / "e2e_oracle.py"))
    configs = {d["abbr"]: d.to_dict() for d in cfg["datasets"]}
    model = next(m.to_dict() for m in cfg["models"] if m["abbr"] == "thinker")
    task = OpenICLEvalTask.__new__(OpenICLEvalTask)
    task.model_cfg, task.eval_cfg = model, {}
    before, after = [], []
    for abbr, rows in _thinker(scripted_run).items():
        d = configs[abbr]
        data = [dict(r) for r in load_rows(d["task"], **config_params(d))]
        saved = [s for _, s, _ in rows]
        evaluator = NeedleBenchEvaluator(truncated="unscored")
        texts = evaluator.pred_postprocess(task._process_predictions(list(saved)))
        regraded = evaluator.score(texts, [r["answer"] for r in data], data, prediction=saved)["details"]
        before += [{**r, "model": "thinker", "dataset": abbr} for _, _, r in rows]
        after += [{**r, "model": "thinker", "dataset": abbr} for r in regraded]
    assert [r["id"] for r in before] == [r["id"] for r in after]
    assert [r["unscored"] == "truncated" for r in after] == [r["truncated"] for r in before]
    old = {
        (r["task"], r["lang"], r["length"]): r
        for r in summary_table(graded(before), ["thinker"]).to_dict(orient="records")
    }
    new = summary_table(graded(after), ["thinker"]).to_dict(orient="records")
    moved = 0
    for row in new:
        if row["lang"] not in ("EN", "ZH") or row["length"] == "all":
            continue
        mine = [
            r
            for r in before
            if (get_task(r["task"]).short, r["lang"].upper(), r.get("length"))
            == (row["task"], row["lang"], row["length"])
        ]
        kept = [r["score"] for r in mine if not r["truncated"]]
        cut = len(mine) - len(kept)
        if kept:
            assert row["thinker"] == pytest.approx(sum(kept) / len(kept)), row
        assert row["thinker truncated_excluded"] == cut and row["thinker truncated"] == cut
        assert row["thinker planned"] == len(mine)
        assert bool(row["thinker complete"]) is (cut == 0) and (
            f"{cut} of {len(mine)} truncated (excluded)" in row["thinker note"]
        ) == bool(cut)
        assert row["thinker truncated%"] == pytest.approx(
            old[(row["task"], row["lang"], row["length"])]["thinker truncated%"]
        )
        moved += cut
    assert moved == _styled_cut(scripted_run) == 7
    # left out as truncated, every table still counts the cut-off outputs beside their share
    from needlebench.tasks.atc.open_answer_results import atc_error_table, atc_table
    from needlebench.tasks.needlechain.results import chain_table

    records = graded(after)
    tables = {"summary": new}
    for name, table in (("atc", atc_table), ("atc errors", atc_error_table), ("chain", chain_table)):
        tables[name] = table(records, ["thinker"]).to_dict(orient="records")
    # the thinker's cells: the summary's 22 rows (as in test_no_table_shows_a_zero_count_beside_a_non_zero_share),
    # its ATC row, its ATC error rows N=2 and N=4 (wrong answers in each), NeedleChain's 4 variants x 2 questions
    assert {k: assert_counts_agree(t) for k, t in tables.items()} == {
        "summary": 22,
        "atc": 1,
        "atc errors": 2,
        "chain": 8,
    }


def test_leaderboard_of_real_runs_beside_the_published_rows(
    scripted_run: Path, tiny_run: Path, scored_run: Path, tmp_path: Path
) -> None:
    """The oracle and the garbage model (one opencompass run), SmolLM2 (an opencompass run, and the same answers
    scored by `needlebench score`) and the papers' rows on one leaderboard; the runs' bundles verify."""
    from needlebench.report.bundle import verify_bundle
    from needlebench.report.published import load_published

    out = tmp_path / "board"
    runs = [str(scripted_run), str(tiny_run), str(scored_run)]
    r = subprocess.run(
        [bin_path("needlebench"), "leaderboard", *runs, "-o", str(out)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and not r.stderr.strip(), r.stdout + r.stderr
    rows = list(csv.DictReader((out / "leaderboard.csv").open(encoding="utf-8")))
    assert (out / "leaderboard.md").stat().st_size > 1000 and (out / "leaderboard.html").stat().st_size > 1000
    measured = [x for x in rows if x["kind"] == "measured"]
    boards = {x["board"]: [k for k in rows[0] if x.get(f"{k} complete")] for x in measured}
    # oracle 100 and garbage 0 in every column (ENL-50 is a needle count: the largest N run, or 0)
    for model, expected in (("oracle", 100.0), ("garbage", 0.0)):
        mine = [x for x in measured if x["model"] == model]
        assert {x["board"] for x in mine} == set(boards) and len(boards) == 5, boards
        for x in mine:
            lengths = {"effective", "claimed"}  # a suite board's lengths, not scores
            numbers = {k: float(x[k]) for k in boards[x["board"]] if x[k] and k not in lengths}
            assert numbers, x["board"]
            for key, value in numbers.items():
                assert value == ((4.0 if expected else 0.0) if key == "enl50" else expected), (model, key)
            if x.get("effective"):  # the oracle holds every tested length, garbage none (0: below the shortest)
                assert x["effective"] == ("2000" if expected else "0"), (model, x["board"], x["effective"])
    # SmolLM2's row is its own summary CSV, from the opencompass run and from `needlebench score` alike
    model = "smollm2-135m-instruct"
    summary = {
        (s["task"], s["lang"], s["length"]): s
        for s in csv.DictReader((scored_run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    smol = [x for x in measured if x["model"] == model]
    assert {x["source"] for x in smol} == {tiny_run.name, scored_run.name}
    for x in smol:
        for key in ("S-RT/EN", "S-RT/ZH", "S-RT/mean", "M-RT/EN", "M-RT/mean"):
            task, part = key.split("/")
            cell = summary[(task, "OVERALL" if part == "mean" else part, "all")]
            assert (x[key], x[f"{key} ci_low"], x[f"{key} ci_high"]) == (
                cell[model],
                cell[f"{model} ci_low"],
                cell[f"{model} ci_high"],
            ), key
        assert x["M-RS/EN"] == "" and x["complete"] == "False"  # the tiny suite has no M-RS: not passed off whole
        assert x["overall"] == "" and x["rank"] == ""  # no overall without M-RS: nothing to rank by
    thinker = next(x for x in measured if x["model"] == "thinker" and x["board"].startswith("NeedleBench v2"))
    # the paired difference with the row ranked just above (the scripted thinker sits below the oracle)
    (above,) = [
        x
        for x in measured
        if (x["board"], x["class"]) == (thinker["board"], thinker["class"])
        and x["rank"] == str(int(thinker["rank"]) - 1)
    ]
    assert thinker["vs row"].startswith(f"{above['model']} (") and thinker["significant"] == "yes"
    assert float(thinker["vs above"]) == pytest.approx(float(thinker["overall"]) - float(above["overall"]), abs=0.01)
    # the garbage model ran fewer cells (its 6k context skipped the 2000-token M-RS prompts): ranked apart, saying so
    garbage = next(x for x in measured if x["model"] == "garbage" and x["board"].startswith("NeedleBench v2"))
    assert (garbage["rank"], garbage["vs row"]) == ("1", "") and garbage["class"] != thinker["class"]
    assert "M-RS: 1 of 4 lengths" in garbage["comparable"]
    # every measured row says why it may not sit beside a paper's row; the sparse ones: the packaged corpus
    for x in measured:
        assert x["comparable"].startswith("not comparable: "), x
        if x["board"].startswith("NeedleBench v2"):
            assert x["comparable"].startswith("not comparable: packaged corpus; "), x["comparable"]
    # the published rows are the papers' tables, as printed, and never ranked
    tables = {t.label: t for t in load_published()}
    published = [x for x in rows if x["kind"] == "published"]
    assert {x["source"].split(", ")[0] for x in published} == {
        "needlebench-2025 Table 3",
        "needlechain Table 1",
        "needlebench-2024 Table 5",
    }
    for x in published:
        table = tables[x["source"].split(", ")[0]]
        (row,) = [p for p in table.rows if p.model == x["model"] and (p.group or "") == x["group"]]
        assert all(x[c.key] == row.printed(c.key) for c in table.columns), x["model"]
        assert x["rank"] == "" and x["comparable"] == "published"
    assert len(published) == sum(len(tables[t].rows) for t in {x["source"].split(", ")[0] for x in published})
    # each run's bundle verifies against it; a changed sample does not
    for run in (scripted_run, tiny_run, scored_run):
        found = verify_bundle(run / "summary" / "results.json", run)
        assert found.ok, found.failures
    changed = tmp_path / "changed"
    shutil.copytree(scored_run, changed)
    path = changed / "results" / model / "needlebench_srt_en_4k.samples.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["score"] = 100.0 - first["score"]
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    r = subprocess.run(
        [bin_path("needlebench"), "verify", str(changed / "summary" / "results.json"), str(changed)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1 and f"1 sample(s) changed: {first['id']}" in r.stdout, r.stdout + r.stderr
