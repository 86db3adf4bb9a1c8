"""A task's rows as an Arrow file in the cache: written once per config, at disk speed.

The file is the Arrow IPC stream that ``datasets.Dataset.from_file`` memory-maps
(features in the schema metadata), written one record batch at a time from
per-column lists: no per-row dictionaries, no row-by-row writer. Building goes
through :func:`needlebench.files.cached_file`, so concurrent processes asking for the same
config build it once and the others wait for the finished, verified file.

:func:`materialize_many` builds several files at once on all cores, in fresh
processes that import only this package and pyarrow (not OpenCompass): the
partitioner uses it so every task of a run starts from a warm cache.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..context.corpora import corpus_digest
from ..errors import ConfigError, OutOfSpace
from ..files import ChecksumWriter, cache_dir, cached_file, code_digest, verified
from ..sample import DATASET_VERSION
from ..seeding import files_digest, stable_hash
from ..tasks import get_task, make_params
from .store import PROMPT_COLUMN, ROW_COLUMNS, TOKEN_COLUMNS, RowsDigest, sample_tokens, sample_utf8

__all__ = ["ARROW_SCHEMA", "cache_path", "materialize_file", "materialize_many", "rows_fingerprint", "write_rows"]

# the features ``datasets`` reads back: the row's strings, then its token counts as integers
_DTYPES = {**{c: "string" for c in ROW_COLUMNS}, **{c: "int64" for c in TOKEN_COLUMNS}}
ARROW_SCHEMA = pa.schema(
    [pa.field(c, pa.string() if t == "string" else pa.int64()) for c, t in _DTYPES.items()],
    metadata={
        "huggingface": json.dumps(
            {"info": {"features": {c: {"dtype": t, "_type": "Value"} for c, t in _DTYPES.items()}}}
        )
    },
)
# a record batch closes at this many prompt bytes or rows, whichever comes first: large enough for disk
# speed, small enough that its buffers are reused from one batch to the next (64 MB batches were allocated
# fresh from the kernel each time: 1 s of page faults in the 128k suite's cold build) and the writer's
# memory stays flat on the 1000k suite
BATCH_BYTES = 8 << 20
BATCH_ROWS = 4096


def write_rows(task: str, params: Any, path: Path) -> dict[str, int]:
    """Generate ``task``'s samples for ``params`` into an Arrow stream at ``path``.

    Args:
        task: registry name of the task.
        params: the task's parameter dataclass.
        path: the file to write (a temporary name; the caller renames it).

    Returns:
        ``{"rows": n, "crc32": checksum of the bytes written, "fingerprint": the rows' digest}``, recorded in
        the file's sidecar (``store.RowsDigest``).
    """
    count = size = 0
    digest = RowsDigest()
    columns: list[list[bytes]] = [[] for _ in ROW_COLUMNS]
    tokens: list[list[int]] = [[] for _ in TOKEN_COLUMNS]
    out = ChecksumWriter(path)  # the sidecar's checksum, taken as the bytes go out
    with out, pa.PythonFile(out, mode="w") as sink, pa.ipc.new_stream(sink, ARROW_SCHEMA) as writer:

        def flush() -> None:
            """Write the buffered columns as one record batch and empty them (nothing when empty)."""
            if columns[0]:
                arrays = [_string_array(col) for col in columns] + [pa.array(col, pa.int64()) for col in tokens]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA))
                for col in (*columns, *tokens):
                    col.clear()

        for sample in get_task(task).generate(params):
            values = sample_utf8(sample)
            digest.add(values)
            for col, value in zip(columns, values, strict=True):
                col.append(value)
            for col, n in zip(tokens, sample_tokens(sample), strict=True):
                col.append(n)
            count += 1
            size += len(values[PROMPT_COLUMN])
            if size >= BATCH_BYTES or len(columns[0]) >= BATCH_ROWS:
                flush()
                size = 0
        flush()
    return {"rows": count, "crc32": out.checksum, "fingerprint": digest.hexdigest()}


def _string_array(values: list[bytes]) -> pa.Array:
    """An Arrow string array of UTF-8 values, built from its two buffers: one join of the bytes and their
    offsets. ``pa.array`` of Python strings encodes every string again and grows its buffer as it goes; here
    each byte is copied once (the same array, so the same file).

    Args:
        values: each row's UTF-8 bytes (valid UTF-8: encoded text, or bytes that decoded strictly).

    Raises:
        ValueError: the batch's bytes do not fit Arrow's 32-bit string offsets.
    """
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"a record batch of {offsets[-1]:,} bytes is over Arrow's string limit (2 GiB)")
    data = pa.py_buffer(b"".join(values))
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets.astype(np.int32)), data)


# -- keys --------------------------------------------------------------------------------------


# the sources that decide a dataset's rows: the generators and what they call, and the row writer
# (the report, the command line and the OpenCompass adapters other than the dataset do not)
_ROW_SOURCES = (
    "__init__.py",
    "sample.py",
    "seeding.py",
    "protocol.py",
    "taskspec.py",
    "record.py",
    "request_cost.py",
    "scoring.py",
    "aggregate/*.py",
    "files.py",
    "jsonl.py",
    "cache/*.py",
    "errors.py",
    "context/*.py",
    "tasks/*.py",
    "tasks/*/*.py",
    "grading/*.py",
    "opencompass/__init__.py",
    "opencompass/dataset.py",
)


def _code_identity() -> str:
    """Generator sources, the row writer and committed data: what decides a dataset's rows."""
    data = Path(__file__).resolve().parent.parent / "data"
    extra = sorted(data.rglob("*.json*")) if data.is_dir() else []
    return code_digest(*_ROW_SOURCES) + files_digest(extra)


def _file_identity(path: str) -> str:
    return f"{Path(path).resolve()}:{files_digest([Path(path)])}"


def cache_key(task: str, params: object) -> str:
    """Key of a dataset cache file: params, version, code and the corpus and needle contents.

    Args:
        task: registry name of the task.
        params: the task's parameter dataclass.
    """
    fields = dataclasses.asdict(params)
    ident = {"task": task, "params": fields, "version": DATASET_VERSION, "code": _code_identity()}
    lang = fields.get("lang")
    if "corpus" in fields and lang:
        ident["corpus"] = corpus_digest(lang, fields["corpus"])
    inputs = get_task(task).inputs
    for role, path in (inputs(params) if inputs else {}).items():  # the files the task says it reads
        ident[role] = _file_identity(path)
    return stable_hash(json.dumps(ident, sort_keys=True, default=str), digest_size=12)


def cache_path(task: str, params: Any) -> Path:
    """Where the rows of (``task``, ``params``) live in the cache: ``<cache>/datasets/<task>-<lang>-<key>.arrow``.

    Args:
        task: registry name of the task.
        params: the task's parameter dataclass (its ``lang``, when it has one, goes into the name).
    """
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


def rows_fingerprint(task: str, **params: Any) -> str:
    """The fingerprint of a task's rows (``store.RowsDigest``): from the cache file's sidecar, built if missing;
    generated in memory where the cache cannot be written.

    Args:
        task: registry name of the task.
        params: the task's parameters, as in a dataset config.
    """
    p = make_params(task, **params)
    try:
        found = cached_file(cache_path(task, p), lambda tmp: write_rows(task, p, tmp)).get("fingerprint")
    except OSError:
        found = None
    if found:
        return str(found)
    digest = RowsDigest()
    for sample in get_task(task).generate(p):
        digest.add(sample_utf8(sample))
    return digest.hexdigest()


def _claim_and_build(jobs: list[tuple[str, dict[str, Any]]]) -> None:
    """A worker's loop: build every job no other worker has claimed, then wait for the rest.

    A claim is a non-blocking lock on ``<file>.claim``, so two workers never generate the same
    dataset and neither sits idle while unclaimed work is left.
    """
    for task, params in jobs:
        path = cache_path(task, make_params(task, **params))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".claim"), "a+b") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another worker is on it
            try:
                materialize_file(task, **params)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    for task, params in jobs:
        materialize_file(task, **params)  # waits for any still being built elsewhere


def materialize_many(jobs: Sequence[tuple[str, Mapping[str, Any]]], workers: int | None = None) -> list[Path]:
    """Build the cache files of several (task, params) at once; those already built cost a check.

    The workers are fresh ``python -m needlebench.cache.arrow_rows`` processes (not forks of the caller,
    which may hold OpenCompass's threads, and not ``multiprocessing``, which re-runs the caller's
    main script); each claims datasets as it goes.

    Args:
        jobs: (task name, task parameters) pairs.
        workers: processes (default: the machine's cores, at most one per missing file); 1 builds here.

    Returns:
        The files, in the order of ``jobs``.

    Raises:
        OSError: the cache folder cannot be written (each task then builds its rows in memory).
        ConfigError: a parameter value is wrong (the worker's message).
        OutOfSpace: the cache's file system filled up (the worker's message).
        RuntimeError: a worker failed otherwise; its last output is in the message.
    """
    folder = cache_dir() / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"{folder} is not writable")
    plain = [(t, dict(p)) for t, p in jobs]
    paths = [cache_path(t, make_params(t, **p)) for t, p in plain]
    missing = list({str(path): job for path, job in zip(paths, plain) if verified(path) is None}.values())
    workers = min(workers or os.cpu_count() or 1, len(missing))
    if workers <= 1:
        _claim_and_build(missing)
        return paths
    procs = []
    for i in range(workers):
        order = missing[i:] + missing[:i]  # each worker starts at a different dataset
        proc = subprocess.Popen(
            [sys.executable, "-m", "needlebench.cache.arrow_rows"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        proc.stdin.write(pickle.dumps(order))  # type: ignore[union-attr]  # the params exactly, types kept
        proc.stdin.close()  # type: ignore[union-attr]
        procs.append(proc)
    failures = []
    for proc in procs:
        err = proc.stderr.read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
        code = proc.wait()
        if code in _EXIT_ERRORS:  # a bad value or a full disk: the worker's one-line message, as if raised here
            raise _EXIT_ERRORS[code](err.strip().splitlines()[-1])
        if code != 0:
            failures.append(err[-3000:])
    if failures:
        raise RuntimeError("building the datasets failed in a worker process:\n" + failures[0])
    return paths


_EXIT_ERRORS: dict[int, type[Exception]] = {3: ConfigError, 4: OutOfSpace}  # a worker's exit code -> its error


if __name__ == "__main__":
    try:
        _claim_and_build(pickle.load(sys.stdin.buffer))
    except (ConfigError, OutOfSpace) as exc:
        print(exc, file=sys.stderr)
        sys.exit(next(code for code, kind in _EXIT_ERRORS.items() if isinstance(exc, kind)))
