"""Check a Slurm cluster before OpenCompass's ``SlurmRunner`` submits anything to it.

Without this check a missing ``srun``, a stopped ``munged`` or a mistyped partition shows up
as every task failing (each retried twice, after a random sleep) with the reason buried in
per-task log files. One ``sinfo`` call answers all three before the first job: it needs the
client commands, a working munge and a reachable ``slurmctld``, and it lists the partitions.

The check runs when the partitioner plans the tasks of a Slurm stage (``NeedleBenchPartitioner``),
never when a config is merely read, so ``needlebench export`` works on machines without Slurm.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["check_slurm", "is_slurm_runner", "slurm_partitions"]

_SLURM_RUNNERS = ("SlurmRunner", "SlurmSequentialRunner")
_FIX = "Nothing was submitted."


def is_slurm_runner(runner: Mapping[str, Any] | None) -> bool:
    """Whether a runner config submits through ``srun`` (OpenCompass's Slurm runners).

    Args:
        runner: a stage's ``runner`` section (``type`` as a name, a dotted path or a class).
    """
    if not runner:
        return False
    kind = runner.get("type", "")
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
    return name.rsplit(".", 1)[-1] in _SLURM_RUNNERS


def slurm_partitions(timeout: float = 30.0) -> list[str]:
    """The cluster's partition names, from ``sinfo`` (the default one without its ``*``).

    Args:
        timeout: seconds to wait for ``sinfo`` (it retries an unreachable controller for ~10 s).

    Raises:
        ConfigError: the Slurm commands are missing, munge does not work, or ``slurmctld`` cannot
            be reached; the message says which and how to fix it.
    """
    missing = [cmd for cmd in ("srun", "sinfo") if shutil.which(cmd) is None]
    if missing:
        raise ConfigError(
            f"runner SlurmRunner: Slurm is not installed here ({', '.join(missing)} not on PATH). Run on a "
            "machine of the cluster (a login node), install the Slurm client (Debian: slurm-client), or use "
            f"runtime(runner='LocalRunner'). {_FIX}"
        )
    try:
        result = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"runner SlurmRunner: `sinfo` did not answer in {timeout:.0f} s; is slurmctld reachable? {_FIX}"
        ) from None
    if result.returncode != 0:
        detail = " ".join(line.strip() for line in result.stderr.strip().splitlines()[-2:]) or "no message"
        if "munge" in result.stderr.lower() or "authentication" in result.stderr.lower():
            cause = (
                "munge does not work: start munged (as the munge user) with the cluster's key (/etc/munge/munge.key)"
            )
        else:
            cause = "the Slurm controller (slurmctld) cannot be reached: start it, or check SlurmctldHost in slurm.conf"
        raise ConfigError(f"runner SlurmRunner: {cause}. `sinfo` said: {detail}. {_FIX}")
    return [p.rstrip("*") for p in result.stdout.split()]


def check_slurm(partition: str | None = None, timeout: float = 30.0) -> None:
    """One clear message, before any ``srun``, if Slurm cannot run this config's jobs.

    Args:
        partition: the runner's ``partition`` (``None``: the cluster's default partition is used,
            so only the cluster itself is checked).
        timeout: seconds to wait for ``sinfo``.

    Raises:
        ConfigError: Slurm is not installed, munge or slurmctld does not answer, or the partition
            does not exist (the message lists the ones that do).
    """
    partitions = slurm_partitions(timeout)
    if partition and partition not in partitions:
        raise ConfigError(
            f"runner SlurmRunner: partition {partition!r} does not exist on this cluster; it has "
            f"{partitions}. Set partition= in runtime(...) to one of them. {_FIX}"
        )
