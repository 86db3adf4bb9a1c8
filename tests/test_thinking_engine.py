"""Thinking budgets on a real engine (issue 61; opt-in: ``bash scripts/test.sh -m engine``).

The vLLM CPU server (``tools/vllm_cpu.sh``) with its ``deepseek_r1`` reasoning parser serves SmolLM2 as a stand-in
reasoning model (``tools/vllm_cpu.sh think-model``: a template that opens a think block the model never closes by
itself), and one run asks it for no budget, for 8 and for 24 reasoning tokens (``thinking_sweep``, vLLM's
``thinking_token_budget``). What the engine did shows in every answer: unbudgeted reasoning runs on to the output
budget, budgeted reasoning stops where vLLM ends it (one token under the budget: vLLM counts the template's newline
after ``<think>``), and the records count it although the server reports ``reasoning_tokens: 0``.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
from conftest import fail_unless_offline, run_opencompass, vllm_cpu

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

MODELS = {"smollm2-think": None, "smollm2-think@think-8": 8, "smollm2-think@think-24": 24}


def test_vllm_enforces_each_thinking_budget_and_the_records_show_it(tmp_path: Path) -> None:
    env = {**os.environ, "VLLM_PORT": os.environ.get("VLLM_PORT", "8012"), "VLLM_MAX_MODEL_LEN": "4096"}
    built = vllm_cpu("think-model", env)
    if built.returncode == 3:  # a skip only without network, else a failure
        fail_unless_offline(built, "vllm-cpu")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    env.update(VLLM_MODEL_DIR=built.stdout.strip().splitlines()[-1], VLLM_EXTRA_ARGS="--reasoning-parser deepseek_r1")
    try:
        up = vllm_cpu("up", env)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-4000:]
        (name,) = re.findall(r"^served model: (\S+)$", up.stdout, re.M)
        run = run_opencompass(
            "tests/configs/e2e_thinking_vllm.py",
            tmp_path / "work",
            {**env, "VLLM_SERVED_NAME": name, "THINK_MODEL_DIR": env["VLLM_MODEL_DIR"]},
            timeout=3000,
        )
    finally:
        assert vllm_cpu("down", env).returncode == 0
    for model, budget in MODELS.items():
        path = run / "results" / model / "needlebench_srt_en_4k.samples.jsonl"
        records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        assert len(records) == 3 and all(r["reasoning"] and r["unscored"] is None for r in records), records
        counts = [r["reasoning_tokens"] for r in records]
        if budget is None:  # nothing ends it: the reasoning runs on past every budget of the sweep
            assert min(counts) > 24, counts
            continue
        assert all(budget - 1 <= n <= budget for n in counts), counts  # ended by the engine, at the budget
        assert all(r["budget_reached"] and not r["budget_ignored"] for r in records)
    with (run / "summary" / "needlebench_budgets.csv").open(encoding="utf-8") as fh:
        rows = {r["budget"]: r for r in csv.DictReader(fh)}
    assert {b: (r["stopped at the budget"], r["not enforced"], r["samples"]) for b, r in rows.items()} == {
        "8": ("3", "0", "3"),
        "24": ("3", "0", "3"),
    }
