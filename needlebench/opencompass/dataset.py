"""OpenCompass dataset class for every needlebench task.

One class serves all tasks; ``task`` picks the generator from the registry.
A dataset is one (task, language) with per-sample metadata, not one
(length, depth) cell. Rows are written once to an Arrow file keyed by the
full config and read back memory-mapped by the infer and eval tasks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, Value
from datasets.arrow_writer import ArrowWriter
from opencompass.datasets.base import BaseDataset

from ..store import ROW_COLUMNS, cache_dir, cache_key, rows
from ..tasks import get_task, make_params

__all__ = ["NeedleBenchDataset", "materialize", "load_rows"]

FEATURES = Features({c: Value("string") for c in ROW_COLUMNS})


def materialize(task: str, **params: Any) -> Path | Dataset:
    """Write the task's rows to the cache (once) and return the file; in memory if uncacheable."""
    spec = get_task(task)
    p = make_params(task, **params)
    folder = cache_dir() / "datasets"
    path = folder / f"{task}-{p.lang if hasattr(p, 'lang') else 'xx'}-{cache_key(task, p)}.arrow"
    if path.is_file():
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Dataset.from_list(list(rows(spec.generate(p))), features=FEATURES)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    writer = ArrowWriter(features=FEATURES, path=str(tmp), writer_batch_size=64)
    try:
        for row in rows(spec.generate(p)):
            writer.write(row)
        writer.finalize()
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(tmp, path)
    return path


def load_rows(task: str, max_prompt_tokens: int = 0, overlength: str = "shorten", **params: Any) -> Dataset:
    """The rows a model actually gets, after its context limit is applied.

    Sparse tasks shorten the haystack (or skip the sample) at generation;
    dense tasks cannot be shortened, so their over-length samples are skipped.
    The partitioner injects ``max_prompt_tokens`` and ``overlength`` per model
    into both the infer and the eval config, so both see the same rows.
    """
    spec = get_task(task)
    if spec.family == "sparse" and max_prompt_tokens:
        params = {**params, "max_prompt_tokens": int(max_prompt_tokens), "overlength": overlength}
    result = materialize(task, **params)
    ds = result if isinstance(result, Dataset) else Dataset.from_file(str(result))
    if spec.family != "sparse" and max_prompt_tokens:
        keep = [i for i, m in enumerate(ds["meta"]) if json.loads(m)["prompt_tokens"] <= max_prompt_tokens]
        if len(keep) < len(ds):
            ds = ds.select(keep)
    return ds


class NeedleBenchDataset(BaseDataset):
    """``type=NeedleBenchDataset, task='srt', lang='en', lengths=[...], ...``."""

    @staticmethod
    def load(task: str, **params: Any) -> Dataset:
        return load_rows(task, **params)
