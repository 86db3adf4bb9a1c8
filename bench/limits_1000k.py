"""The 1000k suite end to end through the real ``opencompass`` with the oracle model, measured.

Runs ``opencompass`` on a generated config (the oracle model; ``needlebench_datasets(suite="1000k")``
with the given repeats; ``runtime(num_shards=8)`` as the shipped 1000k config shards it) with an empty
dataset cache, and reports:

* wall time per stage: dataset build (the partitioner's ``materialize_many`` workers), infer tasks,
  eval tasks, summary (from when each kind of process was first and last seen);
* peak RSS of every process (polled every 0.2 s from ``/proc``), and the largest per kind;
* disk used: the dataset cache, predictions, results, summary, logs (and the peak over the run);
* the summary: every cell of ``needlebench_summary.csv`` must be 100.

With ``--cap-gb``, the run goes into a fresh memory cgroup (v1 or v2, root needed) with that limit;
where it stops (one message naming the stage and limit), the cap is raised by ``--raise-gb`` and the
run resumed with ``-r``, and the answers the oracle gave before and after are counted, so a resume
that redid finished work shows.

    nice -n 10 .venv/bin/python -m bench.limits_1000k --repeats 1 --out bench/limits_1000k.json
    nice -n 10 .venv/bin/python -m bench.limits_1000k --repeats 1 --cap-gb 2 --out bench/limits_1000k_capped.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
OPENCOMPASS = str(Path(sys.executable).parent / "opencompass")
RUN = "20000101_000000"  # a fixed run folder, so a resume (-r) finds it

CONFIG = """_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
datasets = needlebench_datasets(suite={suite!r}, repeats={repeats}{extra})
models = [dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", max_seq_len=2_000_000,
               max_out_len=64, batch_size=1, record={record!r}, datasets=datasets, run_cfg=dict(num_gpus=0))]
infer, eval = runtime(num_shards={shards}, max_workers=1, eval_workers={eval_workers})
summarizer = dict(type=SUMMARIZER)
"""


def _kind(cmdline: list[str]) -> str:
    """Which stage a process of the run belongs to, from its command line."""
    text = " ".join(cmdline)
    if "needlebench.cache.arrow_rows" in text:
        return "build"
    if "openicl_infer" in text or "OpenICLInfer" in text:
        return "infer"
    if "openicl_eval" in text or "OpenICLEval" in text:
        return "eval"
    if "opencompass" in text and "tasks" not in text:
        return "driver"
    return "other"


class Monitor(threading.Thread):
    """Polls the run's process tree: peak RSS per process, first/last sighting per kind, peak disk."""

    def __init__(self, root_pid: int, disk: Path) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.disk = disk
        self.disk_start = shutil.disk_usage(disk).used
        self.disk_peak = 0
        self.procs: dict[int, dict[str, Any]] = {}
        self.seen: dict[str, list[float]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                root = psutil.Process(self.root_pid)
                family = [root, *root.children(recursive=True)]
            except psutil.Error:
                family = []
            now = time.time()
            for p in family:
                try:
                    info = self.procs.get(p.pid)
                    if info is None:
                        cmd = p.cmdline()
                        # the shells OpenCompass's runner starts its tasks through are not tasks
                        kind = "other" if p.name() in ("sh", "bash", "dash") else _kind(cmd)
                        info = self.procs[p.pid] = dict(kind=kind, cmd=" ".join(cmd)[-200:], peak_rss=0)
                    info["peak_rss"] = max(info["peak_rss"], p.memory_info().rss)
                except psutil.Error:
                    continue
                if info["kind"] in ("build", "infer", "eval"):
                    span = self.seen.setdefault(info["kind"], [now, now])
                    span[1] = now
            self.disk_peak = max(self.disk_peak, shutil.disk_usage(self.disk).used - self.disk_start)
            self.stop.wait(0.2)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _run(config: Path, work: Path, env: dict[str, str], cgroup: Path | None, resume: bool) -> dict[str, Any]:
    """One ``opencompass`` invocation, monitored."""
    cmd = [OPENCOMPASS, str(config), "-w", str(work), "-r", RUN]

    def enter_cgroup() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    log = work.parent / f"opencompass_{int(time.time())}.log"
    start = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup)
        mon = Monitor(proc.pid, work)
        mon.start()
        rc = proc.wait()
        mon.stop.set()
        mon.join()
    end = time.time()
    tail = log.read_text(errors="replace").splitlines()[-3:]
    per_kind: dict[str, float] = {}
    for info in mon.procs.values():
        per_kind[info["kind"]] = max(per_kind.get(info["kind"], 0), info["peak_rss"])
    stages = {k: round(b - a, 1) for k, (a, b) in mon.seen.items()}
    last = max((b for _, b in mon.seen.values()), default=start)
    stages["driver_rest"] = round((end - start) - sum(stages.values()), 1)
    stages["summary_after_last_task"] = round(end - last, 1)
    return dict(
        rc=rc,
        resume=resume,
        wall_s=round(end - start, 1),
        stage_s=stages,
        peak_rss_gb_per_kind={k: round(v / 1e9, 3) for k, v in per_kind.items()},
        processes=[
            dict(kind=i["kind"], peak_rss_gb=round(i["peak_rss"] / 1e9, 3))
            for i in sorted(mon.procs.values(), key=lambda i: i["kind"])
            if i["kind"] != "other"
        ],
        disk_peak_gb=round(mon.disk_peak / 1e9, 3),
        log_tail=tail,
    )


def _cgroup(limit: int) -> Path:
    """A fresh memory cgroup with ``limit`` bytes (v2 where mounted so, else v1)."""
    base = Path("/sys/fs/cgroup")
    name = f"needlebench-bench-{os.getpid()}"
    if (base / "cgroup.controllers").exists():
        folder = base / name
        folder.mkdir()
        (folder / "memory.max").write_text(str(limit))
    else:
        folder = base / "memory" / name
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text(str(limit))
    return folder


def _set_limit(folder: Path, limit: int) -> None:
    target = folder / ("memory.max" if (folder / "memory.max").exists() else "memory.limit_in_bytes")
    target.write_text(str(limit))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="1000k")
    ap.add_argument("--repeats", type=int, default=1, help="samples per cell and task (the suite's: 10/25/10)")
    ap.add_argument("--depths", default="", help="comma-separated depths (default: the suite's)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--eval-workers", type=int, default=2)
    ap.add_argument("--cap-gb", type=float, default=0, help="run in a memory cgroup with this limit")
    ap.add_argument("--raise-gb", type=float, default=8, help="the limit a stopped capped run resumes under")
    ap.add_argument("--scratch", default="/tmp", help="where the cache and work dir go (removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the cache and work dir")
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="nb-limits-", dir=args.scratch))
    cache, work, record = scratch / "cache", scratch / "work", scratch / "oracle_calls.jsonl"
    (work / RUN).mkdir(parents=True)
    extra = f", depths=[{args.depths}]" if args.depths else ""
    config = scratch / "eval_oracle_1000k.py"
    config.write_text(
        CONFIG.format(
            record=str(record),
            suite=args.suite,
            repeats=args.repeats,
            extra=extra,
            shards=args.shards,
            eval_workers=args.eval_workers,
        )
    )
    env = {**os.environ, "NEEDLEBENCH_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cgroup = _cgroup(int(args.cap_gb * 2**30)) if args.cap_gb else None
    runs = []
    try:
        runs.append(_run(config, work, env, cgroup, resume=False))
        if runs[-1]["rc"] != 0 and cgroup is not None:
            calls_before = len(record.read_text().splitlines()) if record.exists() else 0
            runs[-1]["oracle_calls"] = calls_before
            _set_limit(cgroup, int(args.raise_gb * 2**30))
            runs.append(_run(config, work, env, cgroup, resume=True))
        run_dir = work / RUN
        summary_csv = run_dir / "summary" / "needlebench_summary.csv"
        cells = list(csv.DictReader(summary_csv.open(encoding="utf-8"))) if summary_csv.exists() else []
        scores = sorted({float(r["oracle"]) for r in cells if r.get("oracle") not in (None, "")})
        calls = record.read_text().splitlines() if record.exists() else []
        rows = sum(json.loads(x)["prompts"] for x in calls)
        predicted = sum(
            len(json.loads(p.read_text(encoding="utf-8"))) for p in (run_dir / "predictions" / "oracle").glob("*.json")
        )
        result = dict(
            suite=args.suite,
            repeats=args.repeats,
            depths=args.depths or "suite default",
            lengths="suite default",
            shards=args.shards,
            eval_workers=args.eval_workers,
            cap_gb=args.cap_gb or None,
            raise_gb=args.raise_gb if args.cap_gb else None,
            machine=dict(cpus=os.cpu_count(), mem_gb=round(psutil.virtual_memory().total / 1e9, 1)),
            runs=runs,
            disk_gb=dict(
                cache=round(_du(cache) / 1e9, 3),
                predictions=round(_du(run_dir / "predictions") / 1e9, 3),
                results=round(_du(run_dir / "results") / 1e9, 3),
                summary=round(_du(run_dir / "summary") / 1e9, 4),
                logs=round(_du(run_dir / "logs") / 1e9, 4),
                total=round(_du(scratch) / 1e9, 3),
            ),
            samples_predicted=predicted,
            oracle_answers=rows,
            summary_cells=len(cells),
            summary_scores=scores,
        )
    finally:
        if cgroup is not None:
            for _ in range(50):
                try:
                    cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.2)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
