"""Stable seeds for every random choice.

Python's ``hash()`` is salted per process and the global ``random`` state
depends on call order; both would make two processes disagree on a sample.
Every choice here is a function of the coordinates it depends on.
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["stable_hash", "stable_seed", "rng", "content_digest"]


def stable_hash(*parts: object, digest_size: int = 8) -> str:
    """Hex digest of ``parts`` that is the same in every process and machine."""
    joined = "\x1f".join(repr(p) if not isinstance(p, str) else p for p in parts)
    return hashlib.blake2b(joined.encode("utf-8"), digest_size=digest_size).hexdigest()


def stable_seed(*parts: object) -> int:
    """A 64-bit integer seed derived from ``parts``."""
    return int(stable_hash(*parts), 16)


def rng(*parts: object) -> random.Random:
    """A private ``Random`` seeded from ``parts``; never touches global state."""
    return random.Random(stable_seed(*parts))


def content_digest(data: bytes) -> str:
    """A fast, machine-independent digest of prompt bytes (xxh3 where installed, else blake2b)."""
    try:
        import xxhash
    except ImportError:  # pragma: no cover - datasets brings xxhash
        return hashlib.blake2b(data, digest_size=8).hexdigest()
    return xxhash.xxh3_64_hexdigest(data)
