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

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["PROTOCOLS", "Option", "resolve_options"]

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
