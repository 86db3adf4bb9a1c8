"""The memory cgroup a process runs in: its limit and how many processes the kernel killed in it.

Why its own module: the partitioner records the kill count when it plans a run, and the summarizer's
stage check compares against it; both read the same files the same way.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

__all__ = ["MemoryLimit", "memory_limit"]

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
