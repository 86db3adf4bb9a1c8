"""``needlebench retry RUN``: ask again the requests of a finished run that failed, and nothing else.

A run whose server was down or throttling for long enough ends with some samples ``request_failed``
(left out of every score, counted under ``failed``). This resumes the run with OpenCompass
(``opencompass <its config> -w <work dir> -r <time>``, the config as the run stored it, through
``needlebench run``'s lean start): the infer stage
asks again only the failed requests (``opencompass.carryover.requeue_failed``), every answered sample is
kept as it is, and the eval stage and summaries are redone for the datasets it touched.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..errors import ConfigError
from ..opencompass import driver
from ..retries import RETRY_MODELS_ENV, failed_requests

__all__ = ["retry_run", "run_config"]


def run_config(run: Path, command: str = "retry") -> Path:
    """The config OpenCompass stored in the run (its newest dump), which a resume of the run is given.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        command: the command asking, named in the error.

    Raises:
        ConfigError: the folder holds no stored config.
    """
    configs = sorted((run / "configs").glob("*.py"))
    if not configs:
        raise ConfigError(f"{command}: {run} holds no configs/*.py (is it a run folder, <work_dir>/<time>?)")
    return configs[-1]


def retry_run(run: Path, dry_run: bool = False, models: Sequence[str] = ()) -> int:
    """List a run's failed requests and, unless ``dry_run``, ask them again; print how it ended.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        dry_run: only list them.
        models: only these models' (by abbr); empty: every model's.

    Returns:
        0 when nothing is left failed (or only listing), 1 when some still failed, else OpenCompass's exit code.

    Raises:
        ConfigError: not a run folder.
    """
    if not (run / "results").is_dir():
        raise ConfigError(f"retry: {run} has no results/ (give a run folder, <work_dir>/<time>, that was evaluated)")
    before = Counter({k: n for k, n in failed_requests(run).items() if not models or k[0] in models})
    if not before:
        print(f"{run}: no failed requests")
        return 0
    for (model, dataset), n in sorted(before.items()):
        print(f"{model} / {dataset}: {n} failed")
    if dry_run:
        return 0
    config = run_config(run)
    env = {**os.environ, RETRY_MODELS_ENV: ",".join(models)} if models else None
    done = subprocess.run([*driver.command(), str(config), "-w", str(run.parent), "-r", run.name], check=False, env=env)
    if done.returncode:
        return done.returncode
    after = Counter({k: n for k, n in failed_requests(run).items() if k in before})
    for (model, dataset), n in sorted(before.items()):
        left = after.get((model, dataset), 0)
        print(f"{model} / {dataset}: {n} failed, {n} asked again, {n - left} answered now, {left} still failed")
    return 1 if sum(after.values()) else 0
