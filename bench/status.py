"""``needlebench status`` on a 1000k run folder at the suite's default repeats, half done: its CPU time.

The plan is the real one (``needlebench plan``'s ``plan_config`` on the oracle model, ``runtime(num_shards=8)``
as the shipped 1000k config shards it; the dataset cache is built first, about 150 s and 18 GB here, in
``--scratch``, removed afterwards). The run folder is then laid out as a run killed half way leaves it: in each
shard, the first half of its pieces has its whole prediction file, the next piece a ``tmp_`` log holding half
its rows, the rest nothing; the progress log has a step per batch of 4 (the shipped model's batch size) for
every sample predicted. The prediction files hold short prompts where a real run holds a million tokens: status
reads a whole file's first and last bytes only, and a ``tmp_`` log not at all where the progress log's step is
newer, so their size does not change what it costs (``runfolder/status.py``).

Measured: the CPU time (user + sys, from the kernel's accounting of the child) of a fresh ``needlebench status
RUN --json`` process and of the table, each run ``--times`` times (the median and the largest), and of a second
read by the same ``StatusReader`` (one redraw of ``--watch`` or the live view).

    .venv/bin/python -m bench.status --out bench/status_1000k.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from needlebench.planning.run import RunPlan
from needlebench.runfolder.plan_file import StoredPlan, write_stored
from needlebench.runfolder.progress_log import Step, record_progress

CONFIG = """_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
datasets = needlebench_datasets(suite="1000k")
models = [dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", max_seq_len=2_000_000,
               max_out_len=64, batch_size=4, datasets=datasets, run_cfg=dict(num_gpus=0))]
infer, eval = runtime(num_shards=8)
summarizer = dict(type=SUMMARIZER)
"""
BATCH = 4


def _entry(i: int) -> dict:
    return {"origin_prompt": f"prompt {i}", "prediction": "answer", "gold": "answer"}


def lay_out(run: Path, plan: RunPlan) -> dict[str, int]:
    """Write the folder of a run killed half way (see the module's docstring); what it holds."""
    ended = subprocess.Popen(["true"])
    ended.wait()  # the run's process, ended: a stopped run, so status also works out the command
    write_stored(
        run,
        StoredPlan(
            plan,
            history=(
                {"stage": "fresh", "request": {}, "at": time.time(), "host": socket.gethostname(), "pid": ended.pid},
            ),
        ),
    )
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "20000101_000000_1.py").write_text(CONFIG, encoding="utf-8")
    counts = {"pieces": 0, "whole": 0, "partial": 0, "samples": 0, "predicted": 0, "steps": 0}
    t = time.time() - 3600
    for model in plan.models:
        folder = run / "predictions" / model.abbr
        folder.mkdir(parents=True)
        for shard in model.shards:
            half = len(shard.parts) // 2
            for k, part in enumerate(shard.parts):
                rows = part.end - part.start
                counts["pieces"] += 1
                counts["samples"] += rows
                done = rows if k < half else rows // 2 if k == half else 0
                if k < half:
                    entries = {str(i): _entry(i) for i in range(rows)}
                    (folder / f"{part.abbr}.json").write_text(json.dumps(entries, indent=4), encoding="utf-8")
                    counts["whole"] += 1
                elif k == half and done:
                    lines = "".join(json.dumps({str(i): _entry(i)}) + "\n" for i in range(done))
                    (folder / f"tmp_{part.abbr}.jsonl").write_text(lines, encoding="utf-8")
                    counts["partial"] += 1
                if not done:
                    continue
                record_progress(folder, Step(part.abbr, t, 0, 0))
                for n in range(BATCH, done + BATCH, BATCH):
                    t += 0.5
                    record_progress(folder, Step(part.abbr, t, min(n, done), min(BATCH, done - n + BATCH)))
                    counts["steps"] += 1
                counts["predicted"] += done
    return counts


def _child_cpu(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/status_1000k.json")
    ap.add_argument("--scratch", default="/tmp", help="where the cache and run folder go (removed afterwards)")
    ap.add_argument("--times", type=int, default=5, help="fresh status processes per form")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="needlebench-status-", dir=args.scratch))
    try:
        os.environ["NEEDLEBENCH_CACHE"] = str(scratch / "cache")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from needlebench.commands.plan import plan_config
        from needlebench.runfolder.status import StatusReader

        config = scratch / "eval_oracle_1000k.py"
        config.write_text(CONFIG, encoding="utf-8")
        start = time.perf_counter()
        plan = plan_config(str(config)).run
        planned_s = time.perf_counter() - start
        shutil.rmtree(scratch / "cache")
        run = scratch / "work" / "20000101_000000"
        counts = lay_out(run, plan)
        status = [str(Path(sys.executable).parent / "needlebench"), "status", str(run)]
        rows = {}
        for form, extra in (("json", ["--json"]), ("table", [])):
            cpu, wall = [], []
            for _ in range(args.times):
                c, w, done = _child_cpu(status + extra)
                cpu.append(c)
                wall.append(w)
            rows[form] = {
                "cpu_s_median": round(statistics.median(cpu), 3),
                "cpu_s_max": round(max(cpu), 3),
                "wall_s_median": round(statistics.median(wall), 3),
            }
        answer = json.loads(_child_cpu(status + ["--json"])[2].stdout)
        reader = StatusReader(run)
        reader.read()
        start = time.process_time()
        reader.read()
        again = time.process_time() - start
        result = {
            "what": "needlebench status on a 1000k run folder (oracle model, default repeats, 8 shards), half done and stopped",
            "machine": {"cpus": os.cpu_count()},
            "plan_s": round(planned_s, 1),
            "folder": counts,
            "status_said": {k: answer[k] for k in ("state", "stage", "done", "planned", "commands")},
            "fresh_process": rows,
            "second_read_cpu_s": round(again, 4),
            "limit_cpu_s": 2.0,
        }
        assert answer["done"] == counts["predicted"] and answer["planned"] == counts["samples"], answer
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
