"""A run's options, declared once: how it is cut and how over-length prompts are handled.

One record, built from the config (``runtime()``'s arguments, the partitioner's config section, or
``needlebench plan``'s reading of that section) and checked once, when it is made. The partitioner keeps
it, the limits read it, and the run's plan stores it (a resume compares the stored record with the new one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..adaptive.ladder import LadderSettings
from ..errors import ConfigError, unknown_option_error
from ..tasks.sparse.retrieval import OVERLENGTH_POLICIES

__all__ = ["BEYOND_WINDOW", "PROMPT_RECORDS", "RunSettings"]

# OpenCompass's own keys of a partitioner's config section: not ours to check
_OPENCOMPASS_KEYS = ("type", "stage", "out_dir", "keep_keys")
# how a prediction file keeps each prompt: OpenCompass's whole text, or its digest and the sample's id
PROMPT_RECORDS = ("text", "digest")
# what a run does with cells whose prompts go past a model's context window (``planning.window``)
BEYOND_WINDOW = ("stop", "mark")


@dataclass(frozen=True)
class RunSettings:
    """How a run is cut, checked when made.

    Args:
        num_shards: infer tasks per model, of about equal prompt tokens (one per GPU, or per Slurm job).
        overlength: ``"shorten"`` (cut the haystack of a prompt over the model's room) or ``"skip"`` it.
        template_margin: tokens kept free for the chat template.
        measure_with_model_tokenizer: scale the room by the model tokenizer's tokens per cl100k token.
        eval_tasks: the eval stage groups the run's datasets, every model's, into this many tasks (0: one per dataset);
            it changes no prediction, so a resume that changes it is the same plan.
        prompts: what each prediction file keeps of a prompt: ``"text"`` (OpenCompass's ``origin_prompt``,
            which its own tools read) or ``"digest"`` (the prompt's digest and its sample id; the text stays
            in the dataset cache). It changes no request and no score, so a resume that changes it is the
            same plan; files written either way mix freely.
        beyond_window: cells whose prompts go past a model's context window as its ``config.json`` and RoPE
            scaling give it (``planning.window``): ``"stop"`` the run before any model call, naming them, or
            ``"mark"`` them "beyond window" in the tables and run them. The cells are in the plan either way,
            so a resume that changes it is the same plan.
        adaptive: an adaptive run (``adaptive.ladder.LadderSettings``' options: ``delta``, ``first``, ``growth``,
            ``budget``, ``seed``, ``extend``, ``graded``; ``{}`` for every default): each length-suite dataset
            is asked in rounds, only what decides its effective length (``planning.adaptive``); None: the full
            grid.

    Raises:
        ConfigError: an unknown policy, fewer than one shard, or a negative count.
    """

    num_shards: int = 1
    overlength: str = "shorten"
    template_margin: int = 64
    measure_with_model_tokenizer: bool = True
    eval_tasks: int = field(default=0, compare=False)
    prompts: str = field(default="text", compare=False)
    beyond_window: str = field(default="stop", compare=False)
    adaptive: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.overlength not in OVERLENGTH_POLICIES:
            raise ConfigError(f"overlength: {self.overlength!r}; choose from {OVERLENGTH_POLICIES}")
        if self.num_shards < 1:
            raise ConfigError(f"num_shards: {self.num_shards} must be at least 1")
        if self.template_margin < 0:
            raise ConfigError(f"template_margin: {self.template_margin} must not be negative")
        if self.prompts not in PROMPT_RECORDS:
            raise ConfigError(f"prompts: {self.prompts!r}; choose from {PROMPT_RECORDS}")
        if self.beyond_window not in BEYOND_WINDOW:
            raise ConfigError(f"beyond_window: {self.beyond_window!r}; choose from {BEYOND_WINDOW}")
        if self.eval_tasks < 0:
            raise ConfigError(f"eval_tasks: {self.eval_tasks} must not be negative")
        if self.adaptive is not None:
            LadderSettings.of(self.adaptive)  # an unknown key or a bad value: one line, when the config is read

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RunSettings:
        """The settings a partitioner config section (or a stored plan) gives; an unknown key is named.

        Args:
            options: the section's keys; OpenCompass's own (``type``, ``stage``, ``out_dir``, ``keep_keys``)
                are passed over.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        known = cls.names()
        ours = {k: v for k, v in options.items() if k not in _OPENCOMPASS_KEYS}
        unknown = sorted(set(ours) - set(known))
        if unknown:
            raise unknown_option_error("partitioner", unknown, known)
        return cls(**ours)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every setting's name, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def planned(cls) -> tuple[str, ...]:
        """The settings that change a run's plan (a resume under other values must re-plan)."""
        return tuple(f.name for f in fields(cls) if f.compare)

    def section(self, partitioner: str, stage: str) -> dict[str, Any]:
        """A stage's partitioner config section holding these settings.

        Args:
            partitioner: the partitioner's type name.
            stage: ``"infer"`` or ``"eval"``.
        """
        return dict(type=partitioner, stage=stage, **asdict(self))
