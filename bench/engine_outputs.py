"""Same outputs in any order: greedy answers of a real engine with the prompts sent in OpenCompass's order and ours.

Our partitioner sends prompts in its own order (datasets sharing a haystack interleaved, for the prefix
cache; ``bench/engine_order.py`` measures the prefill it saves). Request order, batch composition and a
prefix-cache hit can in principle change a GPU engine's greedy output (batched kernels round differently),
and a benchmark that shares prefixes could end up measuring the cache. Here the same prompts (S-RT, M-RT,
M-RS and ATC, English) go to the CPU vLLM server of ``tools/vllm_cpu.sh`` (SmolLM2-135M, temperature 0,
prefix caching on, emptied before each run) four ways: OpenCompass's order and ours, one request at a time
and 8 in flight (batches as OpenCompass's inferencer sends them, never spanning two datasets). Every
answer is compared with the one OpenCompass's order gave one at a time; each difference is listed with
both answers and both scores (the task's own grader).

    .venv/bin/python -m bench.engine_outputs                  # bench/engine_outputs.json
    .venv/bin/python -m bench.engine_outputs --cache-multiple 1.5 --out bench/engine_outputs_small_cache.json
    .venv/bin/python -m bench.engine_outputs --lengths 800 --repeats 1 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.engine_order import (
    ROOT,
    Order,
    Request,
    builtin_order,
    cached_tokens,
    post_json,
    replies,
    stream_order,
    tokenize,
    vllm_server,
    workload,
)

CONCURRENCY = (1, 8)
BASELINE = "builtin at 1"


def answers(port: int, name: str, order: Order, concurrency: int, max_tokens: int) -> dict[str, dict[str, Any]]:
    """Each request's greedy answer by sample id, sent in ``order`` (``concurrency`` at once within each piece).

    The prefix cache is emptied first, so every run starts as a fresh server would.
    """
    post_json(port, "/reset_prefix_cache", None, timeout=60)

    out: dict[str, dict[str, Any]] = {}
    for r, reply in replies(port, name, order, concurrency, max_tokens):
        choice = reply["choices"][0]
        out[r.sample_id] = {
            "text": choice["message"]["content"],
            "finish": choice["finish_reason"],
            "cached": cached_tokens(reply.get("usage")),
        }
    return out


def score(request: Request, text: str) -> float | None:
    """The answer's score by the task's own grader (default options: the reference protocol's)."""
    from needlebench.scoring import ScoreOptions
    from needlebench.tasks import get_task

    return get_task(request.task).grade(text, request.gold, ScoreOptions()).score


def differences(runs: dict[str, dict[str, dict[str, Any]]], requests: Sequence[Request]) -> list[dict[str, Any]]:
    """Every answer that differs from the baseline run's (OpenCompass's order, one at a time), with both scores."""
    base = runs[BASELINE]
    found = []
    for name, run in runs.items():
        for r in requests:
            a, b = base[r.sample_id]["text"], run[r.sample_id]["text"]
            if a != b:
                found.append(
                    dict(
                        run=name,
                        sample=r.sample_id,
                        task=r.task,
                        baseline=a,
                        answer=b,
                        baseline_score=score(r, a),
                        score=score(r, b),
                    )
                )
    return found


def compare(
    requests_by_dataset: Sequence[Sequence[Request]], port: int, name: str, max_tokens: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """The answers of each (order, concurrency) run against a running server, by run name."""
    runs = {}
    for c in CONCURRENCY:
        for label, order in (
            ("builtin", builtin_order(requests_by_dataset)),
            ("ours", stream_order(requests_by_dataset, c)),
        ):
            runs[f"{label} at {c}"] = answers(port, name, order, c, max_tokens)
    return runs


def summary(runs: dict[str, dict[str, dict[str, Any]]], requests: Sequence[Request]) -> dict[str, Any]:
    """Per run: answers identical to the baseline's, mean score, prompt tokens served from the cache."""
    diffs = differences(runs, requests)
    per_run = {}
    for name, run in runs.items():
        scores = [score(r, run[r.sample_id]["text"]) for r in requests]
        scored = [s for s in scores if s is not None]
        per_run[name] = dict(
            identical=sum(run[r.sample_id]["text"] == runs[BASELINE][r.sample_id]["text"] for r in requests),
            of=len(requests),
            mean_score=round(sum(scored) / len(scored), 4) if scored else None,
            cached_prompt_tokens=sum(a["cached"] for a in run.values()),
            cut_at_budget=sum(a["finish"] == "length" for a in run.values()),
        )
    return dict(runs=per_run, differences=diffs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[800, 1600])
    parser.add_argument("--depths", type=float, nargs="+", default=[0, 50, 100])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--port", type=int, default=8014)
    parser.add_argument(
        "--cache-multiple",
        type=float,
        default=0.0,
        help="size the KV cache at this many times the longest prompt (0: the server's default, which holds "
        "every prompt of the workload); a small cache makes what is reused depend on the order",
    )
    parser.add_argument(
        "--block-size", type=int, default=32, help="KV cache block (the CPU build takes multiples of 32)"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "engine_outputs.json"))
    args = parser.parse_args(argv)
    datasets = workload(args.lengths, args.depths, args.repeats, [2], [2], ["eldest_ancestor"])
    requests = [r for d in datasets for r in d]
    # /reset_prefix_cache between runs; cached_tokens in each reply
    env = {
        **os.environ,
        "VLLM_PORT": str(args.port),
        "VLLM_SERVER_DEV_MODE": "1",
        "VLLM_EXTRA_ARGS": "--enable-prompt-tokens-details",
    }
    blocks = 0
    if args.cache_multiple:
        longest = max(len(t) for t in tokenize(requests).values()) + args.max_tokens
        blocks = int(round(args.cache_multiple * -(-longest // args.block_size))) + 1
        env["VLLM_MAX_MODEL_LEN"] = str(min(8192, (blocks - 1) * args.block_size))
        env["VLLM_EXTRA_ARGS"] += f" --num-gpu-blocks-override {blocks} --block-size {args.block_size}"
    vllm_server("down", env)
    name = re.findall(r"^served model: (\S+)$", vllm_server("up", env), re.M)[0]
    try:
        runs = compare(datasets, args.port, name, args.max_tokens)
    finally:
        vllm_server("down", env)
    result = dict(
        workload=dict(
            lengths=args.lengths,
            depths=args.depths,
            repeats=args.repeats,
            max_tokens=args.max_tokens,
            cache=f"{blocks} blocks of {args.block_size} tokens ({args.cache_multiple:g}x the longest prompt)"
            if blocks
            else "the server's default (holds every prompt of the workload)",
            requests=len(requests),
            datasets=[f"{d[0].task}:{len(d)}" for d in datasets if d],
            engine="vLLM CPU build (tools/vllm_cpu.sh), SmolLM2-135M, temperature 0, prefix caching on",
        ),
        **summary(runs, requests),
    )
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result["runs"], indent=1))
    print(f"{len(result['differences'])} answers differ from {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
