"""Request order on a real engine, as OpenCompass sends it: prefill computed by vLLM in the built-in order and ours.

The prompts of one task (S-RT, M-RT, M-RS and ATC, English, short lengths so a
CPU can afford it) go to the CPU vLLM server of ``tools/vllm_cpu.sh`` the way
OpenCompass's inferencer sends them: dataset after dataset, ``batch_size``
requests at once (1, 8 and 32 in flight), a batch never spanning two datasets.
Orders:

* ``builtin``: OpenCompass's ``needlebench_v2`` configs (a dataset per length and
  depth, the repeats inside; M-RS per needle count; ATC per needle count);
* ``ours_datasets``: our datasets whole, one after another (before the stream
  interleaved them; simulated only);
* ``ours``: our partitioner's stream (``needlebench/planning/stream.py``): S-RT
  and M-RS pieces of one haystack together, each piece a dataset part.

The KV cache is sized like a GPU serving long prompts, a small multiple of the
longest prompt (``--num-gpu-blocks-override``). Reported per (cache, concurrency,
order): wall time, prompt tokens computed (vLLM's per-request count: prompt
tokens less ``cached_tokens``), and the share of the reusable prefix
captured, where "reusable" is what an unbounded cache saves over the whole task
(order-independent: every distinct block computed once; the limit).
``bench/prefix_cache.py`` replays the cache for each setting; the engine runs
check it.

    .venv/bin/python -m bench.engine_order               # simulate, then every engine setting in one run
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.prefix_cache import replay

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = Path(os.environ.get("VLLM_MODEL_DIR") or ROOT / ".cache" / "smollm2-135m-hf")
TASK_ORDER = ("srt", "mrt", "mrs", "atc")


@dataclass(frozen=True)
class Request:
    """One prompt and the coordinates that decide its place in each order."""

    task: str
    length: int
    depth: float  # S-RT/M-RS: the (first) needle's depth; M-RT, ATC: 0
    count: int  # needles
    repeat: int
    prompt: str
    dataset: int  # index among our datasets (partitioner order)
    row: int  # row in that dataset
    group: Any  # haystack group (planning/stream.py)
    position: float  # first needle's token position
    sample_id: str = ""  # the sample's id
    gold: Any = None  # its structured gold, for grading an answer (bench/engine_outputs.py)


Order = list[list[Request]]  # pieces: runs of one dataset (a batch never spans two)


def workload(
    lengths: Sequence[int],
    depths: Sequence[float],
    repeats: int,
    mrs_counts: Sequence[int],
    atc_counts: Sequence[int],
    atc_questions: Sequence[str],
) -> list[list[Request]]:
    """Our datasets of the benchmark's task, in the partitioner's order, each its rows as generated."""
    from needlebench.opencompass.configs import atc_datasets, needlebench_datasets
    from needlebench.tasks import config_params, get_task, make_params

    configs = needlebench_datasets(
        suite="8k",
        tasks=["srt", "mrt", "mrs"],
        langs=["en"],
        lengths=list(lengths),
        depths=list(depths),
        repeats=repeats,
        num_needles=list(mrs_counts),
    ) + atc_datasets(langs=["en"], needle_counts=list(atc_counts), question_types=list(atc_questions), repeats=repeats)
    out: list[list[Request]] = []
    for di, d in enumerate(configs):
        task = d["task"]
        rows = []
        for ri, s in enumerate(get_task(task).generate(make_params(task, **config_params(d)))):
            m = s.meta
            count = m.get("num_needles") or len(m.get("depths") or [0]) or 1
            prefix_group = get_task(task).prefix_group
            group, pos = prefix_group("en", m) if prefix_group else (None, 0.0)
            rows.append(
                Request(
                    task,
                    m.get("length", 0),
                    float(m.get("depth", 0.0)),
                    count,
                    m["repeat"],
                    s.prompt,
                    di,
                    ri,
                    group,
                    pos,
                    s.id,
                    s.gold,
                )
            )
        out.append(rows)
    return out


def builtin_order(datasets: Sequence[Sequence[Request]]) -> Order:
    """OpenCompass v2's datasets: per (length, depth) ascending, repeats inside; M-RS per count; ATC per count."""
    rank = {t: i for i, t in enumerate(TASK_ORDER)}

    def cell(r: Request) -> tuple:
        if r.task == "mrt":
            return (rank[r.task], 0, r.length, 0.0)
        if r.task == "atc":
            return (rank[r.task], r.count, 0, 0.0)
        return (rank[r.task], r.count if r.task == "mrs" else 0, r.length, r.depth)

    pieces: dict[tuple, list[Request]] = {}
    for r in sorted((r for d in datasets for r in d), key=lambda r: (cell(r), r.repeat, r.row)):
        pieces.setdefault(cell(r), []).append(r)
    return list(pieces.values())


def datasets_order(datasets: Sequence[Sequence[Request]]) -> Order:
    """Our datasets whole, one after another (what the partitioner sent before it interleaved them)."""
    return [list(d) for d in datasets if d]


def stream_order(datasets: Sequence[Sequence[Request]], batch_size: int = 1) -> Order:
    """Our partitioner's stream (``planning/stream.py``), cut into its pieces (runs of one dataset)."""
    from needlebench.planning.stream import HEAD_CHARS, interleave

    stream = interleave(
        [[(r.group, r.position) for r in d] for d in datasets],
        [d[0].prompt[:HEAD_CHARS] if d else "" for d in datasets],
        batch_size,
    )
    pieces: Order = []
    for di, ri in stream:
        if not pieces or pieces[-1][-1].dataset != di:
            pieces.append([])
        pieces[-1].append(datasets[di][ri])
    return pieces


def batches(order: Order, concurrency: int) -> list[int]:
    """Batch sizes as OpenCompass's inferencer cuts them: ``concurrency`` at a time inside each piece."""
    out = []
    for piece in order:
        out.extend(min(concurrency, len(piece) - i) for i in range(0, len(piece), concurrency))
    return out


def tokenize(requests: Sequence[Request]) -> dict[str, list[int]]:
    """Token ids as the server sees them (SmolLM2's chat template around each prompt), by prompt."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR))
    return {
        r.prompt: tok.apply_chat_template(
            [{"role": "user", "content": r.prompt}], add_generation_prompt=True, tokenize=True
        )
        for r in requests
    }


def simulate(
    orders: dict[int, dict[str, Order]],
    tokens: dict[str, list[int]],
    multiples: Sequence[float],
    concurrencies: Sequence[int],
    block_size: int,
    max_tokens: int,
) -> dict[str, Any]:
    """Simulated prefill per order, cache size (a multiple of the longest request's blocks) and concurrency."""
    any_order = [tokens[r.prompt] for piece in next(iter(next(iter(orders.values())).values())) for r in piece]
    longest = max(-(-(len(t) + max_tokens) // block_size) for t in any_order)
    floor = replay(any_order, None, block_size, max_tokens)
    reusable = floor.prompt_tokens - floor.computed
    rows = []
    for mult in multiples:
        blocks = max(longest, int(round(mult * longest)))
        for c in concurrencies:
            row: dict[str, Any] = {"cache_multiple": mult, "blocks": blocks, "concurrency": c}
            for name, order in orders[c].items():
                toks = [tokens[r.prompt] for piece in order for r in piece]
                r = replay(toks, blocks, block_size, max_tokens, batches(order, c))
                sizes = batches(order, c)
                row[name] = {
                    "computed": r.computed,
                    "captured": (r.hit / reusable) if reusable else 1.0,
                    "mean_batch": sum(sizes) / len(sizes),
                    "pieces": len(order),
                }
            rows.append(row)
    return {
        "prompt_tokens": floor.prompt_tokens,
        "limit_computed": floor.computed,
        "reusable": reusable,
        "longest_blocks": longest,
        "rows": rows,
    }


# -- the engine ----------------------------------------------------------------------------------
def _counters(port: int) -> dict[str, float]:
    """vLLM's cumulative counters (the names of vLLM 0.14 and later)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for name in ("prefix_cache_queries", "prefix_cache_hits", "prompt_tokens", "num_preemptions"):
        m = re.search(rf"^vllm:{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def post_json(port: int, path: str, body: dict[str, Any] | None, timeout: float = 1800) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read().decode()
    return json.loads(raw) if raw.strip().startswith("{") else {}


def cached_tokens(usage: dict[str, Any] | None) -> int:
    """Prompt tokens a reply's ``usage`` says the prefix cache served (0 where the server does not say)."""
    return int(((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


def replies(
    port: int, name: str, order: Order, concurrency: int, max_tokens: int
) -> list[tuple[Request, dict[str, Any]]]:
    """Each request with the server's chat completion, sent as OpenCompass's inferencer sends them: ``concurrency``
    at once inside each piece (a batch never spans two), the next batch after the last answer, greedy.

    Args:
        port: the server's port on 127.0.0.1.
        name: the served model's name.
        order: the pieces, in the order sent.
        concurrency: requests in flight.
        max_tokens: each request's output budget.
    """

    def one(r: Request) -> tuple[Request, dict[str, Any]]:
        body = {
            "model": name,
            "messages": [{"role": "user", "content": r.prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        return r, post_json(port, "/v1/chat/completions", body)

    out: list[tuple[Request, dict[str, Any]]] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for piece in order:
            for i in range(0, len(piece), concurrency):
                out.extend(pool.map(one, piece[i : i + concurrency]))
    return out


def engine_run(port: int, name: str, order: Order, concurrency: int, max_tokens: int) -> dict[str, Any]:
    """Send ``order`` as OpenCompass does (``concurrency`` at once inside each piece, waiting for the batch)
    after emptying the prefix cache.

    Prefill computed is vLLM's own per-request count, summed: each response's prompt tokens less its
    ``usage.prompt_tokens_details.cached_tokens`` (what the prefix cache held when the request was
    scheduled). vLLM's ``prefix_cache_queries``/``hits`` counters are kept beside it, but they count a
    request again each time the scheduler looks it up and finds no room, so under concurrency with a
    small cache they overstate the work (``queried_not_hit``).
    """
    post_json(port, "/reset_prefix_cache", None, timeout=60)
    before = _counters(port)
    start = time.perf_counter()

    answered = replies(port, name, order, concurrency, max_tokens)
    usages = [reply["usage"] for _, reply in answered]
    counts = [(usage["prompt_tokens"], cached_tokens(usage)) for usage in usages]
    wall = time.perf_counter() - start
    after = _counters(port)
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    prompt = sum(p for p, _ in counts)
    cached = sum(c for _, c in counts)
    # the run ledger's count: each reply read as the API model reads it (RequestCost.computed_tokens), summed
    from openai.types.chat import ChatCompletion

    from needlebench.opencompass.api import response_cost

    costs = [response_cost(ChatCompletion.model_validate(reply), 0.0, None) for _, reply in answered]
    return {
        "wall_s": wall,
        "computed": prompt - cached,
        "ledger_computed": sum(c.computed_tokens for c in costs if c.computed_tokens is not None),
        "ledger_reported": sum(c.computed_tokens is not None for c in costs),
        "cache_hit": cached,
        "prompt_tokens": prompt,
        "queried_not_hit": int(delta["prefix_cache_queries"] - delta["prefix_cache_hits"]),
        "preemptions": int(delta["num_preemptions"]),
    }


def vllm_server(cmd: str, env: dict[str, str]) -> str:
    r = subprocess.run(
        ["bash", str(ROOT / "tools" / "vllm_cpu.sh"), cmd], env=env, capture_output=True, text=True, timeout=900
    )
    if r.returncode != 0:
        raise RuntimeError(f"tools/vllm_cpu.sh {cmd} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def engine(
    orders: dict[int, dict[str, Order]],
    concurrencies: Sequence[int],
    blocks: int,
    block_size: int,
    max_model_len: int,
    max_tokens: int,
    port: int,
    done: Any,
    cell_at: Sequence[int] = (),
) -> None:
    """One server with a ``blocks``-block cache; each (concurrency, order) replayed on an emptied cache.

    ``done(concurrency, order, result)`` is called after each run, so a long sweep keeps what it measured.
    ``ours_cell`` (pieces of one cell, batches cut short) runs at the concurrencies in ``cell_at`` only.
    """
    env = {
        **os.environ,
        "VLLM_PORT": str(port),
        "VLLM_SERVER_DEV_MODE": "1",  # for /reset_prefix_cache between the orders
        "VLLM_MAX_MODEL_LEN": str(max_model_len),
        "VLLM_EXTRA_ARGS": f"--num-gpu-blocks-override {blocks} --block-size {block_size} --max-num-seqs 64 "
        "--enable-prompt-tokens-details",
    }
    vllm_server("down", env)
    out = vllm_server("up", env)
    name = re.findall(r"^served model: (\S+)$", out, re.M)[0]
    try:
        # one warm-up request outside the measurement (first-call costs of the engine)
        first = next(iter(next(iter(orders.values())).values()))
        engine_run(port, name, [first[0][:1]], 1, max_tokens)
        version = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=30).read())["version"]
        ran: dict[tuple, tuple[int, dict[str, Any]]] = {}  # schedule -> (concurrency, result)
        for c in concurrencies:
            for order in ("builtin", "ours", *(("ours_cell",) if c in cell_at else ())):
                # the same requests in the same batches as a run already made (every piece shorter than
                # both concurrencies): the same schedule, not sent again
                schedule = (
                    tuple(r.prompt for piece in orders[c][order] for r in piece),
                    tuple(batches(orders[c][order], c)),
                )
                if schedule in ran:
                    done(c, order, {**ran[schedule][1], "same_schedule_as": ran[schedule][0]})
                    continue
                result = {**engine_run(port, name, orders[c][order], c, max_tokens), "vllm": version}
                ran[schedule] = (c, result)
                done(c, order, result)
    finally:
        vllm_server("down", env)


def table(result: dict[str, Any]) -> str:
    """Per setting and order: prefill computed and reuse captured, the engine's counters first, the model's after."""
    sim = result["simulated"]
    lines = [
        f"prompt tokens {sim['prompt_tokens']}; the limit (unbounded cache, any order) computes "
        f"{sim['limit_computed']}, so {sim['reusable']} are reusable",
        "| cache (x longest) | in flight | order | computed: vLLM (model) | / built-in | reuse captured: vLLM (model) "
        "| wall | mean batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    engine_rows = {(e["cache_multiple"], e["concurrency"]): e for e in result.get("engine", [])}
    for row in sim["rows"]:
        e = engine_rows.get((row["cache_multiple"], row["concurrency"]), {})
        for name in ("builtin", "ours", "ours_cell", "ours_datasets"):
            m, x, base = row[name], e.get(name), e.get("builtin")
            got = f"{x['computed']} ({m['computed']})" if x else f"- ({m['computed']})"
            ratio = f"{x['computed'] / base['computed']:.2f}" if x and base else "-"
            ratio += f" ({m['computed'] / row['builtin']['computed']:.2f})"
            cap = f"{100 * (sim['prompt_tokens'] - x['computed']) / sim['reusable']:.0f}%" if x else "-"
            cap += f" ({100 * m['captured']:.0f}%)"
            wall = f"{x['wall_s']:.0f} s" if x else "-"
            lines.append(
                f"| {row['cache_multiple']:g} | {row['concurrency']} | {name} | {got} | {ratio} | {cap} | {wall} "
                f"| {m['mean_batch']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[800, 1600])
    parser.add_argument("--depths", type=float, nargs="+", default=[0, 50, 100])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--mrs-counts", type=int, nargs="+", default=[2])
    parser.add_argument("--atc-counts", type=int, nargs="+", default=[2])
    parser.add_argument("--atc-questions", nargs="+", default=["eldest_ancestor"])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=2)
    parser.add_argument("--multiples", type=float, nargs="+", default=[1.2, 1.5, 3])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--engine-multiples", type=float, nargs="*", default=[1.2, 1.5, 3])
    parser.add_argument("--engine-cell-at", type=int, nargs="*", default=[8])
    parser.add_argument(
        "--engine-concurrency", type=int, nargs="*", help="in-flight settings sent to the engine (default: all)"
    )
    parser.add_argument("--port", type=int, default=8013)
    parser.add_argument("--simulate-only", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "bench" / "engine_order.json"))
    args = parser.parse_args(argv)

    datasets = workload(args.lengths, args.depths, args.repeats, args.mrs_counts, args.atc_counts, args.atc_questions)
    orders = {
        c: {
            "builtin": builtin_order(datasets),
            "ours": stream_order(datasets, c),
            "ours_cell": stream_order(datasets, 1),
            "ours_datasets": datasets_order(datasets),
        }
        for c in args.concurrency
    }
    tokens = tokenize([r for d in datasets for r in d])
    result: dict[str, Any] = {
        "workload": {
            **{k: v for k, v in vars(args).items() if k not in ("out", "port", "simulate_only")},
            "requests": sum(len(d) for d in datasets),
            "datasets": [f"{d[0].task}:{len(d)}" for d in datasets if d],
            "pieces": {f"{name} at {c}": len(o) for c, by in orders.items() for name, o in by.items()},
        },
    }
    result["simulated"] = simulate(orders, tokens, args.multiples, args.concurrency, args.block_size, args.max_tokens)
    print(table(result), flush=True)
    if not args.simulate_only:
        longest_blocks = result["simulated"]["longest_blocks"]
        result["engine"] = []
        for mult in args.engine_multiples:
            blocks = int(round(mult * longest_blocks))
            max_model_len = min(8192, (blocks - 1) * args.block_size)
            rows: dict[int, dict[str, Any]] = {}

            def done(
                c: int, order: str, res: dict[str, Any], mult: float = mult, blocks: int = blocks, rows: dict = rows
            ) -> None:
                if c not in rows:
                    rows[c] = {"cache_multiple": mult, "blocks": blocks, "concurrency": c}
                    result["engine"].append(rows[c])
                rows[c][order] = res
                print(f"engine {mult:g}x c={c} {order}: {res}", flush=True)
                Path(args.out).write_text(json.dumps(result, indent=1) + "\n")

            engine(
                orders,
                args.engine_concurrency or args.concurrency,
                blocks + 1,
                args.block_size,
                max_model_len,
                args.max_tokens,
                args.port,
                done,
                args.engine_cell_at,
            )
        print(table(result))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
