"""An adaptive run's rounds, as its plan holds them: each dataset's grid as the ladder sees it, and what each round
asked and why.

Why in the plan: the plan is the run (``planning.run``), so the rounds are too. A round is one more set of rows
per dataset, rendered as numbered parts after those of the rounds before (``planning.run.add_round``): every
earlier prediction file keeps its name, OpenCompass's reader serves each part by its ``test_range``, and the
rows' cache key is the dataset's own. The full grid stays the plan's ``planned`` cells, the denominator every
table reads.

The ladder (``adaptive.ladder``) sees one dataset of one model: per length, each prompt as (depth, sample id),
and the scores its graded samples got. A sample that was asked and left unscored (its request failed, its
prompt was skipped as over length) leaves the length's population, as it leaves the full grid's score; it is
never asked twice. Datasets of tasks without length suites (ATC, NeedleChain) run whole in the first round.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..adaptive.ladder import LadderSettings, Round, next_round
from ..aggregate.effective_length import EffectiveRule
from ..record import GradedSample
from ..scoring import SCORING_NAMES, ScoreOptions
from ..tasks import config_params, get_task, make_params
from .limits import Limit, model_rows

__all__ = ["DatasetLadder", "LadderGrid", "LadderRound", "decide", "ladder_grid", "ladder_settings", "scores_of"]


@dataclass(frozen=True)
class LadderGrid:
    """One dataset's full grid for one model, as the ladder asks it.

    Args:
        task: the dataset's task.
        cells: per length, each prompt as (depth as its metadata gives it, sample id, row, prompt tokens as the
            model is sent it), in row order.
        graded: a score may lie between 0 and 100 (the task says so for the dataset's parameters and scoring
            options, ``TaskSpec.binary``): the ladder's bounds are then those for any score from the first
            look (``LadderSettings.graded``). Decided when the run is planned and kept, so every round and
            the replay bound alike.
    """

    task: str
    cells: Mapping[int, tuple[tuple[Any, str, int, int], ...]]
    graded: bool = False

    def bounded(self, settings: LadderSettings) -> LadderSettings:
        """The settings this grid's ladder climbs by: the bounds for any score where its scores are graded.

        Args:
            settings: the run's ladder settings.
        """
        return replace(settings, graded=True) if self.graded else settings

    @property
    def size(self) -> int:
        """Its samples' count (the full grid's)."""
        return sum(map(len, self.cells.values()))

    @property
    def tokens(self) -> dict[int, float]:
        """Per length, the mean prompt tokens of one of its prompts (what a budget counts)."""
        return {n: sum(c[3] for c in cells) / len(cells) for n, cells in self.cells.items() if cells}

    def rows(self) -> dict[str, int]:
        """Each sample id's row."""
        return {c[1]: c[2] for cells in self.cells.values() for c in cells}

    def keys(self) -> dict[str, tuple[int, Any, str]]:
        """Each sample id's ladder key, (length, depth, sample id)."""
        return {c[1]: (n, c[0], c[1]) for n, cells in self.cells.items() for c in cells}

    def sizes(self) -> dict[str, int]:
        """Each sample id's prompt tokens."""
        return {c[1]: c[3] for cells in self.cells.values() for c in cells}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LadderGrid:
        """A grid from :meth:`to_dict`'s data.

        Args:
            data: the JSON data.
        """
        return cls(
            str(data["task"]),
            {int(n): tuple((d, str(s), int(r), int(t)) for d, s, r, t in cells) for n, cells in data["cells"].items()},
            bool(data.get("graded", False)),  # a plan from before the field decided as right-or-wrong
        )


@dataclass(frozen=True)
class LadderRound:
    """One round of an adaptive run: what it asked of each dataset, and the decision that asked it.

    Args:
        index: the round's number (0: the sparse first round).
        asks: per dataset abbr, the sample ids it asked (in the ladder's order).
        reasons: per dataset abbr, the ladder's reason for them.
        shards: the indices of the shards (infer tasks) it added to the plan.
        rule: the effective-length rule the ladder decides by (``EffectiveRule``'s fields), in the first round:
            every later round, and the report's replay, decide by the rule the run began with.
    """

    index: int
    asks: Mapping[str, tuple[str, ...]]
    reasons: Mapping[str, str]
    shards: tuple[int, ...] = ()
    rule: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LadderRound:
        """A round from its JSON data.

        Args:
            data: ``dataclasses.asdict`` of one.
        """
        return cls(
            int(data["index"]),
            {k: tuple(str(s) for s in v) for k, v in data["asks"].items()},
            {k: str(v) for k, v in data["reasons"].items()},
            tuple(int(i) for i in data.get("shards") or ()),
            data.get("rule"),
        )


def ladder_settings(adaptive: Mapping[str, Any] | None, rule: Mapping[str, Any] | None) -> LadderSettings:
    """The ladder's settings of a run: its config's ``adaptive`` options and the rule its first round stored.

    Args:
        adaptive: the run's ``RunSettings.adaptive``.
        rule: the effective-length rule the run began with (``planning.run.ModelRun.rule``); None: the default.
    """
    return LadderSettings.of(adaptive, EffectiveRule.of(dict(rule)) if rule else None)


def ladder_grid(dataset: dict, limit: Limit | None) -> LadderGrid | None:
    """A dataset's grid as its model is sent it, or None for a task without length suites (run whole).

    Args:
        dataset: the needlebench dataset config.
        limit: the model's limit for it (its room decides the prompts' tokens).
    """
    spec = get_task(dataset["task"])
    if not spec.suite_weights:
        return None
    scoring = dict((dataset.get("eval_cfg") or {}).get("evaluator") or {})
    options = ScoreOptions.of({k: v for k, v in scoring.items() if k in SCORING_NAMES})
    graded = spec.binary is None or not spec.binary(make_params(spec.name, **config_params(dataset)), options)
    rows = model_rows(dataset, limit)
    cells: dict[int, list[tuple[Any, str, int, int]]] = {}
    for row, (sample, meta, tokens) in enumerate(zip(rows["id"], rows["meta"], rows["prompt_tokens"], strict=True)):
        length, depth = spec.cell_of(json.loads(meta))
        cells.setdefault(int(length), []).append((depth, str(sample), row, int(tokens)))
    return LadderGrid(spec.name, {n: tuple(c) for n, c in sorted(cells.items())}, graded)


def decide(
    grid: LadderGrid, scores: Mapping[str, float | None], settings: LadderSettings, asked: Sequence[str] = ()
) -> tuple[Round, tuple[str, ...]]:
    """The ladder's round after these scores, and the sample ids it asks that no round asked before.

    Args:
        grid: the dataset's grid.
        scores: each graded sample's score (0-100) by sample id; None: asked and left unscored.
        settings: the ladder's settings.
        asked: every sample id an earlier round asked (never asked again); one without a score is left
            unscored, as a None.
    """
    scores = {**dict.fromkeys(asked), **scores}
    left = {sid for sid, score in scores.items() if score is None}
    cells = {n: [(c[0], c[1]) for c in found if c[1] not in left] for n, found in grid.cells.items()}
    keys = grid.keys()
    answers = {keys[s][:2] + (s,): float(v) / 100 for s, v in scores.items() if v is not None and s in keys}
    found = next_round(cells, answers, grid.tokens, grid.bounded(settings))
    before = set(asked)
    new = tuple(s for n in sorted(found.asks) for _, s in found.asks[n] if s not in before)
    return found, new


def scores_of(records: Sequence[GradedSample]) -> dict[str, float | None]:
    """Each asked record's score (0-100) by sample id; None: left unscored; the records of samples never asked
    are not the ladder's.

    Args:
        records: one model's graded samples of one dataset.
    """
    return {
        r.id: None if r.unscored or r.score is None else float(r.score)
        for r in records
        if r.unscored != "not_sampled"  # never asked: not a sample the ladder has seen
    }


@dataclass(frozen=True)
class DatasetLadder:
    """One dataset's ladder as the eval stage gives it to the dataset's evaluator (``planning.run.ladder_config``):
    the evaluator writes a ``not_sampled`` record for each prompt no round asked, so every number's denominator
    is the full grid's, and the effective length the ladder decides from the records, as the report's replay
    decides it.

    Args:
        grid: the dataset's full grid.
        asked: the sample ids its rounds asked.
        adaptive: the run's ladder options (``RunSettings.adaptive``).
        rule: the effective-length rule the run began with (``ModelRun.rule``).
        fields: what every sample of the dataset holds alike (its planned entry's ``fields``), for the records of
            the prompts not asked.
    """

    grid: LadderGrid
    asked: tuple[str, ...]
    adaptive: Mapping[str, Any]
    rule: Mapping[str, Any] | None
    fields: Mapping[str, Any]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetLadder:
        """A dataset's ladder from ``dataclasses.asdict`` of one (the evaluator's config).

        Args:
            data: the JSON data.
        """
        rule = data.get("rule")
        return cls(
            LadderGrid.from_dict(data["grid"]),
            tuple(str(s) for s in data.get("asked") or ()),
            dict(data.get("adaptive") or {}),
            dict(rule) if rule else None,
            dict(data.get("fields") or {}),
        )

    def unasked(self) -> dict[str, tuple[int, Any]]:
        """Each sample no round asked: its id and its cell (length, depth)."""
        asked = set(self.asked)
        return {c[1]: (n, c[0]) for n, cells in self.grid.cells.items() for c in cells if c[1] not in asked}

    def effective(self, records: Sequence[GradedSample]) -> tuple[int | None, str, int | None]:
        """The dataset's effective length as its ladder decides it from its records: (the length, its edge, the
        first open length).

        Args:
            records: the dataset's graded samples.
        """
        settings = ladder_settings(self.adaptive, self.rule)
        return decide(self.grid, scores_of(records), settings, self.asked)[0].effective
