"""The entry point of our infer and eval task processes: OpenCompass's task code, without importing all it ships.

Every OpenCompass task process starts with ``import opencompass.tasks``, whose package imports every
task module and through them every dataset module (``opencompass.datasets``: hundreds of modules, with
``transformers``, ``sklearn`` and ``openai``) and every model module (``opencompass.models``): measured
12-15 s of CPU per process before the first sample, on every shard of every run. A task names its
classes by their dotted paths (a config dump writes them so), and ours live in ``needlebench``; so this
entry point first puts *lazy shells* of those packages (and of ``opencompass.openicl``'s evaluator,
inferencer and retriever packages) in ``sys.modules``: each one's submodules import one by one as usual
(``opencompass.models.openai_api``), and the package's own ``__init__`` runs only when a name is first
read from the package itself (``from opencompass.models import X``, a registry key
``opencompass.models.X``), so code that needs the whole package still gets it. OpenCompass's dataset
reader and base evaluator, which every task imports, are imported with stand-ins for
``transformers.AutoTokenizer`` and ``scipy.stats.hypergeom`` that import the real ones on first use. A task
whose config names any type by a short registry name (``type="ZeroRetriever"``) runs with the full imports,
as OpenCompass runs it. Measured on a 4k oracle run:
7-8 s of CPU before a task's first sample became 2.4 s (infer) and 3.3 s (eval).

    python -m needlebench.opencompass.task_entry infer|eval TASK_CONFIG.py
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import runpy
import sys
import types
from typing import Any

__all__ = [
    "LAZY_PACKAGES",
    "MODULE",
    "STAND_INS",
    "import_with_stand_ins",
    "install_lazy_packages",
    "load_whole_on_registry_miss",
    "typed_by_path",
    "main",
]

MODULE = "needlebench.opencompass.task_entry"
LAZY_PACKAGES = (
    "opencompass.tasks",
    "opencompass.datasets",
    "opencompass.models",
    # OpenCompass's prompt and evaluation machinery: every evaluator, inferencer and retriever it ships
    "opencompass.openicl",
    "opencompass.openicl.icl_evaluator",
    "opencompass.openicl.icl_inferencer",
    "opencompass.openicl.icl_retriever",
    # the LLM-judge evaluators, which the evaluator registry imports before it finds a dotted name (with scipy)
    "opencompass.evaluator",
)
# Modules every task imports that take one name from a heavy package at import time and use it rarely:
# each is imported with a stand-in for that package whose names import the real one on first use
# (``import_with_stand_ins``). OpenCompass's dataset reader takes ``transformers.AutoTokenizer`` for an encoder
# no task of ours builds (transformers: 3.5 s of CPU per process); its base evaluator takes ``scipy.stats``'
# ``hypergeom`` for G-pass@k only (scipy.stats: 0.8 s per eval process).
STAND_INS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    # module: (imported first, as usual; the package stood in for; the names it takes from it)
    "opencompass.openicl.icl_dataset_reader": (
        ("torch", "datasets", "opencompass.registry", "opencompass.utils", "opencompass.openicl.icl_prompt_template"),
        "transformers",
        ("AutoTokenizer",),
    ),
    "opencompass.openicl.icl_evaluator.icl_base_evaluator": (
        ("numpy", "datasets", "scipy", "opencompass.registry", "opencompass.utils.logging"),
        "scipy.stats",
        ("hypergeom",),
    ),
}
TASKS = {"infer": "opencompass.tasks.openicl_infer", "eval": "needlebench.opencompass.eval_task"}
FULL_IMPORTS_ENV = "NEEDLEBENCH_FULL_IMPORTS"  # =1: import OpenCompass's packages whole, as its own script does


class _LazyName:
    """Stands for ``module.name`` until first used (an attribute read or a call): then imports and uses it."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)

    def _real(self) -> Any:
        module, name = self._where
        return getattr(importlib.import_module(module), name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._real(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)


def import_with_stand_ins(stand_ins: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = STAND_INS) -> None:
    """Import each module of ``stand_ins`` with a stand-in for the heavy package it takes names from.

    The stand-in is in ``sys.modules`` only while the module's own lines run (what else it imports is
    imported before), so every later import of the package gets the real one; each name the module took
    imports the real package the first time it is used. A module or package imported already is left alone.

    Args:
        stand_ins: module -> (modules imported first, the package stood in for, the names taken from it).
    """
    for module, (needs, package, names) in stand_ins.items():
        if module in sys.modules or package in sys.modules:
            continue
        for name in needs:
            importlib.import_module(name)
        stand_in = types.ModuleType(package)
        for name in names:
            setattr(stand_in, name, _LazyName(package, name))
        sys.modules[package] = stand_in
        try:
            importlib.import_module(module)
        finally:
            if sys.modules.get(package) is stand_in:
                del sys.modules[package]


class _LazyPackage(types.ModuleType):
    """A package whose names are imported on first read: from the one submodule its ``__init__`` takes a name
    from (``from .base_api import APITemplateParser``), else by running its whole ``__init__`` once."""

    def __getattr__(self, name: str) -> Any:
        if name == "__all__":  # `from package import *`: every name, as the package itself would give them
            self._load_whole()
            return self.__dict__.get("__all__") or [k for k in self.__dict__ if not k.startswith("_")]
        if name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        where = _exported(self.__spec__.origin).get(name)
        if where is not None:  # only the submodule that defines it
            value = getattr(importlib.import_module(f"{self.__name__}.{where[0]}"), where[1])
        else:
            self._load_whole()
            if name not in self.__dict__:
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
            value = self.__dict__[name]
        setattr(self, name, value)
        return value

    def _load_whole(self) -> None:
        """Run the package's ``__init__`` in this very module object, once."""
        if not self.__dict__.get("_needlebench_loaded"):
            self.__dict__["_needlebench_loaded"] = True
            self.__spec__.loader.exec_module(self)


@functools.cache
def _exported(init: str | None) -> dict[str, tuple[str, str]]:
    """The names a package's ``__init__`` imports by name from its own submodules: name -> (submodule, its name).

    Read from the file's syntax once per file (nothing runs); a ``from .x import *`` line names nothing here.
    """
    import ast

    if not init or not init.endswith(".py"):
        return {}
    with open(init, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    return {
        alias.asname or alias.name: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
        if alias.name != "*"
    }


def install_lazy_packages(names: tuple[str, ...] = LAZY_PACKAGES) -> None:
    """Put a lazy shell of each package in ``sys.modules`` (a package imported already is left as it is).

    Each package is found on its parent's path without importing the parent (``opencompass.openicl``'s
    own ``__init__`` would import ``opencompass.openicl.icl_evaluator`` whole).

    Args:
        names: the packages' dotted names.
    """
    for name in names:
        spec = None if name in sys.modules else _find_unimported(name)
        if spec is None or spec.submodule_search_locations is None:
            continue
        module = _LazyPackage(name)
        module.__spec__ = spec
        module.__file__ = spec.origin
        module.__path__ = list(spec.submodule_search_locations)
        module.__package__ = name
        module.__loader__ = spec.loader
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def load_whole_on_registry_miss() -> None:
    """Make a registry lookup that finds nothing run every lazy package's ``__init__`` and look again.

    A class registers itself when its module is imported; a lazy shell imports only the submodules asked
    for, so a registry asked for a short name (``type="OpenICLInferTask"``) whose module nothing imported yet
    finds nothing. Then, and only then, the packages are imported whole (as OpenCompass itself imports
    them) and the lookup is repeated, so a config that names a type by its registry name gets it. For the
    driver (``driver.py``), which cannot read every type of a config before OpenCompass loads it.
    """
    from mmengine.registry import Registry

    if getattr(Registry.get, "_needlebench_whole_on_miss", False):
        return
    lookup = Registry.get

    def get(self: Registry, key: str) -> Any:
        found = lookup(self, key)
        if found is None:
            shells = [m for m in list(sys.modules.values()) if isinstance(m, _LazyPackage)]
            if any(not m.__dict__.get("_needlebench_loaded") for m in shells):
                for shell in shells:
                    shell._load_whole()
                found = lookup(self, key)
        return found

    get._needlebench_whole_on_miss = True  # type: ignore[attr-defined]
    Registry.get = get  # type: ignore[method-assign]


def _find_unimported(name: str) -> Any:
    """A module's spec found along its parents' paths, none of the parents imported."""
    from importlib.machinery import PathFinder

    top, *rest = name.split(".")
    spec = importlib.util.find_spec(top)  # a top-level spec: nothing is imported
    for at in range(len(rest)):
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = PathFinder.find_spec(".".join([top, *rest[: at + 1]]), list(spec.submodule_search_locations))
    return spec


# a ``type`` in a dumped config (``type=...`` or ``'type': ...``) whose value is not a quoted dotted path
_NOT_BY_PATH = re.compile(r"""(?:\btype\s*=|['"]type['"]\s*:)\s*+(?!'[\w.]*\.[\w.]*'|"[\w.]*\.[\w.]*")""")


def typed_by_path(text: str) -> bool:
    """Whether every type a dumped task config names is a dotted path (so no registry needs a package whole).

    Read from the file's text, not by loading it (the task loads it once, as OpenCompass's script does):
    a ``type`` whose value is a short registry name, a class, or anything but a quoted dotted path says no.
    Text that merely looks like one (a ``type=`` inside a string) says no too, which costs only the lean start.

    Args:
        text: the task's config file, as the runner wrote it (``Config.dump``).
    """
    return _NOT_BY_PATH.search(text) is None


def main(argv: list[str] | None = None) -> None:
    """Run OpenCompass's infer task, or our eval task, on a task config (OpenCompass's runners call this).

    Args:
        argv: ``[stage, config path]``; default ``sys.argv[1:]``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in TASKS:
        raise SystemExit(f"usage: python -m {MODULE} infer|eval TASK_CONFIG.py")
    stage, config = args
    with open(config, encoding="utf-8") as fh:
        lean = os.environ.get(FULL_IMPORTS_ENV) != "1" and typed_by_path(fh.read())
    if lean:
        install_lazy_packages()
        import_with_stand_ins()
    sys.argv = [TASKS[stage], config]
    runpy.run_module(TASKS[stage], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
