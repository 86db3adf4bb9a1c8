"""The tasks: one folder per task family (sparse/, atc/, needlechain/), each task exporting a ``TaskSpec``; the registry.

``needlebench.tasks.registry`` holds the registry; its public names are handed on here so
adapters write ``from needlebench.tasks import get_task``.
"""

from .registry import (
    BUILTIN_TASKS,
    CONFIG_KEYS,
    ENTRY_POINT_GROUP,
    TaskSpec,
    all_tasks,
    config_params,
    get_task,
    is_needlebench,
    make_params,
    register_task,
    task_names,
    type_name,
)

__all__ = [
    "BUILTIN_TASKS",
    "CONFIG_KEYS",
    "ENTRY_POINT_GROUP",
    "TaskSpec",
    "all_tasks",
    "config_params",
    "get_task",
    "is_needlebench",
    "make_params",
    "register_task",
    "task_names",
    "type_name",
]
