"""The benchmark in tiny mode, so it cannot rot (speed itself is reported, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_bench_tiny_mode_runs_end_to_end(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    r = subprocess.run(
        [sys.executable, "-m", "bench.run", "--tiny", "--out", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(out.read_text())
    (gen,) = result["generation"]
    assert gen["builtin"]["samples"] == gen["ours"]["samples"] > 0  # the same suite on both sides
    assert gen["speedup"] > 0 and gen["ours"]["peak_rss_gb"] > 0
    assert result["pipeline"]["builtin"]["seconds"] > 0 and result["pipeline"]["ours"]["seconds"] > 0
    assert 0 < result["prefix"]["share"] < 1
    assert "| generate 4k suite" in r.stdout
