"""Suite definitions: lengths, depths and buffers of each profile.

Pure data plus lookup functions; configs call them and never copy these
numbers. ``v2`` (the 2025 paper) is OpenCompass's ``needlebench_v2``
configs; ``v1`` (the 2024 paper) is OpenCompass's ``needlebench`` configs,
whose buffers are the 2024 paper's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["Suite", "SUITES", "V1_SUITES", "get_suite", "suite_buffer", "LINEAR_DEPTHS", "PROFILES_BUFFER"]

LINEAR_DEPTHS: tuple[int, ...] = tuple(range(0, 101, 10))


@dataclass(frozen=True)
class Suite:
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

# 2024: linear depths with 20 points up to 8k, then OpenCompass v1's 11 rounded depths.
_V1_DEPTHS_20: tuple[float, ...] = tuple(100 * i / 19 for i in range(20))
_V1_DEPTHS_11: tuple[int, ...] = (0, 10, 21, 31, 42, 52, 63, 73, 84, 94, 100)
V1_SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("4k", (1000, 2000, 3000, 4000), _V1_DEPTHS_20),  # type: ignore[arg-type]
        Suite("8k", (5000, 6000, 7000, 8000), _V1_DEPTHS_20),  # type: ignore[arg-type]
        Suite("32k", (9000, 13000, 17000, 21000, 25000, 29000, 31000, 32000), _V1_DEPTHS_11),
        Suite("128k", (16000, 32000, 48000, 64000, 80000, 96000, 112000, 128000), _V1_DEPTHS_11),
        Suite("200k", (16000, 48000, 80000, 112000, 128000, 144000, 176000, 200000), _V1_DEPTHS_11),
        Suite("256k", (32000, 128000, 256000), _V1_DEPTHS_11),
        Suite("1000k", (20000, 160000, 300000, 440000, 580000, 720000, 860000, 1000000), _V1_DEPTHS_11),
    )
}

# (suite, task, lang) -> buffer. v2: OpenCompass v2 configs (English 500 up to 8k, 3000 above;
# Chinese 200). v1: the 2024 paper's table; suites it lacks use the nearest smaller one.
PROFILES_BUFFER: dict[str, dict[str, dict[str, int]]] = {
    "v2": {
        "4k": {"en": 500, "zh": 200},
        "8k": {"en": 500, "zh": 200},
        "_default": {"en": 3000, "zh": 200},
    },
    "v1": {
        "4k": {"srt": 600, "mrt": 1000, "mrs": 600, "zh": 200},
        "8k": {"srt": 800, "mrt": 1300, "mrs": 1000, "zh": 200},
        "32k": {"srt": 3000, "mrt": 3000, "mrs": 3000, "zh": 200},
        "128k": {"srt": 600, "mrt": 3000, "mrs": 600, "zh": 200},
        "200k": {"srt": 600, "mrt": 3000, "mrs": 600, "zh": 200},
        "256k": {"srt": 600, "mrt": 3000, "mrs": 600, "zh": 200},
        "1000k": {"srt": 600, "mrt": 3000, "mrs": 600, "zh": 200},
    },
}


def get_suite(name: str, profile: str = "v2") -> Suite:
    """A suite's lengths and depths under a profile (``v2``: 2025 paper, ``v1``: 2024 paper)."""
    try:
        return (V1_SUITES if profile == "v1" else SUITES)[name]
    except KeyError:
        raise ConfigError(f"suite: unknown suite {name!r}; choose from {list(SUITES)}") from None


def suite_buffer(suite: str, task: str, lang: str, profile: str = "v2") -> int:
    """The buffer a profile gives a (suite, task, language)."""
    if profile not in PROFILES_BUFFER:
        raise ConfigError(f"profile: unknown profile {profile!r}; choose from {sorted(PROFILES_BUFFER)}")
    get_suite(suite)
    table = PROFILES_BUFFER[profile]
    row = table.get(suite) or table["_default"]
    if profile == "v1":
        return row["zh"] if lang == "zh" else row[task]
    return row[lang]
