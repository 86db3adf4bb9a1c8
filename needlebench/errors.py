"""The one exception users see for bad configs and inputs, and the checks that raise it."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = [
    "ConfigError",
    "PlanChanged",
    "OutOfSpace",
    "OutOfMemory",
    "check_choices",
    "check_at_least",
    "unknown_option_error",
    "checked_keywords",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class ConfigError(ValueError):
    """A config value, file or input is wrong; the message names what and where."""


class PlanChanged(ConfigError):
    """A resumed run's config gives another plan than the one it stored; the message names each difference."""


class OutOfSpace(RuntimeError):
    """A file system filled up while a file was written; the message names the file and the space.

    Not an ``OSError``: callers that fall back to memory when a cache folder is unwritable must not
    do so here (a 1000k suite does not fit in memory), and the run must stop with this message.
    """


class OutOfMemory(RuntimeError):
    """A stage's process was stopped by a memory limit; the message names the stage and the limit."""


def check_choices(field: str, values: Iterable[Any], allowed: Iterable[Any]) -> None:
    """Every value must be one of ``allowed``.

    Args:
        field: the parameter's name, as the user wrote it.
        values: the values given.
        allowed: the values accepted (named in the message).

    Raises:
        ConfigError: the first value that is not allowed.
    """
    allowed = tuple(allowed)
    for value in values:
        if value not in allowed:
            raise ConfigError(f"{field}: unknown {value!r}; choose from {allowed}")


def check_at_least(field: str, values: Iterable[Any], minimum: int) -> None:
    """Every value must be an integer of at least ``minimum`` (``True`` is not an integer here).

    Args:
        field: the parameter's name, as the user wrote it.
        values: the values given.
        minimum: the smallest value accepted.

    Raises:
        ConfigError: the first value that is not such an integer.
    """
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ConfigError(f"{field}: {value!r} must be an integer of at least {minimum}")


def unknown_option_error(where: str, unknown: Iterable[str], valid: Iterable[str], what: str = "option") -> ConfigError:
    """The one message for names a builder, class or file does not take: one line naming each unknown name,
    the nearest valid one (``difflib``), and every valid one; every such check in the package says it so.

    Args:
        where: what was called or read (``"runtime"``, ``"hf_model"``, ``"task 'srt'"``).
        unknown: the names given that it does not take.
        valid: the names it takes.
        what: the kind of name (``"option"``, ``"parameter"``).

    Returns:
        The error, for the caller to raise: ``runtime: unknown option 'num_shard'; did you mean 'num_shards'?
        valid: [...]``.
    """
    names, choices = sorted(set(unknown)), sorted(set(valid))
    near = {n: m[0] for n in names if (m := difflib.get_close_matches(n, choices, n=1))}
    listed = ", ".join(repr(n) for n in names)
    head = f"{where}: unknown {what} {listed}" if len(names) == 1 else f"{where}: unknown {what}s {listed}"
    if len(names) == 1 and near:
        head += f"; did you mean {near[names[0]]!r}?"
    elif near:
        head += "; did you mean " + ", ".join(f"{m!r} (for {n!r})" for n, m in near.items()) + "?"
    return ConfigError(f"{head} valid: {choices}" if near else f"{head}; valid: {choices}")


def checked_keywords(more: Callable[[], Iterable[str]] | None = None) -> Callable[[_F], _F]:
    """A builder that refuses a keyword it does not take with :func:`unknown_option_error`, before its body runs.

    Why: Python's own refusal is a ``TypeError`` without the nearest name, and a builder's ``**kwargs`` passed on
    to a class that takes ``**kwargs`` (OpenCompass's HuggingFace model, ``LocalRunner``) swallows a typo.

    Args:
        more: the names the builder's ``**kwargs`` takes (a model class's), read only when a keyword is not
            one of the builder's own parameters (so the class's module is imported only then).
    """

    def wrap(fn: _F) -> _F:
        params = inspect.signature(fn).parameters.values()
        own = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if not own.issuperset(kwargs):
                valid = own | frozenset(more() if more else ())
                if not valid.issuperset(kwargs):
                    raise unknown_option_error(fn.__name__, set(kwargs) - valid, valid)
            return fn(*args, **kwargs)

        return checked  # type: ignore[return-value]

    return wrap
