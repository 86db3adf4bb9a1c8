"""How a dataset's outputs are scored: the scoring options, each declared once, and one dataset's checked set.

Every dataset builder that takes an option, the OpenCompass evaluator, ``needlebench export`` and ``needlebench
score`` read its name, default and values here (:data:`SCORING_OPTIONS`); :class:`ScoreOptions` is what a grader
is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "METRICS",
    "REASONING_APART",
    "SCORING_NAMES",
    "SCORING_OPTIONS",
    "TRUNCATED_POLICIES",
    "ScoreOptions",
    "ScoringOption",
]

METRICS = ("keyword", "levenshtein")

# what a cut-off output counts as: "scored" as its text reads (OpenCompass, reference), "unscored" (clarified)
TRUNCATED_POLICIES = ("scored", "unscored")
# what is scored of an answer whose reasoning a server returned apart (``reasoning_content``): the "answer"
# alone (the default, every protocol), or OpenCompass's "joined" text (reasoning, think tag, answer)
REASONING_APART = ("answer", "joined")


@dataclass(frozen=True)
class ScoringOption:
    """One scoring option, declared once (:data:`SCORING_OPTIONS`): every dataset builder that takes it, the
    OpenCompass evaluator, ``needlebench export`` and ``needlebench score`` read its name, default and values here,
    and :class:`ScoreOptions` checks a value against it, the one check.

    Attributes:
        name: the option's name, as a builder or an evaluator config takes it.
        default: its value when none is given.
        choices: the values it takes; None: any number (``alpha``).
        meaning: what it decides, for the docs and the messages.
    """

    name: str
    default: Any
    choices: tuple[Any, ...] | None
    meaning: str

    def check(self, value: Any) -> None:
        """Refuse a value the option does not take.

        Raises:
            ValueError: naming the option, the value and the values it takes.
        """
        if self.choices is None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{self.name}: {value!r}; give a number ({self.meaning})")
        elif not any(value is c or (value == c and type(value) is type(c)) for c in self.choices):
            raise ValueError(f"{self.name}: {value!r}; choose from {self.choices} ({self.meaning})")


SCORING_OPTIONS: tuple[ScoringOption, ...] = (
    ScoringOption("metric", "keyword", METRICS, "how a sparse task's answer is scored"),
    ScoringOption(
        "strip_think",
        None,
        (None, True, False),
        "drop <think> blocks before grading; None: only under the clarified rules",
    ),
    ScoringOption("alpha", 0.2, None, "the weight of the Levenshtein partial credit"),
    ScoringOption("truncated", None, (None, *TRUNCATED_POLICIES), "how a cut-off output counts; None: by the protocol"),
    ScoringOption(
        "reasoning_apart",
        "answer",
        REASONING_APART,
        "what is scored of an answer whose reasoning the server returned apart",
    ),
)
SCORING_NAMES = tuple(o.name for o in SCORING_OPTIONS)
_NOT_NONE = frozenset(o.name for o in SCORING_OPTIONS if o.default is not None)  # None given: the default


@dataclass(frozen=True)
class ScoreOptions:
    """The scoring options of one dataset (:data:`SCORING_OPTIONS` declares them; each field is one, checked there).

    Args:
        metric: ``"keyword"`` or ``"levenshtein"`` (sparse tasks).
        strip_think: drop ``<think>`` blocks before grading; None (the default) drops them under the
            clarified rules only, as OpenCompass's evaluators read the whole output. ``True`` on a
            reference sample applies ``reference_strip`` (OpenCompass's ``extract_non_reasoning_content``,
            what its reasoning-model configs attach); on a clarified one our own strip (case-blind tags,
            an unclosed block is no answer).
        alpha: the weight of the Levenshtein partial credit.
        truncated: how a cut-off output counts: ``"scored"`` (as its text reads, as OpenCompass scores it),
            ``"unscored"`` (left out of every number as ``truncated``); None: by the sample's protocol
            (``unscored`` under clarified). Cut-off outputs are flagged and counted either way.
        reasoning_apart: what is scored of an answer whose reasoning the server returned apart
            (``reasoning_content``): ``"answer"`` (the default under every protocol: the server said which
            part is reasoning) or ``"joined"`` (OpenCompass's ``OpenAISDK`` text: reasoning, ``</think>``,
            answer; a measurement bug kept for parity checks, docs/protocol/differences.md).
        reference_strip: OpenCompass's own think strip, which only its adapter layer may import
            (``needlebench.opencompass.outputs.reference_strip``); needed by ``strip_think=True`` on
            reference samples. Not a scoring option a config sets.
    """

    metric: str = "keyword"
    strip_think: bool | None = None
    alpha: float = 0.2
    truncated: str | None = None
    reasoning_apart: str = "answer"
    reference_strip: Callable[[str], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for option in SCORING_OPTIONS:
            option.check(getattr(self, option.name))

    @classmethod
    def of(cls, settings: Mapping[str, Any], reference_strip: Callable[[str], str] | None = None) -> ScoreOptions:
        """The options a config gives by name (the others at their defaults).

        Args:
            settings: option name -> value; None for an option whose default is not None means its default.
            reference_strip: see the class.

        Raises:
            ValueError: a name that is no scoring option, or a value its option does not take.
        """
        unknown = sorted(set(settings) - set(SCORING_NAMES))
        if unknown:
            raise ValueError(f"unknown scoring option(s) {unknown}; the options are {list(SCORING_NAMES)}")
        given = {k: v for k, v in settings.items() if v is not None or k not in _NOT_NONE}
        return cls(**given, reference_strip=reference_strip)

    def truncated_policy(self, protocol: object) -> str:
        """``"scored"`` or ``"unscored"`` for a cut-off output of a sample made under ``protocol``.

        Args:
            protocol: the sample's ``protocol`` metadata (``"reference"``, ``"clarified"`` or None).
        """
        if self.truncated is not None:
            return self.truncated
        return "unscored" if protocol == "clarified" else "scored"
