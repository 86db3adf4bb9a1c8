"""Why an OpenCompass stage stopped short: a full disk or a memory limit, said in one message.

OpenCompass runs each task in its own process; when one fails it logs ``task ... fail, see <log>``
and goes on, so a run whose predictions were lost to a full disk or to the kernel's OOM killer
would end with holes in its tables and exit code 0. OpenCompass plans the eval stage before any
infer task runs, so the first point that sees what every stage left is the summarizer: it calls
:func:`check_stages`, which asks the partitioner which predictions are still missing (the plan a
resume would run, made by the same code) and which results. Where the tasks' logs or the memory
cgroup show that they ran out of space or memory, the run stops with one message naming the stage,
the cause (the folder and the space needed, or the limit) and the resume command; other failures
keep OpenCompass's behaviour, with a warning naming them.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from opencompass.utils import get_logger, model_abbr_from_cfg

from ..cache.rows import load_rows
from ..errors import OutOfMemory, OutOfSpace
from ..tasks import config_params, is_needlebench

__all__ = ["MemoryLimit", "memory_limit", "prediction_bytes", "stage_stop", "check_stages", "OOM_KILLS_AT_INFER"]

# OOM kills in the driver's memory cgroup when the infer stage was planned (set by the partitioner): only
# kills after it are blamed on the limit (a reused cgroup may count kills of an earlier run)
OOM_KILLS_AT_INFER = [0]

# what Python prints for ENOSPC / EDQUOT, and for an allocation refused under `prlimit --as`
_DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|OutOfSpace")
_NO_MEMORY = re.compile(r"\bMemoryError\b|OutOfMemory")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a huge number


@dataclasses.dataclass(frozen=True)
class MemoryLimit:
    """The memory cgroup this process runs in.

    Attributes:
        path: its folder under ``/sys/fs/cgroup``.
        limit: its limit in bytes (None: none).
        oom_kills: processes the kernel killed in it for going over the limit, since it was made.
    """

    path: Path
    limit: int | None
    oom_kills: int


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii")
    except OSError:
        return None


def memory_limit(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = _CGROUP_ROOT) -> MemoryLimit | None:
    """The memory cgroup of this process (cgroup v2 or v1), or None where there is none to read.

    Why: a process killed by the OOM killer leaves no message of its own (SIGKILL); the cgroup's
    ``oom_kill`` counter is the only place that says what happened.

    Args:
        proc_cgroup: this process's cgroup list.
        root: where the cgroup file systems are mounted.
    """
    text = _read(proc_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "" and (root / rel / "memory.max").exists():  # v2
            folder = root / rel
            raw = (_read(folder / "memory.max") or "max").strip()
            events = _read(folder / "memory.events") or ""
            kills = re.search(r"^oom_kill (\d+)", events, re.M)
            return MemoryLimit(folder, None if raw == "max" else int(raw), int(kills.group(1)) if kills else 0)
        if "memory" in controllers.split(","):  # v1
            folder = root / "memory" / rel
            raw = _read(folder / "memory.limit_in_bytes")
            if raw is None:
                return None
            kills = re.search(r"^oom_kill (\d+)", _read(folder / "memory.oom_control") or "", re.M)
            limit = int(raw)
            return MemoryLimit(folder, None if limit >= _UNLIMITED else limit, int(kills.group(1)) if kills else 0)
    return None


def prediction_bytes(datasets: list[dict]) -> int:
    """At least how many bytes the prediction files of these dataset configs take: their prompts' UTF-8 bytes.

    OpenCompass stores every prompt in its prediction file (``origin_prompt``), so the prompts are
    a lower bound; read from the memory-mapped rows, no prompt is copied.

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
    stage: str, model_abbr: str, missing: list[dict], folder: Path, logs: Path, need: int | None = None
) -> OutOfSpace | OutOfMemory | None:
    """Why a stage left ``missing`` datasets without output, where it was a full disk or a memory limit.

    Args:
        stage: ``infer`` or ``eval``.
        model_abbr: the model's abbr.
        missing: the dataset configs without output.
        folder: where the stage writes the model's output (predictions or results).
        logs: the stage's task logs for the model (``<work_dir>/logs/<stage>/<model>``).
        need: at least how many bytes the missing output takes, where known.

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
        needed = f"They need at least {need:,} bytes (OpenCompass stores every prompt)" if need else "They need more"
        return OutOfSpace(
            f"{stage} stage stopped: {folder}: no space left on its file system while {model_abbr}'s "
            f"{'predictions' if stage == 'infer' else 'results'} were written ({names}; see {full[0]}). "
            f"{needed}; {free:,} bytes are free there. Free space or move the work dir (-w), {resume}"
        )
    cgroup = memory_limit()
    killed = cgroup is not None and cgroup.oom_kills > OOM_KILLS_AT_INFER[0]
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


def check_stages(cfg: Any) -> None:
    """After every stage ran: stop if a full disk or a memory limit left predictions or results missing.

    Only for runs planned by our partitioner (it knows what a complete run holds). Holes with another
    cause are logged as a warning, as OpenCompass goes on with them.

    Args:
        cfg: the run's OpenCompass config.

    Raises:
        OutOfSpace: a stage's output did not fit its file system.
        OutOfMemory: a stage's task was killed by a memory limit, or ran out of memory under one.
    """
    from .partitioner import NeedleBenchPartitioner  # it imports this module

    settings = dict((cfg.get("infer") or {}).get("partitioner") or {})
    kind = settings.get("type")
    if not getattr(kind, "__name__", str(kind)).endswith("NeedleBenchPartitioner"):
        return
    work_dir = Path(cfg["work_dir"])
    planner = NeedleBenchPartitioner(
        out_dir=str(work_dir / "results"),
        num_shards=int(settings.get("num_shards", 1)),
        stage="eval",
        overlength=settings.get("overlength", "shorten"),
    )
    logger = get_logger()
    unfinished = planner.unfinished_predictions(cfg)
    for model, pending in unfinished:
        m_abbr = model_abbr_from_cfg(model)
        folder, logs = work_dir / "predictions" / m_abbr, work_dir / "logs" / "infer" / m_abbr
        stop = stage_stop("infer", m_abbr, pending, folder, logs, prediction_bytes(pending))
        if stop is not None:
            raise stop
        logger.warning(f"{m_abbr}: {len(pending)} dataset(s) have no predictions; see the logs in {logs}")
    if unfinished:
        return  # their evaluation failed for want of predictions, not for a limit
    for model in cfg["models"]:
        m_abbr = model_abbr_from_cfg(model)
        folder = work_dir / "results" / m_abbr
        missing = [d for d in cfg["datasets"] if is_needlebench(d) and not (folder / f"{d['abbr']}.json").exists()]
        stop = stage_stop("eval", m_abbr, missing, folder, work_dir / "logs" / "eval" / m_abbr)
        if stop is not None:
            raise stop
