"""Benchmark against OpenCompass 0.5.4's built-in NeedleBench v2, on the same machine, in one run.

    python -m bench.run            # full: 128k generation x3 (A/B alternating), 1000k RSS, 32k pipeline
    python -m bench.run --tiny     # the 4k suite's S-RT, a small pipeline, one run of each (what the test runs)

Prints one table and writes it as JSON (default bench/results.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
OC = str(Path(PY).parent / "opencompass")


def _gen(impl: str, suite: str, workdir: Path, cache: Path, task: str | None) -> dict[str, Any]:
    env = dict(os.environ, NEEDLEBENCH_CACHE=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [PY, "-m", "bench.gen_worker", impl, suite, str(workdir), *([task] if task else [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def generation(
    suite: str, runs: int, workdir: Path, with_builtin: bool = True, task: str | None = None
) -> dict[str, Any]:
    """A/B alternating runs; the corpus token cache is warm for ours after the first (as in real use).

    Args:
        task: one task of the suite (``"srt"``) instead of all of it.
    """
    cache = workdir / "cache"
    results: dict[str, list[dict[str, Any]]] = {"builtin": [], "ours": []}
    for _ in range(runs):
        for impl in ("builtin", "ours") if with_builtin else ("ours",):
            results[impl].append(_gen(impl, suite, workdir, cache, task))
    row: dict[str, Any] = {"suite": suite, "task": task or "all", "runs": runs}
    for impl, rs in results.items():
        if not rs:
            continue
        secs = statistics.median(r["seconds"] for r in rs)
        row[impl] = {
            "seconds": secs,
            "samples": rs[0]["samples"],
            "mb": rs[0]["bytes"] / 1e6,
            "mb_per_s": rs[0]["bytes"] / 1e6 / secs,
            "peak_rss_gb": max(r["peak_rss"] for r in rs) / 1e9,
        }
    if with_builtin:
        row["speedup"] = row["builtin"]["seconds"] / row["ours"]["seconds"]
    return row


_BUILTIN_CFG = """
from mmengine.config import read_base
with read_base():
    from opencompass.configs.datasets.needlebench_v2.needlebench_v2_{suite}.needlebench_v2_{suite} import needlebench_datasets
from opencompass.partitioners import NaivePartitioner, NumWorkerPartitioner
from opencompass.runners import LocalRunner
from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask
from needlebench.opencompass.instant import InstantModel

datasets = needlebench_datasets{subset}
models = [dict(type=InstantModel, abbr="instant", path="instant", max_seq_len=2000000, max_out_len=16, batch_size=64)]
infer = dict(partitioner=dict(type=NumWorkerPartitioner, num_worker={workers}),
             runner=dict(type=LocalRunner, max_num_workers={workers}, task=dict(type=OpenICLInferTask)))
eval = dict(partitioner=dict(type=NaivePartitioner, n=64),
            runner=dict(type=LocalRunner, max_num_workers=2, task=dict(type=OpenICLEvalTask)))
"""

_OURS_CFG = """
_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime

models = [dict(type="needlebench.opencompass.instant.InstantModel", abbr="instant", path="instant",
               max_seq_len=2000000, max_out_len=16, batch_size=64)]
datasets = needlebench_datasets(suite="{suite}"{subset})
infer, eval = runtime(num_shards={workers}, max_workers={workers}, eval_workers={workers})
summarizer = dict(type=SUMMARIZER)
"""


def pipeline(suite: str, workdir: Path, tiny: bool) -> dict[str, Any]:
    """Full ``opencompass`` runs (infer + eval + summarize) with an instant model, built-in vs ours."""
    row: dict[str, Any] = {"suite": suite}
    workers = 1 if tiny else 2  # tiny (the test): one task per stage, each an OpenCompass import less
    cfgs = {
        "builtin": _BUILTIN_CFG.format(suite=suite, subset="[:2]" if tiny else "", workers=workers),
        "ours": _OURS_CFG.format(
            suite=suite,
            subset=', tasks=["srt"], lengths=[1000], depths=[0, 100], repeats=1' if tiny else "",
            workers=workers,
        ),
    }
    for impl, text in cfgs.items():
        cfg = workdir / f"pipeline_{impl}.py"
        cfg.write_text(text)
        env = dict(
            os.environ,
            NEEDLEBENCH_CACHE=str(workdir / f"pipeline_cache_{impl}"),
            PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "offline_hub"), str(ROOT)]),
            HF_HUB_OFFLINE="1",
        )
        start = time.perf_counter()
        out = subprocess.run(
            [OC, str(cfg), "-w", str(workdir / f"pipeline_out_{impl}")],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
        if out.returncode != 0:
            raise RuntimeError(f"{impl} pipeline failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        row[impl] = {"seconds": seconds}
    row["speedup"] = row["builtin"]["seconds"] / row["ours"]["seconds"]
    return row


def prefix_share(suite: str, shards: int) -> dict[str, Any]:
    """Share of S-RT prefill tokens an automatic prefix cache could reuse, in our request order.

    For each prompt: its longest common token prefix with any earlier prompt of the same shard
    (and the same repeat), summed, over all prompt tokens.
    """
    from needlebench.context.tokenizer import get_encoding
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.planning.shards import shard_ranges
    from needlebench.tasks import config_params, get_task, make_params

    enc = get_encoding()
    prompts: list[tuple[int, str, int]] = []  # (group, prompt, tokens)
    for gi, d in enumerate(needlebench_datasets(suite=suite, tasks=["srt"])):
        params = make_params(d["task"], **config_params(d))
        for s in get_task("srt").generate(params):
            prompts.append((gi * 1000 + s.meta["repeat"], s.prompt, s.meta["prompt_tokens"]))
    ranges = shard_ranges([p[2] for p in prompts], shards)
    reused = total = 0
    for a, b in ranges:
        earlier: dict[int, list[np.ndarray]] = {}
        for group, prompt, tokens in prompts[a:b]:
            raw = np.frombuffer(prompt.encode("utf-8"), dtype=np.uint8)
            best = 0
            for prev in earlier.get(group, []):
                n = min(len(prev), len(raw))
                diff = np.flatnonzero(prev[:n] != raw[:n])
                best = max(best, int(diff[0]) if len(diff) else n)
            if best:
                # whole tokens of the shared text, minus one for a token that may straddle the split
                shared = prompt.encode("utf-8")[:best].decode("utf-8", errors="ignore")
                reused += max(0, len(enc.encode_ordinary(shared)) - 1)
            total += tokens
            earlier.setdefault(group, []).append(raw)
    return {
        "suite": suite,
        "shards": shards,
        "prompt_tokens": total,
        "reusable_tokens": reused,
        "share": reused / total if total else 0.0,
    }


def _table(result: dict[str, Any]) -> str:
    lines = ["| measure | built-in v2 | ours | ratio |", "|---|---|---|---|"]
    for g in result["generation"]:
        b, o = g.get("builtin"), g["ours"]
        if b:
            lines.append(
                f"| generate {g['suite']} suite{'' if g['task'] == 'all' else ', ' + g['task']} (median of {g['runs']}) | "
                f"{b['seconds']:.1f} s, "
                f"{b['mb_per_s']:.1f} MB/s, {b['peak_rss_gb']:.2f} GB | {o['seconds']:.1f} s, "
                f"{o['mb_per_s']:.1f} MB/s, {o['peak_rss_gb']:.2f} GB | {g['speedup']:.1f}x |"
            )
        else:
            lines.append(
                f"| generate {g['suite']} suite | not run | {o['seconds']:.1f} s, {o['mb_per_s']:.1f} MB/s, "
                f"{o['peak_rss_gb']:.2f} GB peak RSS | |"
            )
    p = result.get("pipeline")
    if p:
        lines.append(
            f"| opencompass run, {p['suite']} suite, instant model | {p['builtin']['seconds']:.0f} s | "
            f"{p['ours']['seconds']:.0f} s | {p['speedup']:.1f}x |"
        )
    s = result.get("prefix")
    if s:
        lines.append(
            f"| prefix-cache reusable share, S-RT {s['suite']}, {s['shards']} shards | | {100 * s['share']:.1f}% | |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="small suite, one run of each part")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    parser.add_argument("--skip-pipeline", action="store_true")
    args = parser.parse_args(argv)
    from bench.standin import build_standin

    with tempfile.TemporaryDirectory(prefix="nb-bench-") as tmp:
        workdir = Path(tmp)
        build_standin(workdir)
        runs = 1 if args.tiny else args.runs
        result: dict[str, Any] = {
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "mode": "tiny" if args.tiny else "full",
        }
        # tiny (the test): the 4k suite's S-RT, the task of the prefix share below
        result["generation"] = [
            generation("4k", 1, workdir, task="srt") if args.tiny else generation("128k", runs, workdir)
        ]
        if not args.tiny:
            result["generation"].append(generation("1000k", 1, workdir, with_builtin=False))
        if not args.skip_pipeline:
            result["pipeline"] = pipeline("4k" if args.tiny else "32k", workdir, args.tiny)
        result["prefix"] = prefix_share("4k" if args.tiny else "128k", 1 if args.tiny else 8)
    table = _table(result)
    result["table"] = table
    print(table)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
