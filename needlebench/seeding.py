"""Stable seeds for every random choice.

Python's ``hash()`` is salted per process and the global ``random`` state
depends on call order; both would make two processes disagree on a sample.
Every choice here is a function of the coordinates it depends on, and those
coordinates are hashed by value, not by spelling: depth ``50`` and ``50.0``
are the same coordinate, so they must give the same seed.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable
from pathlib import Path

__all__ = ["canonical", "stable_hash", "stable_seed", "rng", "content_digest", "files_digest"]


def canonical(value: object) -> str:
    """The text a value is hashed as: equal numbers alike, whatever their type or spelling.

    Why: ``repr`` made ``50`` and ``50.0`` (or a tuple and a list of the same
    items) different seeds and ids. Rules: a string is itself; ``True`` and
    ``False`` stay distinct from ``1`` and ``0``; an integral finite float
    is written as the int; any other float by its ``repr`` (the shortest
    round-trip spelling, fixed since Python 3.1); tuples and lists alike as
    ``[a, b]``; dicts by sorted keys; anything else by ``repr``.

    Args:
        value: a coordinate: str, int, float, bool, None, or a list, tuple or dict of those.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted((canonical(k), canonical(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    return repr(value)


def stable_hash(*parts: object, digest_size: int = 8) -> str:
    """Hex digest of ``parts`` that is the same in every process and machine.

    Args:
        parts: coordinates, each written with :func:`canonical`.
        digest_size: bytes of blake2b output (the hex string is twice as long).
    """
    joined = "\x1f".join(canonical(p) for p in parts)
    return hashlib.blake2b(joined.encode("utf-8"), digest_size=digest_size).hexdigest()


def stable_seed(*parts: object) -> int:
    """A 64-bit integer seed derived from ``parts``."""
    return int(stable_hash(*parts), 16)


def rng(*parts: object) -> random.Random:
    """A private ``Random`` seeded from ``parts``; never touches global state."""
    return random.Random(stable_seed(*parts))


def content_digest(data: bytes) -> str:
    """A 16-hex-digit SHA-256 digest of prompt bytes.

    Always the standard library's SHA-256: sample ids must never depend on
    which optional packages happen to be installed. SHA-256 rather than
    blake2b because CPUs hash it in hardware (about 1.5 GB/s here against
    0.7): every prompt of a suite goes through it.
    """
    return hashlib.sha256(data).hexdigest()[:16]


def files_digest(paths: Iterable[Path]) -> str:
    """One digest of several files' names and contents, for cache keys.

    Names go in too, so moving text from one file to another still changes it;
    a missing file is hashed as missing rather than failing.

    Args:
        paths: the files, in a fixed order chosen by the caller.
    """
    h = hashlib.sha256()  # hardware-accelerated: cache files of 1000k suites are read through it
    for path in paths:
        p = Path(path)
        h.update(p.name.encode("utf-8") + b"\x00")
        try:
            with p.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            h.update(b"<missing>")
        h.update(b"\x1f")
    return h.hexdigest()[:24]
