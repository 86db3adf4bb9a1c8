"""Honest aggregates: completeness, full-range ATC scores, strict vs plain, intervals, paired comparisons.

Every expected number is computed by hand (or, for bootstrap intervals,
independently with numpy from the documented seed rule).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_linear, bin_path, graded

from needlebench.aggregate.uncertainty import seed_for
from needlebench.errors import ConfigError
from needlebench.planning.run import ModelRun, RunPlan
from needlebench.planning.settings import RunSettings
from needlebench.report.html import build_report
from needlebench.report.results import load_results
from needlebench.report.tables import difference_table, grid, summary_table
from needlebench.runfolder.plan_file import StoredPlan, write_stored
from needlebench.tasks.atc.open_answer_results import atc_table, atc_weighted_score
from needlebench.tasks.needlechain.results import chain_table

CHECK = dict(zip([2, 4, 8, 16, 32, 64, 128, 256, 512], [100, 100, 87.5, 95, 97.5, 90, 70, 65, 15]))
RUN = "20260101_000000"


def _write(root: Path, model: str, dataset: str, rows: list[dict], overlength: dict | None = None) -> None:
    folder = root / RUN / "results" / model
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}.samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if overlength is not None:  # the run's plan, holding the models' over-length cells alone
        plan = RunPlan(RunSettings(), tuple(ModelRun(m, {}, cut, ()) for m, cut in overlength.items()))
        write_stored(root / RUN, StoredPlan(plan))


def _skip_record(model: str, dataset: str, cells: list[list]) -> dict:
    """A model's over-length cells as the plan records them (skip policy)."""
    return {
        model: {
            dataset: {
                "policy": "skip",
                "max_prompt_tokens": 3000,
                "tokenizer_ratio": 1.0,
                "shortened": [],
                "skipped": cells,
                "num_shortened": 0,
                "num_skipped": sum(c[2] for c in cells),
            }
        }
    }


def _sparse(task: str, lang: str, score, lengths=(1000, 2000), depths=(0, 50, 100), **extra) -> list[dict]:
    return [
        {
            "id": f"{task}-{lang}-{length}-{depth}",
            "task": task,
            "lang": lang,
            "length": length,
            "depth": depth,
            "score": float(score(length, depth)),
            "correct": score(length, depth) == 100,
            "format_failure": False,
            **extra,
        }
        for length in lengths
        for depth in depths
    ]


def _atc(acc: dict[int, float], per_n: int = 40) -> list[dict]:
    rows = []
    for n, p in acc.items():
        right = round(p * per_n / 100)
        for i in range(per_n):
            rows.append(
                {"id": f"atc-{n}-{i}", "task": "atc", "lang": "en", "num_needles": n, "score": 100.0 * (i < right)}
            )
    return rows


def _table(root: Path) -> tuple[pd.DataFrame, object]:
    res = load_results([root])
    return summary_table(res.records, res.models, res.skipped()).set_index(["task", "lang", "length"]), res


def test_shortened_samples_are_excluded_counted_and_marked(tmp_path: Path) -> None:
    rows = _sparse("srt", "en", lambda L, d: 100.0)
    cut = next(r for r in rows if r["length"] == 2000 and r["depth"] == 100)
    cut.update(score=0.0, correct=False, shortened_from=1985)  # would pull the 2000 cell to 66.67 if counted
    overlength = _skip_record("m", "needlebench_srt_en_4k", [[4000, 0, 1], [4000, 50, 1], [4000, 100, 1]])
    _write(tmp_path, "m", "needlebench_srt_en_4k", rows, overlength)
    t, res = _table(tmp_path)
    cell = t.loc[("S-RT", "EN", 2000)]
    assert cell["m"] == 100.0
    assert (cell["m planned"], cell["m scored"], cell["m shortened"], cell["m skipped"]) == (3, 2, 1, 0)
    assert not cell["m complete"] and cell["m note"] == "1 of 3 shortened (excluded)"
    assert t.loc[("S-RT", "EN", 1000), "m complete"]
    skipped = t.loc[("S-RT", "EN", 4000)]  # only known from the over-length record
    assert math.isnan(skipped["m"]) and (skipped["m planned"], skipped["m skipped"]) == (3, 3)
    assert skipped["m note"] == "3 of 3 skipped (over length)" and not skipped["m complete"]
    total = t.loc[("S-RT", "EN", "all")]
    assert total["m"] == 100.0 and (total["m planned"], total["m scored"]) == (9, 5)
    assert total["m note"] == "1 of 9 shortened (excluded); 3 of 9 skipped (over length)"
    overall = t.loc[("S-RT", "OVERALL", "all")]
    assert overall["m"] == 100.0 and not overall["m complete"] and "1 of 9 shortened" in overall["m note"]
    assert math.isnan(grid(res.records, "m", "srt", "en").loc[100.0, 2000])  # heatmaps leave it out too


def test_atc_spec_check_row_reproduces_with_intervals(tmp_path: Path) -> None:
    _write(tmp_path, "m", "needlebench_atc_en", _atc(CHECK))
    res = load_results([tmp_path])
    row = atc_table(res.records, res.models, res.skipped()).iloc[0]
    assert round(row["weighted"], 2) == 44.01 and round(row["weighted_short"], 2) == 92.86
    assert row["ENL-50"] == 256 and row["complete"] and row["note"] == ""
    for col in ("weighted", "weighted_short", "N=512"):
        assert row[f"{col} ci_low"] <= row[col] <= row[f"{col} ci_high"]
    assert row["ENL-50 ci_low"] in CHECK and row["ENL-50 ci_high"] in CHECK


@pytest.mark.parametrize("dropped", [(512,), (256, 512)])
def test_atc_missing_n_counts_zero_and_is_flagged(tmp_path: Path, dropped: tuple[int, ...]) -> None:
    acc = {n: p for n, p in CHECK.items() if n not in dropped}
    overlength = _skip_record("m", "needlebench_atc_en", [[n, None, 40] for n in dropped])
    _write(tmp_path, "m", "needlebench_atc_en", _atc(acc), overlength)
    res = load_results([tmp_path])
    row = atc_table(res.records, res.models, res.skipped()).iloc[0]
    sum_pn = {(512,): 37300, (256, 512): 20660}[dropped]  # sum of P_N * N over the N that ran
    assert row["weighted"] == pytest.approx(sum_pn / 1022)  # not sum_pn / (1022 - dropped N): no renormalising
    assert round(row["weighted_short"], 2) == 92.86 and row["complete_short"]
    assert not row["complete"] and row["ENL-50"] == (256 if dropped == (512,) else 128)
    shown = ", ".join(map(str, dropped))
    assert row["note"] == f"incomplete (N={shown} not run: over length); counted as 0"
    assert (row["planned"], row["scored"], row["skipped"]) == (360, 360 - 40 * len(dropped), 40 * len(dropped))
    assert math.isnan(row["N=512"])
    assert atc_weighted_score({2: 100.0}, planned=[2, 4]) == pytest.approx(200 / 6)


def test_atc_without_overlength_record_still_uses_full_range(tmp_path: Path) -> None:
    _write(tmp_path, "m", "needlebench_atc_en", _atc({n: p for n, p in CHECK.items() if n != 512}))
    res = load_results([tmp_path])
    row = atc_table(res.records, res.models, res.skipped()).iloc[0]
    assert row["weighted"] == pytest.approx(37300 / 1022) and row["note"] == "incomplete (N=512 not run); counted as 0"


def test_needlechain_lucky_guess_is_strict_zero_plain_hundred(tmp_path: Path) -> None:
    base = {"task": "needlechain", "lang": "en", "variant": "forward", "k": 5, "question": "single"}
    rows = [{**base, "id": "c1", "score": 0.0, "correct": False, "plain_correct": True, "error": "needle_omission"}]
    rows.append({**base, "question": "total", "id": "c2", "score": 100.0, "correct": True})  # no plain field
    _write(tmp_path, "m", "needlechain", rows)
    res = load_results([tmp_path])
    t = chain_table(res.records, res.models).set_index(["variant", "k", "question"])
    lucky = t.loc[("forward", 5, "single")]
    assert lucky["m"] == 0.0 and lucky["m plain"] == 100.0 and lucky["m needle_omission%"] == 100.0
    assert math.isnan(t.loc[("forward", 5, "total"), "m plain"]) and t.loc[("forward", 5, "total"), "m"] == 100.0
    build_report([tmp_path])
    csv = pd.read_csv(tmp_path / "needlebench_report" / "needlechain_summary.csv")
    assert {"m", "m plain", "m ci_low", "m plain ci_high"} <= set(csv.columns)


def _draws(diffs: np.ndarray, seed: int) -> np.ndarray:
    """The paired bootstrap written out independently: 1000 resamples of the differences."""
    idx = np.random.default_rng(seed).integers(0, len(diffs), size=(1000, len(diffs)))
    return diffs[idx].mean(axis=1)


def test_paired_comparison_matches_hand_bootstrap(tmp_path: Path) -> None:
    depths = tuple(range(10))
    a_score = {1000: lambda d: 0.0, 2000: lambda d: 100.0 * (d % 2)}
    b_score = {1000: lambda d: 100.0 * (d < 8), 2000: lambda d: 100.0 * (d in (0, 3, 5, 7, 9))}
    _write(tmp_path / "A", "m", "srt_en", _sparse("srt", "en", lambda L, d: a_score[L](d), depths=depths))
    _write(tmp_path / "B", "m", "srt_en", _sparse("srt", "en", lambda L, d: b_score[L](d), depths=depths))
    res = load_results([tmp_path / "A", tmp_path / "B"], label_by_dir=True)
    t = difference_table(res.records, "A/m", "B/m").set_index(["task", "lang", "length"])
    label = "B/m - A/m"
    draws = {}
    for length in (1000, 2000):
        ordered = sorted(depths, key=lambda d: f"srt-en-{length}-{d}")  # pairs in (dataset, id) order
        diffs = np.array([b_score[length](d) - a_score[length](d) for d in ordered])
        draws[length] = _draws(diffs, seed_for("paired", "A/m", "B/m", "srt", "en", length))
        lo, hi = np.percentile(draws[length], [2.5, 97.5])
        row = t.loc[("S-RT", "EN", length)]
        assert row[label] == pytest.approx(diffs.mean())
        assert (row[f"{label} ci_low"], row[f"{label} ci_high"]) == pytest.approx((lo, hi))
        assert row["paired n"] == 10
        assert bool(row["significant"]) == (lo > 0 or hi < 0)
    assert t.loc[("S-RT", "EN", 1000), "significant"] and not t.loc[("S-RT", "EN", 2000), "significant"]
    pooled = (draws[1000] + draws[2000]) / 2  # equal counts: the language total weighs both cells by 10 / 20
    row = t.loc[("S-RT", "EN", "all")]
    assert (row[f"{label} ci_low"], row[f"{label} ci_high"]) == pytest.approx(tuple(np.percentile(pooled, [2.5, 97.5])))
    out = build_report([tmp_path / "A", tmp_path / "B"], tmp_path / "out")
    again = build_report([tmp_path / "A", tmp_path / "B"], tmp_path / "again")
    csv = (out.parent / "diff_B_m_vs_A_m.csv").read_text()
    assert "significant" in csv and csv == (again.parent / "diff_B_m_vs_A_m.csv").read_text()  # seeded: identical
    cli = [bin_path("needlebench"), "report", str(tmp_path / "A"), str(tmp_path / "B"), "-o", str(tmp_path / "cli")]
    r = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "diff_B_m_vs_A_m: 3 of 4 rows differ significantly" in r.stdout and "S-RT EN 1000" in r.stdout


def test_comparison_refuses_different_prompts_and_mixed_versions(tmp_path: Path) -> None:
    _write(tmp_path / "A", "m", "srt_en", _sparse("srt", "en", lambda L, d: 100.0, version="1.0"))
    other = _sparse("srt", "en", lambda L, d: 100.0, version="1.0")
    for r in other[:2]:
        r["id"] += "-changed"
    _write(tmp_path / "B", "m", "srt_en", other)
    with pytest.raises(ConfigError, match=r"srt_en: A/m and B/m were given different prompts: 2 ids only in A/m"):
        build_report([tmp_path / "A", tmp_path / "B"], tmp_path / "out")
    cli = [bin_path("needlebench"), "report", str(tmp_path / "A"), str(tmp_path / "B"), "-o", str(tmp_path / "cli")]
    r = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "different prompts" in r.stderr and "Traceback" not in r.stderr
    _write(tmp_path / "C", "m", "srt_en", _sparse("srt", "en", lambda L, d: 100.0, version="1.1"))
    with pytest.raises(ConfigError, match=r"mix dataset versions \['1.0', '1.1'\]"):
        build_report([tmp_path / "A", tmp_path / "C"], tmp_path / "out")
    _write(tmp_path / "D", "m", "srt_en", _sparse("srt", "en", lambda L, d: 100.0, version="1.0"))
    _write(tmp_path / "D", "m", "mrt_en", _sparse("mrt", "en", lambda L, d: 100.0, version="1.1"))
    with pytest.raises(ConfigError, match="mix dataset versions"):
        build_report([tmp_path / "D"])


@pytest.mark.parametrize("profile", [None, "v1", "v2"])
def test_overall_row_follows_the_run_profile(tmp_path: Path, profile: str | None) -> None:
    extra = {"profile": profile} if profile else {}
    for task, score in (("srt", 100.0), ("mrt", 50.0), ("mrs", 0.0)):
        _write(tmp_path, "m", f"{task}_en", _sparse(task, "en", lambda L, d, s=score: s, **extra))
    t, _ = _table(tmp_path)
    overall = [k[0] for k in t.index if k[0].startswith("OVERALL")]
    if profile == "v1":
        assert overall == ["OVERALL (v1)"]
        assert t.loc[("OVERALL (v1)", "OVERALL", "all"), "m"] == pytest.approx(0.4 * 100 + 0.3 * 50)
    else:
        assert overall == ["OVERALL (v2)"]
        assert t.loc[("OVERALL (v2)", "OVERALL", "all"), "m"] == pytest.approx(50.0)


def _many_records(root: Path, copies: int) -> list:
    """S-RT, M-RT and M-RS in both languages over four lengths, ``copies`` samples per cell, random 0/100."""
    rng = np.random.default_rng(0)
    for task in ("srt", "mrt", "mrs"):
        for lang in ("en", "zh"):
            rows = _sparse(task, lang, lambda L, d: float(rng.integers(0, 2) * 100), lengths=(1000, 2000, 4000, 8000))
            rows = [{**r, "id": f"{r['id']}-{i}"} for i in range(copies) for r in rows]
            _write(root, "m", f"{task}_{lang}", rows)
    return load_results([root]).records


def test_intervals_are_seeded_across_processes_and_linear(tmp_path: Path) -> None:
    """The same records give the same intervals in two processes with different hash seeds; the table's cost
    grows linearly with the records (9,216 here)."""
    records = _many_records(tmp_path / "big", 128)
    assert len(records) > 9000
    code = (
        "import sys; from pathlib import Path; from needlebench.report.results import load_results; "
        "from needlebench.report.tables import summary_table; r = load_results([Path(sys.argv[1])]); "
        "print(summary_table(r.records, r.models).to_csv())"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "big")],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert outs[0] == outs[1] and "ci_low" in outs[0]
    first = summary_table(records, ["m"])
    assert (first["m ci_low"] <= first["m"]).all() and (first["m"] <= first["m ci_high"]).all()
    small = _many_records(tmp_path / "small", 16)
    assert_linear(lambda r: summary_table(r, ["m"]), small, records)


def test_atc_planned_counts_come_from_the_samples() -> None:
    """A config planning N = 2, 4, 8 whose N=8 never ran: 8 counts as 0 in the table and the evaluator."""
    from needlebench.tasks import get_task

    rows = [
        dict(r, model="m", needle_counts=[2, 4, 8], correct=r["score"] == 100.0)
        for r in _atc({2: 100.0, 4: 50.0}, per_n=4)
    ]
    table = atc_table(graded(rows), ["m"])
    assert [c for c in table.columns if c.startswith("N=") and "ci" not in c] == ["N=2", "N=4", "N=8"]
    row = table.iloc[0]
    assert row["weighted"] == pytest.approx((2 * 100 + 4 * 50 + 8 * 0) / 14)
    assert not row["complete"] and "N=8" in row["note"]
    out = get_task("atc").aggregation().dataset_metrics(graded(rows))  # what the evaluator adds for ATC
    assert out["weighted_score"] == pytest.approx((2 * 100 + 4 * 50) / 14) and out["planned_n_missing"] == 1


def test_a_single_sample_gets_no_interval() -> None:
    """One sample says nothing about its spread: no zero-width interval for it or what sits above it."""
    from needlebench.aggregate.uncertainty import interval, resample_means

    assert all(math.isnan(x) for x in interval(resample_means([66.7], "cell")))
    lo, hi = interval(resample_means([0.0, 100.0, 100.0], "cell"))
    assert 0.0 <= lo < hi <= 100.0


def test_dataset_numbers_skip_unscored_samples_and_count_them() -> None:
    """OpenCompass's summary CSV reads these numbers: a failed request or a shortened prompt is never a 0."""
    from needlebench.aggregate.metrics import summarise_details
    from needlebench.tasks import get_task

    def rec(score: float, length: int, **extra: object) -> dict:
        return {
            "id": f"{score}-{length}-{extra}",
            "task": "srt",
            "lang": "en",
            "score": score,
            "correct": score == 100,
            "length": length,
            "num_needles": 2,
            "error": None,
            **extra,
        }

    details = [
        rec(100, 1000),
        rec(0, 1000, error="wrong_name"),
        rec(0, 1000, error="request_failed"),
        rec(100, 2000, shortened_from=2000),
        rec(0, 2000, shortened_from=2000, error="request_failed"),  # shortened first, as the tables count it
    ]
    out = summarise_details(graded(details))
    assert out["score"] == 50.0 and out["accuracy"] == 50.0 and out["length_1000"] == 50.0
    assert "length_2000" not in out and "needles_2" not in out  # a task's own breakdown, declared with it
    assert (out["num_samples"], out["num_scored"], out["num_failed"], out["num_shortened"]) == (5, 2, 1, 2)
    assert out["error_wrong_name"] == 50.0 and "error_request_failed" not in out
    assert math.isnan(summarise_details(graded(details[2:]))["score"])
    atc = get_task("atc").aggregation().dataset_metrics(graded({**d, "needle_counts": [2]} for d in details))
    assert atc["weighted_score"] == 50.0  # the two scored N=2 samples only
    assert atc["needles_2"] == 50.0  # TaskSpec.breakdowns: per needle count, scored samples only
    from needlebench.tasks.needlechain.results import chain_cells

    chain = chain_cells(graded({**d, "variant": "forward", "k": 5, "question": "single"} for d in details))
    assert chain["acc_forward_k5_single"] == 50.0 and "err_forward_k5_request_failed" not in chain


def test_a_language_row_over_single_sample_lengths_gets_an_interval(tmp_path: Path) -> None:
    """M-RT's tiny-run shape: one sample per length. The language row pools three samples and resamples them
    together; each length cell (one sample) still gets none; the task row combines its languages' draws."""
    from needlebench.aggregate.uncertainty import interval, resample_means

    rows = _sparse(
        "mrt", "en", lambda L, d: {1000: 0.0, 2000: 50.0, 3000: 100.0}[L], lengths=(1000, 2000, 3000), depths=(0,)
    )
    _write(tmp_path, "m", "needlebench_mrt_en_4k", rows)
    t, _ = _table(tmp_path)
    assert all(math.isnan(t.loc[("M-RT", "EN", n), "m ci_low"]) for n in (1000, 2000, 3000))
    lang = t.loc[("M-RT", "EN", "all")]
    expected = interval(resample_means([0.0, 50.0, 100.0], "summary", "m", "mrt", "en"))
    assert lang["m"] == pytest.approx(50.0) and (lang["m ci_low"], lang["m ci_high"]) == pytest.approx(expected)
    assert lang["m ci_low"] < 50.0 < lang["m ci_high"]
    task = t.loc[("M-RT", "OVERALL", "all")]  # one language: the task row is that language's
    assert (task["m ci_low"], task["m ci_high"]) == pytest.approx(expected)


def test_single_model_report_names_the_model_once_and_counts_positions_in_integers(tmp_path: Path) -> None:
    import re

    rows = _sparse("srt", "en", lambda L, d: 100.0)
    mrt = _sparse("mrt", "en", lambda L, d: 50.0, recalled=[True, False, True])
    _write(tmp_path, "only-model", "needlebench_srt_en_4k", rows)
    _write(tmp_path, "only-model", "needlebench_mrt_en_4k", mrt)
    page = build_report([tmp_path], tmp_path / "out").read_text(encoding="utf-8")
    headers = re.findall(r"<th>([^<]*)</th>", page)
    assert "only-model" in headers and "planned" in headers and "fmt_fail%" in headers
    assert not [h for h in headers if h.startswith("only-model ")]  # never "only-model planned"

    from needlebench.aggregate.plots import pyplot
    from needlebench.tasks.sparse.results import mrt_position_figure

    fig = mrt_position_figure(graded({**r, "model": "m"} for r in mrt), "t")
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)  # 1st, 2nd, 3rd needle: no 1.5th
    pyplot().close(fig)
