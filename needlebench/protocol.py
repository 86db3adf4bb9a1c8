"""The protocol switch: ``reference`` reproduces the papers and OpenCompass, ``clarified`` is ours.

Published NeedleBench and NeedleChain numbers were produced with particular
prompts, placements, buffers and scoring rules. ``protocol="reference"`` (the
default) reproduces them so scores sit next to the papers' tables; every
place where we deliberately differ is a named option whose ``clarified``
value a user may pick one at a time, or all at once with
``protocol="clarified"``. The resolved options go into every sample's
metadata, so a result always says which protocol made it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from .errors import ConfigError

__all__ = ["PROTOCOLS", "Option", "ProtocolParams", "reference_values", "resolve_options"]

PROTOCOLS = ("reference", "clarified")


@dataclass(frozen=True)
class Option:
    """One protocol choice: its value under each protocol, and every value allowed."""

    reference: str
    clarified: str
    extra: tuple[str, ...] = ()

    @property
    def choices(self) -> tuple[str, ...]:
        """Every allowed value: the reference one, the clarified one, then the extras, without repeats."""
        return tuple(dict.fromkeys((self.reference, self.clarified, *self.extra)))


def resolve_options(protocol: str, options: Mapping[str, Option], given: Mapping[str, str]) -> dict[str, str]:
    """Each option's value: the one given, else the protocol's.

    Args:
        protocol: ``"reference"`` or ``"clarified"``.
        options: the task's options and their values under each protocol.
        given: values the user set; ``""`` (or absent) means "what the protocol says".

    Raises:
        ConfigError: an unknown protocol or option value, naming the choices.
    """
    if protocol not in PROTOCOLS:
        raise ConfigError(f"protocol: unknown protocol {protocol!r}; choose from {PROTOCOLS}")
    out: dict[str, str] = {}
    for name, option in options.items():
        value = given.get(name) or getattr(option, protocol)
        if value not in option.choices:
            raise ConfigError(f"{name}: unknown value {value!r}; choose from {option.choices}")
        out[name] = value
    return out


def reference_values(options: Mapping[str, Option]) -> dict[str, str]:
    """Each option's value under ``protocol="reference"``: what a run must have used to sit beside a paper.

    Args:
        options: a task's options (its parameters' ``OPTIONS``).
    """
    return {name: option.reference for name, option in options.items()}


class ProtocolParams:
    """The one way a task declares its protocol options and resolves them: a base for its parameters.

    A task's frozen parameter dataclass sets ``OPTIONS`` (name -> :class:`Option`, each declared once, with
    why in a comment beside it), has a ``protocol`` field and one ``str`` field per option whose ``""``
    means "what the protocol says". :meth:`options` resolves them with :func:`resolve_options`;
    ``TaskSpec.options`` is the same mapping, for readers that list every task's options.
    """

    OPTIONS: ClassVar[Mapping[str, Option]] = MappingProxyType({})
    protocol: str

    def options(self) -> dict[str, str]:
        """The resolved options (each given value, else the protocol's), resolved once per distinct setting.

        Raises:
            ConfigError: an unknown protocol or option value, naming the choices.
        """
        return dict(_resolved(type(self), self.protocol, tuple(getattr(self, name) for name in self.OPTIONS)))


@functools.lru_cache(maxsize=256)
def _resolved(cls: type[ProtocolParams], protocol: str, given: tuple[str, ...]) -> Mapping[str, str]:
    """Every sample asks for its options: resolve each distinct (task, protocol, given values) once."""
    values = resolve_options(protocol, cls.OPTIONS, dict(zip(cls.OPTIONS, given, strict=True)))
    return MappingProxyType(values)
