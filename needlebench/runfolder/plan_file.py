"""The run's stored plan (``<run>/needlebench_plan.json``): the plan, what it was made from, and the run's history.

The file is the plan's JSON (``planning.run.RunPlan``) with three keys of the run's beside it:
``config_digest`` (the digest of the settings, models and datasets the plan was made from),
``fingerprints`` (each needlebench dataset's rows, ``cache.store.RowsDigest``) and ``history`` (one entry
per stage: what it did, what it was asked (``request.RunRequest``; the eval stage is asked nothing), and who
runs it since when). A resume reads it first and
renders its tasks from it (``lifecycle.py``); the eval stage, the stage check, the reports and
``needlebench prompt`` read the plan from it.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import atomic_write
from ..planning.run import RunPlan

__all__ = ["PLAN_FILE", "StoredPlan", "read_plan", "read_stored", "resume_command", "retry_command", "write_stored"]

log = logging.getLogger(__name__)

PLAN_FILE = "needlebench_plan.json"  # written by the infer stage, read by the eval stage, reports and commands
_RUN_KEYS = ("config_digest", "fingerprints", "history")  # the run's keys beside the plan's


@dataclass(frozen=True)
class StoredPlan:
    """A run's plan with what it was made from.

    Args:
        plan: the plan.
        config_digest: digest of the settings, models and datasets it was made from (``""``: not recorded).
        fingerprints: per needlebench dataset abbr, its rows' fingerprint when the plan was made.
        history: per stage, in order: ``{"stage": "fresh"|"resume"|"replan"|"eval", "request": {...}, "at": ...,
            "host": ..., "pid": ...}`` (``lifecycle._stage_entry``).
    """

    plan: RunPlan
    config_digest: str = ""
    fingerprints: dict[str, str] = field(default_factory=dict)
    history: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> str:
        """The file's text."""
        data = self.plan.to_dict()
        data.update(config_digest=self.config_digest, fingerprints=self.fingerprints, history=list(self.history))
        return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> StoredPlan:
        """The stored plan read back from :meth:`to_json`'s text (a plan stored before the run's keys: empty).

        Args:
            text: the file's text.
        """
        data = json.loads(text)
        return cls(
            RunPlan.from_dict(data),
            str(data.get("config_digest") or ""),
            {str(k): str(v) for k, v in (data.get("fingerprints") or {}).items()},
            tuple(data.get("history") or ()),
        )


def write_stored(run: Path | str, stored: StoredPlan) -> Path:
    """Store a run's plan in its folder, whole or not at all.

    Args:
        run: the run folder.
        stored: the plan and its run keys.
    """
    path = Path(run) / PLAN_FILE
    with atomic_write(path) as tmp:
        tmp.write_text(stored.to_json() + "\n", encoding="utf-8")
    return path


def read_stored(run: Path | str) -> StoredPlan | None:
    """The plan a run's infer stage stored, or None where it stored none (or it cannot be read: warned).

    Args:
        run: the run folder.
    """
    path = Path(run) / PLAN_FILE
    try:
        return StoredPlan.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("%s is unreadable (%s: %s); the run is planned again", path, type(exc).__name__, exc)
        return None


def read_plan(run: Path | str) -> RunPlan | None:
    """The plan alone (:func:`read_stored`), for the readers that need its decisions only.

    Args:
        run: the run folder.
    """
    stored = read_stored(run)
    return stored.plan if stored is not None else None


def resume_command(run: Path | str, config: Path | str = "CONFIG", replan: bool = False, adaptive: bool = False) -> str:
    """The one command that continues a run from its stored plan, quoted for a shell: ``needlebench run CONFIG -w
    PARENT -r NAME`` (``opencompass`` takes the same arguments).

    Args:
        run: the run folder.
        config: the config to name (the run's stored one where known; ``CONFIG`` where the user picks it).
        replan: re-plan the run, keeping every answer still valid (``--replan``).
        adaptive: an adaptive run (``--adaptive``: what a run started with it needs again; a no-op for a config
            whose ``runtime()`` sets one).
    """
    run = Path(run)
    return shlex.join(
        ["needlebench", "run", str(config), "-w", str(run.parent), "-r", run.name]
        + ["--replan"] * replan
        + ["--adaptive"] * adaptive
    )


def retry_command(run: Path | str) -> str:
    """The one command that asks a finished run's failed requests again, every answered sample kept.

    Args:
        run: the run folder.
    """
    return f"needlebench retry {shlex.quote(str(run))}"
