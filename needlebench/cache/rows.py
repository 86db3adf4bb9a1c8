"""A dataset's rows as a model gets them: read from the cache (built once), limited to the model's room.

The infer and eval tasks, the partitioner and ``needlebench plan`` all read rows here, so they see
the same samples. No OpenCompass: the adapter (``opencompass/dataset.py``) adds its reader columns.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from datasets import Dataset, Features

from ..tasks import get_task, make_params
from .arrow_rows import ARROW_SCHEMA, materialize_file
from .store import sample_to_row

__all__ = ["FEATURES", "materialize", "load_rows", "selected_rows"]

FEATURES = Features.from_arrow_schema(ARROW_SCHEMA)  # the cache files' features, for in-memory rows too


def materialize(task: str, **params: Any) -> Dataset:
    """The task's rows, written to the cache once and memory-mapped; in memory if uncacheable.

    Concurrent processes asking for the same dataset build it once (file
    lock); the file is checked against its sidecar before use (its size, and
    its checksum whenever it was written since), so a truncated or corrupt
    file is rebuilt, never read.

    Args:
        task: registry name of the task.
        params: the task's parameters, as in a dataset config.
    """
    try:
        path, count = materialize_file(task, **params)
    except OSError:
        p = make_params(task, **params)
        return Dataset.from_list([sample_to_row(x) for x in get_task(task).generate(p)], features=FEATURES)
    stat = Path(path).stat()
    ds = _opened(str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if len(ds) != count:  # checksum matched, so only a writer bug gets here
        raise RuntimeError(f"{path}: {len(ds)} rows, its sidecar says {count}")
    return ds


@functools.lru_cache(maxsize=64)
def _opened(path: str, inode: int, size: int, mtime_ns: int) -> Dataset:
    """One memory map per cache file (and version of it) per process.

    Opening reads the header of every record batch, and the kernel reads ahead around each one: about half
    of a 9 GB 1000k file from disk where the page cache cannot hold it (a memory-capped job). An infer task
    builds its dataset once per part (over a hundred per 1000k shard), so opening the file again for each
    would read it again each time; the rows are the same, so the one map serves them all (``select`` and
    ``with_format`` make new objects; nothing here changes a dataset in place).
    """
    return Dataset.from_file(path)


def _budgets_fit(ds: Dataset, max_prompt_tokens: int) -> bool:
    """Whether every sample's token budget already fits: the limit would change no row."""
    return all(n <= max_prompt_tokens for n in ds["budget_tokens"])


def load_rows(task: str, max_prompt_tokens: int = 0, overlength: str = "shorten", **params: Any) -> Dataset:
    """The rows a model actually gets, after its context limit is applied.

    Sparse tasks shorten the haystack (or skip the sample) at generation;
    dense tasks cannot be shortened, so their over-length samples are skipped.
    The partitioner injects ``max_prompt_tokens`` and ``overlength`` per model
    into both the infer and the eval config, so both see the same rows. A
    limit every sample fits in reads the unlimited file: one file per dataset
    however many models share it.

    Args:
        task: registry name of the task.
        max_prompt_tokens: the model's room in cl100k tokens (0: no limit).
        overlength: ``shorten`` or ``skip`` a sparse sample over the room.
        params: the task's parameters, as in a dataset config.
    """
    spec = get_task(task)
    ds = materialize(task, **params)
    if spec.family == "sparse" and max_prompt_tokens and not _budgets_fit(ds, int(max_prompt_tokens)):
        # a limit decides only over-length samples: where none is, the unlimited file is the same rows
        ds = materialize(task, **params, max_prompt_tokens=int(max_prompt_tokens), overlength=overlength)
    if spec.family != "sparse" and max_prompt_tokens:
        keep = [i for i, n in enumerate(ds["prompt_tokens"]) if n <= max_prompt_tokens]
        if len(keep) < len(ds):
            ds = ds.select(keep)
    return ds


def selected_rows(ds: Dataset) -> Dataset:
    """``ds`` as a table of exactly its rows: a selection (dense tasks over a model's room) is flattened,
    a whole memory-mapped file is returned as is, never copied.

    ``datasets`` has no public way to ask whether a dataset is a selection; its ``_indices`` mapping is read
    (``tests/test_dataset_contract.py`` checks that it still means this).

    Args:
        ds: rows as :func:`load_rows` returns them.
    """
    return ds.flatten_indices() if ds._indices is not None else ds
