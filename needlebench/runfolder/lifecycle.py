"""What the infer stage does with a run folder: fresh, resume, re-plan, retry, batch, decided once, here.

:func:`start_infer` is the infer stage's one call into the run folder. It reads the command's request
(``request.py``), makes the prediction files safe to resume from (``pieces.py``), builds every dataset of
the run once, on all cores, and settles the plan:

* a **fresh** run plans (``planning.run.plan_run``) and stores the plan with the digest of the settings,
  models and datasets it was made from and each dataset's rows' fingerprint (``plan_file.py``);
* a **resume** reads the stored plan first. Where the config's digest and every dataset's fingerprint are
  the stored ones, the stored plan is the run's: nothing is planned again and no tokenizer is loaded.
  Where the digest differs, the config is planned again to compare (``plan_diff.py``); where a
  fingerprint differs (a generator or input change that keeps every token count), the dataset is named;
* any difference stops the run before any model call, naming each one, unless the request asks to
  **re-plan**: then every answer still valid (same prompt, model and output budget) is carried into the new
  plan (``carryover.py``) and the rest are asked.

It then stores the plan with the stage in its history (who runs it, since when), takes apart the prediction
files whose requests still failed (of the models the request names, else every model's:
``carryover.requeue_failed``) and removes the request. What is left for the adapter is to render the plan's pieces that are not done
(``pieces.piece_done``) as OpenCompass tasks.

:func:`start_eval` is the eval stage's: every dataset config as it is scored, with the limit the plan holds
for its model and the numbers every model's result file of it names; it adds itself to the plan's history.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aggregate.effective_length import EffectiveRule
from ..cache.arrow_rows import materialize_many, rows_fingerprint
from ..cache.rows import load_rows
from ..cgroups import memory_limit
from ..errors import PlanChanged
from ..grading.evaluation import metric_names, planned_lengths
from ..planning.limits import Limit, Limits, limited_dataset
from ..planning.run import (
    MemoryBaseline,
    ModelRun,
    RunPlan,
    adaptive_rows,
    ladder_config,
    plan_run,
    row_selection,
)
from ..planning.settings import RunSettings
from ..planning.shards import shard_ranges
from ..planning.window import check_windows
from ..seeding import stable_hash
from ..tasks import config_params, get_task, is_needlebench
from .carryover import carry_over, requeue_failed
from .ladder_rounds import advance
from .pieces import repair_predictions
from .plan_diff import plan_changes
from .plan_file import PLAN_FILE, StoredPlan, read_stored, resume_command, write_stored
from .request import RunRequest, clear_request, read_request

__all__ = [
    "Group",
    "InferStart",
    "config_digest",
    "dataset_fingerprints",
    "eval_groups",
    "make_plan",
    "start_eval",
    "start_infer",
]

Group = tuple[Sequence[dict], Sequence[dict]]  # (model configs, the dataset configs each of them runs)


@dataclass(frozen=True)
class InferStart:
    """What the infer stage goes on with.

    Args:
        plan: the run's plan (stored).
        request: what the command asked (``RunRequest()`` for a plain run).
        stage: ``"fresh"``, ``"resume"`` or ``"replan"``.
    """

    plan: RunPlan
    request: RunRequest
    stage: str


def _named(value: Any) -> str:
    """A config value JSON cannot hold, as a stable name (a class or function by its qualified name)."""
    if isinstance(value, type) or callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', repr(value))}"
    return str(value)


def config_digest(settings: RunSettings, groups: Sequence[Group]) -> str:
    """The digest of what a plan is made from in the config: the settings, every model and every dataset config.

    Args:
        settings: the infer partitioner's settings.
        groups: (models, datasets) per OpenCompass model-dataset combination.
    """
    data = {
        "settings": dataclasses.asdict(settings),
        "groups": [[[dict(m) for m in models], [dict(d) for d in datasets]] for models, datasets in groups],
    }
    return stable_hash(json.dumps(data, sort_keys=True, default=_named), digest_size=16)


def dataset_fingerprints(groups: Sequence[Group]) -> dict[str, str]:
    """Each needlebench dataset's rows' fingerprint (``cache.store.RowsDigest``), by abbr.

    Args:
        groups: (models, datasets) per OpenCompass model-dataset combination.
    """
    out: dict[str, str] = {}
    for _, datasets in groups:
        for d in datasets:
            if is_needlebench(d) and d["abbr"] not in out:
                out[d["abbr"]] = rows_fingerprint(d["task"], **config_params(d))
    return out


def _memory() -> MemoryBaseline | None:
    """The memory cgroup's kill count now (kills after it are this run's)."""
    cgroup = memory_limit()
    return MemoryBaseline(str(cgroup.path), cgroup.limit, cgroup.oom_kills) if cgroup else None


def make_plan(
    groups: Sequence[Group], settings: RunSettings, logger: Any = None, rule: EffectiveRule | None = None
) -> RunPlan:
    """The run's plan from its config, with the memory cgroup's kill count now (``planning.run.plan_run``).

    Args:
        groups: (models, datasets) per OpenCompass model-dataset combination.
        settings: the infer partitioner's settings.
        logger: where planning warns (a tokenizer that fails to load, a missing ``max_seq_len``).
        rule: the run's effective-length rule (an adaptive run's ladder decides by it).
    """
    runs: list[ModelRun] = []
    for models, datasets in groups:
        runs.extend(plan_run(list(models), list(datasets), settings, logger, rule=rule).models)
    return RunPlan(settings, tuple(runs), _memory())


def _changed_rows(stored: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The datasets whose rows are not those the plan was made for (datasets new to the config aside)."""
    return [abbr for abbr in sorted(set(stored) & set(now)) if stored[abbr] != now[abbr]]


def _rows_line(abbr: str, stored: Mapping[str, str], now: Mapping[str, str]) -> str:
    return (
        f"dataset {abbr}: its rows changed since the plan was made (fingerprint {stored[abbr]} -> {now[abbr]}: "
        "a generator, needle or corpus change that may keep every token count)"
    )


def _stopped(run: Path, changes: list[str]) -> PlanChanged:
    """The one message a resume with another plan stops with: each difference and the two ways on."""
    lines = "\n".join(f"  - {c}" for c in changes)
    return PlanChanged(
        f"this run's stored plan ({run / PLAN_FILE}) is not what the config gives now; nothing was asked of any "
        f"model.\n{lines}\nEither run into a new work dir (leave out -r), or re-plan this one, keeping every answer "
        f"still valid (same prompt, model and output budget) and asking the rest: {resume_command(run, replan=True)}"
    )


def _stage_entry(stage: str, request: dict[str, Any]) -> dict[str, Any]:
    """A stage's entry in the plan's history: what it is, what it was asked, and who runs it since when (this
    process, this host, now): ``needlebench status`` tells a live run from a stopped one by them."""
    return {
        "stage": stage,
        "request": request,
        "at": round(time.time(), 3),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def _models(groups: Sequence[Group], plan: RunPlan) -> list[tuple[dict, list[dict], ModelRun]]:
    """Each model config with its needlebench datasets and its plan, in config order (as planned)."""
    runs = iter(plan.models)
    return [(m, [d for d in datasets if is_needlebench(d)], next(runs)) for models, datasets in groups for m in models]


def start_infer(
    run: Path | str,
    out_dir: Path | str,
    groups: Sequence[Group],
    settings: RunSettings,
    logger: Any,
    rule: EffectiveRule | None = None,
) -> InferStart:
    """Settle the run's plan for its infer stage and leave its folder ready for the pieces still to run.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        out_dir: the infer stage's output folder (``<run>/predictions``).
        groups: (models, datasets) per OpenCompass model-dataset combination, as the config gives them.
        settings: the infer partitioner's settings.
        logger: the stage's logger (every decision is logged there).
        rule: the run's effective-length rule (the summarizer's): an adaptive run's rounds are decided by it.

    Raises:
        PlanChanged: a resume whose config gives another plan, or whose datasets' rows changed, without a
            request to re-plan.
        ConfigError: a request file that is not one.
    """
    run, out_dir = Path(run), Path(out_dir)
    log = logger or logging.getLogger(__name__)
    request = read_request(run)
    for models, _ in groups:
        for model in models:  # a file a full disk or a kill cut short is never taken as done
            repair_predictions(out_dir / str(model.get("abbr", "model")))
    # every dataset of the run built once, on all cores, before any task starts: the tasks (and the eval
    # stage) then open finished files
    jobs = [(d["task"], config_params(d)) for _, datasets in groups for d in datasets if is_needlebench(d)]
    try:
        materialize_many(jobs)
    except OSError as exc:
        log.warning(f"dataset cache not writable ({exc}); every task builds its rows in memory")
    stored = read_stored(run)
    digest, prints = config_digest(settings, groups), dataset_fingerprints(groups)
    changes: list[str] = []
    rows: list[str] = []
    plan: RunPlan | None = None
    if stored is None:
        plan, stage = make_plan(groups, settings, log, rule), "fresh"
    else:
        stage = "resume"
        if stored.config_digest != digest:  # the config changed: plan to see whether the plan did
            plan = make_plan(groups, settings, log, rule)
            changes = plan_changes(stored.plan, plan)
        rows = _changed_rows(stored.fingerprints, prints)
        changes += [_rows_line(abbr, stored.fingerprints, prints) for abbr in rows]
        if changes and not request.replan:
            raise _stopped(run, changes)
        if changes:
            plan, stage = plan or make_plan(groups, settings, log, rule), "replan"
            check_windows(plan.models, settings.beyond_window)  # before the re-plan moves any answer
            _replan(stored, plan, groups, out_dir, run, changes, set(rows), log)
        elif plan is None or stored.plan.settings.adaptive is not None:  # an adaptive run's rounds: the stored plan
            plan = dataclasses.replace(stored.plan, memory=_memory())
    check_windows(plan.models, settings.beyond_window)  # before any file of the stage and any model call
    history = (*(stored.history if stored else ()), _stage_entry(stage, request.to_dict()))
    write_stored(run, StoredPlan(plan, digest, prints, history))
    only = request.retry
    for model, ours, model_run in _models(groups, plan):
        if only is None or model_run.abbr in only:
            found = requeue_failed(model, ours, model_run, str(out_dir), str(run / "results"))
            if found:
                log.warning(
                    f"{model_run.abbr}: asking again the {sum(found.values())} requests that failed in "
                    f"{', '.join(sorted(found))}; every answered sample is kept as it is"
                )
    if stage == "resume":  # an adaptive run whose round is answered and scored (its failed requests asked
        # again first, above: a round they are in is not scored until they are): the next round
        configs = {str(m.get("abbr", "model")): (m, list(ds)) for ms, ds in groups for m in ms}
        advanced = advance(plan, configs, run, log)
        if advanced is not plan:
            plan = advanced
            write_stored(run, StoredPlan(plan, digest, prints, history))
    clear_request(run)
    for model_run in plan.models:
        for abbr, cells in model_run.overlength.items():
            log.warning(
                f"{model_run.abbr} / {abbr}: {cells['num_shortened']} prompts shortened, {cells['num_skipped']} "
                f"skipped to fit {cells['max_prompt_tokens']} tokens (see the plan's overlength, {run / PLAN_FILE})"
            )
        for abbr, entry in model_run.beyond_window.items():
            log.warning(
                f"{model_run.abbr} / {abbr}: {sum(c[1] for c in entry['cells'])} prompts past the model's "
                f"{entry['window']}, run and marked 'beyond window' (runtime(beyond_window='mark'))"
            )
    return InferStart(plan, request, stage)


def _replan(
    stored: StoredPlan,
    plan: RunPlan,
    groups: Sequence[Group],
    out_dir: Path,
    run: Path,
    changes: list[str],
    rows: set[str],
    log: Any,
) -> None:
    """Carry the still-valid answers of each model whose plan or datasets' rows changed into the new plan
    (``carryover.py``), saying what changed."""
    log.warning("re-planning this run (--replan):\n" + "\n".join(f"  - {c}" for c in changes))
    for model, ours, model_run in _models(groups, plan):
        old = stored.plan.model(model_run.abbr)
        if old is not None and (old != model_run or any(d["abbr"] in rows for d in ours)):
            kept, dropped = carry_over(model, ours, old, model_run, str(out_dir), str(run / "results"))
            log.warning(
                f"{model_run.abbr}: {kept} answers kept for the new plan (asked again only if their prompt changed), "
                f"{dropped} dropped (another output budget, window, scaling or press, a failed request, or a changed dataset)"
            )


def _evaluated(dataset: dict, limit: Limit, planned: dict[str, Any], effective: dict | None) -> dict:
    """A dataset config as an eval task scores it: the model's limit in, its evaluator told how the outputs are
    counted (the plan's ``Limit.evaluator_settings``), which numbers to report and the samples planned per
    length (for the effective length, read by the summarizer's rule); a value the config set wins."""
    out = limited_dataset(dataset, limit)
    evaluator = out.setdefault("eval_cfg", {}).setdefault("evaluator", {})
    settings = {**limit.evaluator_settings(), **planned}
    if effective is not None:
        settings["effective_length"] = dict(effective)
    for key, value in settings.items():
        evaluator.setdefault(key, value)
    return out


def _planned(dataset: dict) -> dict[str, Any]:
    """Every number a dataset reports and its samples per length, from its planned samples (before any limit)."""
    rows = load_rows(dataset["task"], **config_params(dataset))
    metas = [json.loads(m) for m in rows["meta"]]
    return {
        "metric_names": list(metric_names(get_task(dataset["task"]), metas)),
        "planned_lengths": planned_lengths(metas),
    }


def start_eval(
    run: Path | str, groups: Sequence[Group], settings: RunSettings, logger: Any, effective: dict | None = None
) -> list[list[tuple[dict, dict]]]:
    """The eval tasks' (model, dataset config as scored) pairs: the plan's limit in, and the numbers every model's
    result file of the dataset names (``grading.evaluation.metric_names``), so OpenCompass's own summary puts the
    models side by side; in ``settings.eval_tasks`` contiguous groups over the models in config order, so a run
    of several models starts that many eval processes, not that many per model (each a few seconds of imports,
    or a Slurm job). OpenCompass's eval task scores each dataset of its group in turn, skipping those scored.

    Where the run has no plan (an eval-only run of an older work dir) or the plan lacks a pair, the limit is
    decided now, with a warning: it may differ from what inference used. Where it has one, the stage is added
    to its history (``stage`` ``"eval"``, no request: the infer stage takes it).

    Args:
        run: the run folder.
        groups: (models, datasets) per OpenCompass model-dataset combination.
        settings: the eval partitioner's settings.
        logger: the stage's logger.
        effective: the summarizer's ``effective_length`` rule (None: the default), so each dataset's result file
            reads its effective length as the summary does.
    """
    stored = read_stored(run)
    if stored is not None:  # the stage in the history, so an eval started on its own reads as running
        write_stored(run, dataclasses.replace(stored, history=(*stored.history, _stage_entry("eval", {}))))
    plan = stored.plan if stored is not None else None
    planned = {m.abbr: m for m in plan.models} if plan is not None else {}
    limits = Limits(settings, logger)
    names: dict[str, dict[str, Any]] = {}  # per dataset abbr, every model's
    pairs: list[tuple[dict, dict]] = []
    for models, datasets in groups:
        for model in models:
            m_abbr = model.get("abbr", "model")
            model_run = planned.get(m_abbr)
            for d in datasets:
                if not is_needlebench(d):
                    pairs.append((model, d))
                    continue
                limit = model_run.limits.get(d["abbr"]) if model_run is not None else None
                if limit is None:
                    logger.warning(
                        f"{m_abbr} / {d['abbr']}: no over-length decision in {Path(run) / PLAN_FILE} from the infer "
                        "stage; measuring it now, which may differ from what inference used"
                    )
                    limit = limits.decide(model, d)
                elif limit.policy != settings.overlength:
                    logger.warning(
                        f"{m_abbr} / {d['abbr']}: inference used overlength={limit.policy!r}; "
                        f"evaluating with it, not {settings.overlength!r}"
                    )
                if d["abbr"] not in names:
                    names[d["abbr"]] = _planned(d)
                scored = _evaluated(d, limit, names[d["abbr"]], effective)
                rows = adaptive_rows(model_run, d["abbr"]) if model_run is not None else None
                if rows is not None:  # an adaptive run: the rows its rounds asked, in their files' order, and
                    # its ladder (a record for each sample none asked, and the ladder's effective length)
                    scored.setdefault("reader_cfg", {})["test_range"] = row_selection(rows)
                    scored["eval_cfg"]["evaluator"]["ladder"] = ladder_config(model_run, d["abbr"], settings.adaptive)
                pairs.append((model, scored))
    return eval_groups(pairs, settings.eval_tasks)


def eval_groups(items: list[Any], count: int) -> list[list[Any]]:
    """Items (a run's (model, dataset) pairs) in ``count`` contiguous groups of near-equal size (0: one each).

    Args:
        items: the items, in order.
        count: how many groups (``RunSettings.eval_tasks``).
    """
    if not count or count >= len(items):
        return [[item] for item in items]
    return [items[a:b] for a, b in shard_ranges([1] * len(items), count)]
