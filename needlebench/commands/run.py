"""``needlebench run CONFIG [--replan] [--retry [MODELS]] [opencompass options]``: OpenCompass's command, leaner.

The run itself is ``opencompass.driver``'s. A ``--replan`` or ``--retry`` resumes a run (``-r TIME``): it is left in
the run folder as a typed request (``runfolder.request.RunRequest``) that the infer stage reads once, records
in the plan's history and removes.

An adaptive run (``runtime(adaptive=...)``) is a run in rounds: each ``opencompass`` command runs one (its infer
stage adds the round its records decide, ``runfolder.ladder_rounds``); ``needlebench run`` resumes the run
(``-r``, in a process of its own each time) until no model's ladder asks more, or a round adds nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError
from ..runfolder.request import RunRequest, write_request

__all__ = ["resumed_run", "run_config"]


def _option(options: Sequence[str], *names: str) -> str | None:
    """The value of the last of ``names`` in OpenCompass's options (``-w DIR``, ``--work-dir=DIR``), else None;
    ``""`` for a flag given without a value (``-r`` alone: the latest run)."""
    found = None
    for i, item in enumerate(options):
        for name in names:
            if item == name:
                following = options[i + 1] if i + 1 < len(options) else ""
                found = "" if following.startswith("-") else following
            elif item.startswith(name + "="):
                found = item.split("=", 1)[1]
    return found


def resumed_run(config: str, options: Sequence[str]) -> Path:
    """The run folder OpenCompass's options resume (``-w``, else the config's ``work_dir``; ``-r TIME`` or latest).

    Args:
        config: the config file.
        options: OpenCompass's options as given.

    Raises:
        ConfigError: no ``-r``, or no run to resume.
    """
    reuse = _option(options, "-r", "--reuse")
    if reuse is None:
        raise ConfigError("run: --replan and --retry resume a run; give it with -r TIME (or -r for the latest)")
    work = _work_dir(config, options)
    if reuse in ("", "latest"):
        runs = sorted(p for p in Path(work).iterdir() if p.is_dir()) if Path(work).is_dir() else []
        if not runs:
            raise ConfigError(f"run: {work} has no run to resume")
        return runs[-1]
    if not (Path(work) / reuse).is_dir():
        raise ConfigError(f"run: no run folder {Path(work) / reuse} to resume")
    return Path(work) / reuse


def run_config(
    config: str, options: Sequence[str], replan: bool = False, retry: str | None = None, adaptive: bool = False
) -> None:
    """Run ``config`` through OpenCompass's command line, with a request for the resumed run where one is asked.

    Args:
        config: the config file.
        options: OpenCompass's options, handed on as given.
        replan: re-plan a resumed run whose config gives another plan, keeping every answer still valid.
        retry: ask again the failed requests of these models (comma-separated abbrs; ``""``: every model's).
        adaptive: run the config as an adaptive run, the ladder's defaults, where its ``runtime()`` sets none
            (each round of it, as for a config that sets one; a resume of it gives ``--adaptive`` again).
    """
    from ..launch.driver import main as drive

    if replan or retry is not None:
        models = tuple(m for m in (retry or "").split(",") if m) or None
        write_request(resumed_run(config, options), RunRequest(replan=replan, retry=models))
    started = time.time()
    drive([config, *options], adaptive={} if adaptive else None)
    _rounds(config, options, started, adaptive)


def _work_dir(config: str, options: Sequence[str]) -> str:
    """The work dir OpenCompass's options give, else the config's (OpenCompass's default where it has none)."""
    work = _option(options, "-w", "--work-dir")
    if work:
        return work
    from mmengine.config import Config

    return str(Config.fromfile(config).get("work_dir") or "./outputs/default")


def _without(options: Sequence[str], *names: str) -> list[str]:
    """OpenCompass's options less ``names`` and their values (``-r TIME``, ``--work-dir=DIR``)."""
    out, skip = [], False
    for i, item in enumerate(options):
        if skip:
            skip = False
            continue
        if item in names:
            following = options[i + 1] if i + 1 < len(options) else ""
            skip = bool(following) and not following.startswith("-")
            continue
        if any(item.startswith(n + "=") for n in names):
            continue
        out.append(item)
    return out


def _rounds(config: str, options: Sequence[str], started: float, adaptive: bool = False) -> None:
    """An adaptive run's further rounds, each a resume of the run in a process of its own, while a model's ladder
    asks more and the round before added something (a round that adds nothing would repeat forever)."""
    from ..launch.driver import command, own_run
    from ..runfolder.ladder_rounds import pending
    from ..runfolder.plan_file import read_plan

    run = own_run([_work_dir(config, options)], os.getpid(), started)
    plan = read_plan(run) if run is not None else None
    if run is None or plan is None or plan.settings.adaptive is None:
        return
    rest = _without(options, "-r", "--reuse", "-w", "--work-dir")
    asked = -1
    while True:
        plan = read_plan(run)
        if plan is None:
            return
        due = pending(plan, run)
        total = sum(len(ids) for m in plan.models for r in m.rounds for ids in r.asks.values())
        if not any(due.values()) or total == asked:
            return
        asked = total
        print(f"needlebench: adaptive run {run}: the next round asks {sum(due.values())} prompts", file=sys.stderr)
        flag = ["--adaptive"] if adaptive else []
        done = subprocess.run([*command(), *flag, config, *rest, "-w", str(run.parent), "-r", run.name], check=False)
        if done.returncode != 0:
            raise SystemExit(done.returncode)
