"""Thinking budgets as an axis: asked of the server as it spells them, and checked against what it reports.

The builders (``api_model(thinking_budget=...)``, ``thinking_sweep``) and the one rule that reads a record
(``record.budget_verdict``); then real OpenCompass runs of a two-budget sweep against the scripted
server (``tools/flaky_server.py --thinking``): a server that honours the budget (every record's reasoning at
most its budget, reasoning stopped at it counted), one that ignores it (flagged "not enforced" in the table),
and one that refuses the field (one line before any prompt).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, free_port, start_flaky_server, stop_server

from needlebench.errors import ConfigError
from needlebench.opencompass.models import api_model, hf_model, thinking_sweep, vllm_model
from needlebench.record import budget_verdict

CONFIG = "tests/configs/e2e_thinking.py"
MODELS = ("think@think-8", "think@think-30")


def _api(**kwargs: object) -> dict:
    return api_model("a", "served", base_url="http://127.0.0.1:1/v1", max_seq_len=32768, **kwargs)


def test_the_budget_is_asked_as_each_server_spells_it_and_bad_ones_are_one_line() -> None:
    assert _api(thinking_budget=512)["extra_body"] == {"thinking_token_budget": 512}
    assert _api(thinking_budget=512, thinking_field="chat_template")["extra_body"] == {
        "chat_template_kwargs": {"thinking_budget": 512}
    }
    mixed = _api(thinking_budget=64, thinking_field="nim", extra_body={"nvext": {"top_k": 1}, "x": 2})
    assert mixed["extra_body"] == {"nvext": {"top_k": 1, "max_thinking_tokens": 64}, "x": 2}
    assert (mixed["thinking_budget"], mixed["thinking_field"]) == (64, "nim")
    assert "extra_body" not in _api() and "thinking_budget" not in _api()
    swept = thinking_sweep(_api(thinking_budget=4), [0, 1024])
    assert [(m["abbr"], m["extra_body"], m["thinking_budget"]) for m in swept] == [
        ("a@think-0", {"thinking_token_budget": 0}, 0),
        ("a@think-1024", {"thinking_token_budget": 1024}, 1024),
    ]
    for call, named in (
        (lambda: _api(thinking_budget=-1), "thinking_budget=-1"),
        (lambda: _api(thinking_budget=1.5), "thinking_budget=1.5"),
        (lambda: _api(thinking_budget=True), "thinking_budget=True"),
        (lambda: _api(thinking_budget="8"), "thinking_budget='8'"),
        (lambda: _api(thinking_budget=8, thinking_field="sglang-strict"), "thinking_field='sglang-strict'"),
        (lambda: thinking_sweep(_api(), [8, 8]), "none repeated"),
        (lambda: thinking_sweep(_api(), [8, -2]), "thinking_budget=-2"),
        (lambda: thinking_sweep(hf_model("h", "/m", max_seq_len=8192), [8]), "an api_model config"),
        # in-process vLLM beside OpenCompass 0.5.4 (<= 0.14.0) has no thinking_token_budget: serve it instead
        (lambda: vllm_model("v", "/m", max_seq_len=8192, thinking_budget=8), "api_model(..., thinking_budget=N)"),
        (lambda: thinking_sweep(vllm_model("v", "/m", max_seq_len=8192), [8]), "no thinking_token_budget"),
    ):
        with pytest.raises(ConfigError, match="'a|'h|'v|model ") as err:
            call()
        assert named in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_budget_is_reached_within_a_tenth_and_one_token_and_ignored_beyond() -> None:
    assert budget_verdict(None, 100) == budget_verdict(500, None) == (False, False)
    assert budget_verdict(98, 100) == (False, False)  # stopped by itself before the budget
    assert budget_verdict(99, 100) == (False, True)  # vLLM counts the template's newline after <think>
    assert budget_verdict(100, 100) == budget_verdict(111, 100) == (False, True)  # NIM's tenth, a forced token
    assert budget_verdict(112, 100) == (True, False)
    assert budget_verdict(1, 0) == (False, True) and budget_verdict(2, 0) == (True, False)
    assert budget_verdict(0, 0) == (False, False)  # no reasoning under a budget of 0: nothing was cut


@contextlib.contextmanager
def _serve(tmp_path: Path, mode: str) -> Iterator[tuple[int, Path]]:
    log = tmp_path / f"{mode}.jsonl"
    port = free_port()
    server = start_flaky_server(
        port, log, "--never-every", "0", "--faults-per-prompt", "0", "--echo", "--thinking", mode
    )
    try:
        yield port, log
    finally:
        stop_server(server)


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    with _serve(tmp_path, mode) as (port, log):
        env = {**os.environ, "NEEDLEBENCH_API_BASE": f"http://127.0.0.1:{port}/v1"}
        work = tmp_path / mode
        done = subprocess.run(
            [bin_path("needlebench"), "run", CONFIG, "-w", str(work)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    return done, work, log


def _records(run: Path, model: str) -> list[dict]:
    path = run / "results" / model / "needlebench_srt_en_4k.samples.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _notes(run: Path) -> dict[str, dict[str, str]]:
    rows = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    return {m: {r["length"]: r[f"{m} note"] for r in rows if r["lang"] == "EN"} for m in MODELS}


@pytest.mark.e2e
def test_an_honoured_budget_keeps_every_reasoning_within_it_and_counts_those_it_stopped(tmp_path: Path) -> None:
    done, work, log = _run(tmp_path, "honour")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = work.iterdir()
    asked = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    assert sorted({a["budget"] for a in asked}) == [8, 30]  # each model asked for its own budget
    for model, budget in zip(MODELS, (8, 30)):
        records = _records(run, model)
        assert len(records) == 6 and all(r["thinking_budget"] == budget for r in records)
        assert all(r["reasoning_tokens"] <= budget and not r["budget_ignored"] for r in records)
        assert sum(r["budget_reached"] for r in records) == sum(r["reasoning_tokens"] >= budget - 1 for r in records)
    notes = _notes(run)
    assert notes["think@think-8"]["all"] == "6 of 6 reasoning stopped at the thinking budget"  # the server said 20+
    assert "not enforced" not in json.dumps(notes)
    # score by budget, per length: the table and the curve of the swept model
    rows = list(csv.DictReader((run / "summary" / "needlebench_budgets.csv").open(encoding="utf-8")))
    assert sorted((r["budget"], r["length"]) for r in rows) == [
        ("30", "1000"),
        ("30", "2000"),
        ("8", "1000"),
        ("8", "2000"),
    ]
    assert all(r["baseline"] == "think" and r["not enforced"] == "0" and r["samples"] == "3" for r in rows)
    assert [int(r["stopped at the budget"]) for r in rows if r["budget"] == "8"] == [3, 3]
    from PIL import Image

    with Image.open(run / "summary" / "figures" / "budget_S-RT_en_think.png") as figure:
        assert figure.format == "PNG" and min(figure.size) > 100  # a drawn figure, not an empty file


@pytest.mark.e2e
def test_an_ignored_budget_is_flagged_in_the_tables(tmp_path: Path) -> None:
    done, work, _ = _run(tmp_path, "ignore")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = work.iterdir()
    records = _records(run, "think@think-8")
    assert all(r["reasoning_tokens"] > 8 + 1 and r["budget_ignored"] for r in records)  # 20 or more each
    notes = _notes(run)
    assert notes["think@think-8"]["all"] == "6 of 6 thinking budget not enforced (reasoned past it)"
    ignored = sum(r["budget_ignored"] for r in _records(run, "think@think-30"))
    assert ignored and f"{ignored} of 6 thinking budget not enforced" in notes["think@think-30"]["all"]
    assert "thinking budget not enforced" in (run / "summary" / "report.html").read_text(encoding="utf-8")
    rows = list(csv.DictReader((run / "summary" / "needlebench_budgets.csv").open(encoding="utf-8")))
    assert sum(int(r["not enforced"]) for r in rows if r["budget"] == "8") == 6


@pytest.mark.e2e
def test_a_server_that_refuses_the_budget_stops_the_run_in_one_line_before_any_prompt(tmp_path: Path) -> None:
    done, work, log = _run(tmp_path, "reject")
    said = [x for x in done.stderr.splitlines() if x.startswith("needlebench: ")]
    assert done.returncode != 0 and len(said) == 1, done.stderr[-3000:]
    assert (
        "model think@think-8: " in said[0]
        and "refuses a thinking budget of 8 tokens (thinking_field='vllm')" in said[0]
    )
    assert "--reasoning-parser" in said[0]
    assert not log.exists() or log.read_text() == ""  # no prompt reached the server
    assert not list(work.glob("*/predictions/*/*.json"))
