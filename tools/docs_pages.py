"""The generated parts of the documentation: performance tables and the needle-placement table from
``bench/*.json``, every command's ``--help``.

A page marks each generated part with ``<!-- BEGIN name -->`` and ``<!-- END name -->``; this module
rewrites what lies between them, and nothing else, so the prose around a table stays hand-written while
its numbers come from the measurement files the benchmarks wrote. ``tests/test_docs.py`` fails when a page
and what this module makes of the current files differ.

    python -m tools.docs_pages           # rewrite the generated parts
    python -m tools.docs_pages --check   # exit 1 and name the stale pages
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PERFORMANCE = ROOT / "docs" / "performance.md"
DISK_MEMORY = ROOT / "docs" / "reliability" / "disk-memory.md"
CLI = ROOT / "docs" / "reference" / "cli.md"
DIFFERENCES = ROOT / "docs" / "protocol" / "differences.md"
HELP_COLUMNS = "100"  # the width argparse wraps the help texts to, so the page does not depend on a terminal


# ------------------------------------------------------------------------------------------------
# Marked blocks
# ------------------------------------------------------------------------------------------------


def _markers(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN {re.escape(name)} -->)(.*?)(<!-- END {re.escape(name)} -->)", re.S)


def read_block(text: str, name: str) -> str:
    """What lies between a page's ``BEGIN name`` and ``END name`` markers, without the surrounding newlines.

    Args:
        text: the page.
        name: the block's name.

    Raises:
        KeyError: the page has no such block.
    """
    found = _markers(name).search(text)
    if not found:
        raise KeyError(f"no <!-- BEGIN {name} --> ... <!-- END {name} --> block")
    return found.group(2).strip("\n")


def replace_block(text: str, name: str, body: str, inline: bool = False) -> str:
    """The page with one block's content replaced.

    Args:
        text: the page.
        name: the block's name.
        body: the new content.
        inline: the block sits inside a paragraph (no newlines around the content).

    Raises:
        KeyError: the page has no such block.
    """
    read_block(text, name)
    inner = body.strip("\n") if inline else f"\n{body.strip(chr(10))}\n"
    return _markers(name).sub(lambda m: m.group(1) + inner + m.group(3), text, count=1)


def sync_page(path: Path, blocks: Mapping[str, str], check: bool, inline: Iterable[str] = ()) -> bool:
    """Rewrite a page's generated blocks (or only compare them); whether the page was stale.

    Args:
        path: the Markdown page.
        blocks: block name -> its content.
        check: compare only; the page is left as it is.
        inline: names of blocks that sit inside a paragraph.
    """
    text = path.read_text(encoding="utf-8")
    new = text
    for name, body in blocks.items():
        new = replace_block(new, name, body, inline=name in set(inline))
    if new != text and not check:
        path.write_text(new, encoding="utf-8")
    return new != text


# ------------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s"


def _gb(value: float) -> str:
    return f"{value:.2f} GB"


def _range(values: Sequence[float], fmt: Callable[[float], str] = lambda v: f"{v:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _load(name: str) -> Any:
    return json.loads((BENCH / name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------
# Data preparation (bench/prepare.py)
# ------------------------------------------------------------------------------------------------


def prepare_table(rows_128k: Mapping[str, Any], rows_1000k: Mapping[str, Any]) -> str:
    """The data-preparation table: cold builds side by side, the partitioner's build, tasks, whole runs.

    Args:
        rows_128k: ``bench/prepare.json``'s row for the 128k suite (three alternating cold rounds).
        rows_1000k: ``bench/prepare_1000k.json``'s row (ours only; it predates the alternating rounds).
    """
    r = rows_128k
    rounds = r["cold_rounds"]
    built = [x["builtin"]["seconds"] for x in rounds]
    ours = [x["ours"]["seconds"] for x in rounds]
    ratios = [x["ratio"] for x in rounds]
    b_med, o_med = statistics.median(built), statistics.median(ours)
    b_rss = statistics.median(x["builtin"]["peak_rss_gb"] for x in rounds)
    o_rss = statistics.median(x["ours"]["peak_rss_gb"] for x in rounds)
    written = r["ours_cold"]["bytes_written_gb"]
    tasks, evals = r["ours_tasks"], r["ours_evals"]
    mat = r["ours_materialize"]["seconds"]
    n = len(rounds)
    out = []
    if all("ours_first" in x for x in rounds):
        firsts = [x["ours_first"]["seconds"] for x in rounds]
        f_ratios = [x["ratio_first"] for x in rounds]
        f_rss = statistics.median(x["ours_first"]["peak_rss_gb"] for x in rounds)
        out.append(
            (
                r["suite"],
                f"a new machine's first run: every dataset built once, one process, nothing cached (ours builds its "
                f"corpus token cache too): {n} rounds alternating, medians",
                f"{_s(b_med)} ({_range(built, lambda v: f'{v:.1f}')}), {_gb(b_rss)}",
                f"{_s(statistics.median(firsts))} ({_range(firsts, lambda v: f'{v:.1f}')}), {_gb(f_rss)}",
                f"{statistics.median(f_ratios):.1f}x (rounds: {', '.join(f'{x:.1f}x' for x in f_ratios)})",
            )
        )
    out += [
        (
            r["suite"],
            f"every later run: every dataset built once, one process, empty dataset cache (ours: its corpus token "
            f"cache kept from an earlier run): {n} rounds alternating, medians",
            f"{_s(b_med)} ({_range(built, lambda v: f'{v:.1f}')}), {_gb(b_rss)}",
            f"{_s(o_med)} ({_range(ours, lambda v: f'{v:.1f}')}), {_gb(o_rss)}, {_gb(written)} written",
            f"{statistics.median(ratios):.1f}x (rounds: {', '.join(f'{x:.1f}x' for x in ratios)})",
        ),
        (
            r["suite"],
            "the same, as our partitioner does it (one process per core; once, after the rounds)",
            _s(r["builtin_cold"]["seconds"]),
            _s(mat),
            f"{r['builtin_cold']['seconds'] / mat:.1f}x",
        ),
        (
            r["suite"],
            f"each of {len(tasks)} infer tasks: datasets built and every prompt of its shard read",
            "",
            f"{_range([t['seconds'] for t in tasks])} s, peak RSS {_range([t['peak_rss_gb'] for t in tasks])} GB",
            "",
        ),
        (
            r["suite"],
            f"whole sharded run ({len(tasks)} infer tasks, {len(evals)} eval tasks)",
            f"{r['builtin_run_s']:.0f} s",
            _s(r["ours_run_s"]),
            f"{r['builtin_run_s'] / r['ours_run_s']:.1f}x",
        ),
    ]
    k = rows_1000k
    ready = [t for t in k["ours_tasks"] + k["ours_evals"] if "ready_s" in t]
    out += [
        (
            k["suite"],
            "every dataset built once, one process, empty dataset cache",
            "not run",
            f"{_s(k['ours_cold']['seconds'])}, {_gb(k['ours_cold']['peak_rss_gb'])}, "
            f"{k['ours_cold']['bytes_written_gb']:.1f} GB written",
            "",
        ),
        (
            k["suite"],
            "the same, as our partitioner does it (one process per core)",
            "not run",
            _s(k["ours_materialize"]["seconds"]),
            "",
        ),
        (
            k["suite"],
            "a task's datasets ready (warm cache; up to a whole 9.2 GB dataset)",
            "",
            f"{_range([t['ready_s'] for t in ready])} s, {_range([t['ready_rss_gb'] for t in ready])} GB",
            "",
        ),
    ]
    return _table(("suite", "measure", "built-in v2", "ours", "ratio"), out)


# ------------------------------------------------------------------------------------------------
# The 1000k suite end to end (bench/limits_1000k.py)
# ------------------------------------------------------------------------------------------------


def _peaks(run: Mapping[str, Any], kind: str, measure: str = "peak_rss_gb") -> list[float]:
    """Each process's peak of one kind (``peak_rss_gb``, or ``peak_anon_gb``: RSS less file-backed pages)."""
    return [p[measure] for p in run["processes"] if p["kind"] == kind]


def limits_stage_table(result: Mapping[str, Any]) -> str:
    """Wall time and peak RSS per stage of one uncapped run (``bench/limits_1000k.json``).

    Args:
        result: the benchmark's JSON.
    """
    run = result["runs"][0]
    stages, peak = run["stage_s"], run["peak_rss_gb_per_kind"]
    shards, workers = result["shards"], result["eval_workers"]
    rows = [
        (
            f"dataset build (partitioner, {len(_peaks(run, 'build'))} workers)",
            _s(stages["build"]),
            f"{peak['build']:.2f} GB per worker",
        ),
        (
            f"infer ({shards} tasks, one at a time)",
            _s(stages["infer"]),
            f"{_range(_peaks(run, 'infer'))} GB per task",
        ),
        (f"eval ({workers} tasks at once)", _s(stages["eval"]), f"{_range(_peaks(run, 'eval'))} GB per task"),
        (
            "summary and report (after the last task)",
            _s(stages["summary_after_last_task"]),
            f"driver {peak['driver']:.2f} GB",
        ),
        ("whole run", _s(run["wall_s"]), ""),
    ]
    return _table(("stage", "wall time", "peak RSS"), rows)


def limits_disk_line(result: Mapping[str, Any]) -> str:
    """One paragraph: what the uncapped 1000k run left on disk and what its summary held."""
    disk, run = result["disk_gb"], result["runs"][0]
    scores = sorted(set(result["summary_scores"]))
    held = f"at {scores[0]:g}" if len(scores) == 1 else f"between {scores[0]:g} and {scores[-1]:g}"
    return (
        f"Disk: {disk['cache']:.2f} GB of dataset cache, {disk['predictions']:.2f} GB of predictions, "
        f"{disk['results'] * 1000:.0f} MB of results, under {max(1, round(disk['summary'] * 1000))} MB of summary; "
        f"{run['disk_peak_gb']:.2f} GB at the peak. Summary: all {result['summary_cells']} cells of "
        f"`needlebench_summary.csv` {held}; {result['samples_predicted']:,} predictions, "
        f"{result['oracle_answers']:,} oracle answers."
    )


def limits_capped_table(result: Mapping[str, Any]) -> str:
    """The capped run and its resume, stage by stage (``bench/limits_1000k_capped.json``).

    Args:
        result: the benchmark's JSON: ``runs[0]`` under ``cap_gb``, ``runs[1]`` resumed under ``raise_gb``.
    """
    rows = []
    answered = 0
    for run in result["runs"]:
        limit = result["raise_gb"] if run["resume"] else result["cap_gb"]
        calls = run.get("oracle_calls", result["samples_predicted"] - answered)
        answered += calls
        stages = run["stage_s"]
        rows.append(
            (
                f"{'resumed (`-r`)' if run['resume'] else 'first run'}, memory cgroup of {limit:g} GiB",
                run["rc"],
                _s(stages.get("build", 0.0)) if "build" in stages else "(kept)",
                _s(stages["infer"]),
                f"{calls:,}",
                _s(stages["eval"]),
                _s(run["wall_s"]),
                f"{run['peak_rss_gb_per_kind']['infer']:.2f} GB",
            )
        )
    return _table(
        ("run", "exit code", "build", "infer", "prompts answered", "eval", "whole run", "peak RSS of an infer task"),
        rows,
    )


def pipeline_time_table(before: Mapping[str, Any], after: Mapping[str, Any], full: Mapping[str, Any]) -> str:
    """The pipeline's own time per stage per 1,000 samples, before and after issue 35, and at default repeats.

    The oracle generates nothing, so a stage's time is all pipeline. CPU time (user + sys of every process of
    the stage) is what a loaded machine stretches least; wall time is given for the two runs made back to back.

    Args:
        before: ``bench/limits_1000k_r1_stock.json`` (1 repeat, OpenCompass's inferencer and eval task).
        after: ``bench/limits_1000k_r1_ours.json`` (1 repeat, ours), run right after ``before``.
        full: ``bench/limits_1000k.json`` (default repeats, ours).
    """
    # (run, samples it is scaled from, whether its wall time is shown: not the default-repeats run's)
    runs = [(r["runs"][0], 1000 / r["samples_predicted"], r is not full) for r in (before, after, full)]
    rows = []
    for label, stage, cpu in (
        ("dataset build", "build", "build"),
        ("infer", "infer", "infer"),
        ("eval", "eval", "eval"),
        ("summary and report", "summary_after_last_task", "summary"),
        ("whole run", None, "all_processes"),
    ):
        cells = []
        for run, scale, with_wall in runs:
            if with_wall:
                wall = run["wall_s"] if stage is None else run["stage_s"][stage]
                cells.append(_s(wall * scale))
            cells.append(_s(run["cpu_s"][cpu] * scale))
        rows.append((label, *cells))
    head = (
        "per 1,000 samples",
        "before: wall",
        "before: CPU",
        "after: wall",
        "after: CPU",
        f"after, default repeats ({full['samples_predicted']:,} samples): CPU",
    )
    return _table(head, rows)


# the suites the pipeline's cost is measured at: (label, after: bench/pipeline_cost_<stem>.json, before: a
# bench file); the default-repeats 1000k "before" is the text run of bench/limits_1000k.json (under a 6 GiB cap)
COST_SUITES = (
    ("4k", "4k", "pipeline_cost_4k_before.json"),
    ("32k", "32k", "pipeline_cost_32k_before.json"),
    ("128k", "128k", "pipeline_cost_128k_before.json"),
    ("1000k, 1 repeat", "1000k_r1", "pipeline_cost_1000k_r1_before.json"),
    ("1000k default repeats, after as digests", "1000k_digest", "limits_1000k.json"),
)
# the suites measured with both starts of OpenCompass's command line, back to back (``--driver``)
DRIVER_SUITES = (("4k", "4k"), ("32k", "32k"))
COST_STAGES = (
    ("dataset build", "build"),
    ("infer tasks", "infer"),
    ("eval tasks", "eval"),
    ("driver, before the first task", "driver_before_tasks"),
    ("driver, while tasks run", "driver_during_tasks"),
    ("summary and report", "summary"),
    ("all processes", "all_processes"),
)


def pipeline_cost_table(
    suites: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]], sides: tuple[str, str] = ("before", "after")
) -> str:
    """CPU seconds per 1,000 samples per stage at each suite size, two runs side by side.

    Args:
        suites: ``(label, before, after)`` per suite: ``bench/pipeline_cost_<suite>_before.json`` (the code
            before issue 44's cuts) and ``bench/pipeline_cost_<suite>.json``, both ``bench/limits_1000k.py``
            runs of the oracle on this machine (or any two such runs, named by ``sides``).
        sides: the two columns' names.
    """
    head = ["per 1,000 samples (CPU)"]
    for label, _, after in suites:
        head += [f"{label} ({after['samples_predicted']:,}): {sides[0]}", sides[1]]
    rows = []
    for name, key in COST_STAGES:
        cells = [name]
        for _, before, after in suites:
            cells += [_s(r["runs"][0]["per_1000_samples"]["cpu_s"][key]) for r in (before, after)]
        rows.append(cells)
    counts = ["task processes (build, infer, eval)"]
    for _, before, after in suites:
        for r in (before, after):
            kinds = [p["kind"] for p in r["runs"][0]["processes"]]
            counts.append(", ".join(str(kinds.count(k)) for k in ("build", "infer", "eval")))
    rows.append(counts)
    each = ["CPU per infer / eval process (not per 1,000 samples)"]
    for _, before, after in suites:
        for r in (before, after):
            procs = r["runs"][0]["processes"]
            means = []
            for kind in ("infer", "eval"):
                cpu = [p["cpu_s"] for p in procs if p["kind"] == kind]
                means.append(f"{sum(cpu) / len(cpu):.1f}" if cpu else "-")
            each.append(" / ".join(means) + " s")
    rows.append(each)
    return _table(head, rows)


def pipeline_profile_line(result: Mapping[str, Any]) -> str:
    """Where a profiled run's CPU went, by package, per kind of process (``bench/pipeline_cost_4k_profile.json``)."""
    parts = []
    for kind in ("driver", "build", "infer", "eval"):
        shares = {k: v for k, v in result["profiles"][kind]["self_s_by_package"].items() if k != "waiting"}
        total = sum(shares.values()) or 1.0
        top = sorted(shares.items(), key=lambda kv: -kv[1])[:4]
        parts.append(f"{kind}: " + ", ".join(f"{name} {_pct(v / total)}" for name, v in top))
    return "; ".join(parts)


def digest_size_line(
    text: Mapping[str, Any], digest: Mapping[str, Any], full: Mapping[str, Any], full_digest: Mapping[str, Any]
) -> str:
    """Predictions written with prompts kept as text and as digests (``runtime(prompts=...)``), 1000k suite.

    Args:
        text: ``bench/pipeline_cost_1000k_r1.json`` (1 repeat, prompts as text).
        digest: ``bench/pipeline_cost_1000k_r1_digest.json`` (1 repeat, prompts as digests).
        full: ``bench/limits_1000k.json`` (default repeats, prompts as text).
        full_digest: ``bench/pipeline_cost_1000k_digest.json`` (default repeats, prompts as digests).
    """
    scores = ", ".join(f"{s:g}" for s in sorted(set(full_digest["summary_scores"])))
    return (
        f"1000k suite, 1 repeat ({digest['samples_predicted']:,} samples): predictions "
        f"{_gb(text['disk_gb']['predictions'])} with prompts as text, "
        f"about {digest['disk_gb']['predictions'] * 1000:.0f} MB as digests. At default repeats "
        f"({full_digest['samples_predicted']:,} samples): {_gb(full['disk_gb']['predictions'])} as text, "
        f"about {full_digest['disk_gb']['predictions'] * 1000:.0f} MB as digests (measured; the bench rounds disk "
        f"use to the megabyte), every one of the {full_digest['summary_cells']} summary cells {scores}."
    )


def engine_outputs_table(results: Sequence[Mapping[str, Any]]) -> str:
    """Greedy answers of the vLLM CPU engine in OpenCompass's order and ours (``bench/engine_outputs*.json``).

    Args:
        results: one ``bench/engine_outputs.py`` run per KV cache size.
    """
    rows = []
    for result in results:
        cache = result["workload"].get("cache", "the server's default (holds every prompt of the workload)")
        for name, run in result["runs"].items():
            score = "" if run["mean_score"] is None else f"{run['mean_score']:.2f}"
            identical = f"{run['identical']} of {run['of']}"
            rows.append((cache, name, identical, score, f"{run['cached_prompt_tokens']:,}", run["cut_at_budget"]))
    head = (
        "KV cache",
        "order, requests in flight",
        "answers identical to OpenCompass's order at 1",
        "mean score",
        "prompt tokens from the cache",
        "cut at the budget",
    )
    table = _table(head, rows)
    diffs = [d for result in results for d in result["differences"]]
    if not diffs:
        return table + "\n\nNo answer differs."
    lines = [f"- {d['run']}, {d['sample']} ({d['task']}): score {d['baseline_score']} -> {d['score']}" for d in diffs]
    return table + "\n\nEvery answer that differs, with both scores:\n\n" + "\n".join(lines)


def _cumulative(profile: Mapping[str, Any], function: str) -> float:
    """A function's cumulative seconds in a kind's profile (``top_cumulative`` lines: ``cum self file(func)``)."""
    for line in profile["top_cumulative"]:
        if line.rstrip().endswith(function):
            return float(line.split()[0])
    raise KeyError(function)


def profile_1000k_line(result: Mapping[str, Any]) -> str:
    """Where a 1000k infer task's time goes (``bench/pipeline_cost_1000k_profile.json``, profiled, prompts as text)."""
    infer = result["profiles"]["infer"]
    total = _cumulative(infer, "(_run_module_as_main)")
    write = _cumulative(infer, "(keep)")
    imports = _cumulative(infer, "(import_with_stand_ins)")
    encode = _cumulative(infer, "json/__init__.py:183(dumps)")
    oracle = _cumulative(infer, "(generate_from_template)")
    return (
        f"At 1000k the infer task's own work is the prompts: one task over {result['samples_predicted']} "
        f"samples of 1,000,000 tokens, profiled with prompts kept as text, spent {_pct(write / total)} of its time "
        f"writing them into the prediction files ({_pct(encode / total)} JSON-encoding each 4 MB prompt, for the "
        f"`tmp_` log and again for the file), {_pct(imports / total)} importing torch, datasets and OpenCompass's "
        f"dataset reader and base evaluator, and {_pct(oracle / total)} in the oracle (each prompt encoded and "
        "compared with its row); reading and rendering the prompts is no longer among its 40 costliest calls. "
        '`runtime(prompts="digest")` replaces the writing with one hash of each prompt.'
    )


def memory_table(runs: Sequence[tuple[Mapping[str, Any], str]]) -> str:
    """Disk and peak memory per process of 1000k runs, as measured (``bench/limits_1000k*.json``).

    Peak RSS counts the pages of the memory-mapped dataset cache a process has read; the kernel drops those
    under pressure, so the anonymous part (RSS less file-backed pages) is what a memory limit has to hold.

    Args:
        runs: (the benchmark's JSON, the row's label), in order.
    """
    rows = []
    for result, label in runs:
        run = result["runs"][0]
        peak = run["peak_rss_gb_per_kind"]
        rows.append(
            (
                label
                + (f"; the whole run in a {result['cap_gb']:g} GiB memory cgroup" if result.get("cap_gb") else ""),
                _gb(result["disk_gb"]["cache"]),
                _gb(result["disk_gb"]["predictions"]),
                f"driver {peak['driver']:.2f} GB, infer {_range(_peaks(run, 'infer'))} GB, "
                f"eval {_range(_peaks(run, 'eval'))} GB",
                f"infer {max(_peaks(run, 'infer', 'peak_anon_gb')):.2f} GB, "
                f"eval {max(_peaks(run, 'eval', 'peak_anon_gb')):.2f} GB",
            )
        )
    head = ("run", "dataset cache", "predictions", "peak RSS per process", "largest anonymous part")
    return _table(head, rows)


# ------------------------------------------------------------------------------------------------
# Request order on a real engine (bench/engine_order.py)
# ------------------------------------------------------------------------------------------------


def _captured(computed: int, prompt_tokens: int, reusable: int) -> float:
    return (prompt_tokens - computed) / reusable


def _sim_row(result: Mapping[str, Any], multiple: float, concurrency: int) -> Mapping[str, Any]:
    (row,) = [
        r
        for r in result["simulated"]["rows"]
        if abs(r["cache_multiple"] - multiple) < 1e-9 and r["concurrency"] == concurrency
    ]
    return row


def engine_shape_table(result: Mapping[str, Any]) -> str:
    """Built-in order, ours and the limit on a suite-shaped task, as the engine counted them.

    Args:
        result: ``bench/engine_order_suite_shape*.json`` (one engine setting, the replay model's rows beside).
    """
    (eng,) = result["engine"]
    sim = _sim_row(result, eng["cache_multiple"], eng["concurrency"])
    total, reusable = result["simulated"]["prompt_tokens"], result["simulated"]["reusable"]
    limit = result["simulated"]["limit_computed"]
    base = eng["builtin"]["computed"]
    rows = []
    for key, label in (
        ("builtin", "built-in (a dataset per length and depth, repeats inside; M-RS per needle count)"),
        ("ours", f"ours (the partitioner's stream, `batch_size` {eng['concurrency']})"),
    ):
        e, s = eng[key], sim[key]
        ratio = f"{e['computed'] / base:.2f}"
        captured = f"{100 * _captured(e['computed'], total, reusable):.1f}%"
        if key == "ours":
            ratio, captured = f"**{ratio}**", f"**{captured}**"
        rows.append(
            (
                label,
                f"{e['computed']:,} ({s['computed']:,})",
                ratio,
                f"{captured} ({_pct(s['captured'])})",
                f"{e['wall_s']:.0f} s",
            )
        )
    rows.append(("the limit (unbounded cache)", f"{limit:,}", f"{limit / base:.2f}", "100%", ""))
    return _table(("order", "prefill computed", "/ built-in", "reuse captured", "wall (2 loaded cores)"), rows)


def engine_small_table(result: Mapping[str, Any]) -> str:
    """The small task at every cache size and concurrency the engine was run at (``bench/engine_order.json``).

    Args:
        result: the benchmark's JSON: engine rows per (cache multiple, concurrency), the replay model's beside.
    """
    total, reusable = result["simulated"]["prompt_tokens"], result["simulated"]["reusable"]
    rows = []
    cell_seen: dict[float, int] = {}
    for eng in result["engine"]:
        m, c = eng["cache_multiple"], eng["concurrency"]
        sim = _sim_row(result, m, c)
        b, o = eng["builtin"]["computed"], eng["ours"]["computed"]
        if c == 1:
            cell = "= ours"
        elif "ours_cell" in eng:
            oc = eng["ours_cell"]["computed"]
            cell = f"{oc:,}: {oc / b:.2f}x, {_pct(_captured(oc, total, reusable))}"
            cell_seen[m] = c
        else:
            cell = f"as at {cell_seen[m]}"
        rows.append(
            (
                f"{m:g}",
                c,
                f"{b:,} ({sim['builtin']['computed']:,})",
                f"{o:,} ({sim['ours']['computed']:,})",
                f"{o / b:.2f}",
                f"{_pct(_captured(b, total, reusable))} ({_pct(sim['builtin']['captured'])})",
                f"{_pct(_captured(o, total, reusable))} ({_pct(sim['ours']['captured'])})",
                cell,
            )
        )
    return _table(
        (
            "cache (x longest prompt)",
            "in flight",
            "built-in: computed",
            "ours: computed",
            "ours / built-in",
            "reuse captured: built-in",
            "ours",
            "ours, one cell per piece: computed, / built-in, captured",
        ),
        rows,
    )


def engine_8k_line(result: Mapping[str, Any]) -> str:
    """One sentence: the replay model on the 8k suite's shape at 8 in flight (``bench/engine_order_8k_suite.json``)."""
    parts = {}
    for m in (1.2, 1.5, 3):
        row = _sim_row(result, m, 8)
        parts[m] = (
            row["ours"]["captured"],
            row["ours"]["computed"] / row["builtin"]["computed"],
            row["builtin"]["captured"],
        )
    w = result["workload"]
    return (
        f"On the 8k suite's shape (lengths {w['lengths'][0] // 1000}k-{w['lengths'][-1] // 1000}k, "
        f"{len(w['depths'])} depths, {w['repeats']} repeats, M-RS with {w['mrs_counts'][0]}-{w['mrs_counts'][-1]} "
        f"needles, ATC; {w['requests']:,} prompts, replayed by the model, `bench/engine_order_8k_suite.json`), "
        f"where a haystack group holds {len(w['lengths']) * len(w['depths'])} S-RT prompts, ours at 8 in flight and 1.5x captures "
        f"{_pct(parts[1.5][0])} of the whole-task limit and computes {parts[1.5][1]:.2f}x the built-in's prefill "
        f"(1.2x: {_pct(parts[1.2][0])}, {parts[1.2][1]:.2f}x; 3x: {_pct(parts[3][0])}, {parts[3][1]:.2f}x; "
        f"the built-in captures {_pct(parts[1.2][2])}, {_pct(parts[1.5][2])} and {_pct(parts[3][2])})."
    )


# ------------------------------------------------------------------------------------------------
# Generation, pipeline, report size (bench/run.py, bench/report_size.py)
# ------------------------------------------------------------------------------------------------


def generation_table(
    result: Sequence[Mapping[str, Any]], pipeline: Mapping[str, Any], earlier: Mapping[str, Any]
) -> str:
    """Generation in process and the whole pipeline, built-in against ours.

    Args:
        result: ``bench/generation_128k.json`` (one row per suite).
        pipeline: ``bench/pipeline_32k.json``.
        earlier: ``bench/results.json`` (version 1.0's run of the same benchmarks: the pipeline's ratio then).
    """
    rows = []
    for r in result:
        b, o = r["builtin"], r["ours"]
        rows.append(
            (
                f"generate the {r['suite']} suite in process ({o['samples']:,} prompts, {b['mb']:.0f} MB)",
                f"{_s(b['seconds'])}, {b['mb_per_s']:.1f} MB/s, {_gb(b['peak_rss_gb'])} peak RSS",
                f"{_s(o['seconds'])}, {o['mb_per_s']:.0f} MB/s, {_gb(o['peak_rss_gb'])} peak RSS",
                f"**{r['speedup']:.1f}x**",
            )
        )
    rows.append(
        (
            f"a full `opencompass` run of the {pipeline['suite']} suite (infer, eval, summary), instant model",
            _s(pipeline["builtin"]["seconds"]),
            _s(pipeline["ours"]["seconds"]),
            f"**{pipeline['speedup']:.1f}x** (version 1.0's run: {earlier['pipeline']['speedup']:.1f}x)",
        )
    )
    return _table(("measure", "built-in v2", "ours", "ratio"), rows)


def report_size_table(result: Mapping[str, Any]) -> str:
    """What grading and the report cost for a whole suite (``bench/report_size.json``)."""
    per_sample = result["embedded_samples_bytes"] / result["samples"]
    rows = [
        ("samples graded (a stand-in model, right on about half)", f"{result['samples']:,}"),
        ("grading with the real evaluator code", _s(result["grade_s"])),
        ("building the report", _s(result["report_s"])),
        ("`report.html`, every heatmap clickable down to its samples", f"{result['report_html_bytes'] / 1e6:.1f} MB"),
        (
            "of which the compressed sample list",
            f"{result['embedded_samples_bytes'] / 1e6:.1f} MB (about {per_sample:.0f} bytes a sample)",
        ),
        ("the per-sample `*.samples.jsonl` files", f"{result['samples_jsonl_bytes'] / 1e6:.1f} MB"),
    ]
    return _table((f"{result['suite']} suite", "measured"), rows)


def performance_blocks() -> dict[str, str]:
    """Every generated block of ``docs/performance.md``, from the JSON files in ``bench/``."""
    prepare = _load("prepare.json")["rows"][0]
    prepare_1000k = _load("prepare_1000k.json")["rows"][0]
    limits = _load("limits_1000k.json")
    return {
        "prepare": prepare_table(prepare, prepare_1000k),
        "limits-stages": limits_stage_table(limits),
        "limits-disk": limits_disk_line(limits),
        "limits-pipeline": pipeline_time_table(
            _load("limits_1000k_r1_stock.json"), _load("limits_1000k_r1_ours.json"), limits
        ),
        "limits-capped": limits_capped_table(_load("limits_1000k_r1_capped.json")),
        "engine-shape": engine_shape_table(_load("engine_order_suite_shape.json")),
        "engine-shape-3k": engine_shape_table(_load("engine_order_suite_shape_3k.json")),
        "engine-small": engine_small_table(_load("engine_order.json")),
        "engine-8k": engine_8k_line(_load("engine_order_8k_suite.json")),
        "generation": generation_table(
            _load("generation_128k.json"), _load("pipeline_32k.json"), _load("results.json")
        ),
        "report-size": report_size_table(_load("report_size.json")),
        "pipeline-cost": pipeline_cost_table(
            [
                (label, _load(before), _load(f"pipeline_cost_{stem}.json"))
                for label, stem, before in COST_SUITES
                if (BENCH / f"pipeline_cost_{stem}.json").exists()
            ]
        ),
        "pipeline-driver": pipeline_cost_table(
            [
                (
                    label,
                    _load(f"pipeline_driver_{stem}_opencompass.json"),
                    _load(f"pipeline_driver_{stem}_needlebench.json"),
                )
                for label, stem in DRIVER_SUITES
            ],
            sides=("`opencompass`", "`needlebench run`"),
        ),
        "pipeline-profile": pipeline_profile_line(_load("pipeline_cost_4k_profile.json")),
        "engine-outputs": engine_outputs_table(
            [
                _load(name)
                for name in ("engine_outputs.json", "engine_outputs_small_cache.json")
                if (BENCH / name).exists()
            ]
        ),
        "pipeline-1000k": profile_1000k_line(_load("pipeline_cost_1000k_profile.json")),
    }


def disk_memory_blocks() -> dict[str, str]:
    """Every generated block of ``docs/reliability/disk-memory.md``, from the JSON files in ``bench/``."""
    full = _load("limits_1000k.json")
    runs = [
        (_load("limits_1000k_r1_stock.json"), "1000k, 1 repeat, OpenCompass's inferencer and eval task"),
        (_load("limits_1000k_r1_ours.json"), "1000k, 1 repeat, ours"),
        (full, f"1000k, default repeats ({full['samples_predicted']:,} samples), ours, as shipped"),
    ]
    blocks = {"limits-memory": memory_table(runs)}
    if (BENCH / "pipeline_cost_1000k_digest.json").exists():
        blocks["digest-size"] = digest_size_line(
            _load("pipeline_cost_1000k_r1.json"),
            _load("pipeline_cost_1000k_r1_digest.json"),
            full,
            _load("pipeline_cost_1000k_digest.json"),
        )
    return blocks


# ------------------------------------------------------------------------------------------------
# The command line's help
# ------------------------------------------------------------------------------------------------


def placement_table(result: Mapping[str, Any]) -> str:
    """The ``split`` fix per profile and task (``bench/placement.json``): prompts it touches, needles it moves."""
    rows = []
    for profile, tasks in result["profiles"].items():
        for task, r in tasks.items():
            rows.append(
                [
                    profile,
                    {"srt": "S-RT", "mrt": "M-RT", "mrs": "M-RS"}[task],
                    f"{r['prompts']:,}",
                    f"{r['split']:,} ({r['split_share']}%)",
                    f"{r['by_lang']['en']}% / {r['by_lang']['zh']}%",
                    f"{r['moved_needles']:,}",
                    f"{r['move_tokens_max']} / {r['move_tokens_median']:g}",
                ]
            )
    header = [
        "profile",
        "task",
        f"prompts ({' + '.join(result['suites'])}, every cell)",
        "touched by `split`",
        "of English / Chinese prompts",
        "needles moved",
        "tokens moved (max / median)",
    ]
    return _table(header, rows)


def cli_help() -> str:
    """``needlebench --help`` and every sub-command's, as one fenced block per command."""
    from needlebench.commands.cli import main

    def run(argv: list[str]) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([*argv, "--help"])
        return out.getvalue().rstrip()

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        top = run([])
        commands = re.search(r"\{([a-z,]+)\}", top).group(1).split(",")
        parts = [f"```text\n$ needlebench --help\n{top}\n```"]
        parts += [f"```text\n$ needlebench {c} --help\n{run([c])}\n```" for c in commands]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n\n".join(parts)


def stale_pages(check: bool = True) -> list[Path]:
    """The pages whose generated blocks differ from what the current files give (rewritten unless ``check``).

    Args:
        check: compare only.
    """
    pages = {
        PERFORMANCE: performance_blocks(),
        CLI: {"cli-help": cli_help()},
        DISK_MEMORY: disk_memory_blocks(),
        DIFFERENCES: {"placement": placement_table(_load("placement.json"))},
    }
    return [path for path, blocks in pages.items() if sync_page(path, blocks, check)]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated parts of the docs, or with ``--check`` only report the stale pages."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    stale = stale_pages(check=args.check)
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(ROOT)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
