"""Durable files: atomic writes, file locks and verified cache files.

Every file this package writes (caches, results, reports, limits) goes through
:func:`atomic_write`, so a kill or a full disk never leaves a half-written file
that a later run would trust; a full disk raises :class:`OutOfSpace` naming the
path and the space needed. :func:`cached_file` builds a cache file once under a
file lock while other processes wait, and a sidecar checksum written last is
verified before the file is ever read, so a truncated or corrupt file is rebuilt.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import io
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import OutOfSpace
from .seeding import files_digest

__all__ = [
    "cache_dir",
    "code_digest",
    "atomic_write",
    "file_lock",
    "cached_file",
    "verified",
    "file_checksum",
    "ChecksumWriter",
    "file_version",
]
_PACKAGE = Path(__file__).resolve().parent  # the needlebench package folder
_SIDECAR = ".sum"


def cache_dir() -> Path:
    """Where caches live: ``$NEEDLEBENCH_CACHE``, else ``~/.cache/needlebench``."""
    root = os.environ.get("NEEDLEBENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "needlebench"


def file_version(path: str | Path) -> tuple[int, int]:
    """A file's version as a memo key: (size, modification time in ns); (-1, -1) where it cannot be read.

    Why: an input read once per process (a needle file) is keyed in the dataset cache by its content, read
    afresh; a memo by path alone would build rows from the old reading under the new content's key.

    Args:
        path: the file.
    """
    try:
        stat = Path(path).stat()
    except OSError:
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)


# -- writing and verifying cache files ---------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; best effort (some file systems refuse to open folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(target: Path | str, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it replaces ``target`` whole.

    Why: a reader (or a crash) must see the old file or the new one, never a
    half-written one. The temporary file sits in the target's folder (same
    file system, so the rename is atomic), is fsynced before the rename and
    removed if the block raises.

    Args:
        target: the file to write.
        suffix: ending of the temporary name; writers that infer a format
            from the extension (``np.savez`` adds ``.npz``) pass it here.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with tmp.open("rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a shared cache must stay readable
        os.replace(tmp, target)
    except BaseException as exc:
        written = tmp.stat().st_size if tmp.exists() else 0
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in _FULL:
            raise _out_of_space(target, written) from exc
        raise
    _fsync_dir(target.parent)


_FULL = (errno.ENOSPC, errno.EDQUOT)  # no space left; disk quota exceeded


def _out_of_space(target: Path, written: int) -> OutOfSpace:
    """The message for a write that filled its file system: the file, how far it got, what is free."""
    free = shutil.disk_usage(target.parent).free
    got = (
        f"it needs more than the {written:,} bytes written when it filled up" if written else "nothing could be written"
    )
    return OutOfSpace(
        f"{target}: no space left on its file system ({got}; {free:,} bytes free; no partial file is kept). "
        "Free space there, or point $NEEDLEBENCH_CACHE or the work dir (-w) elsewhere, then resume "
        "(`opencompass CONFIG -r`): finished files are kept"
    )


@contextlib.contextmanager
def file_lock(target: Path) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on ``<target>.lock`` while the block runs.

    Why: eight OpenCompass tasks may start on the same dataset at once; one
    builds it while the others wait and then read the finished file. The
    lock file stays (deleting it would let two processes lock different files).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@functools.lru_cache(maxsize=256)
def _verified(path: str, sidecar: str, stamp: tuple) -> dict[str, Any] | None:
    """Check a file against its sidecar once per process and file version (``stamp``).

    The sidecar records the file's size, CRC-32 (:func:`file_checksum`), inode and modification time
    as its builder left them. A file with that very inode and time has not been written since it was verified, so the
    checksum is recomputed only for a file that changed (any rewrite, even of the same size, moves
    its time): a task opening an 18 GB dataset pays a ``stat``, not a full read.
    """
    try:
        info = json.loads(Path(sidecar).read_text(encoding="utf-8"))
        if info["size"] != stamp[1]:
            return None
        if (info.get("inode"), info.get("mtime_ns")) == (stamp[0], stamp[2]):
            return info
        if info["crc32"] != file_checksum(Path(path)):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info


def file_checksum(path: Path) -> str:
    """CRC-32 of a file's bytes, as 8 hex digits: what a cache file's sidecar records and is checked against.

    Why CRC-32 and not a cryptographic digest: the sidecar guards against a truncated, half-written or
    damaged file (its size is checked first), not against an adversary; cache keys, which decide what a
    file holds, stay SHA-256 and blake2b. Computed as the file is read in blocks, at about twice
    SHA-256's speed: the cold build of a suite checksums every byte it writes (1 GB for the 128k suite).

    Args:
        path: the file.
    """
    crc = 0
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


class ChecksumWriter(io.RawIOBase):
    """A binary file that keeps the :func:`file_checksum` of every byte written to it, in order.

    Why: a builder that writes its cache file through it returns ``crc32`` among its facts, and
    :func:`cached_file` records that instead of reading the whole file back (1 GB for the 128k suite)
    to checksum it; the bytes are checksummed while they are still in the CPU's cache.

    Args:
        path: the file to create (truncated if it exists).
    """

    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self._fh = open(path, "wb", buffering=0)  # noqa: SIM115  # closed by close()
        self._crc = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Write all of ``data`` (any bytes-like object) and fold it into the checksum."""
        view = memoryview(data).cast("B")
        self._crc = zlib.crc32(view, self._crc)
        done = 0
        while done < len(view):
            done += self._fh.write(view[done:])
        return done

    def close(self) -> None:
        if not self.closed:
            self._fh.close()
        super().close()

    @property
    def checksum(self) -> str:
        """The checksum of everything written so far, as :func:`file_checksum` gives it for the file."""
        return f"{self._crc:08x}"


def verified(path: Path) -> dict[str, Any] | None:
    """The sidecar record of a complete, uncorrupted cache file; None if it must be (re)built.

    Args:
        path: the cache file; its sidecar is ``<path>.sum``.
    """
    sidecar = path.with_name(path.name + _SIDECAR)
    try:
        st, ss = path.stat(), sidecar.stat()
    except OSError:
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns, ss.st_ino, ss.st_mtime_ns)
    return _verified(str(path), str(sidecar), stamp)


def cached_file(path: Path, build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Make sure ``path`` holds a verified cache file, building it at most once across processes.

    The file is replaced atomically, then its sidecar (size, CRC-32 of the content, inode and
    modification time, facts) is written last, so a file without a matching sidecar is never trusted.

    Args:
        path: the cache file; its sidecar is ``<path>.sum``.
        build: ``build(tmp)`` writes the file to ``tmp`` and returns facts to record (e.g. a row count);
            a builder that wrote through a :class:`ChecksumWriter` includes its ``crc32``, else the finished
            file is read to checksum it.

    Returns:
        The sidecar record.

    Raises:
        OSError: the cache folder is not writable (callers fall back to memory).
        OutOfSpace: its file system filled up while the file was written (nothing half-written is kept).
    """
    info = verified(path)
    if info is not None:
        return info
    with file_lock(path):
        info = verified(path)  # another process may have built it while we waited
        if info is not None:
            return info
        sidecar = path.with_name(path.name + _SIDECAR)
        sidecar.unlink(missing_ok=True)
        with atomic_write(path, suffix=path.suffix) as tmp:
            facts = build(tmp)
        st = path.stat()
        record = {
            **facts,
            "size": st.st_size,
            "crc32": facts.get("crc32") or file_checksum(path),
            "inode": st.st_ino,
            "mtime_ns": st.st_mtime_ns,
        }
        with atomic_write(sidecar) as tmp:
            tmp.write_text(json.dumps(record, sort_keys=True), encoding="utf-8")
    return record


# -- keys --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def code_digest(*modules: str) -> str:
    """Digest of source files of this package, so a code edit never serves a stale cache.

    Args:
        modules: paths relative to the package folder (``"context/haystack.py"``,
            ``"opencompass/dataset.py"``) or glob patterns (``"*.py"``).
    """
    files: list[Path] = []
    for m in modules:
        found = sorted(_PACKAGE.glob(m))
        if not found:  # a moved module would otherwise drop out of the key and serve stale caches
            raise FileNotFoundError(f"code_digest: {m!r} matches no file under {_PACKAGE}")
        files += found
    return files_digest(files)
