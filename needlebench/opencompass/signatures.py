"""The keyword parameters an OpenCompass class takes, read from its source file without importing it.

Why: ``import opencompass.runners`` or ``opencompass.models`` imports every dataset and model module
OpenCompass ships (3-8 s of CPU), and every config load checks its runner's and its models' options: each
``needlebench plan``, ``export`` and test that read a config paid that for a list of names the source states.
``tests/test_typos.py`` checks these names against ``inspect.signature`` of the imported classes.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from functools import cache
from pathlib import Path
from typing import NamedTuple

__all__ = ["ClassParams", "class_names", "class_params"]


class ClassParams(NamedTuple):
    """What a class's ``__init__`` takes by keyword."""

    named: frozenset[str]  # its named parameters, ``self`` left out
    var_keyword: bool  # whether it takes ``**kwargs`` too


@cache
def _sources(package: str) -> tuple[Path, ...]:
    """The ``.py`` files of an installed package (found, not imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"{package} is not installed")
    return tuple(sorted(p for d in spec.submodule_search_locations for p in Path(d).rglob("*.py")))


@cache
def _classes(path: Path) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.ClassDef)}


def _find(package: str, name: str) -> ast.ClassDef | None:
    """The definition of class ``name`` in ``package``'s files (the first file that defines it)."""
    pattern = re.compile(rf"^class {re.escape(name)}\b", re.M)
    for path in _sources(package):
        if pattern.search(path.read_text(encoding="utf-8")):
            found = _classes(path).get(name)
            if found is not None:
                return found
    return None


@cache
def class_params(package: str, name: str) -> ClassParams | None:
    """The keyword parameters of class ``name``'s ``__init__``, defined somewhere in ``package``.

    A class without its own ``__init__`` takes its first base's, looked up in the same package; where the source
    does not say (a base from elsewhere), the class is imported and its signature read.

    Args:
        package: an installed package (``"opencompass.runners"``).
        name: the class name (``"LocalRunner"``).

    Returns:
        The names (``self`` left out) and whether it takes ``**kwargs``; None where no such class is defined.
    """
    cls = _find(package, name)
    if cls is None:
        return None
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases]
        if not bases or bases == ["object"]:
            return ClassParams(frozenset(), False)
        return class_params(package, bases[0]) or _imported(package, name)
    args = init.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return ClassParams(frozenset(names) - {"self"}, args.kwarg is not None)


def _imported(package: str, name: str) -> ClassParams:
    """The keyword parameters of ``package``'s class ``name``, from its imported ``__init__``."""
    params = inspect.signature(getattr(importlib.import_module(package), name).__init__).parameters.values()
    named = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) - {"self"}
    return ClassParams(named, any(p.kind is p.VAR_KEYWORD for p in params))


def class_names(package: str, suffix: str) -> list[str]:
    """The classes ``package``'s files define whose name ends with ``suffix`` (``"Runner"``), sorted."""
    return sorted({n for path in _sources(package) for n in _classes(path) if n.endswith(suffix)})
