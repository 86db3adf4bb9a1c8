"""Hand a task's memory-mapped dataset pages back after each batch, so its RSS is a batch, not its shard.

``datasets`` memory-maps the Arrow cache file, and every prompt a task reads stays mapped into the process
(file-backed pages, counted in its RSS) until the process ends: an infer task over 1,300 prompts of a
million tokens reads about 2.5 GB of them, and its RSS says so although the kernel could drop every one of
those pages. Whoever reads RSS (``ps``, Slurm's accounting, a cluster's memory killer, our own benchmark)
sees the shard's prompt bytes. ``madvise(MADV_DONTNEED)`` on the dataset's mapping unmaps those pages from
this process at once; they stay in the page cache, so the next read is a page fault, not a disk read, and
every Arrow buffer pointing into the mapping stays valid (read-only file mappings have nothing to lose).

Only the one dataset's own mapping is released: the mapping of its cache file that holds its Arrow
buffers (another ``Dataset`` of the same file, such as the oracle model's index, is a mapping of its
own and keeps its pages), and never anonymous memory, where ``MADV_DONTNEED`` would zero the data.
Linux only (``/proc/self/maps``); elsewhere nothing is released and nothing fails.
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import functools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from datasets import Dataset, Value

__all__ = [
    "RELEASE_EVERY",
    "OnDemandRow",
    "dataset_mappings",
    "release_mapped",
    "released_every",
    "releasing",
    "rows_on_demand",
]

log = logging.getLogger(__name__)
MAPS = Path("/proc/self/maps")
MADV_DONTNEED = 4  # Linux's value on every architecture it runs on
RELEASE_EVERY = 16  # rows read between two releases where rows are read one by one: 16 prompts of RSS at most
T = TypeVar("T")
Span = tuple[int, int]  # (start, end) of one mapping in this process


def _buffer_addresses(dataset: Any) -> list[int]:
    """Where the dataset's Arrow buffers lie in this process (none for anything but a ``datasets.Dataset``)."""
    table = getattr(getattr(dataset, "data", None), "table", None)
    if table is None:
        return []
    return [buf.address for column in table.columns for chunk in column.chunks for buf in chunk.buffers() if buf]


def dataset_mappings(dataset: Any) -> list[Span]:
    """The mappings of ``dataset``'s cache files that hold its Arrow buffers, from ``/proc/self/maps``.

    Empty for a dataset in memory (its buffers lie in no mapping of its files), for anything that is not a
    ``datasets.Dataset``, and where the platform has no ``/proc/self/maps``.

    Args:
        dataset: a ``datasets.Dataset`` read from its Arrow cache file.
    """
    files = {os.path.realpath(e["filename"]) for e in getattr(dataset, "cache_files", None) or [] if "filename" in e}
    addresses = sorted(set(_buffer_addresses(dataset))) if files else []
    if not addresses or not MAPS.exists():
        return []
    # one regular expression over the whole table: a process with a few hundred libraries has thousands of
    # mappings, and an infer task looks once per piece of its shard (hundreds)
    text = MAPS.read_text(encoding="utf-8", errors="replace")
    paths = "|".join(map(re.escape, files))
    line = re.compile(rf"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+ +(?:{paths})$", re.M)
    found = []
    for match in line.finditer(text):  # "start-end perms offset dev inode   path"
        start, end = int(match.group(1), 16), int(match.group(2), 16)
        at = bisect.bisect_left(addresses, start)  # the first buffer at or after the mapping's start
        if at < len(addresses) and addresses[at] < end:
            found.append((start, end))
    return found


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, looked up once: ``find_library`` runs ``ldconfig`` (about 2 ms), and a release runs per batch."""
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def release_mapped(mappings: Iterable[Span]) -> int:
    """Unmap the pages of ``mappings`` this process has read (they stay in the page cache); the bytes advised.

    Args:
        mappings: file mappings, as :func:`dataset_mappings` finds them (never anonymous memory).

    Returns:
        The size of the mappings advised.
    """
    mappings = list(mappings)
    if not mappings:
        return 0
    libc = _libc()
    advised = 0
    for start, end in mappings:
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED) == 0:
            advised += end - start
        else:  # only memory, never an answer, is at stake: say so and go on
            log.warning("madvise on %x-%x: %s", start, end, os.strerror(ctypes.get_errno()))
    return advised


def released_every(rows: Iterable[T], mappings: Iterable[Span], every: int) -> Iterator[T]:
    """``rows`` as they are, with :func:`release_mapped` on ``mappings`` after each ``every`` rows and at the end.

    Args:
        rows: rows read from the memory-mapped ``mappings``.
        mappings: the mappings the rows are read from.
        every: how many rows between releases.
    """
    mappings = list(mappings)
    for n, row in enumerate(rows, 1):
        yield row
        if n % every == 0:
            release_mapped(mappings)
    release_mapped(mappings)


class OnDemandRow(Mapping[str, Any]):
    """One row of an Arrow record batch whose columns are converted to Python when read, not before.

    OpenCompass's eval task loops over every row for one column (the references); ``datasets`` would decode
    each row whole, prompt included (4 MB at 1000k), and the grader reads it once more.
    """

    __slots__ = ("_batch", "_at", "_names")

    def __init__(self, batch: Any, at: int, names: Mapping[str, int]) -> None:
        self._batch, self._at, self._names = batch, at, names

    def _scalar(self, key: str) -> Any:
        return self._batch.column(self._names[key])[self._at]

    def __getitem__(self, key: str) -> Any:
        return self._scalar(key).as_py()

    def utf8(self, key: str) -> bytes:
        """A string column's value as its UTF-8 bytes, not decoded (one copy: ``bytes`` can be searched).

        Args:
            key: the column.
        """
        return self._scalar(key).as_buffer().to_pybytes()

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def rows_on_demand(dataset: Any) -> Iterator[Mapping[str, Any]]:
    """``dataset``'s rows, each an :class:`OnDemandRow` where that reads the same values, else as it iterates.

    The same values: a ``datasets.Dataset`` without an index mapping or an output format, whose columns are
    all plain values (strings, numbers), which ``datasets`` hands over as Arrow's ``as_py`` gives them.

    Args:
        dataset: the rows (anything iterable; a ``datasets.Dataset`` is read from its Arrow table).
    """
    table = getattr(getattr(dataset, "data", None), "table", None)
    plain = isinstance(dataset, Dataset) and dataset._indices is None and dataset.format["type"] is None
    if table is None or not plain or not all(isinstance(f, Value) for f in dataset.features.values()):
        # a Dataset's own iteration (a subclass's __iter__ may be this very loop: rows selected by an index
        # mapping, an adaptive run's, come back here)
        yield from (Dataset.__iter__(dataset) if isinstance(dataset, Dataset) else dataset)
        return
    names = {name: i for i, name in enumerate(table.column_names)}
    for batch in table.to_batches():
        for at in range(batch.num_rows):
            yield OnDemandRow(batch, at, names)


class _ReleasingDataset(Dataset):
    """A ``datasets.Dataset`` whose row iteration reads columns on demand and hands its pages back every
    :data:`RELEASE_EVERY` rows."""

    def __iter__(self) -> Iterator[Any]:
        return released_every(rows_on_demand(self), dataset_mappings(self), RELEASE_EVERY)


def releasing(dataset: Dataset) -> Dataset:
    """The same rows (no copy), iterated with :func:`released_every`: for code that loops over every row.

    OpenCompass's eval task loops over every row to list the references; here that loop reads only the
    reference of each row (:func:`rows_on_demand`) and its RSS stays at :data:`RELEASE_EVERY` rows. What
    ``select`` or ``map`` derive is a plain ``Dataset`` again.

    Args:
        dataset: a memory-mapped dataset.
    """
    return _ReleasingDataset(
        dataset.data,
        info=dataset.info,
        split=dataset.split,
        indices_table=dataset._indices,
        fingerprint=dataset._fingerprint,
    )
