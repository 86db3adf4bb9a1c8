"""One registry: an explicit list of the built-in tasks plus entry points; a name registered twice is an error."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from needlebench.errors import ConfigError
from needlebench.tasks import BUILTIN_TASKS, get_task, register_task, registry, task_names


def test_builtin_tasks_are_listed_once_each() -> None:
    assert task_names() == ["atc", "atc_mc", "mrs", "mrt", "needlechain", "srt"]
    assert len(BUILTIN_TASKS) == len(task_names())


def test_a_second_task_of_the_same_name_is_refused() -> None:
    clone = dataclasses.replace(get_task("srt"), title="another S-RT")
    with pytest.raises(ConfigError, match="'srt' is registered twice"):
        register_task(clone)
    assert get_task("srt").title == "Single-needle retrieval (S-RT)"


def test_a_new_task_registers_and_is_found() -> None:
    spec = dataclasses.replace(get_task("srt"), name="srt_copy")
    try:
        assert register_task(spec) is spec and get_task("srt_copy") is spec
    finally:
        registry._registry().pop("srt_copy", None)
    with pytest.raises(ConfigError, match="unknown task 'srt_copy'"):
        get_task("srt_copy")


def test_importing_a_task_module_registers_nothing() -> None:
    """No hidden import loop: task modules build a TaskSpec and never import the registry back."""
    code = (
        "import needlebench.tasks.needlechain.task, needlebench.tasks.atc.open_answer, needlebench.tasks.sparse.mrs\n"
        "import needlebench.tasks.atc.choice, needlebench.tasks.sparse.retrieval\n"
        "from needlebench.tasks import registry\n"
        "assert registry._registry.cache_info().currsize == 0, 'importing a task module filled the registry'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    for module in sorted(Path(registry.__file__).parent.glob("*.py")):
        if module.name not in ("__init__.py", "registry.py"):
            imports = re.findall(r"^\s*(?:from|import)\s.*$", module.read_text(encoding="utf-8"), re.M)
            assert not [line for line in imports if "registry" in line], f"{module.name} imports the registry"
