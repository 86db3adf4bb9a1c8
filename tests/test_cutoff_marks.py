"""Cut off is visible wherever a score is: heatmap cells (page and PNG) and leaderboard cells carry the share of
outputs cut off at their budget, name the budget on hover, and a cell whose every answer was cut off reads so."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import launch_chromium

from needlebench.aggregate.plots import pyplot
from needlebench.planning.limits import Limit
from needlebench.planning.run import ModelRun, RunPlan
from needlebench.planning.settings import RunSettings
from needlebench.report.board_pages import leaderboard_markdown, write_leaderboard
from needlebench.report.cutoff import COLOUR, CutOff
from needlebench.report.figures import ALL_CUT_HATCH, CUT_HATCH, heatmap_figure
from needlebench.report.html import build
from needlebench.report.leaderboard import build_leaderboard
from needlebench.runfolder.plan_file import StoredPlan, write_stored

MODEL = "m1"
BUDGETS = {"srt_zh": 24, "srt_en": 32}
LENGTHS, DEPTHS, REPEATS = (1000, 2000), (0, 50, 100), 2


def _rows(lang: str, cut: Callable[[int, int, int], bool]) -> list[dict]:
    """Two S-RT samples per (length, depth); ``cut(length, depth, i)`` says which ran out of budget (scored 0 as
    written, as the reference protocol does), the others answered right."""
    rows = []
    for length in LENGTHS:
        for depth in DEPTHS:
            for i in range(REPEATS):
                truncated = cut(length, depth, i)
                rows.append(
                    {
                        "id": f"{lang}-{length}-{depth}-{i}",
                        "task": "srt",
                        "lang": lang,
                        "length": length,
                        "depth": depth,
                        "score": 0.0 if truncated else 100.0,
                        "correct": not truncated,
                        "truncated": truncated,
                        "output_tokens": BUDGETS[f"srt_{lang}"] if truncated else 5,
                        "prediction": "一二三四五六七八九十" * 3 if truncated else "answer",
                    }
                )
    return rows


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]]]:
    """A run folder: every Chinese answer cut off at 24 tokens, one English answer at depth 0 cut off at 32,
    and the run's plan (written by the planner's own writer) holding those budgets."""
    root = tmp_path_factory.mktemp("cut")
    run = root / "20260101_000000"
    folder = run / "results" / MODEL
    folder.mkdir(parents=True)
    rows = {"srt_zh": _rows("zh", lambda L, d, i: True), "srt_en": _rows("en", lambda L, d, i: d == 0 and i == 0)}
    for dataset, lines in rows.items():
        (folder / f"{dataset}.samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    limits = {d: Limit(8192, 8000, "shorten", None, 1.0, None, 8000, out_len=n) for d, n in BUDGETS.items()}
    write_stored(run, StoredPlan(RunPlan(RunSettings(), (ModelRun(MODEL, limits, {}, ()),))))
    return root, rows


def _expected(rows: list[dict]) -> dict[tuple[str, str], tuple[int, int]]:
    """(depth, length) -> (cut, answered) counted straight from the lines; depth "mean" for a length's mean."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        for key in ((str(r["depth"]), str(r["length"])), ("mean", str(r["length"]))):
            out[key][0] += r["truncated"]
            out[key][1] += 1
    return {k: (c, n) for k, (c, n) in out.items() if c}


def test_cut_off_cells_are_marked_in_a_real_browser(cut_run: tuple[Path, dict], tmp_path: Path) -> None:
    """Report heatmaps and the leaderboard, as Chromium shows them: every cell with cut-off answers carries the
    mark and its share, its hover names count and budget, and the all-cut-off cells read "cut off"."""
    from playwright.sync_api import sync_playwright

    root, rows = cut_run
    page_path, _ = build([root], tmp_path / "report")
    board_path = write_leaderboard(build_leaderboard([root]), tmp_path / "board")["html"]
    errors: list[str] = []
    read_cells = """() => Array.from(document.querySelectorAll('table.hmgrid')).map(t => [
        t.closest('figure').querySelector('figcaption').textContent,
        Array.from(t.querySelectorAll('tbody tr')).flatMap(tr => Array.from(tr.querySelectorAll('td')).map((td, j) => ({
            depth: tr.querySelector('th').textContent,
            length: t.querySelectorAll('thead th')[j + 1].textContent,
            cut: td.classList.contains('cut'), all: td.classList.contains('cutall'),
            text: td.childNodes[0] ? td.childNodes[0].textContent : '',
            mark: td.querySelector('.cutmark') ? td.querySelector('.cutmark').textContent : null,
            markVisible: !!td.querySelector('.cutmark') && td.querySelector('.cutmark').getBoundingClientRect().width > 0,
            title: td.getAttribute('title') || ''})))])"""
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.resolve().as_uri())
        page.wait_for_load_state("load")
        grids = page.evaluate(read_cells)
        legend = page.locator(".cutlegend").inner_text()
        legend_visible = page.locator(".cutlegend").is_visible()
        page.goto(board_path.resolve().as_uri())
        page.wait_for_load_state("load")
        table = page.locator("table.board").first
        headers = table.locator("thead th").all_inner_texts()
        measured = table.locator("tbody tr.measured").first
        board_cells = {
            h: (td.inner_text(), td.get_attribute("title") or "", td.locator(".cutmark").count())
            for h, td in zip(headers, measured.locator("td").all())
        }
        board_legend = page.locator(".cutlegend").is_visible()
        browser.close()
    assert not errors, errors
    assert legend_visible and "cut off at their output budget" in legend
    by_lang = {caption.split(" - ")[0]: cells for caption, cells in grids}
    assert set(by_lang) == {"S-RT EN", "S-RT ZH"}
    for label, dataset in (("S-RT EN", "srt_en"), ("S-RT ZH", "srt_zh")):
        want = _expected(rows[dataset])
        seen = {}
        for c in by_lang[label]:
            key = (c["depth"], str(int(c["length"].removesuffix("k")) * 1000))
            if c["mark"] is None:
                assert not c["cut"] and key not in want, (label, c)
                continue
            assert c["cut"] and c["markVisible"], (label, c)
            cut, n = want[key]
            seen[key] = c
            assert c["mark"] == f"✂ {cut}/{n}"
            assert f"{cut} of {n} answers cut off at the {BUDGETS[dataset]}-token output budget" in c["title"]
            assert c["all"] == (cut == n)
            assert c["text"].strip() == "cut off" if cut == n else c["text"].strip().isdigit()
        assert set(seen) == set(want), label  # every cell with a cut-off answer, and only those
    # the leaderboard: S-RT ZH reads cut off (12 of 12 at 24 tokens), EN carries its share at 32
    zh_text, zh_title, zh_marks = board_cells["S-RT ZH"]
    assert zh_text.startswith("cut off") and "✂ 12/12" in zh_text and zh_marks == 1
    assert "12 of 12 answers cut off at the 24-token output budget" in zh_title
    en_text, en_title, _ = board_cells["S-RT EN"]
    assert en_text.startswith("83.33") and "✂ 2/12" in en_text and "2 of 12 answers cut off at the 32-token" in en_title
    mean_text, mean_title, _ = board_cells["S-RT mean"]
    assert "✂ 14/24" in mean_text and "24, 32-token output budgets" in mean_title
    assert board_legend


def test_markdown_board_and_cells_without_cut_offs(cut_run: tuple[Path, dict], tmp_path: Path) -> None:
    """The paste-ready board carries the marks and their legend; a run with no cut-off answer has neither."""
    root, _ = cut_run
    text = leaderboard_markdown(build_leaderboard([root], published=False))
    assert "cut off (0.00 [0.00, 0.00]) ✂ 12/12" in text and "✂ 2/12" in text and "n of the m answers" in text
    clean = tmp_path / "clean" / "20260101_000000" / "results" / MODEL
    clean.mkdir(parents=True)
    lines = _rows("en", lambda L, d, i: False)
    (clean / "srt_en.samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page, rep = build([tmp_path / "clean"], tmp_path / "clean_report")
    assert all(not hm.cut_off for hm in rep.heatmaps)
    html = page.read_text(encoding="utf-8")
    assert "class='cutmark'" not in html and "cutlegend" not in html
    assert "✂" not in leaderboard_markdown(build_leaderboard([tmp_path / "clean"], published=False))


def test_cut_off_and_left_out_reads_cut_off_not_not_run(tmp_path: Path) -> None:
    """Under truncated="unscored" a cell whose every answer was cut off has no score; it reads "cut off",
    never "-" (not run), and the budget is said to be unknown where the run has no plan."""
    folder = tmp_path / "20260101_000000" / "results" / MODEL
    folder.mkdir(parents=True)
    lines = _rows("en", lambda L, d, i: L == 2000)
    for r in lines:
        if r["truncated"]:
            r["unscored"] = "truncated"
    (folder / "srt_en.samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    page, rep = build([tmp_path], tmp_path / "report")
    (hm,) = rep.heatmaps
    assert list(hm.grid.columns) == [1000, 2000]
    for depth in DEPTHS:
        cut = hm.cut_off[(float(depth), 2000)]
        assert cut == CutOff(2, 2) and cut.every and "not recorded" in cut.title
    assert (float(0), 1000) not in hm.cut_off
    html = page.read_text(encoding="utf-8")
    assert html.count("class='hmc cut cutall'") == 3 and html.count(">cut off<span class='cutmark'>✂ 2/2<") == 3


def test_png_heatmap_marks_cut_off_cells() -> None:
    """The PNG's figure hatches each cell with cut-off answers and writes its share; an all-cut-off cell is
    cross-hatched on its own colour and reads "cut off" where it scored 0 (its score where the needle was found
    before the budget ran out); an unmarked cell gets neither; a line under the figure says what it means."""
    import pandas as pd

    table = pd.DataFrame([[50.0, 0.0], [100.0, 0.0]], index=[0.0, 100.0], columns=[1000, 2000])
    cut = {
        (0.0, 1000): CutOff(1, 2, (24,)),
        (0.0, 2000): CutOff(2, 2, (24,)),
        (100.0, 2000): CutOff(2, 2, (24,)),
        (None, 2000): CutOff(4, 4, (24,)),
        (100.0, 1000): CutOff(2, 2, (24,)),
    }
    fig = heatmap_figure(table, "S-RT ZH - m1", cut_off=cut)
    ax = fig.axes[0]
    # each patch covers its own cell: (column, row) of its lower-left corner + 0.5
    corners = sorted((p.get_x() + 0.5, p.get_y() + 0.5, p.get_hatch(), p.get_gid()) for p in ax.patches)
    assert corners == [
        (0.0, 0.0, CUT_HATCH, "cut 1/2"),
        (0.0, 1.0, ALL_CUT_HATCH, "cut 2/2"),
        (1.0, 0.0, ALL_CUT_HATCH, "cut 2/2"),
        (1.0, 1.0, ALL_CUT_HATCH, "cut 2/2"),
        (1.0, 2.0, ALL_CUT_HATCH, "cut 4/4"),
    ]
    assert {p.get_facecolor()[:3] for p in ax.patches if p.get_hatch() == ALL_CUT_HATCH} == {
        tuple(int(COLOUR[i : i + 2], 16) / 255 for i in (1, 3, 5))
    }
    texts = {t.get_position(): t.get_text() for t in ax.texts if "output budget" not in t.get_text()}
    assert texts[(0, 0)] == "50\ncut 1/2" and texts[(1, 0)] == "cut off\n2/2" and texts[(1, 2)] == "cut off\n4/4"
    assert texts[(0, 1)] == "100\ncut 2/2"  # found before the budget ran out: its score stays
    assert texts[(0, 2)] == "75"  # the 1k mean: no cut-off count given, no mark
    notes = [t.get_text() for t in ax.texts if "output budget" in t.get_text()]
    assert len(notes) == 1 and "24-token output budget" in notes[0] and "every answer cut off" in notes[0]
    plain = heatmap_figure(table, "S-RT ZH - m1")
    assert not plain.axes[0].patches
    assert {t.get_text() for t in plain.axes[0].texts} == {"50", "0", "100", "75"}
    pyplot().close(fig)
    pyplot().close(plain)
