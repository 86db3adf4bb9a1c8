"""Token-aware partitioner with per-model over-length handling.

Infer stage: the whole (model, datasets) workload is cut into ``num_shards``
tasks of about equal prompt tokens, read from each sample's metadata (no
re-tokenising). Shards are contiguous runs of the generation order (prompts
sharing a haystack prefix stay together, longest and deepest first). A
dataset cut across shards becomes parts ``abbr_0, abbr_1, ...`` with a
``test_range``, which OpenCompass's eval task merges back.

Both stages inject the model's room (``max_prompt_tokens`` = max_seq_len -
output budget - template margin, in cl100k tokens, scaled by the model
tokenizer's measured ratio where the model config names a local tokenizer)
and the ``overlength`` policy into every needlebench dataset. The decision
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
import math
import os.path as osp
from collections import defaultdict
from typing import Any

from mmengine.config import Config, ConfigDict
from opencompass.partitioners.base import BasePartitioner
from opencompass.utils import get_infer_output_path

from ..arrow_rows import materialize_many
from ..errors import ConfigError
from ..sharding import shard_ranges
from ..tasks import config_params, is_needlebench
from ..tasks.sparse import OVERLENGTH_POLICIES
from .dataset import load_rows
from .models import DEFAULT_MAX_SEQ_LEN
from .preflight import check_api_server, is_api_model
from .slurm_preflight import check_slurm, is_slurm_runner

__all__ = [
    "NeedleBenchPartitioner",
    "model_room",
    "is_needlebench",
    "out_len",
    "limited_dataset",
    "overlength_cells",
    "token_shards",
]


def out_len(model: dict, dataset: dict) -> int:
    """The output budget of a (model, dataset): the dataset's inferencer ``max_out_len``, else the model's.

    Args:
        model: the model config.
        dataset: the dataset config.
    """
    inferencer = (dataset.get("infer_cfg") or {}).get("inferencer") or {}
    return int(inferencer.get("max_out_len") or model.get("max_out_len") or 0)


LIMITS_FILE = "needlebench_limits.json"
OVERLENGTH_FILE = "needlebench_overlength.json"


def _load_tokenizer(model: dict) -> tuple[Any, str | None, str | None]:
    """(tokenizer or None, its path or None, load error or None) for a model config.

    No local folder named is not an error (API models, hub names): the ratio is 1.
    A folder whose tokenizer fails to load is, and the caller reports it.
    """
    path = model.get("tokenizer_path") or model.get("path")
    if not path or not osp.isdir(str(path)):
        return None, None, None
    try:
        from transformers import AutoTokenizer

        kwargs = dict(model.get("tokenizer_kwargs") or {})
        kwargs.pop("padding_side", None)
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, **kwargs), str(path), None
    except Exception as exc:  # transformers raises many types for a broken folder; all are reported
        return None, str(path), f"{type(exc).__name__}: {exc}"


def _tokenizer_ratio(tokenizer: Any, prompts: list[str]) -> float:
    """Model tokens per cl100k token on a few prompts (at least 1: never grant more room)."""
    from ..context.tokenizer import get_encoding

    if tokenizer is None or not prompts:
        return 1.0
    enc = get_encoding()
    ratios = [
        len(tokenizer(p, add_special_tokens=False)["input_ids"]) / max(1, len(enc.encode_ordinary(p))) for p in prompts
    ]
    return max(1.0, max(ratios))


def _store_entry(path: str, model_abbr: str, dataset_abbr: str, entry: dict) -> None:
    """Set ``data[model][dataset] = entry`` in a JSON record file, atomically.

    Why one helper: both record files are read-modify-write by the
    partitioner and read by other stages, so neither may ever be half-written.
    """
    from ..store import atomic_write

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
    except (OSError, ValueError):
        return None


# OpenCompass's OpenAI-compatible models (``opencompass.models.OpenAI`` and its subclasses, ``OpenAISDK``
# among them) give a prompt at most max_seq_len - max_out_len - 100 tokens: past that they trim it themselves
# or refuse the request (``_preprocess_messages``). A prompt we fit with less reserve would arrive cut or not
# at all (measured: a 1,402-token prompt under max_seq_len 1,500 was refused and recorded as a failed request).
OPENAI_CLIENT_RESERVE = 100


def reserved_tokens(model: dict, margin: int) -> int:
    """Tokens a model's prompts must leave free beyond the output budget.

    Args:
        model: the model config; an OpenAI-style API model (``openai_api_base``) keeps OpenCompass's client
            reserve of :data:`OPENAI_CLIENT_RESERVE` tokens at least.
        margin: tokens kept free for the chat template.
    """
    return max(margin, OPENAI_CLIENT_RESERVE) if is_api_model(model) else margin


def model_room(model: dict, dataset: dict, margin: int, logger: Any = None) -> tuple[int, int]:
    """A model's context and the room it leaves for a dataset's prompts.

    Args:
        model: the model config; without ``max_seq_len`` :data:`DEFAULT_MAX_SEQ_LEN` is assumed (with a warning).
        dataset: the dataset config; its inferencer's ``max_out_len`` overrides the model's.
        margin: tokens kept free for the chat template (raised by :func:`reserved_tokens` where the client
            needs more).
        logger: where the missing-``max_seq_len`` warning goes; None stays silent.

    Returns:
        (max_seq_len, max_seq_len - output budget - reserve), both in model tokens.
    """
    max_seq_len = model.get("max_seq_len")
    if not max_seq_len:
        if logger:
            logger.warning(
                f"model {model.get('abbr')}: no max_seq_len in its config; assuming "
                f"{DEFAULT_MAX_SEQ_LEN}. Set max_seq_len so over-length prompts are handled."
            )
        max_seq_len = DEFAULT_MAX_SEQ_LEN
    return int(max_seq_len), int(max_seq_len) - out_len(model, dataset) - reserved_tokens(model, margin)


def _cells(metas: Any) -> dict[tuple, int]:
    """Sample counts per (length or needle count, depth) cell."""
    counts: dict[tuple, int] = defaultdict(int)
    for m in metas:
        counts[(m.get("length", m.get("num_needles", m.get("k"))), m.get("depth"))] += 1
    return counts


def overlength_cells(original: dict, limited: dict, ratio: float = 1.0) -> dict | None:
    """Which cells of a dataset a model's limit shortens or skips (the ``needlebench_overlength.json`` entry).

    Args:
        original: the dataset config as written.
        limited: the same config with the model's ``max_prompt_tokens`` and ``overlength`` (:func:`limited_dataset`).
        ratio: the model tokenizer's tokens per cl100k token the limit was scaled by (recorded only).

    Returns:
        None when every prompt fits (or the dataset is not ours); else the task, language, policy, limit,
        ``shortened`` and ``skipped`` as ``[length, depth, count]`` lists, and their totals.
    """
    if not is_needlebench(original):
        return None
    full = load_rows(original["task"], **config_params(original))
    limit = limited["max_prompt_tokens"]
    if all(json.loads(m)["prompt_tokens"] <= limit for m in full["meta"]):
        return None
    kept = load_rows(limited["task"], **config_params(limited))
    kept_meta = [json.loads(m) for m in kept["meta"]]
    shortened = _cells(m for m in kept_meta if "shortened_from" in m)
    full_cells, kept_cells = _cells(json.loads(m) for m in full["meta"]), _cells(kept_meta)
    skipped = {c: n - kept_cells.get(c, 0) for c, n in full_cells.items() if n > kept_cells.get(c, 0)}
    return {
        "task": original["task"],
        "lang": original.get("lang", "en"),
        "policy": limited["overlength"],
        "max_prompt_tokens": limit,
        "tokenizer_ratio": ratio,
        "shortened": [[c[0], c[1], n] for c, n in sorted(shortened.items(), key=str)],
        "skipped": [[c[0], c[1], n] for c, n in sorted(skipped.items(), key=str)],
        "num_shortened": sum(shortened.values()),
        "num_skipped": sum(skipped.values()),
    }


def limited_dataset(dataset: dict, entry: dict, policy: str) -> dict:
    """A copy of a dataset config with a model's limit decision injected.

    Args:
        dataset: the dataset config.
        entry: the decision (:meth:`NeedleBenchPartitioner.decide` or the recorded one).
        policy: the overlength policy used where the decision records none.
    """
    out = copy.deepcopy(dataset)
    out["max_prompt_tokens"] = int(entry["max_prompt_tokens"])
    out["overlength"] = entry.get("policy", policy)
    return out


def token_shards(
    model: dict, datasets: list[tuple[int, dict]], num_shards: int
) -> tuple[list[tuple[int, int]], list[int], list[tuple[int, int]]]:
    """Cut a model's samples into contiguous runs of about equal cost (prompt tokens plus output budget).

    Args:
        model: the model config (its ``max_out_len`` is the output budget where a dataset sets none).
        datasets: (index, needlebench dataset config with the model's limit) pairs, in run order.
        num_shards: runs wanted; fewer come back when there are fewer samples.

    Returns:
        (the stream of (dataset index, row index), each sample's cost, the (start, end) ranges over the stream).
    """
    stream: list[tuple[int, int]] = []
    costs: list[int] = []
    for di, d in datasets:
        rows = load_rows(d["task"], **config_params(d))
        for ri, meta in enumerate(rows["meta"]):
            stream.append((di, ri))
            costs.append(int(json.loads(meta)["prompt_tokens"]) + out_len(model, d))
    return stream, costs, (shard_ranges(costs, num_shards) if stream else [])


def _groups(datasets: list[dict], count: int) -> list[list[dict]]:
    """A model's datasets in ``count`` contiguous eval tasks of near-equal size (0: one task per dataset).

    Each eval task is a process that imports OpenCompass (seconds) and, under Slurm, a job; grouping
    a model's datasets into as many tasks as run at once pays that once per group, not per dataset.
    OpenCompass's eval task scores each dataset of its group in turn and skips those already scored.
    """
    if not count or count >= len(datasets):
        return [[d] for d in datasets]
    return [datasets[a:b] for a, b in shard_ranges([1] * len(datasets), count)]


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
        if overlength not in OVERLENGTH_POLICIES:
            raise ConfigError(f"partitioner overlength: {overlength!r}; choose from {OVERLENGTH_POLICIES}")
        if num_shards < 1:
            raise ConfigError(f"partitioner num_shards: {num_shards} must be at least 1")
        if eval_tasks < 0:
            raise ConfigError(f"partitioner eval_tasks: {eval_tasks} must not be negative")
        self.num_shards = num_shards
        self.eval_tasks = eval_tasks
        self.stage = stage
        self.overlength = overlength
        self.margin = template_margin
        self.measure = measure_with_model_tokenizer
        self._tokenizers: dict[str, tuple] = {}  # path -> _load_tokenizer(...), one load and warning each

    # -- over-length ---------------------------------------------------------------------------
    def tokenizer(self, model: dict) -> tuple[Any, str | None, str | None]:
        """A model's local tokenizer, loaded once per path; a folder that fails to load is warned about once.

        Args:
            model: the model config (``tokenizer_path`` or ``path``, ``tokenizer_kwargs``).

        Returns:
            (tokenizer or None, its folder or None, the load error or None).
        """
        path = str(model.get("tokenizer_path") or model.get("path") or "")
        if path not in self._tokenizers:
            self._tokenizers[path] = _load_tokenizer(model)
            tok, where, error = self._tokenizers[path]
            if error:
                self.logger.warning(
                    f"model {model.get('abbr')}: tokenizer at {where} failed to load ({error}); "
                    f"over-length limits assume 1 model token per cl100k token (see {LIMITS_FILE})"
                )
        return self._tokenizers[path]

    def decide(self, model: dict, dataset: dict) -> dict:
        """Measure a (model, dataset) limit: the decision the infer stage makes and records.

        Args:
            model: the model config (``max_seq_len``, ``max_out_len``, a local tokenizer if any).
            dataset: a needlebench dataset config.

        Returns:
            ``max_seq_len``, ``room``, ``policy``, ``tokenizer`` (path or None), ``tokenizer_ratio``,
            ``tokenizer_error`` and ``max_prompt_tokens`` (the room in cl100k tokens).
        """
        max_seq_len, room = model_room(model, dataset, self.margin, self.logger)
        entry: dict[str, Any] = {
            "max_seq_len": max_seq_len,
            "room": room,
            "policy": self.overlength,
            "tokenizer": None,
            "tokenizer_ratio": 1.0,
            "tokenizer_error": None,
        }
        if self.measure:
            tok, entry["tokenizer"], entry["tokenizer_error"] = self.tokenizer(model)
            if tok is not None:
                rows = load_rows(dataset["task"], **config_params(dataset))
                prompts = [rows[i]["prompt"] for i in range(0, len(rows), max(1, len(rows) // 3))][:3]
                entry["tokenizer_ratio"] = _tokenizer_ratio(tok, prompts)
        entry["max_prompt_tokens"] = max(1, math.floor(room / entry["tokenizer_ratio"]))
        return entry

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
            entry = self.decide(model, dataset)
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
        """Plan a stage's tasks; a Slurm stage first checks the cluster (one message, no job sent)."""
        runner = (cfg.get(self.stage) or {}).get("runner")
        if is_slurm_runner(runner):
            check_slurm(runner.get("partition"))
        return super().__call__(cfg)

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
        self._tokenizers = {}
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

    def _shards(self, model: dict, datasets: list[dict], out_dir: str, work_dir: str, add_cfg: dict) -> list[Config]:
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
        # per dataset: the row ranges of each shard, so split datasets get numbered parts
        per_dataset: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # di -> (shard, start, end)
        for shard, (a, b) in enumerate(ranges):
            i = a
            while i < b:
                di = stream[i][0]
                j = i
                while j < b and stream[j][0] == di:
                    j += 1
                per_dataset[di].append((shard, stream[i][1], stream[j - 1][1] + 1))
                i = j
        shard_chunks: dict[int, list[dict]] = defaultdict(list)
        for di, pieces in per_dataset.items():
            if di in done:
                continue
            d = datasets[di]
            if len(pieces) == 1:
                shard_chunks[pieces[0][0]].append(d)
                continue
            filename = get_infer_output_path(model, d, out_dir)
            root, ext = osp.splitext(filename)
            for part, (shard, start, end) in enumerate(pieces):
                if osp.exists(f"{root}_{part}{ext}"):
                    continue
                cfg = copy.deepcopy(d)
                cfg["abbr"] = f"{d['abbr']}_{part}"
                cfg["reader_cfg"]["test_range"] = f"[{start}:{end}]"
                shard_chunks[shard].append(cfg)
        for shard in sorted(shard_chunks):
            tasks.append(
                Config({"models": [model], "datasets": [shard_chunks[shard]], "work_dir": work_dir, **add_cfg})
            )
        return tasks
