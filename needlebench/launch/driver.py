"""``needlebench run CONFIG [opencompass options]``: OpenCompass's own command, without importing all it ships.

The ``opencompass`` command imports, before it reads a config, every runner, task, dataset, model and
summarizer module OpenCompass ships (``opencompass.utils.run`` alone pulls ``opencompass.datasets`` whole,
with ``evaluate``, ``transformers.pipelines`` and ``sklearn``): measured 14 s of CPU on this 2-core machine,
on every run, on top of what the run does. This entry point runs the very same ``opencompass.cli.main.main``
with the same arguments after putting the lazy shells of ``task_entry.py`` in place (plus
``opencompass.summarizers``), and with ``opencompass.datasets.custom`` stood in for while
``opencompass.utils.run`` imports (its one name builds a config for ``--custom-dataset-path`` only), as are the
model classes it takes (read only for ``--hf-path`` and ``--accelerator``, which get the real ones). The
run's files are those ``opencompass`` writes (``tests/test_task_entry.py`` compares the two runs' files).

It also keeps a setting OpenCompass asks for and mmengine drops: OpenCompass loads the config with
``Config.fromfile(..., format_python_code=False)``, but mmengine 0.10's ``fromfile`` passes that flag on only
for lazy-import configs, so the ``opencompass`` script formats the run's config dump (``configs/<time>.py``)
with yapf: 5 s of CPU for a one-model config of four datasets. Here the flag holds, and the dump is the same
Python, unformatted (read back to the same config).

On a terminal it draws the run's live status under OpenCompass's output (``report.status_view.LiveStatus``:
samples and tokens done per model, the rate, the ETA), read from the run's files a few times a second in a
thread of this process; OpenCompass's lines scroll above it. In a pipe or a log file it draws nothing.

A key a config holds in clear text never reaches the run folder: as each config loads, the clear ``key`` of
each of our API models moves into this process's environment (inherited by every task process) and the config
names that variable instead (``runfolder.keys.hide_keys``), so OpenCompass's dump and its task files hold the
variable's name only. Keys that cannot move (OpenCompass's own API classes, headers) are scrubbed from the
dump by the partitioner right after it is written (``partitioner.NeedleBenchPartitioner``).

A config that names a type by its short registry name (``type="OpenICLInferTask"``) still gets it: a
registry lookup that finds nothing imports the lazy packages whole and looks again
(``task_entry.load_whole_on_registry_miss``).

    python -m needlebench.launch.driver [--adaptive] CONFIG [options]   # = needlebench run [--adaptive] CONFIG [options]
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .task_entry import (
    LAZY,
    LAZY_PACKAGES,
    STAND_INS,
    StandIns,
    load_whole_on_registry_miss,
    start_lean,
)

__all__ = [
    "DRIVER_LAZY_PACKAGES",
    "DRIVER_STAND_INS",
    "RUN_MODEL_CLASSES",
    "adaptive_on_load",
    "command",
    "hide_keys_on_load",
    "keep_format_flag",
    "main",
    "note_work_dirs",
    "own_run",
    "real_classes_when_read",
    "work_dir_option",
]

# the task entry's packages, and the summarizers (``opencompass.summarizers.subjective`` imports sklearn)
DRIVER_LAZY_PACKAGES = (*LAZY_PACKAGES, "opencompass.summarizers")
# The model classes ``opencompass.utils.run`` takes from ``opencompass.models`` as it imports: read only to build a
# model from the command line (``--hf-path``) or to move a model to another engine (``--accelerator``), both in
# ``get_config_from_arg``; each one read imports its module, and the HuggingFace ones transformers (1.5 s of CPU
# on every run). Stood in for while the module imports; :func:`real_classes_when_read` puts the real ones back
# before a command line that asks for either is read (as OpenCompass parsed it: abbreviations and all).
RUN_MODEL_CLASSES = (
    "VLLM",
    "HuggingFace",
    "HuggingFaceBaseModel",
    "HuggingFaceCausalLM",
    "HuggingFaceChatGLM3",
    "HuggingFacewithChatTemplate",
    "TurboMindModelwithChatTemplate",
    "VLLMwithChatTemplate",
)
DRIVER_STAND_INS = {
    **STAND_INS,
    "opencompass.utils.run": StandIns(
        first=("tabulate", "mmengine.config", "opencompass.models", "opencompass.partitioners", "opencompass.runners"),
        packages={
            "opencompass.datasets.custom": {"make_custom_dataset_config": LAZY},
            "opencompass.models": dict.fromkeys(RUN_MODEL_CLASSES, LAZY),
        },
    ),
}


def real_classes_when_read() -> None:
    """``opencompass.utils.run.get_config_from_arg`` putting the real model classes in its module first when the
    parsed command line builds a model (``hf_path``) or moves one to another engine (``accelerator``).

    Before ``opencompass.cli.main`` imports (it takes the function by name).
    """
    import importlib

    run = importlib.import_module("opencompass.utils.run")
    read = run.get_config_from_arg
    if getattr(read, "_needlebench_real_classes", False):
        return

    def get_config_from_arg(args: Any) -> Any:
        if getattr(args, "hf_path", None) or getattr(args, "accelerator", None):
            models = importlib.import_module("opencompass.models")
            for name in RUN_MODEL_CLASSES:
                setattr(run, name, getattr(models, name))
        return read(args)

    get_config_from_arg._needlebench_real_classes = True  # type: ignore[attr-defined]
    run.get_config_from_arg = get_config_from_arg


def command(python: str = sys.executable) -> list[str]:
    """The command line that starts OpenCompass this way (``needlebench run``'s start), before the config.

    Args:
        python: the interpreter, one with needlebench and OpenCompass installed (default: this one).
    """
    return [python, "-m", __name__]


def keep_format_flag() -> None:
    """``mmengine.Config.fromfile`` honouring ``format_python_code=False`` for every config (see the module)."""
    from mmengine.config import Config

    load = Config.fromfile
    if getattr(load, "_needlebench_keeps_format_flag", False):
        return
    signature = inspect.signature(load)

    def fromfile(*args: Any, **kwargs: Any) -> Any:
        config = load(*args, **kwargs)
        if signature.bind(*args, **kwargs).arguments.get("format_python_code", True) is False:
            object.__setattr__(config, "_format_python_code", False)
        return config

    fromfile._needlebench_keeps_format_flag = True  # type: ignore[attr-defined]
    Config.fromfile = staticmethod(fromfile)  # type: ignore[method-assign]


def hide_keys_on_load() -> None:
    """``mmengine.Config.fromfile`` moving each loaded config's clear API keys into the environment (see the module).

    OpenCompass's command dumps the config it loaded into the run folder (``configs/<time>_<pid>.py``) and runs
    the dump read back; the keys must be out of it before that dump, and this load is the last step before it.
    """
    import os

    from mmengine.config import Config

    from ..runfolder.keys import hide_keys

    load = Config.fromfile
    if getattr(load, "_needlebench_hides_keys", False):
        return

    def fromfile(*args: Any, **kwargs: Any) -> Any:
        config = load(*args, **kwargs)
        models = config.get("models")
        if isinstance(models, list):
            os.environ.update(hide_keys(m for m in models if isinstance(m, dict)))
        return config

    fromfile._needlebench_hides_keys = True  # type: ignore[attr-defined]
    Config.fromfile = staticmethod(fromfile)  # type: ignore[method-assign]


def adaptive_on_load(options: dict[str, Any]) -> None:
    """``mmengine.Config.fromfile`` making each loaded run config an adaptive run (``needlebench run --adaptive``):
    both stages' partitioners (ours, as ``runtime()`` writes them) get ``adaptive`` where the config sets none.

    Why at load: OpenCompass dumps the config it loaded into the run folder and runs the dump, so the setting is
    in the run's own record of its config, and in its plan's settings, as if the config had written it.

    Args:
        options: the ladder's options (``{}``: its defaults).
    """
    from mmengine.config import Config

    load = Config.fromfile

    def fromfile(*args: Any, **kwargs: Any) -> Any:
        config = load(*args, **kwargs)
        stages = [config.get(s) for s in ("infer", "eval") if isinstance(config.get(s), dict)]
        if stages:
            parts = [stage.get("partitioner") or {} for stage in stages]
            if any("adaptive" not in p for p in parts):  # runtime() writes every setting, None where unset
                raise SystemExit(
                    "needlebench: run --adaptive: the config's partitioner is not needlebench's; use runtime()"
                )
            for part in parts:
                if part.get("adaptive") is None:
                    part["adaptive"] = dict(options)
        return config

    Config.fromfile = staticmethod(fromfile)  # type: ignore[method-assign]


def main(argv: list[str] | None = None, adaptive: dict[str, Any] | None = None) -> None:
    """Run OpenCompass's command line on ``argv`` (a config and OpenCompass's options), lean imports first.

    Args:
        argv: ``opencompass``'s arguments; default ``sys.argv[1:]``, where a leading ``--adaptive`` (ours) is
            taken off and read as ``adaptive={}``.
        adaptive: make the config an adaptive run with these ladder options where its ``runtime()`` sets none
            (``needlebench run --adaptive``); None: the config as it is.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None and args[:1] == ["--adaptive"]:
        args, adaptive = args[1:], {}
    started = time.time()
    why = start_lean(DRIVER_LAZY_PACKAGES, DRIVER_STAND_INS)  # on another OpenCompass: its imports as they are
    if why is not None:
        print(f"needlebench: the lean start is off ({why}); OpenCompass is imported in full", file=sys.stderr)
    load_whole_on_registry_miss()
    real_classes_when_read()
    keep_format_flag()
    hide_keys_on_load()
    if adaptive is not None:
        adaptive_on_load(adaptive)
    from opencompass.cli.main import main as opencompass_main

    sys.argv = ["opencompass", *args]
    if (
        not sys.stderr.isatty()
    ):  # a pipe or a log file: OpenCompass's output alone, as the opencompass command writes it
        opencompass_main()
        return
    from ..report.status_view import LiveStatus

    work_dirs = [w] if (w := work_dir_option(args)) else []
    if not work_dirs:
        note_work_dirs(work_dirs)
    with LiveStatus(lambda: own_run(work_dirs or ["outputs/default"], os.getpid(), started)):
        opencompass_main()


def work_dir_option(args: list[str]) -> str | None:
    """The work dir OpenCompass's options give (``-w DIR``, ``--work-dir DIR`` or ``--work-dir=DIR``), else None.

    Args:
        args: the config and OpenCompass's options.
    """
    found = None
    for i, item in enumerate(args):
        if item in ("-w", "--work-dir") and i + 1 < len(args):
            found = args[i + 1]
        elif item.startswith("--work-dir="):
            found = item.split("=", 1)[1]
    return found


def note_work_dirs(seen: list[str]) -> None:
    """``mmengine.Config.fromfile`` appending each loaded config's ``work_dir`` (OpenCompass's default where it has
    none) to ``seen``: where the live view looks for the run folder of a run given no ``-w``.

    Args:
        seen: the list to append to.
    """
    from mmengine.config import Config

    load = Config.fromfile

    def fromfile(*args: Any, **kwargs: Any) -> Any:
        config = load(*args, **kwargs)
        seen.append(str(config.get("work_dir") or os.path.join("outputs", "default")))
        return config

    Config.fromfile = staticmethod(fromfile)  # type: ignore[method-assign]


def own_run(work_dirs: list[str], pid: int, since: float) -> Path | None:
    """The run folder this process runs: one under a work dir whose plan, written since ``since``, names ``pid``
    as the process of its last stage (a fresh run's folder, or the one ``-r`` resumes).

    Args:
        work_dirs: where to look.
        pid: this process.
        since: when this process started the run (Unix seconds).
    """
    from ..runfolder.plan_file import PLAN_FILE

    for work in dict.fromkeys(work_dirs):
        root = Path(work)
        if not root.is_dir():
            continue
        for run in sorted(root.iterdir(), reverse=True):
            plan = run / PLAN_FILE
            try:
                if plan.stat().st_mtime < since - 1:
                    continue
                history = json.loads(plan.read_text(encoding="utf-8")).get("history") or [{}]
            except (OSError, ValueError):
                continue
            if history[-1].get("pid") == pid:
                return run
    return None


if __name__ == "__main__":
    main()
