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
``opencompass.models.X``), so code that needs the whole package still gets it. The OpenCompass
modules every task imports that take names from torch, transformers and scipy.stats at import time are
imported with stand-ins for those names (``STAND_INS``): a name used only by code no NeedleBench task runs
imports the real package on first use, and mmengine's questions about the process's rank answer as they do
in a process with no torch.distributed group until a model imports torch. A task whose model needs torch
(HuggingFace) imports it then, as before; an API or oracle task never imports torch or transformers. A task
whose config names any type by a short registry name (``type="ZeroRetriever"``) runs with the full imports,
as OpenCompass runs it. The stand-ins name OpenCompass 0.5.4's module paths and mmengine 0.10's private
functions: on another release of either (``WRITTEN_FOR``), or when putting them in place raises
``ImportError`` or ``AttributeError``, the task restores ``sys.modules`` and imports OpenCompass in full, as its
own script does, saying so once in its log (``start_lean``). Measured on a 4k oracle run: 7-8 s of CPU before a task's first sample became
2.4 s (infer) and 3.3 s (eval) with the lazy packages, then the task modules' imports 3.7 -> 1.9 s without
torch (the 4k pipeline 11.6 -> 7.9 s of CPU per 1,000 samples, `bench/pipeline_cost_4k.json`).

    python -m needlebench.launch.task_entry infer|eval TASK_CONFIG.py
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import os
import re
import runpy
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "LAZY",
    "LAZY_PACKAGES",
    "MODULE",
    "STAND_INS",
    "StandIns",
    "TorchDatasetStandIn",
    "before_torch",
    "import_with_stand_ins",
    "install_lazy_packages",
    "load_whole_on_registry_miss",
    "typed_by_path",
    "main",
    "start_lean",
    "through_entry",
    "torch_imported",
    "WRITTEN_FOR",
]

MODULE = "needlebench.launch.task_entry"
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
LAZY = "lazy"  # a stood-in name that imports the real package, and is the real name, the first time it is used


class TorchDatasetStandIn:
    """Stands for ``torch.utils.data.Dataset`` as the base class of OpenCompass's ``DatasetEncoder``.

    Only OpenCompass's TopK retriever builds a ``DatasetEncoder`` (never a NeedleBench task), and hands it to
    torch's ``DataLoader``, which takes any object with ``__getitem__`` and ``__len__`` (``DatasetEncoder``'s own).
    """


def before_torch(module: str, name: str, answer: Any) -> Any:
    """``module.name``, a function that asks torch for the process's rank, as it answers before torch is imported.

    No ``torch.distributed`` process group can exist in a process that has not imported torch: the rank is 0,
    the world size 1, and this is the main process, which is what mmengine's functions answer then. Once
    torch is imported (a model that needs it was built), the real function answers.

    Args:
        module: the real function's module.
        name: its name.
        answer: what it answers before torch is imported.
    """

    return _until_torch(lambda: getattr(importlib.import_module(module), name), name, answer)


def _until_torch(real: Callable[[], Callable[..., Any]], name: str, answer: Any) -> Callable[..., Any]:
    """A function named ``name`` that answers ``answer`` until torch is imported, then calls ``real()``'s."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return real()(*args, **kwargs) if torch_imported() else answer

    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


def torch_imported() -> bool:
    """Whether this process has imported the real torch (a stand-in has no file)."""
    return getattr(sys.modules.get("torch"), "__file__", None) is not None


@dataclasses.dataclass(frozen=True)
class StandIns:
    """Heavy packages one module takes names from, stood in for while that module's own lines run.

    Attributes:
        first: modules imported first, as usual: whatever the module needs as the real thing.
        packages: package -> {a name the module takes, dotted below the package: ``LAZY`` or its stand-in}.
        functions: ``module.function`` of a module imported already -> what it answers while the module imports,
            until torch is imported (the real function answers after).
    """

    first: tuple[str, ...]
    packages: Mapping[str, Mapping[str, Any]]
    functions: Mapping[str, Any] = dataclasses.field(default_factory=dict)


# mmengine's answers in a process with no torch.distributed process group
_NOT_DISTRIBUTED = {
    name: before_torch("mmengine.dist", name, answer)
    for name, answer in (("is_main_process", True), ("get_rank", 0), ("get_world_size", 1))
}
# Modules every task imports that take names from heavy packages at import time and use them rarely, or only
# once a model has imported the package: each imports with stand-ins (``import_with_stand_ins``), in this order.
# - torch (2.5 s of CPU per process), which no NeedleBench task needs unless its model does. OpenCompass's
#   package of helpers makes its logger as it imports, and mmengine's logger imports torch to learn the
#   process's rank and device (the device only names a log file, which OpenCompass's logger has none of);
#   its retriever and inferencer ask mmengine whether this is the main process; the inferencer takes
#   torch's DataLoader, which only OpenCompass's own inference loop uses, and the dataset reader subclasses
#   torch's Dataset for its TopK retriever's encoder. ``opencompass.utils`` takes mmengine's environment
#   report, which imports torch, for the driver's log.
# - transformers (3.5 s per process): the dataset reader takes ``AutoTokenizer`` for an encoder no task of
#   ours builds.
# - scipy.stats (0.8 s per eval process): the base evaluator takes ``hypergeom`` for G-pass@k only.
STAND_INS: dict[str, StandIns] = {
    "opencompass.utils": StandIns(
        first=("datasets", "mmengine.logging", "mmengine.utils", "opencompass.registry"),
        packages={"mmengine.utils.dl_utils": {"collect_env": LAZY}},
        functions={
            "mmengine.logging.logger._get_rank": 0,
            "mmengine.logging.logger._get_device_id": 0,
        },
    ),
    "opencompass.models.base": StandIns(
        first=("opencompass.utils",),
        packages={"torch": {"Tensor": LAZY}, "mmengine.dist": _NOT_DISTRIBUTED},
    ),
    "opencompass.openicl.icl_dataset_reader": StandIns(
        first=("datasets", "opencompass.registry", "opencompass.utils", "opencompass.openicl.icl_prompt_template"),
        packages={
            "transformers": {"AutoTokenizer": LAZY},
            "torch": {"utils.data.Dataset": TorchDatasetStandIn},
        },
    ),
    "opencompass.openicl.icl_retriever.icl_base_retriever": StandIns(
        first=("opencompass.openicl.icl_prompt_template", "opencompass.utils.prompt"),
        packages={"mmengine.dist": _NOT_DISTRIBUTED},
    ),
    "opencompass.openicl.icl_inferencer.icl_base_inferencer": StandIns(
        first=("numpy", "opencompass.utils", "opencompass.openicl.icl_prompt_template"),
        packages={"mmengine.dist": _NOT_DISTRIBUTED, "torch": {"utils.data.DataLoader": LAZY}},
    ),
    "opencompass.openicl.utils": StandIns(
        first=(),
        packages={
            "torch": {
                f"distributed.{name}": before_torch("torch.distributed", name, answer)
                for name, answer in (("is_available", False), ("is_initialized", False), ("get_rank", 0))
            }
        },
    ),
    "opencompass.openicl.icl_inferencer.icl_gen_inferencer": StandIns(
        first=("tqdm", "opencompass.registry", "opencompass.utils"),
        packages={"torch": {"no_grad": LAZY}},
    ),
    "opencompass.openicl.icl_evaluator.icl_base_evaluator": StandIns(
        first=("numpy", "datasets", "scipy", "opencompass.registry", "opencompass.utils.logging"),
        packages={"scipy.stats": {"hypergeom": LAZY}},
    ),
}
TASKS = {"infer": "opencompass.tasks.openicl_infer", "eval": "needlebench.opencompass.eval_task"}
# the releases whose module paths and private functions the lazy shells and stand-ins name: per package, the
# distributions that install it (OpenCompass 0.5.4 requires mmengine-lite; mmengine installs the same package)
# and the versions it was checked on (full matches; mmengine-lite 0.11.0rc3 is what OpenCompass 0.5.4 resolves)
WRITTEN_FOR = {
    "opencompass": (("opencompass",), r"0\.5\.4"),
    "mmengine": (("mmengine-lite", "mmengine"), r"0\.1[01]\..*"),
}
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


class _StandInModule(types.ModuleType):
    """Stands for a package while one module imports: the names it lists are stand-ins, any other is the real one."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if sys.modules.get(self.__name__) is self:  # a name not listed, read while the module imports: from
            top = self.__name__.split(".")[0]  # now on the real package (a listing that fell behind costs time only)
            for key, module in list(sys.modules.items()):
                if isinstance(module, _StandInModule) and (key == top or key.startswith(f"{top}.")):
                    del sys.modules[key]
        return getattr(importlib.import_module(self.__name__), name)


def _stand_in_package(package: str, names: Mapping[str, Any]) -> dict[str, types.ModuleType]:
    """Modules standing for ``package`` (and its subpackages a dotted name goes through), by dotted name."""
    modules: dict[str, types.ModuleType] = {package: _StandInModule(package)}
    for dotted, value in names.items():
        *path, name = dotted.split(".")
        where = package
        for part in path:
            inner = f"{where}.{part}"
            if inner not in modules:
                modules[inner] = _StandInModule(inner)
                setattr(modules[where], part, modules[inner])
            where = inner
        setattr(modules[where], name, _LazyName(where, name) if value is LAZY else value)
    return modules


@contextlib.contextmanager
def _answering(functions: Mapping[str, Any]) -> Iterator[None]:
    """Each ``module.function`` of ``functions`` answers its value (until torch is imported) inside the block."""
    saved = []
    for dotted, answer in functions.items():
        module_name, name = dotted.rsplit(".", 1)
        module = sys.modules.get(module_name)
        real = getattr(module, name, None)
        if real is None:  # another release, without this function: nothing to stand in for
            continue

        setattr(module, name, _until_torch(lambda real=real: real, name, answer))
        saved.append((module, name, real))
    try:
        yield
    finally:
        for module, name, real in saved:
            setattr(module, name, real)


def import_with_stand_ins(stand_ins: Mapping[str, StandIns] = STAND_INS) -> None:
    """Import each module of ``stand_ins`` with stand-ins for the heavy packages it takes names from.

    The stand-ins are in ``sys.modules`` only while the module's own lines run (what ``first`` names is
    imported before, as usual), so every later import of a package gets the real one; each ``LAZY`` name
    the module took imports the real package the first time it is used. A module imported already, or one
    whose stood-in package is imported already, is left alone.

    Args:
        stand_ins: module -> what it imports first and the packages and functions stood in for meanwhile.
    """
    for module, spec in stand_ins.items():
        if module in sys.modules:
            continue
        for name in spec.first:
            importlib.import_module(name)
        shells = {p: n for p, n in spec.packages.items() if isinstance(sys.modules.get(p), _LazyPackage)}
        if any(package in sys.modules and package not in shells for package in spec.packages):
            continue
        stand_in: dict[str, types.ModuleType] = {}
        for package, names in spec.packages.items():
            if package not in shells:
                stand_in.update(_stand_in_package(package, names))
        sys.modules.update(stand_in)
        try:
            with _answering(spec.functions), _names_on_shells(shells):
                importlib.import_module(module)
        finally:
            for name, value in stand_in.items():
                if sys.modules.get(name) is value:
                    del sys.modules[name]


@contextlib.contextmanager
def _names_on_shells(shells: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    """Each lazy package's listed names stood in on the package itself inside the block (a name read from a lazy
    shell imports its submodule, and whatever that imports); after it, a name read resolves as usual."""
    placed: list[tuple[types.ModuleType, str]] = []
    for package, names in shells.items():
        shell = sys.modules[package]
        for name, value in names.items():
            if name not in shell.__dict__:
                setattr(shell, name, _LazyName(package, name) if value is LAZY else value)
                placed.append((shell, name))
    try:
        yield
    finally:
        for shell, name in placed:
            shell.__dict__.pop(name, None)


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


_LAZY_KINDS = (_StandInModule, _LazyPackage)  # what start_lean puts in sys.modules that is not a real module


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


def through_entry(command: str, script: str, stage: str) -> str:
    """OpenCompass's command for a task with this entry point in place of the task's script.

    Args:
        command: the command OpenCompass's task built (``get_command``).
        script: the task module's file, which that command runs.
        stage: ``infer`` or ``eval``.

    Raises:
        RuntimeError: the command does not run ``script`` once (another OpenCompass builds it otherwise): run
            as it is, it would start OpenCompass's own task instead of ours, so it is refused, not swapped quietly.
    """
    if command.count(script) != 1:
        raise RuntimeError(
            f"needlebench: OpenCompass's {stage} task command does not run {script} once, so the task cannot be "
            f"started through {MODULE}; this needlebench was written for OpenCompass 0.5.4 (command: {command[:300]})"
        )
    return command.replace(script, f"-m {MODULE} {stage}")


def _unfit() -> str | None:
    """Why this install is not one the lean start was written for (``WRITTEN_FOR``), or None."""
    from importlib.metadata import PackageNotFoundError, version

    for package, (dists, pattern) in WRITTEN_FOR.items():
        for dist in dists:
            try:
                found = version(dist)
                break
            except PackageNotFoundError:
                continue
        else:
            return f"{package} is not installed as a distribution ({' or '.join(dists)})"
        if not re.fullmatch(pattern, found):
            return f"{dist} {found} is not the release the lean start was written for ({pattern})"
    return None


def start_lean(
    packages: tuple[str, ...] = LAZY_PACKAGES, stand_ins: Mapping[str, StandIns] | None = None
) -> str | None:
    """Put the lazy packages and the stand-ins in place, or leave the imports as OpenCompass makes them.

    On another OpenCompass or mmengine than ``WRITTEN_FOR`` nothing is put in place; on ``ImportError`` or
    ``AttributeError`` while it is (a module renamed or moved), ``sys.modules`` is restored: every lazy shell
    and stand-in goes, so the task's imports run OpenCompass's packages whole. The real modules imported
    meanwhile stay (they registered their classes in mmengine's registries, which refuse a second import),
    each keeping the stand-ins it took, which import the real thing when used.

    Args:
        packages: the packages to put lazy shells of in place (the driver's, or a task's).
        stand_ins: the modules to import with stand-ins (None: ``STAND_INS``, a task's).

    Returns:
        None when the start is lean; else why not, for the caller to log once.
    """
    unfit = _unfit()
    if unfit:
        return unfit
    before = dict(sys.modules)
    try:
        install_lazy_packages(packages)
        import_with_stand_ins(STAND_INS if stand_ins is None else stand_ins)
    except (ImportError, AttributeError) as exc:
        for name in [n for n, m in sys.modules.items() if isinstance(m, _LAZY_KINDS) and before.get(n) is not m]:
            del sys.modules[name]
        sys.modules.update(before)
        return f"{type(exc).__name__}: {exc}"
    return None


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
        why = start_lean()
        if why is not None:
            print(f"needlebench: the lean task start is off ({why}); OpenCompass is imported in full", file=sys.stderr)
    sys.argv = [TASKS[stage], config]
    runpy.run_module(TASKS[stage], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
