"""What each cell cost: a request's cost as the engine or the clock says (``needlebench.request_cost``), kept on
its record and added up per cell in ``needlebench_cost.csv`` (``report/ledger.py``).

First the record and the ledger's arithmetic on hand-made costs; then a real OpenCompass run of an API model
against the scripted server, which answers every prompt with the cached tokens and vLLM per-request metrics it
logs (``tools/flaky_server.py --costs``), beside the oracle, an in-process model whose engine reports nothing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, bin_path, free_port, launch_chromium, start_flaky_server, stop_server

from needlebench.record import GradedSample, OutputFacts
from needlebench.report.ledger import cost_ledger
from needlebench.request_cost import RequestCost

CONFIG = "tests/configs/e2e_cost.py"
PRODUCERS = {"opencompass/api.py", "opencompass/inferencer.py"}  # a server's answer; an in-process batch's clock
# the ledger, status's spent line, and the one reading of a cost log for rates (plan --rates, the report's forecast)
READERS = {"report/ledger.py", "report/status_view.py", "planning/rates.py"}
WHERE = {"request_cost.py", *READERS, *PRODUCERS}
FACTS = ("prompt_tokens", "cached_tokens", "queue_ms", "ttft_ms", "decode_ms")
SERVER = {  # the server's names for them (vLLM's)
    "prompt_tokens": "prompt_tokens",
    "cached_tokens": "cached_tokens",
    "queue_ms": "queue_time_ms",
    "ttft_ms": "time_to_first_token_ms",
    "decode_ms": "generation_time_ms",
}


def _record(i: int, length: int, cost: RequestCost | None) -> GradedSample:
    return GradedSample(
        id=str(i),
        task="srt",
        lang="en",
        fields={"length": length},
        score=100.0,
        model="m",
        output=OutputFacts(cost=cost),
    )


def test_a_cost_is_kept_as_reported_and_read_back_without_guesses() -> None:
    cost = RequestCost(wall_s=0.5, ttft_ms=12.5, prompt_tokens=900, cached_tokens=640, engine="openai-api")
    assert cost.to_json() == {
        "wall_s": 0.5,
        "ttft_ms": 12.5,
        "prompt_tokens": 900,
        "cached_tokens": 640,
        "engine": "openai-api",
    }  # a fact not reported is left out, never written as 0
    assert RequestCost.from_json(cost.to_json()) == cost and cost.computed_tokens == 260
    assert RequestCost(prompt_tokens=900).computed_tokens is None  # no cached count: nothing computed is known
    # a value of the wrong type is dropped, not guessed; nothing at all is no cost
    assert RequestCost.from_json({"prompt_tokens": True, "wall_s": "x", "shared": 1}) is None
    assert RequestCost.from_json("garbage") is None and RequestCost.from_json(None) is None
    record = _record(1, 1000, cost)
    assert GradedSample.from_json(json.loads(json.dumps(record.to_json()))).output.cost == cost


def test_the_ledger_adds_a_cells_requests_up_and_leaves_unreported_facts_empty() -> None:
    costs = [
        RequestCost(wall_s=1.0, ttft_ms=10.0, prompt_tokens=1000, cached_tokens=0, engine="openai-api"),
        RequestCost(wall_s=2.0, ttft_ms=30.0, prompt_tokens=1000, cached_tokens=900, engine="openai-api"),
        RequestCost(wall_s=0.25, engine="openai-api"),  # the server said nothing but the clock ran
    ]
    records = [_record(i, 1000, c) for i, c in enumerate(costs)] + [_record(9, 1000, None)]  # carried: no cost
    records.append(_record(10, 2000, RequestCost(wall_s=0.5, shared=True, engine="transformers")))
    ledger = {(r["task"], r["length"]): r for r in cost_ledger(records, ["m"]).to_dict(orient="records")}
    cell = ledger[("S-RT", "1k")]
    assert cell["requests"] == 3 and cell["with tokens"] == 2 and cell["with timings"] == 2
    assert (cell["wall_s"], cell["prompt_tokens"], cell["cached_tokens"], cell["computed_tokens"]) == (
        3.25,
        2000,
        900,
        1100,
    )
    assert cell["cache share"] == pytest.approx(0.45) and cell["ttft_ms p50"] == 20.0 and cell["ttft_ms p90"] == 28.0
    longer = ledger[("S-RT", "2k")]
    assert longer["wall_s"] == 0.5 and longer["shared"] is True
    for fact in ("prompt_tokens", "cached_tokens", "computed_tokens", "ttft_ms p50", "queue_ms", "cache share"):
        assert pd.isna(longer[fact]), fact  # nothing reported: empty (NaN, written as a blank), not 0
    whole = ledger[("all", "")]
    assert whole["requests"] == 4 and whole["wall_s"] == 3.75 and whole["engine"] == "openai-api | transformers"
    assert pd.isna(whole["device_s"]) and pd.isna(whole["money"])  # no plan, no prices: neither is known


def test_device_seconds_and_money_are_the_hand_computation() -> None:
    from needlebench.planning.costs import Price, Prices, Tier
    from needlebench.planning.run import ModelRun

    costs = [
        RequestCost(wall_s=10.0, prompt_tokens=1_000_000, cached_tokens=250_000),
        RequestCost(wall_s=20.0, prompt_tokens=500_000),  # no cached count: every prompt token at the input price
        RequestCost(wall_s=30.0),  # no tokens reported: not priced by tokens
    ]
    records = [
        GradedSample(str(i), "srt", "en", {"length": 1000}, 100.0, model="m", output=OutputFacts(100, cost=c))
        for i, c in enumerate(costs)
    ]
    tokens = Prices({"m": Price((Tier(0, 2.0, 0.5, 8.0),))})
    (cell, _) = cost_ledger(records, ["m"], prices=tokens).to_dict(orient="records")
    dollars = (750_000 * 2.0 + 250_000 * 0.5 + 100 * 8.0) / 1e6 + (500_000 * 2.0 + 100 * 8.0) / 1e6
    assert cell["money"] == pytest.approx(dollars) and cell["priced"] == 2  # 2 of 3 requests priced: said
    plans = {"m": ModelRun("m", {}, {}, (), devices=2)}
    hours = Prices({"m": Price((), device_hour=3.6)})
    (cell, whole) = cost_ledger(records, ["m"], plans, hours).to_dict(orient="records")
    assert cell["devices"] == 2 and cell["device_s"] == 120.0 and cell["money"] == pytest.approx(120.0 / 3600 * 3.6)
    assert cell["priced"] == 3 and pd.isna(whole["planned prompt_tokens"])  # a plan without shards plans none


def test_a_cost_fact_is_named_where_it_is_declared_and_where_it_is_measured_only() -> None:
    """A new per-request fact touches at most 3 package files: its field in ``request_cost.py``, the wrapper or
    inferencer that measures it, and (only for a fact a reader derives from, as ``ttft_ms``'s percentiles) the
    ledger or status's line; the cost log, the records, ``samples.jsonl``, the ledger's sums and ``verify`` take it
    from the declaration.
    (``prompt_tokens``, ``cached_tokens``, ``engine`` and ``shared`` are words the plan uses for its own counts;
    the clock, ``wall_s``, is read by both producers, a server's and the in-process batch's.)"""
    package = ROOT / "needlebench"
    for name in RequestCost.ledger_ways():
        if name in ("prompt_tokens", "cached_tokens", "engine", "shared"):
            continue
        word = re.compile(rf"\b{name}\b")
        files = sorted(
            str(p.relative_to(package)) for p in package.rglob("*.py") if word.search(p.read_text(encoding="utf-8"))
        )
        assert "request_cost.py" in files and set(files) <= WHERE, (name, files)
        assert len(set(files) - READERS - PRODUCERS) == 1, (name, files)  # declared once


@pytest.mark.e2e
def test_every_cell_of_the_ledger_is_what_the_server_said_for_its_requests(tmp_path: Path) -> None:
    log, port, prices = tmp_path / "requests.jsonl", free_port(), tmp_path / "prices.toml"
    prices.write_text("[models.served]\ninput = 2000.0\ncached_input = 500.0\noutput = 8000.0\n", encoding="utf-8")
    server = start_flaky_server(port, log, "--never-every", "0", "--faults-per-prompt", "0", "--echo", "--costs")
    try:
        work = tmp_path / "work"
        done = subprocess.run(
            [bin_path("needlebench"), "run", CONFIG, "-w", str(work)],
            cwd=ROOT,
            env={
                **os.environ,
                "NEEDLEBENCH_API_BASE": f"http://127.0.0.1:{port}/v1",
                "NEEDLEBENCH_PRICES": str(prices),
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        stop_server(server)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = work.iterdir()
    said = [json.loads(x)["cost"] for x in log.read_text(encoding="utf-8").splitlines()]
    assert len(said) == 6  # each prompt asked once, each answer's cost logged as sent
    records = {
        model: [
            json.loads(x)
            for path in sorted((run / "results" / model).glob("*.samples.jsonl"))
            for x in path.read_text(encoding="utf-8").splitlines()
        ]
        for model in ("served", "oracle")
    }
    served = records["served"]
    # each record holds one request's cost as the server said it, and the clock's time around it
    assert Counter(tuple(r["cost"][f] for f in FACTS) for r in served) == Counter(
        tuple(c[SERVER[f]] for f in FACTS) for c in said
    )
    assert all(r["cost"]["wall_s"] > 0 and r["cost"]["engine"] == "openai-api" for r in served)
    assert {r["cost"]["engine_version"] for r in served} == {"flaky-1"}  # the server's GET /version
    rows = list(csv.DictReader((run / "summary" / "needlebench_cost.csv").open(encoding="utf-8")))
    ledger = {(r["model"], r["length"]): r for r in rows}
    for length, label in ((1000, "1k"), (2000, "2k"), (None, "")):
        mine = [r["cost"] for r in served if length is None or r["length"] == length]
        row = ledger[("served", label)]
        assert int(row["requests"]) == len(mine) == (6 if length is None else 3)
        for fact in ("prompt_tokens", "cached_tokens", "queue_ms", "decode_ms"):
            assert float(row[fact]) == pytest.approx(sum(c[fact] for c in mine), abs=0.01), (label, fact)
        computed = sum(c["prompt_tokens"] - c["cached_tokens"] for c in mine)
        assert float(row["computed_tokens"]) == computed
        assert float(row["cache share"]) == pytest.approx(
            sum(c["cached_tokens"] for c in mine) / sum(c["prompt_tokens"] for c in mine), abs=0.01
        )
    assert sum(float(r["prompt_tokens"]) for r in rows if r["model"] == "served" and r["task"] != "all") == sum(
        c["prompt_tokens"] for c in said
    )
    # money: each request's uncached, cached and output tokens at the prices file's rates (dollars per million;
    # rates a thousand times a real API's, so the sum shows in the CSV's cents)
    dollars = sum(
        ((r["cost"]["prompt_tokens"] - r["cost"]["cached_tokens"]) * 2000.0 + r["cost"]["cached_tokens"] * 500.0)
        + r["output_tokens"] * 8000.0
        for r in served
    )
    assert float(ledger[("served", "")]["money"]) == pytest.approx(dollars / 1e6, abs=0.005)
    assert ledger[("served", "")]["priced"] == "6" and ledger[("oracle", "")]["money"] == ""  # the oracle: unpriced
    assert float(ledger[("served", "")]["planned prompt_tokens"]) > 0  # the plan's count beside what was spent
    # the oracle's engine reports nothing: a wall time shared over its batch, every engine field empty
    oracle = ledger[("oracle", "")]
    assert all(r["cost"]["wall_s"] > 0 and r["cost"]["shared"] for r in records["oracle"])  # seconds, exact
    assert oracle["wall_s"] != "" and oracle["shared"] == "True" and int(oracle["requests"]) == 6  # "0.00": 2 places
    for fact in ("prompt_tokens", "cached_tokens", "computed_tokens", "queue_ms", "ttft_ms p50", "cache share"):
        assert oracle[fact] == "", fact
    # what the whole 4k suite would take at the run's rates (S-RT EN: 4 lengths x 11 depths x 10 repeats), an
    # estimate beside the ledger: in report.html and its CSV, never in results.json
    forecast = {r["model"]: r for r in csv.DictReader((run / "summary" / "needlebench_cost_forecast.csv").open())}
    for model in ("served", "oracle"):
        assert forecast[model]["suite"] == "4k" and forecast[model]["suite requests"] == "440", forecast[model]
        assert forecast[model]["run requests"] == "6" and forecast[model]["suite batch_s"] != ""
    assert float(forecast["served"]["suite batch_s"]) > float(forecast["served"]["run batch_s"])  # 440 prompts, not 6
    assert forecast["served"]["suite money"] != "" and forecast["oracle"]["suite money"] == ""  # priced as the ledger
    assert "needlebench_cost_forecast" not in json.loads((run / "summary" / "results.json").read_text())["tables"]
    # seen where the scores are: the cost maps and the ledger in report.html, the run's money on the board
    from playwright.sync_api import sync_playwright

    from needlebench.report.board_pages import write_leaderboard
    from needlebench.report.leaderboard import build_leaderboard

    board = write_leaderboard(build_leaderboard([run]), tmp_path / "board")["html"]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto((run / "summary" / "report.html").resolve().as_uri())
        assert page.locator("h2", has_text="needlebench_cost").count() == 2  # the ledger, and its suite forecast
        for model in ("served", "oracle"):  # each score heatmap's cells, in wall seconds per request
            image = page.locator(f"img[alt='cost_srt_en_{model}']")
            assert image.count() == 1 and image.evaluate("i => i.naturalWidth") > 100
        page.goto(board.resolve().as_uri())
        table = page.locator("table.board").first
        headers = table.locator("th").all_inner_texts()
        assert "$ (run)" in headers and "device-h (run)" not in headers  # no GPU held: no device-hours
        column = headers.index("$ (run)") + 1
        shown = [float(x) for x in table.locator(f"tbody tr.measured td:nth-child({column})").all_inner_texts() if x]
        assert shown == [pytest.approx(float(ledger[("served", "")]["money"]), rel=0.01)]  # the oracle: unpriced
        browser.close()
    # needlebench status: what each model's requests cost so far, against the plan
    shown = subprocess.run([bin_path("needlebench"), "status", str(run)], capture_output=True, text=True, timeout=120)
    assert "spent by served: 6 requests" in shown.stdout and "the engine counted" in shown.stdout, shown.stdout
    assert "spent by oracle: 6 requests" in shown.stdout, shown.stdout
    data = json.loads(
        subprocess.run(
            [bin_path("needlebench"), "status", str(run), "--json"], capture_output=True, text=True, timeout=120
        ).stdout
    )
    spent = {m["abbr"]: m["spent"] for m in data["models"]}
    assert spent["served"]["sums"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in said)
    assert spent["served"]["requests"] == spent["served"]["reported"]["cached_tokens"] == 6
    # needlebench plan --rates: the config planned again at this run's rates (their accuracy on a real engine:
    # bench/plan_rates.py); what it says it measured is what the records hold
    env = {**os.environ, "NEEDLEBENCH_API_BASE": "http://127.0.0.1:9/v1", "NEEDLEBENCH_PRICES": str(prices)}
    args = [bin_path("needlebench"), "plan", CONFIG, "--rates", str(run)]
    planned = subprocess.run([*args, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert planned.returncode == 0, planned.stderr[-2000:]
    predicted = {p["model"]: p for p in json.loads(planned.stdout)["rates"]["predictions"]}
    for model in ("served", "oracle"):
        p, mine = predicted[model], records[model]
        assert p["requests"] == p["rates"]["requests"] == len(mine) == 6
        assert p["batches"] == p["rates"]["batches"] == 1  # batch_size 6: one batch, as the cost log has it
        assert p["rates"]["request_s"] == pytest.approx(sum(r["cost"]["wall_s"] for r in mine))
        walls = [r["cost"]["wall_s"] for r in mine]  # the oracle's are shares of its batch's clock
        assert p["rates"]["batch_s"] == pytest.approx(sum(walls) if model == "oracle" else max(walls))
        assert p["rates"]["output_tokens"]["*"] == pytest.approx(sum(r["output_tokens"] for r in mine) / 6)
        assert p["rates"]["parallel"] == pytest.approx(p["rates"]["batch_s"] / p["rates"]["span_s"])
        assert p["run_s"] == pytest.approx(p["batch_s"] / p["rates"]["parallel"])
        assert p["device_h"] is None  # no GPU held
    assert (
        predicted["served"]["rates"]["engine"] == "openai-api flaky-1"
        and predicted["served"]["rates"]["cache_reported"]
    )
    assert predicted["served"]["money"] > 0 and predicted["oracle"]["money"] is None  # priced as the run's prices file
    oracle = predicted["oracle"]
    assert not oracle["rates"]["cache_reported"] and oracle["computed_tokens"] == oracle["prompt_tokens"]
    shown = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300).stdout
    assert "model served at the rates of" in shown and "from the token plan: requests" in shown, shown
    # the ledger is in the bundle, checked by verify: an edited cost fails it
    bundle = run / "summary" / "results.json"
    verified = subprocess.run(
        [bin_path("needlebench"), "verify", str(bundle), str(run)], capture_output=True, text=True, timeout=300
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    data = json.loads(bundle.read_text(encoding="utf-8"))
    edited = next(r for r in data["tables"]["needlebench_cost"] if r["prompt_tokens"] is not None)
    edited["prompt_tokens"] += 1
    bundle.write_text(json.dumps(data), encoding="utf-8")
    verified = subprocess.run(
        [bin_path("needlebench"), "verify", str(bundle), str(run)], capture_output=True, text=True, timeout=300
    )
    assert verified.returncode == 1 and "needlebench_cost" in verified.stdout + verified.stderr
