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
and the ``overlength`` policy into every needlebench dataset, so inference
and evaluation build the same rows. What was shortened or skipped is
written to ``<work_dir>/needlebench_overlength.json`` for the report.
"""

from __future__ import annotations

import copy
import json
import math
import os
import os.path as osp
from collections import defaultdict
from typing import Any

from mmengine.config import Config, ConfigDict
from opencompass.partitioners.base import BasePartitioner
from opencompass.utils import get_infer_output_path

from ..errors import ConfigError
from ..sharding import shard_ranges
from ..sparse import OVERLENGTH_POLICIES
from ..tasks import config_params, is_needlebench
from .dataset import load_rows
from .models import DEFAULT_MAX_SEQ_LEN

__all__ = ["NeedleBenchPartitioner", "model_room", "is_needlebench"]


def _out_len(model: dict, dataset: dict) -> int:
    inferencer = (dataset.get("infer_cfg") or {}).get("inferencer") or {}
    return int(inferencer.get("max_out_len") or model.get("max_out_len") or 0)


def _tokenizer_ratio(model: dict, prompts: list[str]) -> float:
    """Model tokens per cl100k token on a few prompts, when a local tokenizer is named; else 1."""
    from ..tokenizer import get_encoding

    path = model.get("tokenizer_path") or model.get("path")
    if not path or not prompts or not osp.isdir(str(path)):
        return 1.0
    try:
        from transformers import AutoTokenizer

        kwargs = dict(model.get("tokenizer_kwargs") or {})
        kwargs.pop("padding_side", None)
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True, **kwargs)
    except Exception:
        return 1.0
    enc = get_encoding()
    ratios = [len(tok(p, add_special_tokens=False)["input_ids"]) / max(1, len(enc.encode_ordinary(p))) for p in prompts]
    return max(1.0, max(ratios))


def model_room(model: dict, dataset: dict, margin: int, logger: Any = None) -> tuple[int, int]:
    """(max_seq_len, room for the prompt in model tokens)."""
    max_seq_len = model.get("max_seq_len")
    if not max_seq_len:
        if logger:
            logger.warning(
                f"model {model.get('abbr')}: no max_seq_len in its config; assuming "
                f"{DEFAULT_MAX_SEQ_LEN}. Set max_seq_len so over-length prompts are handled."
            )
        max_seq_len = DEFAULT_MAX_SEQ_LEN
    return int(max_seq_len), int(max_seq_len) - _out_len(model, dataset) - margin


def _cells(metas: Any) -> dict[tuple, int]:
    """Sample counts per (length or needle count, depth) cell."""
    counts: dict[tuple, int] = defaultdict(int)
    for m in metas:
        counts[(m.get("length", m.get("num_needles", m.get("k"))), m.get("depth"))] += 1
    return counts


class NeedleBenchPartitioner(BasePartitioner):
    def __init__(
        self,
        out_dir: str,
        num_shards: int = 1,
        stage: str = "infer",
        overlength: str = "shorten",
        template_margin: int = 64,
        measure_with_model_tokenizer: bool = True,
        keep_keys: list[str] | None = None,
    ) -> None:
        super().__init__(out_dir=out_dir, keep_keys=keep_keys)
        if stage not in ("infer", "eval"):
            raise ConfigError(f"partitioner stage: {stage!r}; choose from ('infer', 'eval')")
        if overlength not in OVERLENGTH_POLICIES:
            raise ConfigError(f"partitioner overlength: {overlength!r}; choose from {OVERLENGTH_POLICIES}")
        if num_shards < 1:
            raise ConfigError(f"partitioner num_shards: {num_shards} must be at least 1")
        self.num_shards = num_shards
        self.stage = stage
        self.overlength = overlength
        self.margin = template_margin
        self.measure = measure_with_model_tokenizer

    # -- over-length ---------------------------------------------------------------------------
    def _limit(self, model: dict, dataset: dict, ratios: dict) -> dict:
        """A copy of the dataset config with the model's limit injected."""
        if not is_needlebench(dataset):
            return dataset
        max_seq_len, room = model_room(model, dataset, self.margin, self.logger)
        key = (model.get("abbr"), dataset.get("abbr"))
        if key not in ratios:
            ratios[key] = 1.0
            tokenizer = model.get("tokenizer_path") or model.get("path")
            if self.measure and tokenizer and osp.isdir(str(tokenizer)):
                rows = load_rows(dataset["task"], **config_params(dataset))
                prompts = [rows[i]["prompt"] for i in range(0, len(rows), max(1, len(rows) // 3))][:3]
                ratios[key] = _tokenizer_ratio(model, prompts)
        limit = max(1, math.floor(room / ratios[key]))
        out = copy.deepcopy(dataset)
        out["max_prompt_tokens"] = limit
        out["overlength"] = self.overlength
        return out

    def _record(self, work_dir: str, model: dict, original: dict, limited: dict, ratio: float) -> None:
        """Which cells were shortened or skipped for this model."""
        if not is_needlebench(original):
            return
        full = load_rows(original["task"], **config_params(original))
        limit = limited["max_prompt_tokens"]
        if all(json.loads(m)["prompt_tokens"] <= limit for m in full["meta"]):
            return
        kept = load_rows(limited["task"], **config_params(limited))
        kept_meta = [json.loads(m) for m in kept["meta"]]
        shortened = _cells(m for m in kept_meta if "shortened_from" in m)
        full_cells, kept_cells = _cells(json.loads(m) for m in full["meta"]), _cells(kept_meta)
        skipped = {c: n - kept_cells.get(c, 0) for c, n in full_cells.items() if n > kept_cells.get(c, 0)}
        path = osp.join(work_dir, "needlebench_overlength.json")
        data = {}
        if osp.exists(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    data = json.load(fh)
            except ValueError:
                data = {}
        data.setdefault(model.get("abbr", "model"), {})[original["abbr"]] = {
            "policy": self.overlength,
            "max_prompt_tokens": limit,
            "tokenizer_ratio": ratio,
            "shortened": [[c[0], c[1], n] for c, n in sorted(shortened.items(), key=str)],
            "skipped": [[c[0], c[1], n] for c, n in sorted(skipped.items(), key=str)],
            "num_shortened": sum(shortened.values()),
            "num_skipped": sum(skipped.values()),
        }
        os.makedirs(work_dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
        os.replace(path + ".tmp", path)
        self.logger.warning(
            f"{model.get('abbr')} / {original['abbr']}: {sum(shortened.values())} prompts shortened, "
            f"{sum(skipped.values())} skipped to fit {limit} tokens (see {path})"
        )

    # -- partition -------------------------------------------------------------------------------
    def partition(
        self, model_dataset_combinations: list[dict], work_dir: str, out_dir: str, add_cfg: dict | None = None
    ) -> list[ConfigDict]:
        add_cfg = add_cfg or {}
        tasks: list[ConfigDict] = []
        ratios: dict = {}
        for comb in model_dataset_combinations:
            for model in comb["models"]:
                datasets = []
                for d in comb["datasets"]:
                    limited = self._limit(model, d, ratios)
                    if self.stage == "infer":
                        self._record(work_dir, model, d, limited, ratios.get((model.get("abbr"), d.get("abbr")), 1.0))
                    datasets.append(limited)
                if self.stage == "eval":
                    for d in datasets:
                        tasks.append(Config({"models": [model], "datasets": [[d]], "work_dir": work_dir, **add_cfg}))
                    continue
                tasks.extend(self._shards(model, datasets, out_dir, work_dir, add_cfg))
        return tasks

    def _shards(self, model: dict, datasets: list[dict], out_dir: str, work_dir: str, add_cfg: dict) -> list[Config]:
        stream: list[tuple[int, int]] = []  # (dataset index, row index)
        costs: list[int] = []
        foreign: list[dict] = []
        for di, d in enumerate(datasets):
            if osp.exists(get_infer_output_path(model, d, out_dir)):
                continue
            if not is_needlebench(d):
                foreign.append(d)
                continue
            rows = load_rows(d["task"], **config_params(d))
            for ri, meta in enumerate(rows["meta"]):
                stream.append((di, ri))
                costs.append(int(json.loads(meta)["prompt_tokens"]) + _out_len(model, d))
        tasks = []
        if foreign:
            tasks.append(Config({"models": [model], "datasets": [foreign], "work_dir": work_dir, **add_cfg}))
        if not stream:
            return tasks
        ranges = shard_ranges(costs, self.num_shards)
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
