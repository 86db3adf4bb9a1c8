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
from ..jsonl import iter_jsonl
from ..planning.adaptive import LadderRound, decide, ladder_settings, scores_of
from ..planning.run import ModelRun, RunPlan, add_round
from ..record import GradedSample
from .pieces import piece_done

__all__ = ["advance", "ladder_scores", "pending", "round_scored"]


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
    """Each graded sample's score (0-100) by sample id from one ``samples.jsonl`` (:func:`scores_of`). A line
    that is not a record is passed over: its sample, asked and without a score, is left unscored by the ladder
    (``planning.adaptive.decide``), as the report's replay leaves it.

    Args:
        path: the dataset's ``results/<model>/<abbr>.samples.jsonl``.
    """
    records = []
    for _, row in iter_jsonl(path, []) if path.is_file() else ():
        try:
            records.append(GradedSample.from_json(row))
        except (ValueError, TypeError, AttributeError):
            continue
    return scores_of(records)


def _decided(
    model_run: ModelRun, run: Path, settings: LadderSettings
) -> tuple[dict[str, Round], dict[str, tuple[str, ...]]]:
    """Per ladder dataset of a model whose round is scored: the ladder's round and the ids it newly asks."""
    rounds, new = {}, {}
    for abbr, grid in model_run.ladders.items():
        scores = ladder_scores(run / "results" / model_run.abbr / f"{abbr}.samples.jsonl")
        rounds[abbr], new[abbr] = decide(grid, scores, settings, model_run.asked(abbr))
    return rounds, new


def pending(plan: RunPlan, run: Path) -> dict[str, int]:
    """Per model of an adaptive run whose latest round is scored, how many prompts the next round asks (0: its
    ladder is done); models whose round is still running are left out.

    Args:
        plan: the run's plan.
        run: the run folder.
    """
    if plan.settings.adaptive is None:
        return {}
    out = {}
    for model_run in plan.models:
        if model_run.rounds and round_scored(model_run, run):
            settings = ladder_settings(plan.settings.adaptive, model_run.rule)
            out[model_run.abbr] = sum(map(len, _decided(model_run, run, settings)[1].values()))
    return out


def advance(
    plan: RunPlan,
    configs: Mapping[str, tuple[dict, Sequence[dict]]],
    run: Path,
    log: Any,
) -> RunPlan:
    """The plan with each model's next round where its latest round is scored and the ladder asks more; those
    datasets' result files removed, so the eval stage scores them again.

    Args:
        plan: the run's plan (an adaptive run's; another is returned as it is).
        configs: per model abbr, its config and the dataset configs it runs (in config order).
        run: the run folder.
        log: where each round is said.
    """
    if plan.settings.adaptive is None:
        return plan
    models, changed = [], False
    for model_run in plan.models:
        if not model_run.rounds or not round_scored(model_run, run) or model_run.abbr not in configs:
            models.append(model_run)
            continue
        settings = ladder_settings(plan.settings.adaptive, model_run.rule)
        found, new = _decided(model_run, run, settings)
        asks = {abbr: ids for abbr, ids in new.items() if ids}
        if not asks:
            models.append(model_run)
            continue
        index = len(model_run.rounds)
        step = LadderRound(index, asks, {abbr: found[abbr].reason for abbr in asks})
        model, datasets = configs[model_run.abbr]
        models.append(add_round(model_run, model, datasets, plan.settings, step))
        changed = True
        asks = dict(models[-1].rounds[-1].asks)  # what has parts
        for abbr in asks:
            (run / "results" / model_run.abbr / f"{abbr}.json").unlink(missing_ok=True)
        log.warning(
            f"{model_run.abbr}: adaptive round {index} asks {sum(map(len, asks.values()))} prompts "
            f"({'; '.join(f'{a}: {len(ids)}, {found[a].reason}' for a, ids in asks.items())})"
        )
    return dataclasses.replace(plan, models=tuple(models)) if changed else plan
