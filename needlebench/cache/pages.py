"""Hand a task's memory-mapped dataset pages back after each batch, so its RSS is a batch, not its shard.

``datasets`` memory-maps the Arrow cache file, and every prompt a task reads stays mapped into the process
(file-backed pages, counted in its RSS) until the process ends: an infer task over 1,300 prompts of a
million tokens reads about 2.5 GB of them, and its RSS says so although the kernel could drop every one of
those pages. Whoever reads RSS (``ps``, Slurm's accounting, a cluster's memory killer, our own benchmark)
sees the shard's prompt bytes. ``madvise(MADV_DONTNEED)`` on the file's mappings unmaps those pages from
this process at once; they stay in the page cache, so the next read is a page fault, not a disk read, and
every Arrow buffer pointing into the mapping stays valid (read-only file mappings have nothing to lose).

Linux only (``/proc/self/maps``); elsewhere nothing is released and nothing fails.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from datasets import Dataset

__all__ = ["RELEASE_EVERY", "dataset_files", "release_mapped", "released_every", "releasing"]

log = logging.getLogger(__name__)
MAPS = Path("/proc/self/maps")
MADV_DONTNEED = 4  # Linux's value on every architecture it runs on
RELEASE_EVERY = 16  # rows read between two releases where rows are read one by one: 16 prompts of RSS at most
T = TypeVar("T")


def dataset_files(dataset: Any) -> list[str]:
    """The files a ``datasets.Dataset`` reads its rows from (none for an in-memory one or another type).

    Args:
        dataset: a ``datasets.Dataset`` (or anything: what has no ``cache_files`` has no files).
    """
    files = getattr(dataset, "cache_files", None) or []
    return [entry["filename"] for entry in files if isinstance(entry, dict) and "filename" in entry]


def _mapped_ranges(files: set[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of every mapping of ``files`` in this process, read from ``/proc/self/maps``."""
    ranges = []
    with MAPS.open(encoding="utf-8", errors="replace") as maps:
        for line in maps:  # "start-end perms offset dev inode   path"
            fields = line.rstrip("\n").split(maxsplit=5)
            if len(fields) == 6 and fields[5] in files:
                start, end = fields[0].split("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def release_mapped(files: Iterable[str | os.PathLike[str]]) -> int:
    """Unmap the pages of ``files`` this process has read (they stay in the page cache); the bytes advised.

    Args:
        files: the memory-mapped files, as :func:`dataset_files` names them.

    Returns:
        The size of the mappings advised (0 where there are none or the platform has no ``/proc/self/maps``).
    """
    wanted = {os.path.realpath(f) for f in files}
    if not wanted or not MAPS.exists():
        return 0
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    advised = 0
    for start, end in _mapped_ranges(wanted):
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED) == 0:
            advised += end - start
        else:  # only memory, never an answer, is at stake: say so and go on
            log.warning("madvise on %x-%x: %s", start, end, os.strerror(ctypes.get_errno()))
    return advised


def released_every(rows: Iterable[T], files: Iterable[str | os.PathLike[str]], every: int) -> Iterator[T]:
    """``rows`` as they are, with :func:`release_mapped` on ``files`` after each ``every`` rows and at the end.

    Args:
        rows: rows read from the memory-mapped ``files``.
        files: the files the rows are read from.
        every: how many rows between releases.
    """
    files = list(files)
    for n, row in enumerate(rows, 1):
        yield row
        if n % every == 0:
            release_mapped(files)
    release_mapped(files)


class _ReleasingDataset(Dataset):
    """A ``datasets.Dataset`` whose row iteration hands its pages back every :data:`RELEASE_EVERY` rows."""

    def __iter__(self) -> Iterator[Any]:
        return released_every(super().__iter__(), dataset_files(self), RELEASE_EVERY)


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
