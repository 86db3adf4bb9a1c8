"""The one exception users see for bad configs and inputs, and the checks that raise it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["ConfigError", "PlanChanged", "OutOfSpace", "OutOfMemory", "check_choices", "check_at_least"]


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
