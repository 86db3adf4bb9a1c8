"""Check that this machine shows the GPUs a model's tasks ask for, before OpenCompass's ``LocalRunner`` starts one.

Without it a config whose model asks for GPUs the machine does not show fails in the runner's worker threads:
``assert len(gpus) >= num_gpus``, a traceback and a progress bar at 0 (or, where the visible ids are not
``0..n-1``, a task that waits for GPUs forever). Here the run stops before any task starts, with one line
naming each model, what it asks for, what the machine shows and the ways on.

The count is the runner's own (``LocalRunner.launch``, OpenCompass 0.5.4): the ids in ``CUDA_VISIBLE_DEVICES``
(``ASCEND_RT_VISIBLE_DEVICES`` where Ascend's ``torch_npu`` is present and sees its devices) where that is set,
read with the runner's pattern; else ``torch.cuda.device_count()`` (``torch.npu``'s). A task asks for its
model's ``run_cfg.num_gpus`` (``OpenICLInferTask``; 0 where unset), and it can start only once that many
distinct visible ids are free. Only the local runner is checked: Slurm, DLC and VOLC place tasks on other
machines. The partitioner and ``needlebench plan`` both call it; nothing here imports OpenCompass.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..placement import task_gpus

__all__ = ["Visible", "check_devices", "device_line", "devices_note", "is_local_runner", "task_gpus", "visible_gpus"]

_IDS = re.compile(r"(?<!-)\d+")  # LocalRunner's pattern: "-1" hides every GPU, as CUDA reads it
CPU_MODEL = "configs/models/smollm2_135m_cpu.py"


@dataclass(frozen=True)
class Visible:
    """The GPUs the local runner would hand out.

    Args:
        count: distinct device ids (a task can start once this many are free).
        source: where the count comes from, as the user can check it (``CUDA_VISIBLE_DEVICES=''``).
    """

    count: int
    source: str


def _npu() -> bool:
    """Whether OpenCompass's runner counts Ascend NPUs (mmengine's ``is_npu_available``), without importing
    torch where ``torch_npu`` is not installed."""
    if importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        import torch
        import torch_npu  # noqa: F401

        return hasattr(torch, "npu") and bool(torch.npu.is_available())
    except Exception:  # mmengine treats any failure to load it as "no NPU"
        return False


def visible_gpus(environ: Mapping[str, str] | None = None) -> Visible:
    """The devices ``LocalRunner`` counts on this machine (see the module).

    Args:
        environ: the environment to read (default: this process's; the runner reads the same one).
    """
    env = os.environ if environ is None else environ
    npu = _npu()
    variable = "ASCEND_RT_VISIBLE_DEVICES" if npu else "CUDA_VISIBLE_DEVICES"
    if variable in env:
        return Visible(len(set(_IDS.findall(env[variable]))), f"{variable}={env[variable]!r}")
    import torch

    if npu:
        return Visible(int(torch.npu.device_count()), "torch.npu.device_count()")
    return Visible(int(torch.cuda.device_count()), "torch.cuda.device_count()")


def is_local_runner(runner: Mapping[str, Any] | None) -> bool:
    """Whether a stage's runner starts its tasks on this machine (OpenCompass's ``LocalRunner``).

    Args:
        runner: a stage's ``runner`` section (``type`` as a name, a dotted path or a class); None where the
            config has none, and OpenCompass uses its local runner.
    """
    return runner is None or _runner_name(runner) == "LocalRunner"


def _runner_name(runner: Mapping[str, Any] | None) -> str:
    kind = (runner or {}).get("type", "")
    return (kind if isinstance(kind, str) else getattr(kind, "__name__", "")).rsplit(".", 1)[-1]


def _plural(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def device_line(needs: Sequence[tuple[str, int]], visible: Visible) -> str | None:
    """The one line that stops a run whose models ask for more GPUs per task than the machine shows; None if none do.

    Args:
        needs: ``(model abbr, GPUs each of its tasks asks for)`` for each model with tasks to start.
        visible: what the machine shows (:func:`visible_gpus`).
    """
    short = [(abbr, n) for abbr, n in needs if n > visible.count]
    if not short:
        return None
    asks = "; ".join(f"{abbr} asks for {_plural(n)} per task" for abbr, n in short)
    most = max(n for _, n in short)
    return (
        f"devices: {asks} and this machine shows {visible.count} ({visible.source}): the run stops before any task "
        f"starts. Ways on: a node with {_plural(most)}; a cluster, runtime(runner='SlurmRunner', partition=...); "
        f"or the CPU model, {CPU_MODEL} (NEEDLEBENCH_MODELS=models/smollm2_135m_cpu.py where the config calls "
        "load_models)"
    )


def check_devices(
    needs: Sequence[tuple[str, int]], runner: Mapping[str, Any] | None, visible: Visible | None = None
) -> None:
    """Stop a local run before its runner starts a task the machine cannot give its GPUs.

    Args:
        needs: ``(model abbr, GPUs each of its tasks asks for)`` for each model with tasks to start.
        runner: the stage's ``runner`` section; only ``LocalRunner`` is checked.
        visible: what the machine shows (default: :func:`visible_gpus`, read only where a task asks for a GPU).

    Raises:
        ConfigError: :func:`device_line`'s line.
    """
    if not is_local_runner(runner) or not any(n > 0 for _, n in needs):
        return
    line = device_line(needs, visible or visible_gpus())
    if line:
        raise ConfigError(line)


def devices_note(abbr: str, gpus: int, runner: Mapping[str, Any] | None) -> tuple[str, bool]:
    """What ``needlebench plan`` says of a model's devices, and whether the run would stop on them.

    Args:
        abbr: the model's abbr.
        gpus: the GPUs each of its tasks asks for (:func:`task_gpus`).
        runner: the infer stage's ``runner`` section (None: the config has none, so OpenCompass uses its local runner).

    Returns:
        ``("", False)`` for a model that asks for none; :func:`device_line`'s line and True where the local runner
        could not give them; else what each task asks for and what the machine shows (or which runner places it).
    """
    if gpus <= 0:
        return "", False
    if not is_local_runner(runner):
        return f"devices: {_plural(gpus)} per task, placed by {_runner_name(runner)}", False
    visible = visible_gpus()
    line = device_line([(abbr, gpus)], visible)
    if line:
        return line, True
    return f"devices: {_plural(gpus)} per task; this machine shows {visible.count} ({visible.source})", False
