"""Token-aware partitioner with per-model over-length handling; the run's stored plan is its authority.

Its settings are one ``planning.settings.RunSettings`` record, as ``runtime()`` writes it into both stages.

Infer stage: every decision is made once (``planning.run.plan_run``): per model, each needlebench
dataset's limit (room, output budget, reserve, the tokenizer its room is measured with and its outputs
counted with: ``planning.limits.Limit``), the cells that limit shortens or skips, and ``num_shards``
infer tasks of about equal prompt tokens plus output budget, read from the cached rows' token columns.
Shards are contiguous runs of one stream over the model's datasets in which those sharing a haystack
(S-RT and M-RS of a language and repeat) are interleaved, a batch at a time, farthest first needle first
(``planning/stream.py``), so an engine's prefix cache reuses the haystack across datasets; a dataset in
several pieces becomes parts ``abbr_0, abbr_1, ...`` with a ``test_range`` each, which OpenCompass's
eval task merges back.

The first run stores the plan (``<work_dir>/needlebench_plan.json``, with the memory cgroup's kill count)
and the report's record of shortened and skipped cells (``needlebench_overlength.json``, written from the
plan). A resume plans again from the config and compares: the same plan renders the tasks still lacking
predictions; another plan (shards, limits, tokenizer, budget, policy, datasets, models) stops the run
before any model call with one message naming each difference, unless ``NEEDLEBENCH_REPLAN=1`` asks to
re-plan, which keeps every answer still valid under the new plan (``carryover.py``) and asks the rest.
A resume also asks again the requests that still failed when their task ended (``retries.py``), keeping
every answered sample. The eval stage reads the limits and the evaluators' output settings from the
plan, and names every dataset's numbers from its planned samples (``grading.evaluation.metric_names``),
so each model's result file of a dataset names the same numbers and OpenCompass's own summary puts the
models side by side.

No API key a config holds in clear text reaches the run folder or a task's parameter file: the infer stage
moves each of our API models' clear keys into the environment its task processes inherit, the eval stage (whose
tasks build no model) replaces every key by ``<redacted>``, and both scrub the config dumps in
``<work_dir>/configs/`` that the ``opencompass`` command wrote before this code ran (``api_keys.py``).

The infer stage first builds every dataset of the run once, all cores at work
(``arrow_rows.materialize_many``), so no task waits on generation. Before handing out the shards of a
model served over HTTP, it asks the server (``GET /v1/models``) whether it is up, serves that model name,
and holds ``max_seq_len`` tokens (``preflight.py``).
"""

from __future__ import annotations

import json
import os
import os.path as osp
from typing import Any

from mmengine.config import Config, ConfigDict
from opencompass.partitioners.base import BasePartitioner
from opencompass.utils import get_infer_output_path

from ..cache.arrow_rows import materialize_many
from ..cache.rows import load_rows
from ..cgroups import memory_limit
from ..errors import ConfigError, OutOfMemory, OutOfSpace, PlanChanged
from ..grading.evaluation import metric_names
from ..planning.limits import Limit, Limits, is_api_model, limited_dataset
from ..planning.run import (
    PLAN_FILE,
    MemoryBaseline,
    ModelRun,
    RunPlan,
    part_config,
    plan_changes,
    plan_run,
    read_plan,
    write_plan,
)
from ..planning.settings import RunSettings
from ..planning.shards import shard_ranges
from ..retries import RETRY_MODELS_ENV
from ..tasks import config_params, get_task, is_needlebench
from .api_keys import clear_keys, hide_keys, redact, scrub_file
from .batch import batch_mode
from .carryover import carry_over, requeue_failed
from .configs import GEN_INFERENCER, check_raw_messages
from .preflight import check_api_server
from .resume import repair_predictions
from .slurm_preflight import check_slurm, is_slurm_runner

__all__ = ["NeedleBenchPartitioner", "OVERLENGTH_FILE", "REPLAN_ENV"]


OVERLENGTH_FILE = "needlebench_overlength.json"
REPLAN_ENV = "NEEDLEBENCH_REPLAN"  # =1: a resume whose config gives another plan re-plans, keeping valid answers


def _write_overlength(plan: RunPlan, work_dir: str) -> None:
    """The report's record of shortened and skipped cells (per model, per dataset), from the plan."""
    from ..files import atomic_write

    data = {m.abbr: dict(m.overlength) for m in plan.models if m.overlength}
    if not data:
        return
    with atomic_write(osp.join(work_dir, OVERLENGTH_FILE)) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)


def _task_config(pairs: list[tuple[dict, dict]], work_dir: str, add_cfg: dict) -> Config:
    """One task's config over (model, dataset) pairs, as OpenCompass's partitioners make it, written unformatted.

    Each model appears once, with its datasets in order: OpenCompass's tasks run ``models[i]`` on
    ``datasets[i]`` for each i, so one eval task can serve several models' datasets.

    The runner writes each task's config to a Python file (``Config.dump``) before it starts the task;
    mmengine formats that text with yapf unless told not to, which for a task of a few hundred dataset
    pieces cost the driver 40 of a 4k run's 115 CPU seconds (``bench/pipeline_cost_4k_before.json``). The text
    without the formatting is the same Python, read back to the same config.
    """
    models: list[dict] = []
    datasets: list[list[dict]] = []
    for model, dataset in pairs:
        if not models or models[-1] is not model:
            models.append(model)
            datasets.append([])
        datasets[-1].append(dataset)
    return Config({"models": models, "datasets": datasets, "work_dir": work_dir, **add_cfg}, format_python_code=False)


def _keeping_prompts(dataset: dict, prompts: str) -> dict:
    """A piece's config whose inferencer (ours) keeps each prompt as the run says (``RunSettings.prompts``).

    ``"text"`` leaves the config as written (OpenCompass's files); another inferencer is left alone.
    """
    inferencer = dataset.get("infer_cfg", {}).get("inferencer", {})
    if prompts == "text" or inferencer.get("type") != GEN_INFERENCER:
        return dataset
    return {**dataset, "infer_cfg": {**dataset["infer_cfg"], "inferencer": {**inferencer, "prompts": prompts}}}


def _groups(items: list[Any], count: int) -> list[list[Any]]:
    """Items (datasets, or a run's (model, dataset) pairs) in ``count`` contiguous groups of near-equal size
    (0: one group per item).

    Each eval task is a process that imports OpenCompass (seconds) and, under Slurm, a job; grouping
    the datasets into as many tasks as run at once pays that once per group, not per dataset.
    OpenCompass's eval task scores each dataset of its group in turn and skips those already scored.
    """
    if not count or count >= len(items):
        return [[item] for item in items]
    return [items[a:b] for a, b in shard_ranges([1] * len(items), count)]


def _evaluated(dataset: dict, limit: Limit, names: tuple[str, ...]) -> dict:
    """A dataset config as an eval task scores it: the model's limit in, its evaluator told how the outputs are
    counted (the plan's ``Limit.evaluator_settings``) and which numbers to report; a value the config set wins."""
    out = limited_dataset(dataset, limit)
    evaluator = out.setdefault("eval_cfg", {}).setdefault("evaluator", {})
    for key, value in {**limit.evaluator_settings(), "metric_names": list(names)}.items():
        evaluator.setdefault(key, value)
    return out


def _planned_names(dataset: dict) -> tuple[str, ...]:
    """Every number a dataset reports, from its planned samples (before any model's limit)."""
    rows = load_rows(dataset["task"], **config_params(dataset))
    return metric_names(get_task(dataset["task"]), [json.loads(m) for m in rows["meta"]])


def _model_runs(plan: RunPlan, model_dataset_combinations: list[dict]) -> list[tuple[dict, list[dict], ModelRun]]:
    """Each model config of the run with its needlebench datasets and its plan, in config order (as planned)."""
    runs = iter(plan.models)
    return [
        (model, [d for d in comb["datasets"] if is_needlebench(d)], next(runs))
        for comb in model_dataset_combinations
        for model in comb["models"]
    ]


def _changed_message(path: str, changes: list[str]) -> str:
    """The one message a resume with another plan stops with: each difference and the two ways on."""
    lines = "\n".join(f"  - {c}" for c in changes)
    return (
        f"this run's stored plan ({path}) is not what the config gives now; nothing was asked of any model.\n"
        f"{lines}\n"
        "Either run into a new work dir (leave out -r), or re-plan this one, keeping every answer still valid "
        f"(same prompt, model and output budget) and asking the rest: {REPLAN_ENV}=1 opencompass <config> -r <time>"
    )


class NeedleBenchPartitioner(BasePartitioner):
    """OpenCompass partitioner: token-balanced shards and each model's over-length limit (see the module).

    Args:
        out_dir: the stage's output folder.
        stage: ``"infer"`` (plans the run and stores the plan) or ``"eval"`` (reads its limits back).
        keep_keys: OpenCompass's keys to keep in the task configs.
        **settings: the run's settings (:class:`~needlebench.planning.settings.RunSettings`: ``num_shards``,
            ``overlength``, ``template_margin``, ``measure_with_model_tokenizer``, ``eval_tasks``), as
            ``runtime()`` writes them.

    Raises:
        ConfigError: an unknown stage, setting or value.
    """

    def __init__(self, out_dir: str, stage: str = "infer", keep_keys: list[str] | None = None, **settings: Any) -> None:
        super().__init__(out_dir=out_dir, keep_keys=keep_keys)
        if stage not in ("infer", "eval"):
            raise ConfigError(f"partitioner stage: {stage!r}; choose from ('infer', 'eval')")
        self.settings = RunSettings.of(settings)
        self.stage = stage

    def __call__(self, cfg: ConfigDict) -> list[dict]:
        """Plan a stage's tasks; a Slurm stage first checks the cluster (one message, no job sent).

        A full disk while the datasets are built ends ``opencompass`` here with one message and exit
        code 1, not a traceback through OpenCompass's code (later stages: ``stopped.py``).
        """
        runner = (cfg.get(self.stage) or {}).get("runner")
        if is_slurm_runner(runner):
            check_slurm(runner.get("partition"))
        self._scrub_dumps(cfg)
        try:
            return super().__call__(cfg)
        except (ConfigError, OutOfSpace, OutOfMemory, PlanChanged) as exc:
            self.logger.error(str(exc))
            raise SystemExit(f"needlebench: {exc}") from None

    def _scrub_dumps(self, cfg: ConfigDict) -> None:
        """Remove the clear API keys of the run's models from the config dumps the ``opencompass`` command wrote.

        It dumps the config into ``<work_dir>/configs/`` before any of our code runs, then calls this
        partitioner in the same process; ``needlebench run`` moves the keys out before that dump, so there is
        nothing left to scrub but the keys OpenCompass's own API classes hold.
        """
        secrets = clear_keys(list(cfg.get("models") or []))
        if not secrets:
            return
        folder = osp.join(str(cfg["work_dir"]), "configs")
        for name in sorted(os.listdir(folder)) if osp.isdir(folder) else []:
            if scrub_file(osp.join(folder, name), secrets):
                self.logger.warning(
                    f"an API key written in the config was removed from {osp.join(folder, name)}; name its "
                    "variable instead: api_model(key_env='VARIABLE')"
                )

    def partition(
        self, model_dataset_combinations: list[dict], work_dir: str, out_dir: str, add_cfg: dict | None = None
    ) -> list[ConfigDict]:
        """Split a run into OpenCompass tasks, each dataset limited to its model's room.

        Infer: repair what a kill or a full disk cut short, build every dataset once, plan the run
        (``planning.run.plan_run``) and store the plan, then render each model's shards that still lack
        predictions as tasks (an HTTP model's server is checked before its tasks are handed out). Eval:
        each model's datasets with the limits the plan holds, in ``eval_tasks`` groups.

        Args:
            model_dataset_combinations: OpenCompass's ``{"models": [...], "datasets": [...]}`` groups.
            work_dir: the run's folder; the plan and the over-length record are written there.
            out_dir: where the stage's outputs go (infer: predictions already present are not run again).
            add_cfg: extra keys copied into every task config.

        Returns:
            One config per task.
        """
        add_cfg = add_cfg or {}
        models = [model for comb in model_dataset_combinations for model in comb["models"]]  # copies of the config's
        if self.stage == "eval":  # its tasks build no model: no key in their files
            for model in models:
                model.update(redact(dict(model)))
            return self._eval_tasks(model_dataset_combinations, work_dir, add_cfg)
        os.environ.update(hide_keys(models))  # the infer tasks the runner starts read them there
        for comb in model_dataset_combinations:
            for model in comb["models"]:  # raw messages reach API models only (as in OpenCompass)
                check_raw_messages(model, comb["datasets"])
        for comb in model_dataset_combinations:
            for model in comb["models"]:  # a file a full disk or a kill cut short is never taken as done
                folder = osp.join(out_dir, model.get("abbr", "model"))
                for note in repair_predictions(folder):
                    self.logger.warning(note)
        # every dataset of the run built once, on all cores, before any task starts: the tasks (and the
        # eval stage) then open finished files
        try:
            materialize_many(
                [
                    (d["task"], config_params(d))
                    for comb in model_dataset_combinations
                    for d in comb["datasets"]
                    if is_needlebench(d)
                ]
            )
        except OSError as exc:
            self.logger.warning(f"dataset cache not writable ({exc}); every task builds its rows in memory")
        plan = self.plan(model_dataset_combinations)
        stored = read_plan(work_dir)
        changes = plan_changes(stored, plan) if stored is not None else []
        if changes:
            if os.environ.get(REPLAN_ENV, "") not in ("1", "true", "yes"):
                raise PlanChanged(_changed_message(osp.join(work_dir, PLAN_FILE), changes))
            self._replan(stored, plan, model_dataset_combinations, out_dir, work_dir, changes)
        write_plan(plan, work_dir)
        self._requeue_failed(plan, model_dataset_combinations, out_dir, work_dir)
        _write_overlength(plan, work_dir)
        for run in plan.models:
            for abbr, cells in run.overlength.items():
                self.logger.warning(
                    f"{run.abbr} / {abbr}: {cells['num_shortened']} prompts shortened, {cells['num_skipped']} "
                    f"skipped to fit {cells['max_prompt_tokens']} tokens (see {osp.join(work_dir, OVERLENGTH_FILE)})"
                )
        tasks: list[ConfigDict] = []
        runs = iter(plan.models)
        batch = batch_mode()  # `needlebench batch`: its API models' tasks only, and no server to ask
        for comb in model_dataset_combinations:
            for model in comb["models"]:
                run = next(runs)
                if batch is not None and not (is_api_model(model) and run.abbr in batch.models):
                    continue
                shards = self._render(model, comb["datasets"], run, out_dir, work_dir, add_cfg)
                if shards and is_api_model(model) and batch is None:
                    # a dead server, a wrong model name or a short --max-model-len: one message now,
                    # not a run of failed requests
                    check_api_server(model)
                tasks.extend(shards)
        return tasks

    def _replan(
        self,
        stored: RunPlan,
        plan: RunPlan,
        model_dataset_combinations: list[dict],
        out_dir: str,
        work_dir: str,
        changes: list[str],
    ) -> None:
        """Carry each changed model's still-valid answers into the new plan (``carryover.py``), saying what changed."""
        self.logger.warning(f"{REPLAN_ENV}=1: re-planning this run:\n" + "\n".join(f"  - {c}" for c in changes))
        for model, ours, run in _model_runs(plan, model_dataset_combinations):
            old = stored.model(run.abbr)
            if old is not None and old != run:
                kept, dropped = carry_over(model, ours, old, run, out_dir, osp.join(work_dir, "results"))
                self.logger.warning(
                    f"{run.abbr}: {kept} answers kept for the new plan (asked again only if their prompt changed), "
                    f"{dropped} dropped (another output budget, a failed request, or a changed dataset)"
                )

    def _requeue_failed(
        self, plan: RunPlan, model_dataset_combinations: list[dict], out_dir: str, work_dir: str
    ) -> None:
        """A resume asks again the requests that still failed when their task ended (``carryover.requeue_failed``)."""
        only = {m for m in os.environ.get(RETRY_MODELS_ENV, "").split(",") if m}  # `needlebench retry --model`
        for model, ours, run in _model_runs(plan, model_dataset_combinations):
            if not only or run.abbr in only:
                found = requeue_failed(model, ours, run, out_dir, osp.join(work_dir, "results"))
                if found:
                    self.logger.warning(
                        f"{run.abbr}: asking again the {sum(found.values())} requests that failed in "
                        f"{', '.join(sorted(found))}; every answered sample is kept as it is"
                    )

    def plan(self, model_dataset_combinations: list[dict]) -> RunPlan:
        """The run's plan, with the memory cgroup's kill count now (see ``planning/run.py``).

        Args:
            model_dataset_combinations: OpenCompass's ``{"models": [...], "datasets": [...]}`` groups.
        """
        runs: list[ModelRun] = []
        for comb in model_dataset_combinations:
            runs.extend(plan_run(comb["models"], comb["datasets"], self.settings, self.logger).models)
        cgroup = memory_limit()
        memory = MemoryBaseline(str(cgroup.path), cgroup.limit, cgroup.oom_kills) if cgroup else None
        return RunPlan(self.settings, tuple(runs), memory)

    def _render(
        self, model: dict, datasets: list[dict], run: ModelRun, out_dir: str, work_dir: str, add_cfg: dict
    ) -> list[Config]:
        """One model's infer tasks from its plan: the pieces whose prediction files do not exist yet.

        A dataset already predicted whole stays in the plan (so a resume cuts alike) and is not run again;
        neither is a piece whose own file exists.
        """
        by_abbr = {d["abbr"]: d for d in datasets}

        def done(abbr: str) -> bool:
            return osp.exists(get_infer_output_path(model, {**by_abbr.get(abbr, {}), "abbr": abbr}, out_dir))

        tasks = []
        foreign = [
            d for d in datasets if not is_needlebench(d) and not osp.exists(get_infer_output_path(model, d, out_dir))
        ]
        if foreign:
            tasks.append(_task_config([(model, d) for d in foreign], work_dir, add_cfg))
        for shard in run.shards:
            chunk = [
                _keeping_prompts(part_config(by_abbr[p.dataset], run.limits[p.dataset], p), self.settings.prompts)
                for p in shard.parts
                if not done(p.dataset) and not done(p.abbr)
            ]
            if chunk:
                tasks.append(_task_config([(model, d) for d in chunk], work_dir, add_cfg))
        return tasks

    def _eval_tasks(self, model_dataset_combinations: list[dict], work_dir: str, add_cfg: dict) -> list[ConfigDict]:
        """Every model's datasets, limited as the plan says, grouped into ``eval_tasks`` tasks for the whole run.

        The groups are contiguous over the models in config order, so a run of several models starts
        ``eval_tasks`` eval processes, not that many per model (each a few seconds of imports, or a Slurm job).

        Where the run has no plan (an eval-only run of an older work dir) or the plan lacks a pair, the
        limit is decided now, with a warning: it may differ from what inference used.
        """
        plan = read_plan(work_dir)
        limits = Limits(self.settings, self.logger)
        names: dict[str, tuple[str, ...]] = {}  # per dataset abbr, every model's
        pairs: list[tuple[dict, dict]] = []  # (model, its dataset as scored), every model's in config order
        for comb in model_dataset_combinations:
            for model in comb["models"]:
                m_abbr = model.get("abbr", "model")
                run = plan.model(m_abbr) if plan is not None else None
                datasets = []
                for d in comb["datasets"]:
                    if not is_needlebench(d):
                        datasets.append(d)
                        continue
                    limit = run.limits.get(d["abbr"]) if run is not None else None
                    if limit is None:
                        self.logger.warning(
                            f"{m_abbr} / {d['abbr']}: no over-length decision in {osp.join(work_dir, PLAN_FILE)} "
                            "from the infer stage; measuring it now, which may differ from what inference used"
                        )
                        limit = limits.decide(model, d)
                    elif limit.policy != self.settings.overlength:
                        self.logger.warning(
                            f"{m_abbr} / {d['abbr']}: inference used overlength={limit.policy!r}; "
                            f"evaluating with it, not {self.settings.overlength!r}"
                        )
                    if d["abbr"] not in names:
                        names[d["abbr"]] = _planned_names(d)
                    datasets.append(_evaluated(d, limit, names[d["abbr"]]))
                pairs.extend((model, d) for d in datasets)
        return [_task_config(group, work_dir, add_cfg) for group in _groups(pairs, self.settings.eval_tasks)]
