"""What a command asks of a run's next stage, as one typed record the run folder holds until it is done.

``needlebench run --replan/--retry``, ``needlebench retry`` and ``needlebench batch`` write a
:class:`RunRequest` into the run folder (:data:`REQUEST_FILE`) before they start OpenCompass on it; the infer
stage reads it once (:func:`read_request`), records it in the plan's history (``plan_file.py``) and removes
it, so a later plain resume is a plain resume. Nothing reads an environment variable to decide what a stage
does. A batch request reaches the infer tasks through their task configs (the inferencer's ``batch``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write

__all__ = ["BATCH_MODES", "REQUEST_FILE", "BatchMode", "RunRequest", "clear_request", "read_request", "write_request"]

REQUEST_FILE = "needlebench_request.json"  # in the run folder, from a command until the infer stage takes it
BATCH_MODES = ("prepare", "collect")


@dataclass(frozen=True)
class BatchMode:
    """What a batch command asks the infer stage to do.

    Args:
        mode: ``"prepare"`` (write the requests) or ``"collect"`` (answer them from results).
        folder: ``<run>/batch``: prepared files in ``<folder>/<model>/``, the collected table beside them.
        models: the API models it applies to (by abbr); the stage leaves every other model alone.
    """

    mode: str
    folder: str
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in BATCH_MODES:
            raise ConfigError(f"batch mode {self.mode!r}; choose from {BATCH_MODES}")

    def table(self, model: str) -> Path:
        """Where ``collect`` keeps a model's results by request digest.

        Args:
            model: the model's abbr.
        """
        return Path(self.folder) / model / "collected.json"

    def to_dict(self) -> dict[str, Any]:
        """The mode as JSON data (the request file, an inferencer's ``batch`` argument)."""
        return {"mode": self.mode, "folder": self.folder, "models": list(self.models)}

    @classmethod
    def of(cls, data: Any) -> BatchMode:
        """A mode from :meth:`to_dict`'s data.

        Args:
            data: the mapping.

        Raises:
            ConfigError: not such a mapping.
        """
        try:
            return cls(str(data["mode"]), str(data["folder"]), tuple(str(m) for m in data.get("models") or ()))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"batch: {data!r} is not a batch mode ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class RunRequest:
    """What the next infer stage of a run is asked to do beyond a plain resume.

    Args:
        replan: a config that gives another plan re-plans the run, keeping every answer still valid
            (``carryover.py``), instead of stopping before any model call.
        retry: the models (by abbr) whose failed requests a resume asks again; None: every model's (what
            any resume does).
        batch: a provider batch's prepare or collect, None: online.
    """

    replan: bool = False
    retry: tuple[str, ...] | None = None
    batch: BatchMode | None = None

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON data (:data:`REQUEST_FILE`, the plan's history)."""
        return {
            "replan": self.replan,
            "retry": None if self.retry is None else list(self.retry),
            "batch": None if self.batch is None else self.batch.to_dict(),
        }

    @classmethod
    def of(cls, data: Any, where: str = "request") -> RunRequest:
        """A request from :meth:`to_dict`'s data, every key checked.

        Args:
            data: the mapping.
            where: what holds it, named in an error.

        Raises:
            ConfigError: not a mapping, an unknown key or a value of another type.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: {data!r} is not a run request (a JSON object)")
        unknown = sorted(set(data) - {"replan", "retry", "batch"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; a run request has replan, retry, batch")
        replan, retry, batch = data.get("replan", False), data.get("retry"), data.get("batch")
        if not isinstance(replan, bool):
            raise ConfigError(f"{where}: replan {replan!r}; true or false")
        if retry is not None and not (isinstance(retry, list) and all(isinstance(m, str) for m in retry)):
            raise ConfigError(f"{where}: retry {retry!r}; a list of model abbrs, or null for every model")
        return cls(replan, None if retry is None else tuple(retry), None if batch is None else BatchMode.of(batch))


def write_request(run: Path | str, request: RunRequest) -> Path:
    """Leave a request for the run's next infer stage (whole or not at all).

    Args:
        run: the run folder (``<work_dir>/<time>``; made if missing: a new run's folder).
        request: what to ask.
    """
    path = Path(run) / REQUEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(request.to_dict(), sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_request(run: Path | str) -> RunRequest:
    """The request a command left in the run folder; a plain resume's (all defaults) where there is none.

    Args:
        run: the run folder.

    Raises:
        ConfigError: the file is there but is not a request (named).
    """
    path = Path(run) / REQUEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RunRequest()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); remove it, or run the command that wrote it again") from None
    return RunRequest.of(data, str(path))


def clear_request(run: Path | str) -> None:
    """Remove the request once the stage has recorded it (a later resume is a plain one).

    Args:
        run: the run folder.
    """
    (Path(run) / REQUEST_FILE).unlink(missing_ok=True)
