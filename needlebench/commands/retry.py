"""``needlebench retry RUN``: ask again the requests of a finished run that failed, and nothing else.

A run whose server was down or throttling for long enough ends with some samples ``request_failed``
(left out of every score, counted under ``failed``). This resumes the run with OpenCompass
(``opencompass <its config> -w <work dir> -r <time>``, the config as the run stored it, through
``needlebench run``'s lean start): the infer stage
asks again only the failed requests (``runfolder.carryover.requeue_failed``), every answered sample is
kept as it is, and the eval stage and summaries are redone for the datasets it touched.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonl import BadLine, iter_jsonl
from ..launch import driver
from ..runfolder.plan_file import PLAN_FILE, StoredPlan
from ..runfolder.request import RunRequest, write_request
from ..runfolder.retries import failed_requests
from ..runfolder.status import stored_config
from ..sample import DATASET_VERSION

__all__ = ["check_run", "retry_run", "run_config"]


def run_config(run: Path, command: str = "retry") -> Path:
    """The config OpenCompass stored in the run (its newest dump), which a resume of the run is given.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        command: the command asking, named in the error.

    Raises:
        ConfigError: the folder holds no stored config.
    """
    config = stored_config(run)
    if config is None:
        runs = sorted(p.name for p in run.iterdir() if (p / "configs").is_dir()) if run.is_dir() else []
        if runs:
            raise ConfigError(f"{command}: {run} is a work dir; give one of its run folders, e.g. {run / runs[-1]}")
        raise ConfigError(f"{command}: {run} holds no configs/*.py (is it a run folder, <work_dir>/<time>?)")
    return config


def check_run(run: Path, command: str) -> Path:
    """A folder that a resume of this package may continue: a run folder, made by this package's version.

    Why: a resume (``retry``, ``batch``) re-plans with this package and asks requests with its prompts; in a
    run another version made, the requests asked again would carry another dataset version than the answers
    kept beside them, or the stored plan would be read as no plan and every limit decided again.

    Args:
        run: the folder given.
        command: the command asking, named in the error.

    Returns:
        The run's stored config (:func:`run_config`).

    Raises:
        ConfigError: no such folder, not a run folder, a stored plan this package cannot read (or one with
            keys it does not know), or graded samples of another dataset version (or none recorded).
    """
    if not run.exists():
        raise ConfigError(f"{command}: no such run folder {run}")
    if not run.is_dir():
        raise ConfigError(f"{command}: {run} is a file; give a run folder, <work_dir>/<time>")
    config = run_config(run, command)
    plan = run / PLAN_FILE
    if plan.exists():
        try:
            text = plan.read_text(encoding="utf-8")
            unknown = _unknown_key(json.loads(text), json.loads(StoredPlan.from_json(text).to_json()))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            unknown = f"unreadable here: {type(exc).__name__}: {exc}"
        if unknown:
            raise ConfigError(
                f"{command}: {plan} is not a plan this needlebench reads ({unknown}); a run of another version? "
                "resume it with the version that made it"
            )
    for path in sorted((run / "results").glob("*/*.samples.jsonl")):
        bad: list[BadLine] = []  # a record that cannot be read is the report's to count, not a version
        for number, record in iter_jsonl(path, bad):  # one eval task wrote the file: its first record speaks
            version = record.get("version") if isinstance(record, dict) else DATASET_VERSION
            if version != DATASET_VERSION:
                raise ConfigError(
                    f"{command}: {path}:{number} is a sample of dataset version {version}; this needlebench makes "
                    f"{DATASET_VERSION} (resume the run with the version that made it)"
                )
            break
    return config


def _unknown_key(stored: Any, read: Any, where: str = "") -> str:
    """The first key of a stored plan that reading it drops (one a later version writes), else ``""``.

    A key the reader fills in where the stored plan lacks it (a field added since, read as unset) is no
    difference: such a plan is one this package resumes.
    """
    if isinstance(stored, dict) and isinstance(read, dict):
        for key, value in stored.items():
            if key not in read:
                return f"a key {where}{key} it does not know"
            found = _unknown_key(value, read[key], f"{where}{key}.")
            if found:
                return found
    elif isinstance(stored, list) and isinstance(read, list):
        for i, (a, b) in enumerate(zip(stored, read)):
            found = _unknown_key(a, b, f"{where}{i}.")
            if found:
                return found
    return ""


def retry_run(run: Path, dry_run: bool = False, models: Sequence[str] = ()) -> int:
    """List a run's failed requests and, unless ``dry_run``, ask them again; print how it ended.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        dry_run: only list them.
        models: only these models' (by abbr); empty: every model's.

    Returns:
        0 when nothing is left failed (or only listing), 1 when some still failed, else OpenCompass's exit code.

    Raises:
        ConfigError: not a run folder of this version (:func:`check_run`), one not evaluated, a model it does
            not have, or nothing failed (of those models): nothing is started, nothing written.
    """
    config = check_run(run, "retry")
    if not (run / "results").is_dir():
        raise ConfigError(f"retry: {run} has no results/ (give a run folder, <work_dir>/<time>, that was evaluated)")
    known = sorted(p.name for p in (run / "results").iterdir() if p.is_dir())
    unknown = sorted(set(models) - set(known))
    if unknown:
        raise ConfigError(f"retry: {run} has no model(s) {unknown}; its models: {known}")
    before = Counter({k: n for k, n in failed_requests(run).items() if not models or k[0] in models})
    if not before:
        of = f" of {', '.join(models)}" if models else ""
        raise ConfigError(f"retry: {run} has no failed requests{of}; nothing to ask again")
    for (model, dataset), n in sorted(before.items()):
        print(f"{model} / {dataset}: {n} failed")
    if dry_run:
        return 0
    write_request(run, RunRequest(retry=tuple(models) if models else None))
    done = subprocess.run([*driver.command(), str(config), "-w", str(run.parent), "-r", run.name], check=False)
    if done.returncode:
        return done.returncode
    after = Counter({k: n for k, n in failed_requests(run).items() if k in before})
    for (model, dataset), n in sorted(before.items()):
        left = after.get((model, dataset), 0)
        print(f"{model} / {dataset}: {n} failed, {n} asked again, {n - left} answered now, {left} still failed")
    return 1 if sum(after.values()) else 0
