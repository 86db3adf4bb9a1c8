"""Token-aware partitioner with per-model over-length handling.

Infer stage: the whole (model, datasets) workload is cut into ``num_shards``
tasks of about equal prompt tokens, read from each sample's metadata (no
re-tokenising). Shards are contiguous runs of one stream over the model's
datasets in which those sharing a haystack (S-RT and M-RS of a language and
repeat) are interleaved, a batch (the model's ``batch_size``) at a time, by
their first needle's position, farthest first (``planning/stream.py``), so an
engine's prefix cache reuses the shared haystack across datasets too. A
dataset that comes in several pieces (interleaved, or cut across shards)
becomes parts ``abbr_0, abbr_1, ...`` in row order, each with a
``test_range``, which OpenCompass's eval task merges back; a shard runs its
pieces in stream order.

Both stages inject the model's room (``max_prompt_tokens`` = max_seq_len -
output budget - template margin, in cl100k tokens, scaled by the model
tokenizer's measured ratio where the model config names a local tokenizer)
and the ``overlength`` policy into every needlebench dataset; the eval stage also writes into each
needlebench dataset's evaluator how the model's outputs are counted (its tokenizer and the output
budget: ``outputs.output_settings``), so a record can say whether its output was cut off. The decision
is made once, by the infer stage, and written to
``<work_dir>/needlebench_limits.json``; the eval stage reads it back instead
of measuring again, so inference and evaluation build the same rows even if
the tokenizer behaves differently later. A tokenizer that fails to load is a
warning naming the path and the error, recorded in that file. What was
shortened or skipped is written to ``<work_dir>/needlebench_overlength.json``
for the report.

The infer stage first builds every dataset of the run once, all cores at
work (``arrow_rows.materialize_many``), so no task waits on generation.
Before handing out the shards of a model served over HTTP, the infer stage asks
the server (``GET /v1/models``) whether it is up, serves that model name, and
holds ``max_seq_len`` tokens (``preflight.py``).
"""

from __future__ import annotations

import copy
import json
import logging
import os.path as osp
from collections import defaultdict

from mmengine.config import Config, ConfigDict
from opencompass.partitioners.base import BasePartitioner
from opencompass.utils import get_infer_output_path

from ..cache.arrow_rows import materialize_many
from ..errors import ConfigError, OutOfMemory, OutOfSpace
from ..planning.limits import (
    LIMITS_FILE,
    PartitionSettings,
    is_api_model,
    limited_dataset,
    overlength_cells,
    shard_runs,
    token_shards,
)
from ..planning.shards import shard_ranges
from ..tasks import config_params, is_needlebench
from .outputs import output_settings
from .preflight import check_api_server
from .resume import repair_predictions
from .slurm_preflight import check_slurm, is_slurm_runner
from .stopped import OOM_KILLS_AT_INFER, memory_limit

log = logging.getLogger(__name__)

__all__ = ["NeedleBenchPartitioner", "OVERLENGTH_FILE"]


OVERLENGTH_FILE = "needlebench_overlength.json"


def _store_entry(path: str, model_abbr: str, dataset_abbr: str, entry: dict) -> None:
    """Set ``data[model][dataset] = entry`` in a JSON record file, atomically.

    Why one helper: both record files are read-modify-write by the
    partitioner and read by other stages, so neither may ever be half-written.
    """
    from ..files import atomic_write

    data: dict = {}
    if osp.exists(path):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except ValueError:
            data = {}
    data.setdefault(model_abbr, {})[dataset_abbr] = entry
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)


def _read_limits(work_dir: str) -> dict | None:
    """The infer stage's decisions, or None when it wrote none (or they are unreadable)."""
    path = osp.join(work_dir, LIMITS_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # the eval stage then decides the limits again, from the configs
        log.warning("%s is unreadable (%s: %s); the limits are decided again", path, type(exc).__name__, exc)
        return None


def _groups(datasets: list[dict], count: int) -> list[list[dict]]:
    """A model's datasets in ``count`` contiguous eval tasks of near-equal size (0: one task per dataset).

    Each eval task is a process that imports OpenCompass (seconds) and, under Slurm, a job; grouping
    a model's datasets into as many tasks as run at once pays that once per group, not per dataset.
    OpenCompass's eval task scores each dataset of its group in turn and skips those already scored.
    """
    if not count or count >= len(datasets):
        return [[d] for d in datasets]
    return [datasets[a:b] for a, b in shard_ranges([1] * len(datasets), count)]


def _count_outputs(dataset: dict, model: dict) -> None:
    """Tell a (limited, copied) dataset's evaluator how its model's outputs are counted, in the eval task config.

    The model's tokenizer and the output budget (``outputs.output_settings``) go into the evaluator's own
    settings, so the eval task config says how its outputs were measured; a value the config set wins.
    """
    evaluator = dataset.setdefault("eval_cfg", {}).setdefault("evaluator", {})
    for key, value in output_settings(model, dataset).items():
        evaluator.setdefault(key, value)


class NeedleBenchPartitioner(BasePartitioner):
    """OpenCompass partitioner: token-balanced shards and each model's over-length limit (see the module).

    Args:
        out_dir: the stage's output folder.
        num_shards: infer tasks per model, of about equal prompt tokens.
        stage: ``"infer"`` (decides and records the limits) or ``"eval"`` (reads them back).
        overlength: ``"shorten"`` or ``"skip"`` a sparse prompt over the model's room.
        template_margin: tokens kept free for the chat template.
        measure_with_model_tokenizer: scale the room by the model tokenizer's tokens per cl100k token.
        keep_keys: OpenCompass's keys to keep in the task configs.
        eval_tasks: eval stage: group each model's datasets into this many tasks (0: one per dataset).

    Raises:
        ConfigError: an unknown stage or policy, or fewer than one shard.
    """

    def __init__(
        self,
        out_dir: str,
        num_shards: int = 1,
        stage: str = "infer",
        overlength: str = "shorten",
        template_margin: int = 64,
        measure_with_model_tokenizer: bool = True,
        keep_keys: list[str] | None = None,
        eval_tasks: int = 0,
    ) -> None:
        super().__init__(out_dir=out_dir, keep_keys=keep_keys)
        if stage not in ("infer", "eval"):
            raise ConfigError(f"partitioner stage: {stage!r}; choose from ('infer', 'eval')")
        if eval_tasks < 0:
            raise ConfigError(f"partitioner eval_tasks: {eval_tasks} must not be negative")
        settings = PartitionSettings(num_shards, overlength, template_margin, measure_with_model_tokenizer)
        self.num_shards = num_shards
        self.eval_tasks = eval_tasks
        self.stage = stage
        self.overlength = overlength
        self.limits = settings.limits(self.logger)

    # -- over-length ---------------------------------------------------------------------------
    def _limit(self, model: dict, dataset: dict, work_dir: str, recorded: dict | None) -> tuple[dict, dict | None]:
        """(the dataset config with the model's limit injected, the decision) for one pair.

        Infer: decide and record in ``<work_dir>/needlebench_limits.json``.
        Eval: use the infer stage's record; decide afresh (with a warning)
        only where it holds none, e.g. an eval-only run of an older work dir.
        """
        if not is_needlebench(dataset):
            return dataset, None
        m_abbr, d_abbr = model.get("abbr", "model"), dataset.get("abbr", dataset["task"])
        entry = ((recorded or {}).get(m_abbr) or {}).get(d_abbr) if self.stage == "eval" else None
        if entry is None:
            if self.stage == "eval":
                self.logger.warning(
                    f"{m_abbr} / {d_abbr}: no over-length decision in {osp.join(work_dir, LIMITS_FILE)} "
                    "from the infer stage; measuring it now, which may differ from what inference used"
                )
            entry = self.limits.decide(model, dataset)
            _store_entry(osp.join(work_dir, LIMITS_FILE), m_abbr, d_abbr, entry)
        elif entry.get("policy") != self.overlength:
            self.logger.warning(
                f"{m_abbr} / {d_abbr}: inference used overlength={entry.get('policy')!r}; "
                f"evaluating with it, not {self.overlength!r}"
            )
        return limited_dataset(dataset, entry, self.overlength), entry

    def _record(self, work_dir: str, model: dict, original: dict, limited: dict, ratio: float) -> None:
        """Which cells were shortened or skipped for this model."""
        entry = overlength_cells(original, limited, ratio)
        if entry is None:
            return
        path = osp.join(work_dir, OVERLENGTH_FILE)
        _store_entry(path, model.get("abbr", "model"), original["abbr"], entry)
        self.logger.warning(
            f"{model.get('abbr')} / {original['abbr']}: {entry['num_shortened']} prompts shortened, "
            f"{entry['num_skipped']} skipped to fit {entry['max_prompt_tokens']} tokens (see {path})"
        )

    # -- partition -------------------------------------------------------------------------------
    def __call__(self, cfg: ConfigDict) -> list[dict]:
        """Plan a stage's tasks; a Slurm stage first checks the cluster (one message, no job sent).

        A full disk while the datasets are built ends ``opencompass`` here with one message and exit
        code 1, not a traceback through OpenCompass's code (later stages: ``stopped.py``).
        """
        runner = (cfg.get(self.stage) or {}).get("runner")
        if is_slurm_runner(runner):
            check_slurm(runner.get("partition"))
        if self.stage == "infer":
            cgroup = memory_limit()
            OOM_KILLS_AT_INFER[0] = cgroup.oom_kills if cgroup else 0
        try:
            return super().__call__(cfg)
        except (OutOfSpace, OutOfMemory) as exc:
            self.logger.error(str(exc))
            raise SystemExit(f"needlebench: {exc}") from None

    def partition(
        self, model_dataset_combinations: list[dict], work_dir: str, out_dir: str, add_cfg: dict | None = None
    ) -> list[ConfigDict]:
        """Split a run into OpenCompass tasks, each dataset limited to its model's room.

        Infer: build every dataset once, decide and record each (model, dataset) limit and the shortened or
        skipped cells, then cut each model's samples into about ``num_shards`` tasks of equal prompt tokens
        (an HTTP model's server is checked before its tasks are handed out). Eval: one task per
        (model, dataset), with the limits the infer stage recorded.

        Args:
            model_dataset_combinations: OpenCompass's ``{"models": [...], "datasets": [...]}`` groups.
            work_dir: the run's folder; the limit and over-length records are written there.
            out_dir: where the stage's outputs go (infer: predictions already present are not run again).
            add_cfg: extra keys copied into every task config.

        Returns:
            One config per task.
        """
        add_cfg = add_cfg or {}
        tasks: list[ConfigDict] = []
        recorded = _read_limits(work_dir) if self.stage == "eval" else None
        if self.stage == "infer":
            # every dataset of the run built once, on all cores, before any task starts: the tasks
            # (and the eval stage) then open finished files
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
        for comb in model_dataset_combinations:
            for model in comb["models"]:
                datasets = []
                for d in comb["datasets"]:
                    limited, entry = self._limit(model, d, work_dir, recorded)
                    if self.stage == "infer" and entry is not None:
                        self._record(work_dir, model, d, limited, entry["tokenizer_ratio"])
                    if self.stage == "eval" and entry is not None:
                        _count_outputs(limited, model)
                    datasets.append(limited)
                if self.stage == "eval":
                    for group in _groups(datasets, self.eval_tasks):
                        tasks.append(Config({"models": [model], "datasets": [group], "work_dir": work_dir, **add_cfg}))
                    continue
                shards = self._shards(model, datasets, out_dir, work_dir, add_cfg)
                if shards and is_api_model(model):
                    # a dead server, a wrong model name or a short --max-model-len: one message now,
                    # not a run of failed requests
                    check_api_server(model)
                tasks.extend(shards)
        return tasks

    def unfinished_predictions(self, cfg: ConfigDict) -> list[tuple[dict, list[dict]]]:
        """Per model, the needlebench dataset configs whose predictions are still missing.

        What a resume's infer stage would run, planned by the same code (the limits the infer stage
        recorded, this partitioner's ``num_shards``, the same repair of cut files), so split datasets
        are listed by part. The summarizer asks, after every stage ran, why a run has holes.

        Args:
            cfg: the run's config (``work_dir``, ``models``, ``datasets``).
        """
        work_dir = cfg["work_dir"]
        recorded = _read_limits(work_dir)
        predictions = osp.join(work_dir, "predictions")
        unfinished = []
        for model in cfg["models"]:
            datasets = [self._limit(model, d, work_dir, recorded)[0] for d in cfg["datasets"]]
            pending = [
                d
                for task in self._shards(model, datasets, predictions, work_dir, {})
                for d in task["datasets"][0]
                if is_needlebench(d)
            ]
            if pending:
                unfinished.append((model, pending))
        return unfinished

    def _shards(self, model: dict, datasets: list[dict], out_dir: str, work_dir: str, add_cfg: dict) -> list[Config]:
        if datasets:  # a file a full disk or a kill cut short is never taken as done (resume.py)
            for note in repair_predictions(osp.dirname(get_infer_output_path(model, datasets[0], out_dir))):
                self.logger.warning(note)
        ours: list[tuple[int, dict]] = []
        foreign: list[dict] = []
        done: set[int] = set()  # datasets already predicted whole; still in the plan so a resume cuts alike
        for di, d in enumerate(datasets):
            if osp.exists(get_infer_output_path(model, d, out_dir)):
                done.add(di)
            if not is_needlebench(d):
                if di not in done:
                    foreign.append(d)
                continue
            ours.append((di, d))
        stream, _, ranges = token_shards(model, ours, self.num_shards)  # stream: (dataset index, row index)
        tasks = []
        if foreign:
            tasks.append(Config({"models": [model], "datasets": [foreign], "work_dir": work_dir, **add_cfg}))
        if not stream:
            return tasks
        # a dataset in several pieces (cut by a shard boundary, or interleaved with another dataset that
        # shares its haystack: planning/stream.py) becomes numbered parts, in row order; each shard runs
        # its pieces in stream order
        runs = [(shard, *run) for shard, (a, b) in enumerate(ranges) for run in shard_runs(stream, a, b)]
        pieces: dict[int, int] = defaultdict(int)  # di -> pieces
        for _, di, _, _ in runs:
            pieces[di] += 1
        part: dict[int, int] = defaultdict(int)  # di -> the next part number
        shard_chunks: dict[int, list[dict]] = defaultdict(list)
        for shard, di, start, end in runs:
            number = part[di]
            part[di] += 1
            if di in done:
                continue
            d = datasets[di]
            if pieces[di] == 1:
                shard_chunks[shard].append(d)
                continue
            root, ext = osp.splitext(get_infer_output_path(model, d, out_dir))
            if osp.exists(f"{root}_{number}{ext}"):
                continue
            cfg = copy.deepcopy(d)
            cfg["abbr"] = f"{d['abbr']}_{number}"
            cfg["reader_cfg"]["test_range"] = f"[{start}:{end}]"
            shard_chunks[shard].append(cfg)
        for shard in sorted(shard_chunks):
            tasks.append(
                Config({"models": [model], "datasets": [shard_chunks[shard]], "work_dir": work_dir, **add_cfg})
            )
        return tasks
