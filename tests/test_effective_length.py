"""The effective length's definition: both rules, the honest edges, the interval, and the options' checks."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, VENV_BIN, launch_chromium, run_opencompass

from needlebench.aggregate.effective_length import EffectiveRule, LengthCell, effective_length, length_text
from needlebench.errors import ConfigError

LENGTHS = (1000, 2000, 4000, 8000, 16000)


def _cells(scores: dict[int, list[float]], incomplete: tuple[int, ...] = ()) -> list[LengthCell]:
    return [LengthCell(n, tuple(scores[n]), n not in incomplete) for n in scores]


def _right_below(limit: int, n: int = 10) -> dict[int, list[float]]:
    """A model right on every sample of a length below ``limit``, wrong on every sample from it on."""
    return {length: [100.0 if length < limit else 0.0] * n for length in LENGTHS}


@pytest.mark.parametrize("rule", [EffectiveRule("relative"), EffectiveRule("absolute")])
def test_a_model_right_below_a_length_has_the_length_below_it_as_its_effective_length(rule: EffectiveRule) -> None:
    found = effective_length(_cells(_right_below(8000)), rule, "m", "srt", "en")
    assert (found.value, found.edge) == (4000, "exact")
    assert (found.ci_low, found.ci_high) == (4000, 4000)  # every resample of all-or-nothing cells agrees
    assert found.text == "4k [4k, 4k]"


@pytest.mark.parametrize("rule", [EffectiveRule("relative"), EffectiveRule("absolute")])
def test_right_everywhere_is_at_least_the_largest_and_wrong_everywhere_below_the_shortest(rule: EffectiveRule) -> None:
    right = effective_length(_cells({n: [100.0] * 5 for n in LENGTHS}), rule, "a")
    assert (right.value, right.edge, right.text) == (16000, "at_least", ">= 16k [16k, 16k]")
    wrong = effective_length(_cells({n: [0.0] * 5 for n in LENGTHS}), rule, "b")
    assert (wrong.value, wrong.edge) == (None, "below")
    assert wrong.text.startswith("< 1k")


def test_the_two_rules_differ_where_a_model_is_weak_from_the_start() -> None:
    """60 at 1k, 55 at 2k, 50 at 4k, 10 after: relative (85% of 60 = 51) keeps 2k, absolute (85.6) nothing."""
    scores = {1000: [60.0] * 10, 2000: [55.0] * 10, 4000: [50.0] * 10, 8000: [10.0] * 10, 16000: [10.0] * 10}
    assert effective_length(_cells(scores), EffectiveRule("relative"), "m").value == 2000
    assert effective_length(_cells(scores), EffectiveRule("absolute"), "m").edge == "below"
    assert effective_length(_cells(scores), EffectiveRule("absolute", threshold=50), "m").value == 4000
    assert effective_length(_cells(scores), EffectiveRule("relative", share=0.95), "m").value == 1000


def test_an_incomplete_cell_makes_the_number_undetermined_above_the_last_length_passed() -> None:
    found = effective_length(_cells(_right_below(16000), incomplete=(4000,)), EffectiveRule(), "m")
    assert (found.value, found.edge, found.undetermined_above) == (2000, "undetermined", 4000)
    assert found.text == ">= 2k, undetermined above 4k"
    after = effective_length(_cells(_right_below(4000), incomplete=(8000,)), EffectiveRule(), "m")
    assert (after.value, after.edge) == (2000, "exact")  # the failure at 4k came first: determined


def test_a_pass_after_a_fail_is_flagged_with_the_first_failing_length() -> None:
    scores = {1000: [100.0] * 8, 2000: [0.0] * 8, 4000: [100.0] * 8, 8000: [100.0] * 8, 16000: [0.0] * 8}
    found = effective_length(_cells(scores), EffectiveRule(), "m")
    assert (found.value, found.non_monotone_at) == (1000, 2000)
    assert "passes again after failing at 2k" in found.text


def test_the_interval_is_seeded_by_the_curve_and_spans_the_lengths_the_samples_allow() -> None:
    """8 of 10 right at 4k (80, under the bar of 85): a resample with 9 or 10 right passes, so the interval spans
    2k to 4k; the same records give the same interval, every time."""
    scores = {
        1000: [100.0] * 10,
        2000: [100.0] * 10,
        4000: [100.0] * 8 + [0.0] * 2,
        8000: [0.0] * 10,
        16000: [0.0] * 10,
    }
    one = effective_length(_cells(scores), EffectiveRule(), "m", "srt", "en")
    assert one == effective_length(_cells(scores), EffectiveRule(), "m", "srt", "en")
    assert one.value == 2000 and (one.ci_low, one.ci_high) == (2000, 4000)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"rule": "ruler"}, "choose from ('relative', 'absolute')"),
        ({"share": 0}, "share: 0; a number in (0, 1]"),
        ({"share": 1.5}, "share: 1.5; a number in (0, 1]"),
        ({"threshold": 0}, "threshold: 0; a score in (0, 100]"),
        ({"threshold": 101}, "threshold: 101; a score in (0, 100]"),
    ],
)
def test_a_rule_out_of_range_is_one_line_naming_the_valid_values(kwargs: dict, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        EffectiveRule(**kwargs)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_lengths_read_as_the_papers_write_them() -> None:
    assert [length_text(n) for n in (1000, 4000, 128000, 1000000, 32768, 500)] == [
        "1k",
        "4k",
        "128k",
        "1000k",
        "32,768",
        "500",
    ]


# ---- through the real opencompass: the CSV, results.json, verify and report.html ------------------------


@pytest.mark.e2e
def test_scripted_models_get_the_effective_length_the_definition_says_in_every_file(tmp_path: Path) -> None:
    """Right below 2,500 prompt tokens: 2k in S-RT, M-RT and M-RS, English and Chinese, under both rules; right
    everywhere: at least 3k; wrong everywhere: below 1k. The CSV, results.json and report.html say so;
    `needlebench verify` recomputes them and fails on an edited one; failed requests in a cell make the number
    undetermined above that cell's length."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), str(ROOT)]))}
    run = run_opencompass("tests/configs/e2e_effective.py", tmp_path / "work", env)
    expected = {"cut": (2000.0, "exact"), "right": (3000.0, "at_least"), "wrong": (None, "below")}
    expected["flaky"] = expected["right"]  # but S-RT in English (below)

    def check(folder: Path, rule: str, claimed_right: int = 32768) -> list[dict]:
        rows = list(csv.DictReader((folder / "needlebench_effective_length.csv").open(encoding="utf-8")))
        assert {(r["task"], r["lang"]) for r in rows} == {
            (t, lang) for t in ("S-RT", "M-RT", "M-RS") for lang in ("EN", "ZH")
        }
        for r in rows:
            if (r["model"], r["task"], r["lang"]) == ("flaky", "S-RT", "EN"):
                continue
            value = float(r["effective_length"]) if r["effective_length"] else None
            assert (value, r["edge"]) == expected[r["model"]], r
            claimed = claimed_right if r["model"] == "right" else 32768
            assert r["rule"] == rule and float(r["claimed"]) == claimed
        return rows

    rows = check(run / "summary", "relative")
    for model, (value, edge) in [*expected.items()][:3]:  # OpenCompass's result files hold the same numbers
        for name in ("needlebench_srt_en_4k", "needlebench_mrt_zh_4k", "needlebench_mrs_en_4k"):
            result = json.loads((run / "results" / model / f"{name}.json").read_text(encoding="utf-8"))
            found = result["effective_length"]
            assert (None if found != found else found) == value, (model, name, result)
            assert result["effective_length_at_least"] == (1.0 if edge == "at_least" else 0.0)
    assert {r["effective"] for r in rows if r["model"] == "cut"} == {"2k [2k, 2k]"}
    page = (run / "summary" / "report.html").read_text(encoding="utf-8")
    assert "Effective context length" in page and "S-RT EN: <b>2k [2k, 2k]</b>" in page
    absolute = subprocess.run(
        [
            str(VENV_BIN / "needlebench"),
            "report",
            str(run),
            "-o",
            str(tmp_path / "abs"),
            "-q",
            "--effective-rule",
            "absolute",
            "--claimed",
            "right=6000",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert absolute.returncode == 0, absolute.stderr[-2000:]
    rows = check(tmp_path / "abs", "absolute", claimed_right=6000)
    assert {r["effective/claimed"] for r in rows if r["model"] == "right"} == {"0.50"}  # 3k of a claimed 6,000

    _leaderboard_sorts_by_effective_length(run, tmp_path / "board")

    bundle = run / "summary" / "results.json"
    verify = [str(VENV_BIN / "needlebench"), "verify", str(bundle), str(run)]
    assert subprocess.run(verify, capture_output=True, text=True, check=False).returncode == 0
    data = json.loads(bundle.read_text(encoding="utf-8"))
    table = data["tables"]["needlebench_effective_length"]
    assert {(r["model"], r["effective_length"]) for r in table} == {
        ("cut", 2000),
        ("right", 3000),
        ("wrong", None),
        ("flaky", 3000),
        ("flaky", 1000),
    }
    next(r for r in table if r["model"] == "cut")["effective_length"] = 3000
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    said = subprocess.run([*verify[:2], str(edited), str(run)], capture_output=True, text=True, check=False)
    assert said.returncode == 1 and "needlebench_effective_length" in said.stdout + said.stderr, said.stdout[-2000:]

    rows = list(csv.DictReader((run / "summary" / "needlebench_effective_length.csv").open(encoding="utf-8")))
    flaky = {(r["task"], r["lang"]): r for r in rows if r["model"] == "flaky"}
    srt_en = flaky.pop(("S-RT", "EN"))  # its two requests at 2k failed: the number stops short of them
    assert (srt_en["edge"], srt_en["undetermined_above"], srt_en["effective"]) == (
        "undetermined",
        "2000",
        ">= 1k, undetermined above 2k",
    )


def _leaderboard_sorts_by_effective_length(run: Path, out: Path) -> None:
    """`needlebench leaderboard`: the suite board's effective and claimed columns, sorted by a click in Chromium."""
    from playwright.sync_api import sync_playwright

    made = subprocess.run(
        [str(VENV_BIN / "needlebench"), "leaderboard", str(run), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((out / "leaderboard.html").resolve().as_uri())
        table = page.locator("table.board").first
        headers = table.locator("th").all_inner_texts()
        col = headers.index("effective length") + 1

        def shown() -> list[tuple[str, str]]:
            models = table.locator("tbody tr.measured td:nth-child(2)").all_inner_texts()
            values = table.locator(f"tbody tr.measured td:nth-child({col})").all_inner_texts()
            return [(m.split("\n")[0], v) for m, v in zip(models, values)]  # the name, not its "tied with" line

        table.locator("th", has_text="effective length").click()
        down = shown()
        table.locator("th", has_text="effective length").click()
        up = shown()
        claimed = table.locator(f"tbody tr.measured td:nth-child({headers.index('claimed') + 1})").all_inner_texts()
        browser.close()
    assert not errors, errors
    assert [m for m, _ in down] == ["right", "cut", "flaky", "wrong"] and [m for m, _ in up] == [
        "wrong",
        "flaky",
        "cut",
        "right",
    ]
    assert down[0][1].startswith(">= 3k") and down[1][1].startswith("2k [2k, 2k]") and down[3][1].startswith("< 1k")
    assert down[2][1].startswith(">= 1k, undetermined above 2k (S-RT EN)")  # its failed requests: marked
    assert set(claimed) == {"32,768"}
