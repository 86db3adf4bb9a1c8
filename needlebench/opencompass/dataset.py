"""OpenCompass dataset class for every needlebench task.

One class serves all tasks; ``task`` picks the generator from the registry.
A dataset is one (task, language) with per-sample metadata, not one
(length, depth) cell. Rows are written once to an Arrow file keyed by the
full config and read back memory-mapped by the infer and eval tasks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, Value
from datasets.arrow_writer import ArrowWriter
from opencompass.datasets.base import BaseDataset

from ..store import ROW_COLUMNS, cache_dir, cache_key, cached_file, rows
from ..tasks import get_task, make_params

__all__ = ["NeedleBenchDataset", "materialize", "load_rows"]

FEATURES = Features({c: Value("string") for c in ROW_COLUMNS})


def _write_rows(task: str, params: Any, path: Path) -> dict[str, int]:
    """Write a task's rows as an Arrow file at ``path``; the row count goes into the sidecar."""
    writer = ArrowWriter(features=FEATURES, path=str(path), writer_batch_size=64)
    try:
        for row in rows(get_task(task).generate(params)):
            writer.write(row)
        count, _ = writer.finalize()
    finally:
        writer.close()
    return {"rows": int(count)}


def materialize(task: str, **params: Any) -> Dataset:
    """The task's rows, written to the cache once and memory-mapped; in memory if uncacheable.

    Concurrent processes asking for the same dataset build it once (file
    lock); the file is verified against its sidecar checksum before use, so
    a truncated or corrupt file is rebuilt, never read.

    Args:
        task: registry name of the task.
        params: the task's parameters, as in a dataset config.
    """
    p = make_params(task, **params)
    path = cache_dir() / "datasets" / f"{task}-{getattr(p, 'lang', 'xx')}-{cache_key(task, p)}.arrow"
    try:
        record = cached_file(path, lambda tmp: _write_rows(task, p, tmp))
    except OSError:
        return Dataset.from_list(list(rows(get_task(task).generate(p))), features=FEATURES)
    ds = Dataset.from_file(str(path))
    if len(ds) != record["rows"]:  # checksum matched, so only a writer bug gets here
        raise RuntimeError(f"{path}: {len(ds)} rows, its sidecar says {record['rows']}")
    return ds


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
    ds = materialize(task, **params)
    if spec.family != "sparse" and max_prompt_tokens:
        keep = [i for i, m in enumerate(ds["meta"]) if json.loads(m)["prompt_tokens"] <= max_prompt_tokens]
        if len(keep) < len(ds):
            ds = ds.select(keep)
    return ds


class NeedleBenchDataset(BaseDataset):
    """``type=NeedleBenchDataset, task='srt', lang='en', lengths=[...], ...``."""

    @staticmethod
    def load(task: str, **params: Any) -> Dataset:
        ds = load_rows(task, **params)
        LOADED.append(ds)
        return ds


# Every dataset this process loaded, in order: the scripted models (``scripted.OracleModel``) look
# a prompt's gold up here, since OpenCompass builds the datasets in the process that runs the model.
LOADED: list[Dataset] = []
