"""Request order on a real engine: prefill computed by vLLM in OpenCompass's built-in order and in ours.

The same prompts (S-RT, M-RT and M-RS, English, up to 8k tokens: SmolLM2's
window) go to the CPU vLLM server of ``tools/vllm_cpu.sh`` one at a time, once
in the order OpenCompass's built-in ``needlebench_v2`` configs produce them
(length, then depth, the repeats innermost; M-RS needle count outermost) and
once in ours (the rows of our datasets as the partitioner hands them out). The
KV cache is sized like a GPU serving long prompts, a small multiple of the
longest prompt (``--num-gpu-blocks-override``): a cache that holds the whole
workload computes the same tokens in any order.

Reported per cache size: wall time, prompt tokens computed (vLLM's
``prompt_tokens_by_source{source="local_compute"}``), its prefix-cache hit rate,
and the share of the reusable prefix captured, where "reusable" is what an
unbounded cache saves (order-independent: every distinct block is computed once).
``bench/prefix_cache.py`` replays vLLM's cache policy for a sweep of sizes; the
engine runs check it.

    .venv/bin/python -m bench.engine_order               # simulate the sweep, then run the engine
    .venv/bin/python -m bench.engine_order --simulate-only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.prefix_cache import replay

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / ".cache" / "smollm2-135m-hf"
TASK_ORDER = ("srt", "mrt", "mrs")


@dataclass(frozen=True)
class Request:
    """One prompt and the coordinates that decide its place in each order."""

    task: str
    length: int
    depth: float  # S-RT/M-RS: the (first) needle's depth; M-RT: 0
    count: int  # needles
    repeat: int
    prompt: str


def workload(lengths: Sequence[int], depths: Sequence[float], repeats: int, mrs_counts: Sequence[int]) -> list[Request]:
    """The benchmark's prompts, in our order (task by task, each dataset's rows as generated)."""
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.tasks import config_params, get_task, make_params

    out: list[Request] = []
    for task in TASK_ORDER:
        extra: dict[str, Any] = {"num_needles": list(mrs_counts)} if task == "mrs" else {}
        (d,) = needlebench_datasets(
            suite="8k", tasks=[task], langs=["en"], lengths=list(lengths), depths=list(depths), repeats=repeats, **extra
        )
        for s in get_task(task).generate(make_params(task, **config_params(d))):
            m = s.meta
            count = m.get("num_needles") or len(m.get("depths") or [0]) or 1
            out.append(Request(task, m["length"], float(m.get("depth", 0.0)), count, m["repeat"], s.prompt))
    return out


def builtin_order(requests: Sequence[Request]) -> list[Request]:
    """OpenCompass v2's order: a dataset per (length, depth), ascending, its repeats inside; M-RS per count."""
    rank = {t: i for i, t in enumerate(TASK_ORDER)}
    return sorted(
        requests,
        key=lambda r: (rank[r.task], r.count if r.task == "mrs" else 0, r.length, r.depth, r.repeat),
    )


def tokenize(requests: Sequence[Request]) -> list[list[int]]:
    """Token ids as the server sees them: SmolLM2's chat template around each prompt."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    return [
        tok.apply_chat_template([{"role": "user", "content": r.prompt}], add_generation_prompt=True, tokenize=True)
        for r in requests
    ]


def sweep(
    orders: dict[str, list[list[int]]], multiples: Sequence[float], block_size: int, max_tokens: int
) -> list[dict[str, Any]]:
    """Simulated prefill per order and cache size (a multiple of the longest request's blocks)."""
    any_order = next(iter(orders.values()))
    longest = max(-(-(len(t) + max_tokens) // block_size) for t in any_order)
    floor = replay(any_order, None, block_size, max_tokens)
    reusable = floor.prompt_tokens - floor.computed
    rows = []
    for mult in multiples:
        blocks = max(longest, int(round(mult * longest)))
        row: dict[str, Any] = {"cache_multiple": mult, "blocks": blocks, "simulated_total": floor.prompt_tokens}
        for name, toks in orders.items():
            r = replay(toks, blocks, block_size, max_tokens)
            row[name] = {
                "computed": r.computed,
                "hit_rate": r.hit / r.prompt_tokens,
                "captured": (r.hit / reusable) if reusable else 1.0,
            }
        rows.append(row)
    return [{"prompt_tokens": floor.prompt_tokens, "unbounded_computed": floor.computed}, *rows]


# -- the engine ----------------------------------------------------------------------------------
def _counters(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {
        src: float(v)
        for src, v in re.findall(
            r'^vllm:prompt_tokens_by_source_total\{[^}]*source="([^"]+)"[^}]*\} ([0-9.e+]+)$', text, re.M
        )
    }
    for name in ("prefix_cache_queries", "prefix_cache_hits"):
        m = re.search(rf"^vllm:{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def _post(port: int, path: str, body: dict[str, Any] | None, timeout: float = 900) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read().decode()
    return json.loads(raw) if raw.strip().startswith("{") else {}


def engine_run(port: int, name: str, requests: Sequence[Request], max_tokens: int) -> dict[str, Any]:
    """Send ``requests`` one at a time after emptying the prefix cache; vLLM's counters before and after."""
    _post(port, "/reset_prefix_cache", None, timeout=60)
    before = _counters(port)
    start = time.perf_counter()
    for r in requests:
        _post(
            port,
            "/v1/chat/completions",
            {
                "model": name,
                "messages": [{"role": "user", "content": r.prompt}],
                "max_tokens": max_tokens,
                "temperature": 0.0,
            },
        )
    wall = time.perf_counter() - start
    after = _counters(port)
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    return {
        "wall_s": wall,
        "computed": int(delta.get("local_compute", 0)),
        "cache_hit": int(delta.get("local_cache_hit", 0)),
        "hit_rate": delta["prefix_cache_hits"] / delta["prefix_cache_queries"] if delta["prefix_cache_queries"] else 0,
    }


def _server(cmd: str, env: dict[str, str]) -> str:
    r = subprocess.run(
        ["bash", str(ROOT / "tools" / "vllm_cpu.sh"), cmd], env=env, capture_output=True, text=True, timeout=900
    )
    if r.returncode != 0:
        raise RuntimeError(f"tools/vllm_cpu.sh {cmd} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def engine(
    orders: dict[str, list[Request]], blocks: int, block_size: int, max_model_len: int, max_tokens: int, port: int
) -> dict[str, Any]:
    """One server with a ``blocks``-block cache; each order replayed on an emptied cache."""
    env = {
        **os.environ,
        "VLLM_PORT": str(port),
        "VLLM_SERVER_DEV_MODE": "1",  # for /reset_prefix_cache between the orders
        "VLLM_MAX_MODEL_LEN": str(max_model_len),
        "VLLM_EXTRA_ARGS": f"--num-gpu-blocks-override {blocks} --block-size {block_size}",
    }
    _server("down", env)
    out = _server("up", env)
    name = re.findall(r"^served model: (\S+)$", out, re.M)[0]
    try:
        # one warm-up request outside the measurement (first-call costs of the engine)
        engine_run(port, name, [next(iter(orders.values()))[0]], max_tokens)
        return {order: engine_run(port, name, reqs, max_tokens) for order, reqs in orders.items()}
    finally:
        _server("down", env)


def table(result: dict[str, Any]) -> str:
    """The simulated sweep: prefill computed per order, and the share of reusable prefix captured."""
    lines = [
        "| cache (x longest prompt) | built-in order: computed | ours: computed | ours / built-in "
        "| reuse captured, built-in | reuse captured, ours |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["simulated"][1:]:
        b, o = row["builtin"], row["ours"]
        lines.append(
            f"| {row['cache_multiple']:g} | {b['computed']} | {o['computed']} | {o['computed'] / b['computed']:.2f} "
            f"| {100 * b['captured_within_datasets']:.0f}% | {100 * o['captured_within_datasets']:.0f}% |"
        )
    return "\n".join(lines)


def engine_table(result: dict[str, Any]) -> str:
    """The engine runs next to the model's prediction for the same cache."""
    lines = [
        "| cache | order | wall | computed (vLLM local_compute) | predicted | vLLM prefix-cache hit rate |",
        "|---|---|---|---|---|---|",
    ]
    for row in result.get("engine", []):
        for name in ("builtin", "ours"):
            e = row[name]
            sim = (row.get("simulated") or {}).get(name, {}).get("computed", "")
            lines.append(
                f"| {row['cache_multiple']:g}x ({row['blocks']} blocks) | {name} | {e['wall_s']:.0f} s | "
                f"{e['computed']} | {sim} | {100 * e['hit_rate']:.1f}% |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--depths", type=float, nargs="+", default=[0, 25, 50, 75, 100])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--mrs-counts", type=int, nargs="+", default=[2])
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--multiples", type=float, nargs="+", default=[1.2, 1.5, 2, 3, 4, 6, 8, 12, 16])
    parser.add_argument("--engine-multiples", type=float, nargs="*", default=[1.2, 2])
    parser.add_argument("--port", type=int, default=8013)
    parser.add_argument("--simulate-only", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench" / "engine_order.json"))
    args = parser.parse_args(argv)

    ours = workload(args.lengths, args.depths, args.repeats, args.mrs_counts)
    orders = {"builtin": builtin_order(ours), "ours": ours}
    tokens = {name: tokenize(reqs) for name, reqs in orders.items()}
    result: dict[str, Any] = {
        "workload": {
            "lengths": args.lengths,
            "depths": args.depths,
            "repeats": args.repeats,
            "mrs_counts": args.mrs_counts,
            "requests": len(ours),
            "block_size": args.block_size,
            "max_tokens": args.max_tokens,
        },
        "per_task": {},
    }
    for task in TASK_ORDER:
        sub = {name: [t for t, r in zip(tokens[name], orders[name]) if r.task == task] for name in orders}
        result["per_task"][task] = sweep(sub, args.multiples, args.block_size, args.max_tokens)
    result["simulated"] = sweep(tokens, args.multiples, args.block_size, args.max_tokens)
    # the reuse an order can reach: within each dataset (OpenCompass runs datasets one after another,
    # so sharing across two of them needs a cache that holds a whole dataset)
    within = sum(rows[0]["prompt_tokens"] - rows[0]["unbounded_computed"] for rows in result["per_task"].values())
    result["reusable_within_datasets"] = within
    for row in result["simulated"][1:]:
        for name in orders:
            row[name]["captured_within_datasets"] = (row["simulated_total"] - row[name]["computed"]) / within
    print(table(result))
    if not args.simulate_only:
        longest = max(len(t) for t in tokens["ours"]) + args.max_tokens
        longest_blocks = -(-longest // args.block_size)
        result["engine"] = []
        for mult in args.engine_multiples:
            blocks = int(round(mult * longest_blocks))
            max_model_len = min(8192, (blocks - 1) * args.block_size)
            row = {"cache_multiple": mult, "blocks": blocks}
            row.update(engine(orders, blocks + 1, args.block_size, max_model_len, args.max_tokens, args.port))
            sim = (
                next(r for r in result["simulated"][1:] if r["cache_multiple"] == mult)
                if mult in args.multiples
                else None
            )
            row["simulated"] = sim
            result["engine"].append(row)
            print(engine_table(result))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
