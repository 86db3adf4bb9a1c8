"""A task's rows as an Arrow file in the cache: written once per config, at disk speed.

The file is the Arrow IPC stream that ``datasets.Dataset.from_file`` memory-maps
(features in the schema metadata), written one record batch at a time from
per-column lists: no per-row dictionaries, no row-by-row writer. Building goes
through :func:`store.cached_file`, so concurrent processes asking for the same
config build it once and the others wait for the finished, verified file.

:func:`materialize_many` builds several files at once on all cores, in fresh
processes that import only this package and pyarrow (not OpenCompass): the
partitioner uses it so every task of a run starts from a warm cache.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from .sample import Sample
from .store import ROW_COLUMNS, cache_dir, cache_key, cached_file, sample_to_row
from .tasks import get_task, make_params

__all__ = ["ARROW_SCHEMA", "cache_path", "materialize_file", "materialize_many", "write_rows"]

# the features ``datasets`` reads back: every column a string
ARROW_SCHEMA = pa.schema(
    [pa.field(c, pa.string()) for c in ROW_COLUMNS],
    metadata={
        "huggingface": json.dumps(
            {"info": {"features": {c: {"dtype": "string", "_type": "Value"} for c in ROW_COLUMNS}}}
        )
    },
)
# a record batch closes at this many prompt characters or rows, whichever comes first: large enough
# for disk speed, small enough to keep the writer's memory flat on the 1000k suite
BATCH_CHARS = 64 << 20
BATCH_ROWS = 4096


def _values(sample: Sample) -> tuple[str, ...]:
    row = sample_to_row(sample)
    return tuple(row[c] for c in ROW_COLUMNS)


def write_rows(task: str, params: Any, path: Path) -> dict[str, int]:
    """Generate ``task``'s samples for ``params`` into an Arrow stream at ``path``.

    Args:
        task: registry name of the task.
        params: the task's parameter dataclass.
        path: the file to write (a temporary name; the caller renames it).

    Returns:
        ``{"rows": n}``, recorded in the file's sidecar.
    """
    count = chars = 0
    columns: list[list[str]] = [[] for _ in ROW_COLUMNS]
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, ARROW_SCHEMA) as writer:

        def flush() -> None:
            if columns[0]:
                arrays = [pa.array(col, type=pa.string()) for col in columns]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA))
                for col in columns:
                    col.clear()

        for sample in get_task(task).generate(params):
            for col, value in zip(columns, _values(sample), strict=True):
                col.append(value)
            count += 1
            chars += len(sample.prompt)
            if chars >= BATCH_CHARS or len(columns[0]) >= BATCH_ROWS:
                flush()
                chars = 0
        flush()
    return {"rows": count}


def cache_path(task: str, params: Any) -> Path:
    """Where the rows of (``task``, ``params``) live in the cache."""
    return cache_dir() / "datasets" / f"{task}-{getattr(params, 'lang', 'xx')}-{cache_key(task, params)}.arrow"


def materialize_file(task: str, **params: Any) -> tuple[Path, int]:
    """The verified cache file of a task's rows and its row count, built here if missing.

    Args:
        task: registry name of the task.
        params: the task's parameters, as in a dataset config.

    Raises:
        OSError: the cache folder is not writable.
    """
    p = make_params(task, **params)
    path = cache_path(task, p)
    record = cached_file(path, lambda tmp: write_rows(task, p, tmp))
    return path, int(record["rows"])


def _build(job: tuple[str, dict[str, Any]]) -> str:
    return str(materialize_file(job[0], **job[1])[0])


def materialize_many(jobs: Sequence[tuple[str, Mapping[str, Any]]], workers: int | None = None) -> list[Path]:
    """Build the cache files of several (task, params) at once; those already built cost a check.

    Args:
        jobs: (task name, task parameters) pairs.
        workers: processes (default: the machine's cores, at most one per job); 1 builds in this process.

    Returns:
        The files, in the order of ``jobs``.
    """
    unique = list({json.dumps([t, dict(p)], sort_keys=True, default=str): (t, dict(p)) for t, p in jobs}.values())
    workers = min(workers or os.cpu_count() or 1, len(unique))
    if workers <= 1:
        built = {json.dumps([t, p], sort_keys=True, default=str): _build((t, p)) for t, p in unique}
    else:
        # spawn: the pool must not inherit a parent's threads (OpenCompass's process has torch loaded)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            paths = pool.map(_build, unique)
            built = {json.dumps([t, p], sort_keys=True, default=str): path for (t, p), path in zip(unique, paths)}
    return [Path(built[json.dumps([t, dict(p)], sort_keys=True, default=str)]) for t, p in jobs]
