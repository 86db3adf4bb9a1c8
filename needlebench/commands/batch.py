"""``needlebench batch prepare|collect``: a run's API requests through a batch API instead of online.

``prepare TARGET`` writes each API model's pending requests as OpenAI Batch JSONL, one file per
prediction file (``<run>/batch/<model>/<dataset>[_<shard>].jsonl``, ``custom_id`` = the sample id, the
bodies the online path sends): OpenCompass's infer stage runs with nothing sent
(``runfolder/provider_batch.py``). TARGET is a config (a new run in ``--work-dir``) or a run folder (its
pending requests). The files go to the provider's batch API, or through vLLM's ``run_batch``.

``collect RUN RESULTS...`` reads the result files back into OpenCompass's prediction files by the
online path's own code (failed or missing lines recorded as ``request_failed``); ``opencompass CONFIG
-r <time>`` then evaluates as usual, and asks the failed ones again online if the model allows.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonl import read_jsonl
from ..launch import driver
from ..runfolder.plan_file import resume_command
from ..runfolder.provider_batch import read_batch_results, replay_table, write_table
from ..runfolder.request import BatchMode, RunRequest, write_request
from .retry import check_run

__all__ = ["prepare_batch", "collect_batch"]


def _opencompass(config: Path, run: Path, mode: BatchMode) -> int:
    """OpenCompass's infer stage for ``config`` in run folder ``run`` (new or resumed), asked for a batch mode
    by a request in the run folder (``runfolder.request``)."""
    write_request(run, RunRequest(batch=mode))
    args = [*driver.command(), str(config), "-w", str(run.parent), "-m", "infer", "-r", run.name]
    return subprocess.run(args, check=False).returncode


def _new_run(work: Path) -> Path:
    """A new run folder in ``work``, named as OpenCompass names one (its start time), made here so the request
    can be left in it before OpenCompass starts."""
    name = datetime.now().strftime("%Y%m%d_%H%M%S")
    run, n = work / name, 0
    while run.exists():
        n += 1
        run = work / f"{name}_{n}"
    run.mkdir(parents=True)
    return run


def _api_models(config: Path) -> list[str]:
    """The abbrs of a config's API models (the ones a batch can answer)."""
    from ..opencompass.configs import load_config
    from ..planning.limits import is_api_model

    return [m["abbr"] for m in load_config(str(config))[0].get("models", []) if is_api_model(m)]


def prepare_batch(target: Path, work_dir: Path, models: Sequence[str] = ()) -> int:
    """Write the API models' pending requests of a config or a run as batch files; print where they are.

    Args:
        target: an OpenCompass config (``.py``: a new run in ``work_dir``) or a run folder.
        work_dir: where a config's new run goes.
        models: only these API models (by abbr); empty: all.

    Returns:
        0 when the files were written, else OpenCompass's exit code.

    Raises:
        ConfigError: no config or run there, a run of another version (``retry.check_run``), a work dir that
            is a file, no API model, or a model that is not one of them.
    """
    if target.is_file():
        config = target
        if work_dir.exists() and not work_dir.is_dir():
            raise ConfigError(f"batch prepare: --work-dir {work_dir} is a file; give the folder the new run goes to")
    elif target.is_dir():
        config = check_run(target, "batch prepare")
    else:
        raise ConfigError(f"batch prepare: no such config file or run folder {target}")
    chosen = _choose(_api_models(config), models, config)
    run = target if target.is_dir() else _new_run(work_dir)
    code = _opencompass(config, run, BatchMode("prepare", str(run / "batch"), tuple(chosen)))
    if code:
        return code
    files = sorted((run / "batch").glob("*/*.jsonl"))
    lines = {f: sum(1 for line in f.open(encoding="utf-8") if line.strip()) for f in files}
    for f, n in lines.items():
        print(f"{f}: {n} requests")
    print(f"{sum(lines.values())} requests in {len(files)} files for {', '.join(chosen)}; after the batch ran:")
    print(f"  needlebench batch collect {run} RESULTS.jsonl ...")
    return 0


def collect_batch(run: Path, results: Sequence[Path], model: str | None = None) -> int:
    """Read batch result files into a run's prediction files (the online path's code); print what came back.

    Args:
        run: the run folder ``prepare`` wrote into.
        results: the result files (OpenAI Batch output and error files).
        model: the API model they answer (needed when the run has several).

    Returns:
        0 when every request was answered, 1 when some failed or had no result, else OpenCompass's exit code.

    Raises:
        ConfigError: not a run of this version (``retry.check_run``), no prepared files, an unknown or unnamed
            model, a result file that is missing, not one, empty or of another run: nothing is written.
    """
    config = check_run(run, "batch collect")
    prepared = sorted(p.parent.name for p in (run / "batch").glob("*/*.jsonl"))
    if not prepared:
        raise ConfigError(f"batch collect: {run / 'batch'} holds no prepared files (run `needlebench batch prepare`)")
    (chosen,) = _choose(sorted(set(prepared)), [model] if model else [], run / "batch", one=True)
    table, counts = replay_table(run / "batch" / chosen, _read_results(results, run / "batch" / chosen))
    if counts["unknown"]:
        print(f"warning: {counts['unknown']} result lines match no prepared request of {chosen} (ignored)")
    mode = BatchMode("collect", str(run / "batch"), (chosen,))
    write_table(mode.table(chosen), table)
    code = _opencompass(config, run, mode)
    if code:
        return code
    print(
        f"{chosen}: {counts['answered']} answered, {counts['failed']} failed, {counts['missing']} without a result "
        f"(recorded as request_failed); evaluate with: {resume_command(run, config)}"
    )
    return 1 if counts["failed"] or counts["missing"] else 0


def _read_results(paths: Sequence[Path], prepared: Path) -> dict[str, dict[str, Any]]:
    """The result lines of every file, each file checked to answer requests prepared here.

    Why: a results file of another run (or of another model) matches none of the prepared requests, and
    collecting it would record every one of them ``request_failed``; it is refused before anything is written.

    Args:
        paths: the result files, in the order given.
        prepared: the model's folder of prepared batch files (``<run>/batch/<model>``).

    Raises:
        ConfigError: a file that is missing, not batch results, empty, answers none of the prepared requests, or
            repeats a ``custom_id`` an earlier file answered.
    """
    asked = {str(item.get("custom_id")) for f in sorted(prepared.glob("*.jsonl")) for item in read_jsonl(f)}
    merged: dict[str, dict[str, Any]] = {}
    for path in paths:
        lines = read_batch_results([path])
        if not lines:
            raise ConfigError(f"batch collect: {path} holds no result lines")
        if asked.isdisjoint(lines):
            raise ConfigError(
                f"batch collect: {path} answers none of the {len(asked)} requests prepared in {prepared} "
                "(a results file of another run or model?)"
            )
        again = sorted(set(lines) & set(merged))
        if again:
            raise ConfigError(f"batch collect: {path}: custom_id {again[0]!r} has a result in an earlier file already")
        merged.update(lines)
    return merged


def _choose(available: Sequence[str], asked: Sequence[str], where: Path, one: bool = False) -> list[str]:
    """The models a batch command works on: those asked (each must be available), else all (or the one)."""
    if not available:
        raise ConfigError(f"batch: {where} has no API model (api_model / OpenAISDK) to batch")
    unknown = sorted(set(asked) - set(available))
    if unknown:
        raise ConfigError(f"batch: unknown model(s) {unknown}; the API models are {list(available)}")
    chosen = list(asked) or list(available)
    if one and len(chosen) > 1:
        raise ConfigError(f"batch collect: results answer one model; name it with --model (one of {chosen})")
    return chosen
