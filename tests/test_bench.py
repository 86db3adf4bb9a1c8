"""The benchmark in tiny mode, so it cannot rot (speed itself is reported, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import bin_path

pytestmark = pytest.mark.e2e


# The tiny bench's generation (the 4k suite's S-RT) as a config `needlebench plan` reads (one shard)
PLAN_CONFIG = """
_base_ = []
from needlebench.opencompass.configs import needlebench_datasets
models = [dict(type="needlebench.opencompass.instant.InstantModel", abbr="instant", path="instant",
               max_seq_len=2000000, max_out_len=16, batch_size=64)]
datasets = needlebench_datasets(suite="4k", tasks=["srt"])
"""


def test_bench_tiny_mode_runs_end_to_end(root: Path, tmp_path: Path) -> None:
    """The tiny bench generates the 4k suite's S-RT on both sides (as many samples as ``needlebench plan`` counts
    for it), runs both pipelines, and measures the S-RT prefix share the plan estimates."""
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
    config = tmp_path / "plan_4k.py"
    config.write_text(PLAN_CONFIG, encoding="utf-8")
    planned = subprocess.run(
        [bin_path("needlebench"), "plan", str(config), "--json", "--shards", "1"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    (model,) = json.loads(planned.stdout)["models"]
    srt = [d for d in model["datasets"] if d["task"] == "srt"]
    assert result["mode"] == "tiny"
    (gen,) = result["generation"]
    assert (gen["suite"], gen["task"], gen["runs"]) == ("4k", "srt", 1)
    # the same S-RT on both sides, every sample of it, as many as the plan counts
    assert gen["builtin"]["samples"] == gen["ours"]["samples"] == model["samples"] == 880
    assert gen["speedup"] > 0 and gen["ours"]["peak_rss_gb"] > 0  # speed and memory: reported, never asserted
    assert result["pipeline"]["builtin"]["seconds"] > 0 and result["pipeline"]["ours"]["seconds"] > 0
    prefix = result["prefix"]
    assert (prefix["suite"], prefix["shards"]) == ("4k", 1)
    assert prefix["prompt_tokens"] == sum(d["prompt_tokens"] for d in srt)  # the same S-RT prompts as the plan's
    assert prefix["share"] == prefix["reusable_tokens"] / prefix["prompt_tokens"]
    # The bench counts the shared text's tokens (less one that may straddle the split); the plan estimates them
    # from the shared bytes at each prompt's tokens per byte: on these 880 prompts 0.5026 against 0.5084 (measured).
    # The plan's estimate stays within one point of the count.
    planned_share = sum(d["prefix_tokens"] for d in srt) / sum(d["prompt_tokens"] for d in srt)
    assert prefix["share"] == pytest.approx(planned_share, abs=0.01), (prefix, planned_share)
    assert "| generate 4k suite, srt" in r.stdout and f"| {100 * prefix['share']:.1f}% |" in r.stdout
