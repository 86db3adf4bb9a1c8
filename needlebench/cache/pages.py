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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from datasets import Dataset

__all__ = ["RELEASE_EVERY", "dataset_mappings", "release_mapped", "released_every", "releasing"]

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


class _ReleasingDataset(Dataset):
    """A ``datasets.Dataset`` whose row iteration hands its pages back every :data:`RELEASE_EVERY` rows."""

    def __iter__(self) -> Iterator[Any]:
        return released_every(super().__iter__(), dataset_mappings(self), RELEASE_EVERY)


def releasing(dataset: Dataset) -> Dataset:
    """The same rows (no copy), iterated with :func:`released_every`: for code that loops over every row.

    OpenCompass's eval task reads each row whole to list the references (prompts included); this keeps
    that loop's RSS at :data:`RELEASE_EVERY` prompts. What ``select`` or ``map`` derive is a plain
    ``Dataset`` again.

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
