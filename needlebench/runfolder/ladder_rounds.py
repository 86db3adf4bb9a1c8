"""An adaptive run's next round, decided from its graded samples once the round before is answered and scored.

Why here: a round is decided from the records the eval stage wrote (``results/<model>/<abbr>.samples.jsonl``),
and the plan that holds the rounds is this folder's (``plan_file.py``). The infer stage calls :func:`advance` as
it resumes a run: a model whose every piece is answered and whose every ladder dataset is scored gets the
round its records decide (``planning.adaptive.decide``), added to its plan as parts after the earlier ones
(``planning.run.add_round``); those datasets' result files are removed, so the eval stage scores them again
with the new rows. A model whose round is still running continues it, asking nothing twice. The summarizer and
``needlebench run``'s loop ask :func:`pending` whether another round is due.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..adaptive.ladder import LadderSettings, Round
from ..aggregate.effective_length import EffectiveRule
from ..jsonl import iter_jsonl
from ..planning.adaptive import LadderRound, decide
from ..planning.run import ModelRun, RunPlan, add_round
from ..record import GradedSample
from .pieces import piece_done

__all__ = ["advance", "ladder_scores", "pending", "round_scored", "scores_of"]


def round_scored(model_run: ModelRun, run: Path) -> bool:
    """Whether a model's latest round is answered (every piece's predictions whole) and scored (every ladder
    dataset's result file written since).

    Args:
        model_run: the model's plan.
        run: the run folder.
    """
    folder = run / "predictions" / model_run.abbr
    if not all(piece_done(folder, p.dataset, p.abbr) for s in model_run.shards for p in s.parts):
        return False
    return all((run / "results" / model_run.abbr / f"{abbr}.json").is_file() for abbr in model_run.ladders)


def ladder_scores(path: Path) -> dict[str, float | None]:
    """Each graded sample's score (0-100) by sample id from one ``samples.jsonl``; None: left unscored. A line
    that is not a record is passed over (the report counts it unreadable).

    Args:
        path: the dataset's ``results/<model>/<abbr>.samples.jsonl``.
    """
    out: dict[str, float | None] = {}
    if not path.is_file():
        return out
    for _, row in iter_jsonl(path, []):
        try:
            record = GradedSample.from_json(row)
        except (ValueError, TypeError, AttributeError):
            continue
        out[record.id] = None if record.unscored or record.score is None else float(record.score)
    return out


def scores_of(records: Sequence[GradedSample]) -> dict[str, float | None]:
    """Each record's score (0-100) by sample id; None: left unscored (as :func:`ladder_scores` reads them).

    Args:
        records: one model's graded samples of one dataset.
    """
    return {r.id: None if r.unscored or r.score is None else float(r.score) for r in records}


def _decided(
    model_run: ModelRun, run: Path, settings: LadderSettings
) -> tuple[dict[str, Round], dict[str, tuple[str, ...]]]:
    """Per ladder dataset of a model whose round is scored: the ladder's round and the ids it newly asks."""
    asked = {abbr: [s for r in model_run.rounds for s in r.asks.get(abbr, ())] for abbr in model_run.ladders}
    rounds, new = {}, {}
    for abbr, grid in model_run.ladders.items():
        scores = ladder_scores(run / "results" / model_run.abbr / f"{abbr}.samples.jsonl")
        rounds[abbr], new[abbr] = decide(grid, scores, settings, asked[abbr])
    return rounds, new


def pending(plan: RunPlan, run: Path, rule: EffectiveRule | None = None) -> dict[str, int]:
    """Per model of an adaptive run whose latest round is scored, how many prompts the next round asks (0: its
    ladder is done); models whose round is still running are left out.

    Args:
        plan: the run's plan.
        run: the run folder.
        rule: the run's effective-length rule (the summarizer's).
    """
    if plan.settings.adaptive is None:
        return {}
    settings = LadderSettings.of(plan.settings.adaptive, rule)
    out = {}
    for model_run in plan.models:
        if model_run.rounds and round_scored(model_run, run):
            out[model_run.abbr] = sum(map(len, _decided(model_run, run, settings)[1].values()))
    return out


def advance(
    plan: RunPlan,
    configs: Mapping[str, tuple[dict, Sequence[dict]]],
    run: Path,
    rule: EffectiveRule | None,
    log: Any,
) -> RunPlan:
    """The plan with each model's next round where its latest round is scored and the ladder asks more; those
    datasets' result files removed, so the eval stage scores them again.

    Args:
        plan: the run's plan (an adaptive run's; another is returned as it is).
        configs: per model abbr, its config and the dataset configs it runs (in config order).
        run: the run folder.
        rule: the run's effective-length rule (the summarizer's).
        log: where each round is said.
    """
    if plan.settings.adaptive is None:
        return plan
    settings = LadderSettings.of(plan.settings.adaptive, rule)
    models = []
    for model_run in plan.models:
        if not model_run.rounds or not round_scored(model_run, run) or model_run.abbr not in configs:
            models.append(model_run)
            continue
        found, new = _decided(model_run, run, settings)
        asks = {abbr: ids for abbr, ids in new.items() if ids}
        if not asks:
            models.append(model_run)
            continue
        index = len(model_run.rounds)
        step = LadderRound(index, asks, {abbr: found[abbr].reason for abbr in asks})
        model, datasets = configs[model_run.abbr]
        models.append(add_round(model_run, model, datasets, plan.settings, step))
        for abbr in asks:
            (run / "results" / model_run.abbr / f"{abbr}.json").unlink(missing_ok=True)
        log.warning(
            f"{model_run.abbr}: adaptive round {index} asks {sum(map(len, asks.values()))} prompts "
            f"({'; '.join(f'{a}: {len(ids)}, {found[a].reason}' for a, ids in asks.items())})"
        )
    return dataclasses.replace(plan, models=tuple(models))
