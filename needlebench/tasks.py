"""The single task registry: name -> parameters, generator and grader.

Adapters (OpenCompass datasets, the export CLI, the benchmark) look tasks up
here and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .graders import SampleScore, ScoreOptions, grade_mrt, grade_srt
from .sample import Sample
from .sparse import SparseParams, generate_mrt, generate_srt, oracle_mrt, oracle_srt

__all__ = [
    "TaskSpec",
    "TASKS",
    "get_task",
    "make_params",
    "register_task",
    "config_params",
    "type_name",
    "is_needlebench",
    "CONFIG_KEYS",
]

# Keys of an OpenCompass dataset config that belong to OpenCompass, not to the task's parameters.
CONFIG_KEYS = frozenset({"type", "abbr", "reader_cfg", "infer_cfg", "eval_cfg", "task", "k", "n"})


@dataclass(frozen=True)
class TaskSpec:
    """A task: its parameters, generator and grader.

    ``oracle`` maps a sample's structured gold to a perfect answer in the task's answer format
    (the scripted oracle model answers with it, so a run can be checked to score 100 end to end).
    """

    name: str
    family: str  # "sparse" or "dense"
    params: type
    generate: Callable[[Any], Iterator[Sample]]
    grade: Callable[[object, dict, ScoreOptions], SampleScore]
    title: str
    oracle: Callable[[dict], str] | None = None


TASKS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec) -> TaskSpec:
    TASKS[spec.name] = spec
    return spec


register_task(
    TaskSpec("srt", "sparse", SparseParams, generate_srt, grade_srt, "Single-needle retrieval (S-RT)", oracle_srt)
)
register_task(
    TaskSpec("mrt", "sparse", SparseParams, generate_mrt, grade_mrt, "Multi-needle retrieval (M-RT)", oracle_mrt)
)


def get_task(name: str) -> TaskSpec:
    _load_plugins()
    try:
        return TASKS[name]
    except KeyError:
        raise ConfigError(f"task: unknown task {name!r}; choose from {sorted(TASKS)}") from None


def make_params(task: str, **kwargs: Any) -> Any:
    """Build a task's parameter dataclass from config kwargs, naming any unknown field."""
    spec = get_task(task)
    fields = {f.name: f for f in dataclasses.fields(spec.params)}
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise ConfigError(f"task {task!r}: unknown parameter(s) {unknown}; valid: {sorted(fields)}")
    clean = {}
    for key, value in kwargs.items():
        if isinstance(value, list):
            value = tuple(value)
        clean[key] = value
    try:
        return spec.params(**clean)
    except TypeError as exc:
        raise ConfigError(f"task {task!r}: {exc}") from exc


def config_params(dataset: Mapping[str, Any]) -> dict[str, Any]:
    """The task parameters of an OpenCompass dataset config (everything but OpenCompass's own keys)."""
    return {k: v for k, v in dataset.items() if k not in CONFIG_KEYS}


def type_name(t: Any) -> str:
    """A config ``type`` as a dotted name, whether given as a string or as a class."""
    return t if isinstance(t, str) else f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', '')}"


def is_needlebench(dataset: Mapping[str, Any]) -> bool:
    return type_name(dataset.get("type")).endswith("NeedleBenchDataset")


def _load_plugins() -> None:
    """Import the modules that register the dense and reasoning tasks (kept lazy)."""
    for module in ("reasoning", "atc", "chains", "atc_mc"):
        try:
            __import__(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{module}":
                raise
