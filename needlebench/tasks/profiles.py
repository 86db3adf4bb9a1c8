"""The two profiles, each one record: its suites, buffers, metric, recall step and task weights.

Pure data plus lookup functions; configs, tasks and tables read these records and never copy their
numbers. ``v2`` (the 2025 paper) is OpenCompass's ``needlebench_v2`` configs; ``v1`` (the 2024 paper)
is OpenCompass's ``needlebench`` configs, whose buffers are the 2024 paper's table. A profile names
tasks only as keys of its tables (the tasks read their own entries); nothing here branches on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ConfigError

__all__ = [
    "BEYOND_SUITES",
    "LINEAR_DEPTHS",
    "OPENCOMPASS_LONGEST",
    "PROFILES",
    "SUITES",
    "V1_SUITES",
    "Profile",
    "Suite",
    "get_profile",
    "get_suite",
]

LINEAR_DEPTHS: tuple[int, ...] = tuple(range(0, 101, 10))
# the longest length OpenCompass's NeedleBench configs have (v1 and v2: 1000k); past it, prompts are its builders'
# extended, with no OpenCompass config or paper table to compare with
OPENCOMPASS_LONGEST = 1_000_000


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

# Rungs past 1M (2025 protocol): suites of their own, beyond OpenCompass's protocol (its configs stop at
# OPENCOMPASS_LONGEST). The shortest length stays 1k: the relative effective-length rule divides by its score.
BEYOND_SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("2000k", (1000, 250000, 500000, 1000000, 1500000, 2000000)),
        Suite("4000k", (1000, 500000, 1000000, 2000000, 3000000, 4000000)),
        Suite("8000k", (1000, 1000000, 2000000, 4000000, 6000000, 8000000)),
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


@dataclass(frozen=True)
class Profile:
    """Everything a profile decides, in one place.

    Args:
        name: ``"v2"`` or ``"v1"``.
        paper: the paper (and OpenCompass configs) it follows.
        suites: suite name -> its lengths and depths.
        buffers: suite name (``"_default"`` for the rest) -> the buffer by language (``"en"``, ``"zh"``)
            or, where a language is absent, by task (``"srt"``, ``"mrt"``, ``"mrs"``).
        weights: task -> its weight in the suite overall; these tasks are the summary table's rows.
        scoring: task -> the grading options a suite config gives it when the user sets none (the
            profile's own evaluator, e.g. v1's Levenshtein credit for S-RT).
        recall_step: a suite config's default for the M-RT recall step (OpenCompass v1 reads it; v2 not).
        atc: the task that is this profile's Ancestral Trace Challenge.
    """

    name: str
    paper: str
    suites: Mapping[str, Suite]
    buffers: Mapping[str, Mapping[str, int]]
    weights: Mapping[str, float]
    scoring: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    recall_step: bool = False
    atc: str = "atc"

    def suite(self, name: str) -> Suite:
        """A suite's lengths and depths.

        Args:
            name: ``4k`` ... ``1000k``; ``v2`` also ``2000k``, ``4000k``, ``8000k`` (:data:`BEYOND_SUITES`).

        Raises:
            ConfigError: an unknown suite.
        """
        try:
            return self.suites[name]
        except KeyError:
            raise ConfigError(f"suite: unknown suite {name!r}; choose from {list(self.suites)}") from None

    def buffer(self, suite: str, task: str, lang: str) -> int:
        """The buffer of a (suite, task, language): by language where the suite's row names it, else by task.

        Args:
            suite: the suite name, e.g. ``"32k"``.
            task: ``"srt"``, ``"mrt"`` or ``"mrs"``.
            lang: ``"en"`` or ``"zh"``.

        Raises:
            ConfigError: an unknown suite.
        """
        self.suite(suite)
        row = self.buffers.get(suite) or self.buffers["_default"]
        return int(row[lang] if lang in row else row[task])


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "v2",
            "NeedleBench 2025 (OpenCompass needlebench_v2)",
            {**SUITES, **BEYOND_SUITES},
            # OpenCompass v2's configs: English 500 up to 8k, 3000 above; Chinese 200
            {"4k": {"en": 500, "zh": 200}, "8k": {"en": 500, "zh": 200}, "_default": {"en": 3000, "zh": 200}},
            # equal weights (2025 paper)
            {"srt": 1 / 3, "mrt": 1 / 3, "mrs": 1 / 3},
        ),
        Profile(
            "v1",
            "NeedleBench 2024 (OpenCompass needlebench)",
            V1_SUITES,
            # the 2024 paper's table, by task; Chinese 200
            {
                "4k": {"srt": 600, "mrt": 1000, "mrs": 600, "zh": 200},
                "8k": {"srt": 800, "mrt": 1300, "mrs": 1000, "zh": 200},
                "32k": {"srt": 3000, "mrt": 3000, "mrs": 3000, "zh": 200},
                "_default": {"srt": 600, "mrt": 3000, "mrs": 600, "zh": 200},
            },
            {"srt": 0.4, "mrt": 0.3, "mrs": 0.3},
            # OpenCompass v1 gives Levenshtein partial credit to S-RT only (NeedleBenchOriginEvaluator); its
            # M-RT (NeedleBenchParallelEvaluator) and M-RS (NeedleBenchMultiEvaluator) are keyword-only
            scoring={"srt": {"metric": "levenshtein"}},
            recall_step=True,
            atc="atc_mc",
        ),
    )
}


def get_profile(name: str) -> Profile:
    """A profile by name.

    Args:
        name: ``v2`` (2025 paper) or ``v1`` (2024 paper).

    Raises:
        ConfigError: an unknown profile.
    """
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"profile: unknown profile {name!r}; choose from {tuple(PROFILES)}") from None


def get_suite(name: str, profile: str = "v2") -> Suite:
    """A suite's lengths and depths under a profile.

    Args:
        name: ``4k`` ... ``1000k`` (both profiles), ``2000k``, ``4000k``, ``8000k`` (``v2``: beyond OpenCompass).
        profile: ``v2`` (2025 paper) or ``v1`` (2024 paper).

    Raises:
        ConfigError: an unknown suite or profile.
    """
    return get_profile(profile).suite(name)
