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

The run folder's wing decides what the stage does with the run (``runfolder.lifecycle.start_infer``:
fresh, resume from the stored plan without planning again, re-plan, retry, batch; the plan stored with its
datasets' fingerprints and history); this adapter renders the plan's pieces that are not done yet
(``runfolder.pieces.piece_done``) as OpenCompass tasks. The eval stage reads the limits and the evaluators'
output settings from the plan, and names every dataset's numbers from its planned samples
(``grading.evaluation.metric_names``), so each model's result file of a dataset names the same numbers and
OpenCompass's own summary puts the models side by side.

No API key a config holds in clear text reaches the run folder or a task's parameter file: the infer stage
moves each of our API models' clear keys into the environment its task processes inherit, the eval stage (whose
tasks build no model) replaces every key by ``<redacted>``, and both scrub the config dumps in
``<work_dir>/configs/`` that the ``opencompass`` command wrote before this code ran (``runfolder/keys.py``).

Before handing out the shards of a model served over HTTP, it asks the server (``GET /v1/models``) whether it is up, serves that model name,
and holds ``max_seq_len`` tokens (``preflight/api_server.py``); where the local runner starts the tasks, every
model's tasks are checked against the GPUs this machine shows, as that runner counts them (``preflight/devices.py``).
"""

from __future__ import annotations

import os
import os.path as osp
from pathlib import Path
from typing import Any

from mmengine.config import Config, ConfigDict
from opencompass.partitioners.base import BasePartitioner
from opencompass.utils import dataset_abbr_from_cfg, model_abbr_from_cfg

from ..aggregate.effective_length import EffectiveRule
from ..errors import ConfigError, OutOfMemory, OutOfSpace, PlanChanged
from ..planning.limits import is_api_model
from ..planning.run import ModelRun, part_config
from ..planning.settings import RunSettings
from ..planning.variants import VARIANT_KEY
from ..preflight.api_server import check_api_server, check_budget_field
from ..preflight.devices import check_devices, task_gpus
from ..preflight.slurm import check_slurm, is_slurm_runner
from ..runfolder.keys import clear_keys, hide_keys, redact, scrub_file
from ..runfolder.lifecycle import start_eval, start_infer
from ..runfolder.pieces import piece_done
from ..runfolder.plan_file import read_stored
from ..runfolder.request import BatchMode
from ..tasks import is_needlebench
from .configs import GEN_INFERENCER, check_raw_messages, check_summarizer

__all__ = ["NeedleBenchPartitioner"]


def _task_config(pairs: list[tuple[dict, dict]], work_dir: str, add_cfg: dict) -> Config:
    """One task's config over (model, dataset) pairs, as OpenCompass's partitioners make it, written unformatted.

    Each model appears once, with its datasets in order: OpenCompass's tasks run ``models[i]`` on
    ``datasets[i]`` for each i, so one eval task can serve several models' datasets.

    The runner writes each task's config to a Python file (``Config.dump``) before it starts the task;
    mmengine formats that text with yapf unless told not to, which for a task of a few hundred dataset
    pieces cost the driver 40 of a 4k run's 115 CPU seconds (``bench/pipeline_cost_4k_before.json``). The text
    without the formatting is the same Python, read back to the same config.

    A model's variant stamp (``planning.variants.VARIANT_KEY``) is the plan's, not the model class's: it is left out.
    """
    models: list[dict] = []
    datasets: list[list[dict]] = []
    for model, dataset in pairs:
        if not models or models[-1] is not model:
            models.append(model)
            datasets.append([])
        datasets[-1].append(dataset)
    models = [{k: v for k, v in m.items() if k != VARIANT_KEY} for m in models]
    return Config({"models": models, "datasets": datasets, "work_dir": work_dir, **add_cfg}, format_python_code=False)


def _inferred(dataset: dict, prompts: str, batch: BatchMode | None) -> dict:
    """A piece's config whose inferencer (ours) keeps each prompt as the run says (``RunSettings.prompts``) and
    writes or reads a provider batch where the run's request asks for one (``runfolder.request.BatchMode``).

    ``"text"`` and no batch leave the config as written (OpenCompass's files); another inferencer is left alone.
    """
    inferencer = dataset.get("infer_cfg", {}).get("inferencer", {})
    if (prompts == "text" and batch is None) or inferencer.get("type") != GEN_INFERENCER:
        return dataset
    extra: dict[str, Any] = {} if prompts == "text" else {"prompts": prompts}
    if batch is not None:
        extra["batch"] = batch.to_dict()
    return {**dataset, "infer_cfg": {**dataset["infer_cfg"], "inferencer": {**inferencer, **extra}}}


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
        self.runner: dict | None = None  # the stage's runner, from the config (__call__): the devices check reads it

    def __call__(self, cfg: ConfigDict) -> list[dict]:
        """Plan a stage's tasks; a Slurm stage first checks the cluster (one message, no job sent).

        A full disk while the datasets are built ends ``opencompass`` here with one message and exit
        code 1, not a traceback through OpenCompass's code (later stages: ``runfolder/stopped.py``).
        """
        runner = (cfg.get(self.stage) or {}).get("runner")
        self.runner = runner
        if is_slurm_runner(runner):
            check_slurm(runner.get("partition"))
        self._scrub_dumps(cfg)
        try:
            summarizer = cfg.get("summarizer") or {}
            check_summarizer(summarizer)  # a typo in its options: one line now, not after the inference
            rule = summarizer.get("effective_length")
            self.effective = None if rule is None else dict(rule)
            EffectiveRule.of(self.effective)  # checked now, not after the run
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

        Infer: the run folder's wing settles the plan (``runfolder.lifecycle.start_infer``: fresh, resume,
        re-plan, retry, batch), then each model's pieces that are not done are rendered as tasks (an HTTP
        model's server is checked before its tasks are handed out). Eval: each model's datasets with the
        limits the plan holds, in ``eval_tasks`` groups.

        Args:
            model_dataset_combinations: OpenCompass's ``{"models": [...], "datasets": [...]}`` groups.
            work_dir: the run's folder; the plan is stored there.
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
        if read_stored(Path(work_dir)) is None:  # a fresh run starts every model's tasks: checked before planning
            check_devices([(model_abbr_from_cfg(m), task_gpus(m)) for m in models], self.runner)
        groups = [(comb["models"], comb["datasets"]) for comb in model_dataset_combinations]
        rule = EffectiveRule.of(getattr(self, "effective", None))
        start = start_infer(work_dir, out_dir, groups, self.settings, self.logger, rule)
        batch = start.request.batch  # `needlebench batch`: its API models' tasks only, and no server to ask
        tasks: list[ConfigDict] = []
        needs: list[tuple[str, int]] = []
        runs = iter(start.plan.models)
        for comb in model_dataset_combinations:
            for model in comb["models"]:
                run = next(runs)
                if batch is not None and not (is_api_model(model) and run.abbr in batch.models):
                    continue
                shards = self._render(model, comb["datasets"], run, out_dir, work_dir, add_cfg, batch)
                if shards and is_api_model(model) and batch is None:
                    # a dead server, a wrong model name or a short --max-model-len: one message now,
                    # not a run of failed requests
                    check_api_server(model)
                    check_budget_field(model)  # a server that refuses the budget field: one line, now
                if shards:
                    needs.append((run.abbr, task_gpus(model)))
                tasks.extend(shards)
        # GPUs the local runner cannot give: one line before any task starts, not its assert in a worker thread (a
        # resume: only models with tasks left, so a run whose inference is done finishes on a machine without GPUs)
        check_devices(needs, self.runner)
        return tasks

    def _render(
        self,
        model: dict,
        datasets: list[dict],
        run: ModelRun,
        out_dir: str,
        work_dir: str,
        add_cfg: dict,
        batch: BatchMode | None,
    ) -> list[Config]:
        """One model's infer tasks from its plan: the pieces that are not done (``runfolder.pieces.piece_done``).

        A dataset already predicted whole stays in the plan (so a resume cuts alike) and is not run again;
        neither is a piece whose own file is whole.
        """
        by_abbr = {d["abbr"]: d for d in datasets}
        folder = osp.join(out_dir, model_abbr_from_cfg(model))
        tasks = []
        foreign = [d for d in datasets if not is_needlebench(d) and not piece_done(folder, dataset_abbr_from_cfg(d))]
        if foreign:
            tasks.append(_task_config([(model, d) for d in foreign], work_dir, add_cfg))
        for shard in run.shards:
            chunk = [
                _inferred(part_config(by_abbr[p.dataset], run.limits[p.dataset], p), self.settings.prompts, batch)
                for p in shard.parts
                if not piece_done(folder, p.dataset, p.abbr)
            ]
            if chunk:
                tasks.append(_task_config([(model, d) for d in chunk], work_dir, add_cfg))
        return tasks

    def _eval_tasks(self, model_dataset_combinations: list[dict], work_dir: str, add_cfg: dict) -> list[ConfigDict]:
        """Every model's datasets as the plan scores them, in ``eval_tasks`` tasks for the whole run
        (``runfolder.lifecycle.start_eval``)."""
        groups = [(comb["models"], comb["datasets"]) for comb in model_dataset_combinations]
        tasks = start_eval(work_dir, groups, self.settings, self.logger, getattr(self, "effective", None))
        return [_task_config(pairs, work_dir, add_cfg) for pairs in tasks]
