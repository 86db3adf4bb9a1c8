"""The single task registry: name -> parameters, generator and grader.

Adapters (OpenCompass datasets, the export CLI, the benchmark) look tasks up
here and nowhere else. The registry is an explicit list of the built-in
tasks plus the ``needlebench.tasks`` entry points of installed packages,
filled on first use; a name registered twice is an error.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from ..errors import ConfigError, unknown_option_error
from ..taskspec import TaskSpec, load_ref

__all__ = [
    "TaskSpec",
    "BUILTIN_TASKS",
    "ENTRY_POINT_GROUP",
    "get_task",
    "task_names",
    "all_tasks",
    "make_params",
    "register_task",
    "config_params",
    "type_name",
    "is_needlebench",
    "CONFIG_KEYS",
]

# Keys of an OpenCompass dataset config that belong to OpenCompass, not to the task's parameters.
CONFIG_KEYS = frozenset({"type", "abbr", "reader_cfg", "infer_cfg", "eval_cfg", "task", "k", "n"})

# The built-in tasks, as "module:attribute" of their TaskSpec, imported on first use.
BUILTIN_TASKS = (
    "needlebench.tasks.sparse.retrieval:SRT",
    "needlebench.tasks.sparse.retrieval:MRT",
    "needlebench.tasks.sparse.mrs:MRS",
    "needlebench.tasks.atc.open_answer:ATC",
    "needlebench.tasks.atc.choice:ATC_MC",
    "needlebench.tasks.needlechain.task:NEEDLECHAIN",
)
# Third-party tasks: an entry point ``name = "package.module:SPEC"`` in this group.
ENTRY_POINT_GROUP = "needlebench.tasks"


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add a task to the registry.

    Args:
        spec: the task; its ``name`` must be new.

    Raises:
        ConfigError: a task of that name is already registered (two packages claiming one name
            would otherwise silently replace each other's samples).
    """
    _add(_registry(), spec)
    return spec


def _add(registry: dict[str, TaskSpec], spec: TaskSpec) -> None:
    known = registry.get(spec.name)
    if known is not None and known is not spec:
        raise ConfigError(
            f"task {spec.name!r} is registered twice (by {known.generate.__module__} "
            f"and {spec.generate.__module__}); task names must be unique"
        )
    registry[spec.name] = spec


@functools.cache
def _registry() -> dict[str, TaskSpec]:
    """The one registry, filled on first use: the built-in list, then the entry points of installed packages.

    Only a complete load is kept (a failing entry point raises, and is reported again on every call);
    :func:`register_task` adds to it.
    """
    found: dict[str, TaskSpec] = {}
    for ref in list(BUILTIN_TASKS) + [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)]:
        _add(found, load_ref(ref, TaskSpec))
    return found


def all_tasks() -> list[TaskSpec]:
    """Every registered task, built-in ones first in ``BUILTIN_TASKS`` order (the order of tables)."""
    return list(_registry().values())


def task_names() -> list[str]:
    """Every registered task name, sorted."""
    return sorted(_registry())


def get_task(name: str) -> TaskSpec:
    """The registered task called ``name``.

    Raises:
        ConfigError: no such task, naming the registered ones.
    """
    tasks = _registry()
    try:
        return tasks[name]
    except KeyError:
        raise ConfigError(f"task: unknown task {name!r}; choose from {sorted(tasks)}") from None


def make_params(task: str, **kwargs: Any) -> Any:
    """Build a task's parameter dataclass from config kwargs, naming any unknown field."""
    spec = get_task(task)
    fields = {f.name: f for f in dataclasses.fields(spec.params)}
    unknown = sorted(set(kwargs) - set(fields))
    if unknown:
        raise unknown_option_error(f"task {task!r}", unknown, fields, what="parameter")
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
    """Whether an OpenCompass dataset config is one of ours (any task)."""
    return type_name(dataset.get("type")).endswith("NeedleBenchDataset")
