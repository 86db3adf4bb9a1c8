"""Rungs past 1M: the 2000k, 4000k and 8000k suites (``tasks/profiles.py``'s ``BEYOND_SUITES``), labelled as beyond
OpenCompass's protocol, which stops at 1000k. The oracle through the real ``opencompass`` at 2M and 4M scores 100
in every cell, and the summary notes each cell past 1000k; the pipeline's cost there is
``bench/pipeline_cost_2000k_r1_digest.json`` and ``..._4000k_...``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from conftest import run_opencompass

from needlebench.opencompass.configs import needlebench_datasets
from needlebench.tasks.profiles import BEYOND_SUITES, OPENCOMPASS_LONGEST, SUITES, get_suite


def test_the_rungs_past_1m_are_suites_of_the_2025_protocol_only() -> None:
    assert {name: s.lengths[-1] for name, s in BEYOND_SUITES.items()} == {
        "2000k": 2_000_000,
        "4000k": 4_000_000,
        "8000k": 8_000_000,
    }
    assert max(s.lengths[-1] for s in SUITES.values()) == OPENCOMPASS_LONGEST  # OpenCompass's own stop at 1000k
    assert all(s.lengths[0] == 1000 for s in BEYOND_SUITES.values())  # the relative rule's base stays 1k
    assert get_suite("8000k").depths == get_suite("1000k").depths
    with pytest.raises(Exception, match="unknown suite '2000k'"):
        needlebench_datasets(suite="2000k", profile="v1")


@pytest.mark.e2e
def test_the_oracle_scores_100_at_2m_and_4m_and_the_tables_say_beyond_opencompass(tmp_path: Path) -> None:
    run = run_opencompass("tests/configs/e2e_beyond_1m.py", tmp_path / "work")
    rows = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    cells = {r["length"]: r for r in rows if r["lang"] == "EN"}
    assert {length: float(r["oracle"]) for length, r in cells.items()} == {
        "1000": 100.0,
        "2000000": 100.0,
        "4000000": 100.0,
        "all": 100.0,
    }
    said = "beyond OpenCompass's protocol (its configs stop at 1000k)"
    assert said in cells["2000000"]["oracle note"] and said in cells["4000000"]["oracle note"]
    assert said in cells["all"]["oracle note"] and said not in cells["1000"]["oracle note"]
    assert all(r["oracle complete"] == "True" for r in cells.values())
    # on a leaderboard the row is never comparable to a paper's, and says why
    from needlebench.report.leaderboard import build_leaderboard

    rows = [r for b in build_leaderboard([run]).boards for r in b.rows if r.kind == "measured"]
    assert rows and all(not r.comparability.comparable for r in rows)
    assert all("beyond OpenCompass's protocol (past 1000k)" in r.comparability.text for r in rows)
