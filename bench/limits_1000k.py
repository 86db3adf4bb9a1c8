"""The 1000k suite end to end through the real ``opencompass`` with the oracle model, measured.

Runs ``opencompass`` on a generated config (the oracle model; ``needlebench_datasets(suite="1000k")``
at the suite's default repeats unless ``--repeats`` says otherwise; ``runtime(num_shards=8)`` as the
shipped 1000k config shards it) with an empty dataset cache, and reports:

* wall time per stage: dataset build (the partitioner's ``materialize_many`` workers), infer tasks,
  eval tasks, summary (from when each kind of process was first and last seen);
* CPU time (user + sys) per stage: the pipeline's own time, which a loaded machine stretches less than
  wall time (the oracle generates nothing, so all of it is pipeline); in all (every process the run
  started, from the kernel's accounting) and per 1,000 samples;
* peak RSS of every process (polled every 0.2 s from ``/proc``) and its peak anonymous part (RSS less
  file-backed pages: the memory-mapped dataset pages a process has read count in RSS, but the kernel
  drops them under pressure, so a memory cap is about the anonymous part), and the largest per kind;
* disk used: the dataset cache, predictions, results, summary, logs (and the peak over the run);
* the summary: every cell of ``needlebench_summary.csv`` must be 100.

With ``--cap-gb``, the run goes into a fresh memory cgroup (v1 or v2, root needed) with that limit;
where it stops (one message naming the stage and limit), the cap is raised by ``--raise-gb`` and the
run resumed with ``-r``, and the answers the oracle gave before and after are counted, so a resume
that redid finished work shows. ``--stock`` runs OpenCompass's own ``GenInferencer`` and eval task
instead of the batch-bounded ones our configs set (the "before" of issue 35). ``--profile DIR`` runs
every process under ``cProfile`` (slower: for where the time goes, not for timings) and adds each kind's
self time by package to the output.

    # the shipped suite as it is (10,350 samples; about two hours here), the whole run under a 6 GiB cap
    nice -n 10 .venv/bin/python -m bench.limits_1000k --cap-gb 6 --out bench/limits_1000k.json
    # small: 1 repeat per cell (1,008 samples), OpenCompass's stock path, then ours (the pipeline's time before/after)
    .venv/bin/python -m bench.limits_1000k --repeats 1 --stock --out bench/limits_1000k_r1_stock.json
    .venv/bin/python -m bench.limits_1000k --repeats 1 --out bench/limits_1000k_r1_ours.json
    # a memory cap that stops the run, and the resume under a larger one
    .venv/bin/python -m bench.limits_1000k --repeats 1 --cap-gb 2 --raise-gb 12 --out bench/limits_1000k_r1_capped.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

from needlebench.launch import driver

ROOT = Path(__file__).resolve().parents[1]
# the two ways to start OpenCompass's command line: its own script, and ``needlebench run``'s lean start
DRIVERS = {
    "opencompass": [str(Path(sys.executable).parent / "opencompass")],
    "needlebench": driver.command(),
}
RUN = "20000101_000000"  # a fixed run folder, so a resume (-r) finds it
PROFILE_HOOK = Path(__file__).resolve().parent / "profile_hook"

CONFIG = """_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets, runtime
datasets = needlebench_datasets(suite={suite!r}{extra})
models = [dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", max_seq_len={max_seq_len},
               max_out_len=64, batch_size={batch_size}, record={record!r}, datasets=datasets,
               run_cfg=dict(num_gpus=0))]
infer, eval = runtime(num_shards={shards}, max_workers=1, eval_workers={eval_workers}{runtime_extra})
summarizer = dict(type=SUMMARIZER)
"""
# --stock: OpenCompass's own inferencer and eval task in place of the ones our configs set (the "before")
STOCK = """for _d in datasets:
    _d["infer_cfg"]["inferencer"]["type"] = "opencompass.openicl.icl_inferencer.GenInferencer"
eval["runner"]["task"]["type"] = "OpenICLEvalTask"
"""
TASK_KINDS = ("build", "infer", "eval")


def _lengths(args: argparse.Namespace) -> list[int]:
    """The lengths the run asks: ``--lengths``, else its suite's."""
    from needlebench.tasks.profiles import get_suite

    return [int(x) for x in args.lengths.split(",")] if args.lengths else list(get_suite(args.suite).lengths)


def _kind(cmdline: list[str]) -> str:
    """Which stage a process of the run belongs to, from its command line."""
    text = " ".join(cmdline)
    if "needlebench.cache.arrow_rows" in text:
        return "build"
    if "openicl_infer" in text or "OpenICLInfer" in text or "task_entry infer" in text:
        return "infer"
    if "openicl_eval" in text or "OpenICLEval" in text or "eval_task" in text or "task_entry eval" in text:
        return "eval"
    if "opencompass" in text and "tasks" not in text:
        return "driver"
    return "other"


class Monitor(threading.Thread):
    """Polls the run's process tree: peak RSS and CPU time per process, first/last sighting per kind, peak disk.

    The driver's CPU time is sampled with each poll, so its share can be split into before the first task,
    and after the last one (the summary).
    """

    def __init__(self, root_pid: int, disk: Path) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.disk = disk
        self.disk_start = shutil.disk_usage(disk).used
        self.disk_peak = 0
        self.procs: dict[int, dict[str, Any]] = {}
        self.seen: dict[str, list[float]] = {}
        self.driver_cpu: list[tuple[float, float]] = []  # (time, driver's user + sys so far)
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
                        info = self.procs[p.pid] = dict(kind=kind, cmd=" ".join(cmd)[-200:], peak_rss=0, peak_anon=0)
                    mem = p.memory_info()
                    cpu = p.cpu_times()
                except psutil.Error:
                    continue
                info["peak_rss"] = max(info["peak_rss"], mem.rss)
                info["peak_anon"] = max(info["peak_anon"], mem.rss - mem.shared)  # less file-backed pages
                info["cpu"] = cpu.user + cpu.system
                if p.pid == self.root_pid:
                    self.driver_cpu.append((now, info["cpu"]))
                if info["kind"] in TASK_KINDS:
                    span = self.seen.setdefault(info["kind"], [now, now])
                    span[1] = now
            self.disk_peak = max(self.disk_peak, shutil.disk_usage(self.disk).used - self.disk_start)
            self.stop.wait(0.2)

    def driver_cpu_at(self, when: float) -> float:
        """The driver's CPU seconds at the last poll before ``when``."""
        before = [cpu for t, cpu in self.driver_cpu if t <= when]
        return before[-1] if before else 0.0


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _children_cpu() -> float:
    """User + sys seconds of every finished process this one started (their descendants included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(
    config: Path, work: Path, env: dict[str, str], cgroup: Path | None, resume: bool, driver: str = "opencompass"
) -> dict[str, Any]:
    """One ``opencompass`` invocation (``driver``: which start, see ``DRIVERS``), monitored."""
    cmd = [*DRIVERS[driver], str(config), "-w", str(work), "-r", RUN]

    def enter_cgroup() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    log = work.parent / f"opencompass_{int(time.time())}.log"
    cpu_before = _children_cpu()
    start = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup)
        mon = Monitor(proc.pid, work)
        mon.start()
        rc = proc.wait()
        mon.stop.set()
        mon.join()
    end = time.time()
    cpu_total = _children_cpu() - cpu_before
    tail = log.read_text(errors="replace").splitlines()[-3:]
    per_kind: dict[str, float] = {}
    anon_per_kind: dict[str, float] = {}
    cpu_per_kind: dict[str, float] = defaultdict(float)
    for info in mon.procs.values():
        per_kind[info["kind"]] = max(per_kind.get(info["kind"], 0), info["peak_rss"])
        anon_per_kind[info["kind"]] = max(anon_per_kind.get(info["kind"], 0), info["peak_anon"])
        cpu_per_kind[info["kind"]] += info.get("cpu", 0.0)
    stages = {k: round(b - a, 1) for k, (a, b) in mon.seen.items()}
    first = min((a for a, _ in mon.seen.values()), default=end)
    last = max((b for _, b in mon.seen.values()), default=start)
    stages["driver_rest"] = round((end - start) - sum(stages.values()), 1)
    stages["summary_after_last_task"] = round(end - last, 1)
    driver_end = cpu_per_kind.get("driver", 0.0)
    driver_first, driver_last = mon.driver_cpu_at(first), mon.driver_cpu_at(last)
    cpu = {k: round(cpu_per_kind.get(k, 0.0), 1) for k in TASK_KINDS}
    cpu["driver_before_tasks"] = round(driver_first, 1)  # config, planning, the build's orchestration
    cpu["driver_during_tasks"] = round(driver_last - driver_first, 1)
    cpu["summary"] = round(driver_end - driver_last, 1)  # the driver after the last task: summarizer, report
    cpu["all_processes"] = round(cpu_total, 1)
    return dict(
        rc=rc,
        resume=resume,
        wall_s=round(end - start, 1),
        stage_s=stages,
        cpu_s=cpu,
        peak_rss_gb_per_kind={k: round(v / 1e9, 3) for k, v in per_kind.items()},
        peak_anon_gb_per_kind={k: round(v / 1e9, 3) for k, v in anon_per_kind.items()},
        processes=[
            dict(
                kind=i["kind"],
                peak_rss_gb=round(i["peak_rss"] / 1e9, 3),
                peak_anon_gb=round(i["peak_anon"] / 1e9, 3),
                cpu_s=round(i.get("cpu", 0.0), 1),
            )
            for i in sorted(mon.procs.values(), key=lambda i: i["kind"])
            if i["kind"] != "other"
        ],
        pids={pid: i["kind"] for pid, i in mon.procs.items()},
        disk_peak_gb=round(mon.disk_peak / 1e9, 3),
        log_tail=tail,
    )


def _per_thousand(run: dict[str, Any], samples: int) -> dict[str, dict[str, float]]:
    """Wall and CPU seconds per stage per 1,000 samples."""
    if not samples:
        return {}
    scale = 1000 / samples
    wall = {k: round(v * scale, 1) for k, v in run["stage_s"].items()}
    wall["whole_run"] = round(run["wall_s"] * scale, 1)
    return dict(wall_s=wall, cpu_s={k: round(v * scale, 1) for k, v in run["cpu_s"].items()})


# -- profiles ----------------------------------------------------------------------------------------
_WAITS = ("acquire", "sleep", "select", "poll", "waitpid", "wait4")
_PACKAGES = ("needlebench", "opencompass", "datasets", "pyarrow", "mmengine", "torch", "transformers", "tiktoken")


def _package(func: tuple[str, int, str]) -> str | None:
    """The package whose code a profiled function is, or None for builtins and the standard library."""
    filename = func[0].replace(os.sep, "/")
    for name in _PACKAGES:
        if f"/{name}/" in filename:
            return name
    if "/bench/" in filename or "/tests/" in filename:
        return "needlebench"  # the oracle model lives in the package; test models count as ours
    return None


def _self_time_by_package(stats: pstats.Stats) -> dict[str, float]:
    """Self time per package; a builtin's or stdlib function's time goes to the packages that called it.

    ``json.dumps`` called by OpenCompass's output handler is OpenCompass's time, called by our evaluator ours:
    a function of no package passes its self time to its callers in proportion to the time each call took.
    """
    table = stats.stats  # type: ignore[attr-defined]
    memo: dict[tuple, dict[str, float]] = {}

    def owners(func: tuple, depth: int = 0) -> dict[str, float]:
        """How ``func``'s time splits over packages (fractions summing to 1)."""
        pkg = _package(func)
        if pkg is not None:
            return {pkg: 1.0}
        if func in memo:
            return memo[func]
        memo[func] = {"other": 1.0}  # a cycle or depth cut resolves to "other"
        callers = table.get(func, (0, 0, 0, 0, {}))[4]
        total = sum(c[3] for c in callers.values()) if callers else 0
        if depth > 12 or not total:
            return memo[func]
        share: dict[str, float] = defaultdict(float)
        for caller, (_, _, _, ct) in callers.items():
            for name, frac in owners(caller, depth + 1).items():
                share[name] += frac * ct / total
        memo[func] = dict(share)
        return memo[func]

    out: dict[str, float] = defaultdict(float)
    for func, (_, _, tt, _, _) in table.items():
        if func[0] == "~" and any(word in func[2] for word in _WAITS):
            out["waiting"] += tt  # a thread blocked on a lock, a child or a sleep: no CPU
            continue
        for name, frac in owners(func).items():
            out[name] += tt * frac
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def _profiles(folder: Path, pids: dict[int, str]) -> dict[str, Any]:
    """Per process kind: self time by package, and the functions with the most cumulative time."""
    per_kind: dict[str, list[Path]] = defaultdict(list)
    for prof in folder.glob("*.prof"):
        per_kind[pids.get(int(prof.stem), "other")].append(prof)
    out: dict[str, Any] = {}
    for kind, files in sorted(per_kind.items()):
        stats = pstats.Stats(*map(str, files))
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:40]  # type: ignore[attr-defined]
        out[kind] = dict(
            processes=len(files),
            self_s_by_package=_self_time_by_package(stats),
            top_cumulative=[
                f"{ct:8.2f} {tt:8.2f} {f[0].split('site-packages/')[-1]}:{f[1]}({f[2]})" for f, (_, _, tt, ct, _) in top
            ],
        )
    return out


# -- cgroups ----------------------------------------------------------------------------------------
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
    ap.add_argument("--repeats", type=int, default=0, help="samples per cell and task (default: the suite's 10/25/10)")
    ap.add_argument("--lengths", default="", help="comma-separated lengths (default: the suite's)")
    ap.add_argument("--depths", default="", help="comma-separated depths (default: the suite's)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--eval-workers", type=int, default=2)
    ap.add_argument(
        "--batch-size", type=int, default=4, help="the oracle model's batch_size (the shipped 1000k model's)"
    )
    ap.add_argument("--stock", action="store_true", help="OpenCompass's GenInferencer and OpenICLEvalTask")
    ap.add_argument("--cap-gb", type=float, default=0, help="run in a memory cgroup with this limit")
    ap.add_argument("--raise-gb", type=float, default=8, help="the limit a stopped capped run resumes under")
    ap.add_argument("--profile", default="", help="run every process under cProfile, .prof files into this folder")
    ap.add_argument("--scratch", default="/tmp", help="where the cache and work dir go (removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the cache and work dir")
    ap.add_argument(
        "--prompts", default="text", choices=("text", "digest"), help="what prediction files keep of each prompt"
    )
    ap.add_argument(
        "--driver",
        default="opencompass",
        choices=sorted(DRIVERS),
        help="start OpenCompass with its `opencompass` script or with `needlebench run` (lean imports)",
    )
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="nb-limits-", dir=args.scratch))
    cache, work, record = scratch / "cache", scratch / "work", scratch / "oracle_calls.jsonl"
    (work / RUN).mkdir(parents=True)
    extra = f", repeats={args.repeats}" if args.repeats else ""
    extra += f", lengths=[{args.lengths}]" if args.lengths else ""
    extra += f", depths=[{args.depths}]" if args.depths else ""
    config = scratch / "eval_oracle_1000k.py"
    text = CONFIG.format(
        record=str(record),
        suite=args.suite,
        extra=extra,
        shards=args.shards,
        eval_workers=args.eval_workers,
        batch_size=args.batch_size,
        runtime_extra=f", prompts={args.prompts!r}" if args.prompts != "text" else "",
        # room for the longest prompt with its output (the 2M of the 1000k runs, more for the rungs past it)
        max_seq_len=max(2_000_000, int(1.05 * max(_lengths(args)))),
    )
    config.write_text(text + (STOCK if args.stock else ""))
    env = {**os.environ, "NEEDLEBENCH_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        env["NEEDLEBENCH_PROFILE_DIR"] = str(Path(args.profile).resolve())
        env["PYTHONPATH"] = str(PROFILE_HOOK) + os.pathsep + env["PYTHONPATH"]
    cgroup = _cgroup(int(args.cap_gb * 2**30)) if args.cap_gb else None
    runs = []
    load = os.getloadavg()
    try:
        runs.append(_run(config, work, env, cgroup, resume=False, driver=args.driver))
        if runs[-1]["rc"] != 0 and cgroup is not None:
            calls_before = len(record.read_text().splitlines()) if record.exists() else 0
            runs[-1]["oracle_calls"] = calls_before
            _set_limit(cgroup, int(args.raise_gb * 2**30))
            runs.append(_run(config, work, env, cgroup, resume=True, driver=args.driver))
        run_dir = work / RUN
        summary_csv = run_dir / "summary" / "needlebench_summary.csv"
        cells = list(csv.DictReader(summary_csv.open(encoding="utf-8"))) if summary_csv.exists() else []
        scores = sorted({float(r["oracle"]) for r in cells if r.get("oracle") not in (None, "")})
        calls = record.read_text().splitlines() if record.exists() else []
        rows = sum(json.loads(x)["prompts"] for x in calls)
        predicted = sum(_count_predictions(p) for p in (run_dir / "predictions" / "oracle").glob("*.json"))
        for run in runs:
            run["per_1000_samples"] = _per_thousand(run, predicted)
        profiles = _profiles(Path(args.profile), {p: k for run in runs for p, k in run["pids"].items()})
        for run in runs:
            run.pop("pids")
        result = dict(
            suite=args.suite,
            repeats=args.repeats or "suite default",
            depths=args.depths or "suite default",
            lengths=args.lengths or "suite default",
            shards=args.shards,
            eval_workers=args.eval_workers,
            batch_size=args.batch_size,
            prompts=args.prompts,
            driver=args.driver,
            path="stock (OpenCompass's GenInferencer and OpenICLEvalTask)" if args.stock else "ours (as configured)",
            cap_gb=args.cap_gb or None,
            raise_gb=args.raise_gb if args.cap_gb else None,
            machine=dict(cpus=os.cpu_count(), mem_gb=round(psutil.virtual_memory().total / 1e9, 1)),
            load_before=[round(x, 2) for x in load],
            load_after=[round(x, 2) for x in os.getloadavg()],
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
        if profiles:
            result["profiles"] = profiles
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
    out = json.dumps(result, indent=1)
    print(out)
    if args.out:
        Path(args.out).write_text(out + "\n")


def _count_predictions(path: Path) -> int:
    """Samples in one prediction file, read a line at a time (OpenCompass writes one key per sample at 4 spaces)."""
    with path.open(encoding="utf-8") as fh:
        return sum(1 for line in fh if line.startswith('    "') and line.rstrip().endswith("{"))


if __name__ == "__main__":
    main()
