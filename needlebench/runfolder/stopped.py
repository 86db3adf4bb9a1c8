"""Why an OpenCompass stage stopped short: a full disk or a memory limit, said in one message.

OpenCompass runs each task in its own process; when one fails it logs ``task ... fail, see <log>``
and goes on, so a run whose predictions were lost to a full disk or to the kernel's OOM killer
would end with holes in its tables and exit code 0. The first point that sees what every stage left
is the summarizer: it calls :func:`check_stages`, which reads the run's plan (``plan_file.py``,
stored by the infer stage) and the run's files, and writes nothing: which planned pieces have no whole
prediction file, and which datasets no result. Where the tasks' logs or the memory cgroup (kills since
the plan was made) show that they ran out of space or memory, the run stops with one message naming the
stage, the cause (the folder and the space needed, or the limit) and the resume command; other
failures keep OpenCompass's behaviour, with a warning naming them. Repairing cut files is the infer
stage's job when a resume starts (``pieces.py``), not this check's.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pyarrow.compute as pc

from ..cache.rows import load_rows
from ..cgroups import memory_limit
from ..errors import OutOfMemory, OutOfSpace
from ..planning.run import part_config
from ..tasks import config_params, is_needlebench
from .pieces import piece_done
from .plan_file import read_plan

__all__ = ["prediction_bytes", "stage_stop", "check_stages"]

# what Python prints for ENOSPC / EDQUOT, and for an allocation refused under `prlimit --as`
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|OutOfSpace")
DIGEST_BYTES = 64  # a sha256 in hex: what a prediction entry keeps of its prompt under prompts="digest"
_NO_MEMORY = re.compile(r"\bMemoryError\b|OutOfMemory")


def prediction_bytes(datasets: list[dict]) -> int:
    """At least how many bytes the prediction files of these dataset configs take: their prompts' UTF-8 bytes.

    OpenCompass stores every prompt in its prediction file (``origin_prompt``), so the prompts are
    a lower bound; read from the memory-mapped rows, no prompt is copied. A piece whose inferencer keeps
    digests (``runtime(prompts="digest")``) needs a digest's bytes per sample instead.

    Args:
        datasets: needlebench dataset configs as the partitioner hands them out (``test_range`` respected).
    """
    total = 0
    for d in datasets:
        if not is_needlebench(d):
            continue
        rows = load_rows(d["task"], **config_params(d))
        span = (d.get("reader_cfg") or {}).get("test_range") or ""
        match = re.fullmatch(r"\[(\d*):(\d*)\]", span.replace(" ", ""))
        if match:
            start, end = int(match.group(1) or 0), int(match.group(2) or len(rows))
            rows = rows.select(range(start, min(end, len(rows))))
        if ((d.get("infer_cfg") or {}).get("inferencer") or {}).get("prompts") == "digest":
            total += DIGEST_BYTES * len(rows)
            continue
        prompts = rows.with_format("arrow")[:]["prompt"]
        total += int(pc.sum(pc.binary_length(prompts)).as_py() or 0)
    return total


def _logs_matching(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    """Task logs in ``folder`` whose text matches ``pattern`` (a log's tail is enough: read the last 64 kB)."""
    found = []
    for log in sorted(folder.glob("*.out")) if folder.is_dir() else []:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 65536))
            if pattern.search(fh.read().decode("utf-8", "replace")):
                found.append(log)
    return found


def stage_stop(
    stage: str,
    model_abbr: str,
    missing: list[dict],
    folder: Path,
    logs: Path,
    need: int | None = None,
    oom_kills_before: int | None = None,
) -> OutOfSpace | OutOfMemory | None:
    """Why a stage left ``missing`` datasets without output, where it was a full disk or a memory limit.

    Args:
        stage: ``infer`` or ``eval``.
        model_abbr: the model's abbr.
        missing: the dataset configs without output.
        folder: where the stage writes the model's output (predictions or results).
        logs: the stage's task logs for the model (``<work_dir>/logs/<stage>/<model>``).
        need: at least how many bytes the missing output takes, where known.
        oom_kills_before: the memory cgroup's kill count when the run was planned; only kills after it are
            this run's (None: not known, so no kill is blamed on it).

    Returns:
        The error to stop with, or None when neither cause shows (the caller warns and goes on).
    """
    if not missing:
        return None
    names = ", ".join(d["abbr"] for d in missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    resume = "then resume the run (`opencompass CONFIG -r TIMESTAMP`): finished work is kept"
    full = _logs_matching(logs, _DISK_FULL)
    if full:
        folder.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(folder).free
        needed = (
            f'They need at least {need:,} bytes (OpenCompass stores every prompt; runtime(prompts="digest") '
            "keeps its digest instead)"
            if need
            else "They need more"
        )
        return OutOfSpace(
            f"{stage} stage stopped: {folder}: no space left on its file system while {model_abbr}'s "
            f"{'predictions' if stage == 'infer' else 'results'} were written ({names}; see {full[0]}). "
            f"{needed}; {free:,} bytes are free there. Free space or move the work dir (-w), {resume}"
        )
    cgroup = memory_limit()
    killed = cgroup is not None and oom_kills_before is not None and cgroup.oom_kills > oom_kills_before
    no_memory = _logs_matching(logs, _NO_MEMORY)
    if killed or no_memory:
        if killed:
            limit = f"{cgroup.limit / 2**30:.2f} GiB" if cgroup.limit else "its limit"  # type: ignore[union-attr]
            how = f"killed by the memory limit of {limit} (cgroup {cgroup.path}, {cgroup.oom_kills} OOM kills)"  # type: ignore[union-attr]
        else:
            how = f"out of memory under its process limit (MemoryError, see {no_memory[0]})"
        return OutOfMemory(
            f"{stage} stage stopped: {model_abbr}'s {stage} task was {how} before it wrote {names}. Raise the "
            f"limit, or cut the run into more, smaller tasks (runtime(num_shards=...)), {resume}"
        )
    return None


def check_stages(work_dir: Path | str, models: list[str], datasets: list[dict]) -> None:
    """After every stage ran: stop if a full disk or a memory limit left predictions or results missing.

    Only for runs our partitioner planned (its plan says what a complete run holds); reads, never writes.
    Holes with another cause are logged as a warning, as OpenCompass goes on with them.

    Args:
        work_dir: the run folder.
        models: the run's model abbrs, in config order.
        datasets: the run's dataset configs.

    Raises:
        OutOfSpace: a stage's output did not fit its file system.
        OutOfMemory: a stage's task was killed by a memory limit, or ran out of memory under one.
    """
    work_dir = Path(work_dir)
    plan = read_plan(work_dir)
    if plan is None:
        return
    kills = plan.memory.oom_kills if plan.memory is not None else None
    logger = logging.getLogger(__name__)
    by_abbr = {d["abbr"]: d for d in datasets}
    pending_any = False
    for m_abbr in models:
        run = plan.model(m_abbr)
        if run is None:
            continue
        folder, logs = work_dir / "predictions" / m_abbr, work_dir / "logs" / "infer" / m_abbr
        pending = [
            part_config(by_abbr[p.dataset], run.limits[p.dataset], p)
            for shard in run.shards
            for p in shard.parts
            if p.dataset in by_abbr and not piece_done(folder, p.dataset, p.abbr)
        ]
        if not pending:
            continue
        pending_any = True
        stop = stage_stop("infer", m_abbr, pending, folder, logs, prediction_bytes(pending), kills)
        if stop is not None:
            raise stop
        logger.warning(f"{m_abbr}: {len(pending)} dataset(s) have no predictions; see the logs in {logs}")
    if pending_any:
        return  # their evaluation failed for want of predictions, not for a limit
    for m_abbr in models:
        folder = work_dir / "results" / m_abbr
        missing = [d for d in datasets if is_needlebench(d) and not (folder / f"{d['abbr']}.json").exists()]
        stop = stage_stop("eval", m_abbr, missing, folder, work_dir / "logs" / "eval" / m_abbr, None, kills)
        if stop is not None:
            raise stop
