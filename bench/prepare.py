"""Data preparation inside OpenCompass: what a run pays before a model sees a prompt.

OpenCompass builds each dataset with ``build_dataset_from_cfg`` in every infer
and every eval task. Measured here, in separate processes, each timing its own
builds:

* ``cold``: every dataset of the suite built once in one process with an empty
  dataset cache, two ways for ours: a new machine's *first run* (nothing cached:
  the corpus token cache is built too) and a *later run* (the corpus token cache
  kept from an earlier run, as on any machine after its first; generation and
  the Arrow cache write); the built-in: its loaders and ``BaseDataset``'s
  ``.map`` on OpenCompass-format stand-in files (it caches nothing between
  runs), of two kinds, since its build time grows with the haystack files and
  ours does not read them: ``packaged`` (every document of our packaged
  corpora) and ``opencompass`` (cut to the sizes of OpenCompass's own files on
  a machine that has them, 3.1 MB English and 5.6 MB Chinese). Peak RSS, bytes written: ours (first, later)
  and the built-in alternating ``--rounds`` times in the same run, the median
  ratio of each and each round's printed;
* ``materialize``: the same, as our partitioner does it before any task
  starts (``arrow_rows.materialize_many``, one process per core);
* ``task``: the datasets of one infer shard as our partitioner cuts them
  (``num_shards`` shards, warm cache, as every task after the partitioner's
  materialisation finds it), with its rows read as the inferencer reads them;
* ``run``: the sum over a full sharded run: our partitioner's one cold build,
  (parallel), then every infer shard and one eval task per dataset warm; the built-in's
  infer tasks build its datasets once between them, its eval tasks once more.

    .venv/bin/python -m bench.prepare --suite 128k            # ours and the built-in, both kinds of stand-ins
    .venv/bin/python -m bench.prepare --suite 128k --standin opencompass --rounds 1
    .venv/bin/python -m bench.prepare --suite 1000k --no-builtin
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- workers (run in their own process) ------------------------------------------------------
def _ours_configs(suite: str) -> list[dict[str, Any]]:
    from needlebench.opencompass.configs import needlebench_datasets

    return needlebench_datasets(suite=suite)


def _shard_configs(suite: str, shards: int, out: str) -> list[list[dict[str, Any]]]:
    """The dataset configs of each infer task, as our partitioner hands them out."""
    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    model = dict(
        type="needlebench.opencompass.instant.InstantModel",
        abbr="instant",
        path="instant",
        max_seq_len=2_000_000,
        max_out_len=16,
        batch_size=64,
    )
    part = NeedleBenchPartitioner(out_dir=out, num_shards=shards)
    tasks = part.partition([{"models": [model], "datasets": _ours_configs(suite)}], work_dir=out, out_dir=out)
    return [[_dataset_part(d) for d in t["datasets"][0]] for t in tasks]


def _dataset_part(cfg: Any) -> dict[str, Any]:
    """What ``build_dataset_from_cfg`` reads of a dataset config (it drops the rest), as plain JSON."""
    return json.loads(json.dumps({k: v for k, v in dict(cfg).items() if k not in ("infer_cfg", "eval_cfg")}))


def _touch(ds: Any) -> int:
    """Read every prompt of the split, a batch at a time; their UTF-8 bytes.

    (OpenCompass's inferencer then holds its shard's prompts as one list of strings; that memory
    is OpenCompass's, whatever the dataset class, and is not counted here.)
    """
    return sum(len(p.encode("utf-8")) for batch in ds.iter(batch_size=16) for p in batch["prompt"])


def worker(mode: str, suite: str, arg: str) -> dict[str, Any]:
    # what every OpenCompass task imports before it builds a dataset; not part of the build
    import opencompass.datasets  # noqa: F401
    from opencompass.utils import build_dataset_from_cfg

    import needlebench.opencompass.dataset  # noqa: F401

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    start = time.perf_counter()
    samples = nbytes = 0
    if mode == "ours-cold":
        for d in _ours_configs(suite):
            ds = build_dataset_from_cfg(d).test
            samples += len(ds)
    elif mode == "ours-materialize":
        # what our partitioner does before any task starts: every dataset once, on all cores
        from needlebench.cache.arrow_rows import materialize_many
        from needlebench.tasks import config_params

        materialize_many([(d["task"], config_params(d)) for d in _ours_configs(suite)])
    elif mode == "ours-shards":
        # the partitioner's materialisation happened in the cold run; this process cuts the shards
        return {"shards": _shard_configs(suite, int(arg), tempfile.mkdtemp(prefix="nb-part-"))}
    elif mode == "ours-task":
        built = [build_dataset_from_cfg(d).test for d in json.loads(Path(arg).read_text())]
        # ready: every dataset of the task built, the inferencer can start
        ready = {
            "ready_s": time.perf_counter() - start,
            "ready_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        }
        for ds in built:
            samples += len(ds)
            nbytes += _touch(ds)
    elif mode == "builtin-cold":
        from bench.gen_worker import builtin

        samples, nbytes = builtin(suite, arg)
    else:
        raise SystemExit(f"unknown mode {mode}")
    return {
        **(ready if mode == "ours-task" else {}),
        "seconds": time.perf_counter() - start,
        "samples": samples,
        "bytes_read": nbytes,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
        "rss_after_imports_gb": base_rss,
    }


# -- driver ----------------------------------------------------------------------------------
def _run(mode: str, suite: str, arg: str, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [PY, "-m", "bench.prepare", "--worker", mode, suite, arg],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{mode} {suite} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(
    suite: str,
    shards: int,
    builtin: bool,
    workdir: Path,
    rounds_wanted: int = 3,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    standin: str = "packaged",
) -> dict[str, Any]:
    """One suite's row; ``checkpoint(row so far)`` after each cold round (a run stopped early keeps them).

    ``standin``: the built-in's haystack files, ``packaged`` (our corpora whole) or ``opencompass`` (cut to the
    sizes of OpenCompass's own files: ``standin.OPENCOMPASS_SIZES``).
    """
    cache = workdir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "NEEDLEBENCH_CACHE": str(cache), "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    row: dict[str, Any] = {"suite": suite, "shards": shards, "standin": standin}
    if builtin:
        from bench.standin import OPENCOMPASS_SIZES, build_standin

        shutil.rmtree(workdir / "data", ignore_errors=True)
        data = build_standin(workdir, OPENCOMPASS_SIZES if standin == "opencompass" else None)
        row["standin_bytes"] = {p.name: p.stat().st_size for p in sorted(data.glob("*.jsonl"))}
    # the cold build, ours (a new machine's first run, then a later run) and the built-in alternating, so the
    # machine's load (shared, 2 cores) falls on all alike; each round's ratios, and their medians and spread
    rounds = []
    for _ in range(max(1, rounds_wanted)):
        shutil.rmtree(cache, ignore_errors=True)  # a new machine: no corpus token cache, no datasets
        first = _run("ours-cold", suite, "", env)
        shutil.rmtree(cache / "datasets", ignore_errors=True)  # a later run: the corpus token cache is kept
        cold = _run("ours-cold", suite, "", env)
        cold["bytes_written_gb"] = _size(cache / "datasets") / 1e9
        pair: dict[str, Any] = {"ours": cold, "ours_first": first}
        if builtin:
            pair["builtin"] = _run("builtin-cold", suite, str(workdir), env)
            pair["ratio"] = pair["builtin"]["seconds"] / cold["seconds"]
            pair["ratio_first"] = pair["builtin"]["seconds"] / first["seconds"]
            print(
                f"round {len(rounds) + 1}: built-in {pair['builtin']['seconds']:.1f} s, ours {first['seconds']:.2f} s "
                f"on a first run ({pair['ratio_first']:.1f}x), {cold['seconds']:.2f} s on a later run "
                f"({pair['ratio']:.1f}x)",
                flush=True,
            )
        rounds.append(pair)
        if checkpoint:
            checkpoint({**row, "cold_rounds": rounds, "partial": True})
    row["cold_rounds"] = rounds
    cold = min((r["ours"] for r in rounds), key=lambda c: c["seconds"])
    row["ours_cold"] = {**cold, "seconds": statistics.median(r["ours"]["seconds"] for r in rounds)}
    first = min((r["ours_first"] for r in rounds), key=lambda c: c["seconds"])
    row["ours_first"] = {**first, "seconds": statistics.median(r["ours_first"]["seconds"] for r in rounds)}
    shutil.rmtree(cache / "datasets", ignore_errors=True)
    row["ours_materialize"] = _run("ours-materialize", suite, "", env)
    plan = _run("ours-shards", suite, str(shards), env)["shards"]
    tasks = []
    for i, cfgs in enumerate(plan):
        path = workdir / f"task{i}.json"
        path.write_text(json.dumps(cfgs))
        tasks.append(_run("ours-task", suite, str(path), env))
    row["ours_tasks"] = tasks
    # eval: one task per dataset, each builds its whole dataset warm (no test_range)
    evals = []
    for i, d in enumerate(_ours_configs(suite)):
        path = workdir / f"eval{i}.json"
        path.write_text(json.dumps([_dataset_part(d)]))
        evals.append(_run("ours-task", suite, str(path), env))
    row["ours_evals"] = evals
    first = row["ours_materialize"]["seconds"]
    row["ours_run_s"] = first + sum(t["seconds"] for t in tasks) + sum(t["seconds"] for t in evals)
    if builtin:
        b = {**rounds[0]["builtin"], "seconds": statistics.median(r["builtin"]["seconds"] for r in rounds)}
        row["builtin_cold"] = b
        row["builtin_run_s"] = 2 * b["seconds"]  # its infer tasks build everything once, its eval tasks again
        ratios = [r["ratio"] for r in rounds]
        row["cold_ratio"] = statistics.median(ratios)
        row["cold_ratio_range"] = [min(ratios), max(ratios)]
        firsts = [r["ratio_first"] for r in rounds]
        row["first_ratio"] = statistics.median(firsts)
        row["first_ratio_range"] = [min(firsts), max(firsts)]
        row["run_ratio"] = row["builtin_run_s"] / row["ours_run_s"]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| suite | measure | built-in v2 | ours | ratio |", "|---|---|---|---|---|"]
    for r in rows:
        c, b = r["ours_cold"], r.get("builtin_cold")
        if b:
            sizes = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in r.get("standin_bytes", {}).items())
            lines.append(
                f"| {r['suite']} | a new machine's first run, the built-in on {r.get('standin', 'packaged')} stand-ins "
                f"({sizes}) | {b['seconds']:.1f} s | {r['ours_first']['seconds']:.1f} s | {r['first_ratio']:.1f}x |"
            )
        slowest = max(r["ours_tasks"], key=lambda t: t.get("ready_s", t["seconds"]))
        lines.append(
            f"| {r['suite']} | every dataset built once, empty cache | "
            + (f"{b['seconds']:.1f} s, {b['peak_rss_gb']:.2f} GB" if b else "not run")
            + f" | {c['seconds']:.1f} s, {c['peak_rss_gb']:.2f} GB, {c['bytes_written_gb']:.2f} GB written | "
            + (
                f"{r['cold_ratio']:.1f}x (rounds: {', '.join(format(x['ratio'], '.1f') for x in r['cold_rounds'])}) |"
                if b
                else "|"
            )
        )
        m = r["ours_materialize"]
        lines.append(
            f"| {r['suite']} | the same, as our partitioner does it ({os.cpu_count()} processes) | "
            + (f"{b['seconds']:.1f} s" if b else "not run")
            + f" | {m['seconds']:.1f} s | "
            + (f"{b['seconds'] / m['seconds']:.1f}x |" if b else "|")
        )
        lines.append(
            f"| {r['suite']} | slowest of {r['shards']} infer tasks: datasets ready (warm cache) | | "
            f"{slowest.get('ready_s', float('nan')):.2f} s, {slowest.get('ready_rss_gb', float('nan')):.2f} GB | |"
        )
        lines.append(
            f"| {r['suite']} | the same task, every prompt of its shard read | | {slowest['seconds']:.2f} s, "
            f"{slowest['peak_rss_gb']:.2f} GB | |"
        )
        lines.append(
            f"| {r['suite']} | whole sharded run (infer + eval) | "
            + (f"{r['builtin_run_s']:.0f} s" if b else "not run")
            + f" | {r['ours_run_s']:.1f} s | "
            + (f"{r['run_ratio']:.1f}x |" if b else "|")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        print(json.dumps(worker(*argv[1:4])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", nargs="+", default=["128k"])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--no-builtin", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="cold builds of each side, alternating")
    parser.add_argument(
        "--standin",
        nargs="+",
        default=["packaged", "opencompass"],
        choices=["packaged", "opencompass"],
        help="the built-in's haystack files: our packaged corpora whole, or cut to OpenCompass's own files' sizes",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "prepare.json"))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nb-prepare-") as tmp:
        for suite in args.suite:
            done = list(rows)

            def checkpoint(partial: dict[str, Any], done: list = done) -> None:
                Path(args.out).write_text(json.dumps({"rows": [*done, partial], "partial": True}, indent=1) + "\n")

            builtin = not args.no_builtin and suite != "1000k"
            for standin in args.standin if builtin else ["packaged"]:
                rows.append(measure(suite, args.shards, builtin, Path(tmp), args.rounds, checkpoint, standin))
    text = table(rows)
    print(text)
    Path(args.out).write_text(json.dumps({"rows": rows, "table": text}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
