"""An adaptive run in the report: each ladder's decision, replayed from the records, and what it spent.

Why replayed: a decision is data (``planning.adaptive``). The plan records each round's asks and reason; the
records hold each asked sample's score. From them alone, each round's asks are decided again (the ladder is a
pure function of the scores before it, ``adaptive.ladder.next_round``) and so is the last decision, the
effective length. The report shows it, ``results.json`` carries it, and ``needlebench verify`` recomputes it:
an edited decision, or a round that does not follow from the records before it, fails.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..adaptive.ladder import LadderSettings, Round
from ..aggregate.effective_length import length_text
from ..planning.adaptive import LadderGrid, decide, ladder_settings, scores_of
from ..planning.run import ModelRun
from ..record import GradedSample
from ..tasks import get_task
from .results import RunResults

__all__ = ["ADAPTIVE_TABLE", "LadderView", "ladder_decisions", "ladder_table", "ladder_views"]

ADAPTIVE_TABLE = "needlebench_adaptive"


@dataclass(frozen=True)
class LadderView:
    """One model's ladder over one dataset, as its records decide it.

    Args:
        model: the model.
        dataset: the dataset's abbr.
        task: its task.
        lang: its language.
        decision: the ladder's round after every record (its ``effective`` is the effective length).
        rounds: the rounds the plan recorded.
        replay: None where every recorded round is what the records before it decide; else the first that is not.
        asked: prompts the rounds asked.
        planned: prompts of the full grid.
        asked_tokens: their prompt tokens (cl100k, as sent).
        planned_tokens: the full grid's.
    """

    model: str
    dataset: str
    task: str
    lang: str
    decision: Round
    rounds: int
    replay: str | None
    asked: int
    planned: int
    asked_tokens: int
    planned_tokens: int

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON data (``results.json``'s ``adaptive``)."""
        value, edge, above = self.decision.effective
        return {
            "model": self.model,
            "dataset": self.dataset,
            "rounds": self.rounds,
            "replay": self.replay,
            "asked": self.asked,
            "planned": self.planned,
            "asked_tokens": self.asked_tokens,
            "planned_tokens": self.planned_tokens,
            "effective_length": value,
            "edge": edge,
            "undetermined_above": above,
            "reason": self.decision.reason,
            "rungs": [
                {
                    "length": r.length,
                    "answered": r.answered,
                    "population": r.population,
                    "low": round(r.low, 6),
                    "high": round(r.high, 6),
                    "status": r.status,
                }
                for r in self.decision.rungs
            ],
        }


def _replay(
    run: ModelRun, abbr: str, grid: LadderGrid, scores: Mapping[str, float | None], s: LadderSettings
) -> str | None:
    """The first recorded round whose asks are not what the records before it decide, or None."""
    before: list[str] = []
    for step in run.rounds:
        asks = step.asks.get(abbr, ())
        if step.index:
            seen = {sid: scores.get(sid) for sid in before}
            found, new = decide(grid, seen, s, before)
            if set(new) != set(asks):
                return (
                    f"round {step.index}: the plan asks {len(asks)} prompts, the records before it decide "
                    f"{len(new)} ({found.reason})"
                )
        before += asks
    return None


def ladder_views(results: RunResults) -> list[LadderView]:
    """Every adaptive ladder of the runs, decided from their records with the results' effective-length rule.

    Args:
        results: the records and plans read (``report.results.load_results``).
    """
    by: dict[tuple[str, str], list[GradedSample]] = defaultdict(list)
    for r in results.records:
        by[(str(r.model), str(r.dataset))].append(r)
    out = []
    for model, run in results.model_plans.items():
        if not run.ladders:
            continue
        settings = ladder_settings(results.adaptive.get(model), run.rule)  # the rule the run began with
        for abbr, grid in run.ladders.items():
            mine = by.get((model, abbr), [])
            scores = scores_of(mine)  # the asked samples' (the not sampled ones are not the ladder's)
            asked = run.asked(abbr)
            decision, _ = decide(grid, scores, settings, asked)
            sizes = grid.sizes()
            planned = results.plan_entry(model, abbr)
            out.append(
                LadderView(
                    model,
                    abbr,
                    grid.task,
                    planned.lang if planned is not None else (mine[0].lang if mine else ""),
                    decision,
                    len(run.rounds),
                    _replay(run, abbr, grid, scores, settings),
                    len(asked),
                    len(sizes),
                    sum(sizes[s] for s in asked if s in sizes),
                    sum(sizes.values()),
                )
            )
    return out


def ladder_decisions(views: Sequence[LadderView]) -> dict[tuple[str, str, str], tuple[int | None, str, int | None]]:
    """Each ladder's effective length as the effective-length table takes it, per (model, task, lang) that one
    ladder decides (where two datasets of one task and language climbed two ladders, the table's own walk
    stands, and ``needlebench_adaptive.csv`` has each).

    Args:
        views: from :func:`ladder_views`.
    """
    keys = [(v.model, v.task, v.lang) for v in views]
    # two ladders of one task and language (two suites' datasets): neither speaks for the curve the table pools
    return {k: v.decision.effective for k, v in zip(keys, views) if keys.count(k) == 1}


def ladder_table(views: Sequence[LadderView]) -> pd.DataFrame:
    """``needlebench_adaptive.csv``: per model and dataset, the ladder's rounds, its effective length and what it
    spent against the full grid.

    Args:
        views: from :func:`ladder_views`.
    """
    rows = []
    for v in views:
        value, edge, above = v.decision.effective
        rows.append(
            {
                "model": v.model,
                "task": get_task(v.task).label or v.task,
                "lang": v.lang.upper(),
                "dataset": v.dataset,
                "rounds": v.rounds,
                "effective_length": value,
                "edge": edge,
                "undetermined_above": above,
                "prompts": v.asked,
                "full grid prompts": v.planned,
                "prompt_tokens": v.asked_tokens,
                "full grid prompt_tokens": v.planned_tokens,
                "share of tokens": v.asked_tokens / v.planned_tokens if v.planned_tokens else None,
                "lengths": " ".join(
                    f"{length_text(r.length)}:{r.status} {r.answered}/{r.population}" for r in v.decision.rungs
                ),
                "decision": v.decision.reason,
                "replayed": "yes" if v.replay is None else f"no: {v.replay}",
            }
        )
    df = pd.DataFrame(rows)
    for column in ("effective_length", "undetermined_above"):
        if column in df:
            df[column] = df[column].astype("Int64")
    return df
