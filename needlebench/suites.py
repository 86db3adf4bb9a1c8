"""Suite definitions: lengths and depths of each profile (a task's own defaults live with the task).

Pure data plus lookup functions; configs call them and never copy these
numbers. ``v2`` (the 2025 paper) is OpenCompass's ``needlebench_v2``
configs; ``v1`` (the 2024 paper) is OpenCompass's ``needlebench`` configs,
whose buffers are the 2024 paper's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["Suite", "SUITES", "V1_SUITES", "get_suite", "LINEAR_DEPTHS", "PROFILES"]

PROFILES = ("v2", "v1")  # the 2025 paper (OpenCompass needlebench_v2) and the 2024 paper (needlebench)
LINEAR_DEPTHS: tuple[int, ...] = tuple(range(0, 101, 10))


@dataclass(frozen=True)
class Suite:
    """A suite's name and the lengths and depths of its cells."""

    name: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...] = LINEAR_DEPTHS


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("4k", (1000, 2000, 3000, 4000)),
        Suite("8k", (1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000)),
        Suite("32k", (1000, 4000, 8000, 12000, 16000, 20000, 24000, 28000, 32000)),
        Suite("128k", (1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000)),
        Suite("200k", (1000, 25000, 50000, 75000, 100000, 125000, 150000, 175000, 200000)),
        Suite("256k", (32000, 128000, 256000)),
        Suite("1000k", (1000, 125000, 250000, 375000, 500000, 625000, 750000, 875000, 1000000)),
    )
}

# 2024 (OpenCompass's ``needlebench`` configs): 20 linear depths up to 8k, each cut to ``int(depth)`` as its
# configs pass it to the loader (5.26 -> 5), then its 11-depth ``depths_list`` (every other of the 20).
_V1_DEPTHS_20: tuple[int, ...] = tuple(int(100 * i / 19) for i in range(20))
_V1_DEPTHS_11: tuple[int, ...] = (0, 10, 21, 31, 42, 52, 63, 73, 84, 94, 100)
V1_SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("4k", (1000, 2000, 3000, 4000), _V1_DEPTHS_20),
        Suite("8k", (5000, 6000, 7000, 8000), _V1_DEPTHS_20),
        Suite("32k", (9000, 13000, 17000, 21000, 25000, 29000, 31000, 32000), _V1_DEPTHS_11),
        Suite("128k", (16000, 32000, 48000, 64000, 80000, 96000, 112000, 128000), _V1_DEPTHS_11),
        Suite("200k", (16000, 48000, 80000, 112000, 128000, 144000, 176000, 200000), _V1_DEPTHS_11),
        Suite("256k", (32000, 128000, 256000), _V1_DEPTHS_11),
        Suite("1000k", (20000, 160000, 300000, 440000, 580000, 720000, 860000, 1000000), _V1_DEPTHS_11),
    )
}


def get_suite(name: str, profile: str = "v2") -> Suite:
    """A suite's lengths and depths under a profile.

    Args:
        name: ``4k`` ... ``1000k``.
        profile: ``v2`` (2025 paper) or ``v1`` (2024 paper).

    Raises:
        ConfigError: an unknown suite or profile.
    """
    if profile not in PROFILES:
        raise ConfigError(f"profile: unknown profile {profile!r}; choose from {PROFILES}")
    try:
        return (V1_SUITES if profile == "v1" else SUITES)[name]
    except KeyError:
        raise ConfigError(f"suite: unknown suite {name!r}; choose from {list(SUITES)}") from None
