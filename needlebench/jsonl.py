"""JSON Lines, read as the format defines them: one JSON value per line, lines ended by ``"\\n"`` alone.

Why one reader: ``str.splitlines()`` also breaks at U+2028, U+2029, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``
and ``\\x85``, which a model's output can hold and which JSON written with ``ensure_ascii=False`` stores
raw; text-mode iteration breaks at ``\\r``. Either turns one record into "malformed lines" that a reader
skips, and the sample vanishes from every table. Every JSONL file this package reads (graded samples,
prediction sidecars, the request log, retries, batch tables, the reuse pool) goes through :func:`iter_jsonl`,
which reads bytes, splits at ``b"\\n"`` only, streams (one line in memory at a time: linear time, constant
memory per line) and names a line that is not JSON by file and line number. Writers may keep
``ensure_ascii=False``. ``tests/test_jsonl.py`` greps the package for any other way of splitting JSONL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["BadLine", "iter_jsonl", "read_jsonl", "tail_jsonl"]


@dataclass(frozen=True)
class BadLine:
    """A line of a JSONL file that is not one JSON value: where it is and why.

    Attributes:
        path: the file.
        number: the line's number (1-based, blank lines counted).
        reason: what the JSON parser said, or that the file ends inside the line.
    """

    path: Path
    number: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.number}: not a JSON line ({self.reason})"


def iter_jsonl(
    path: Path | str, bad: list[BadLine] | None = None, errors: str = "replace"
) -> Iterator[tuple[int, Any]]:
    """Each JSON value of a JSONL file with its line number; blank lines are passed over.

    Bytes that are not UTF-8 are read as U+FFFD (shown, never dropped: a model's output is kept whatever it
    holds); ``\\r`` before a line's ``\\n`` is white space to the JSON parser.

    Args:
        path: the file.
        bad: where a line that is not JSON goes (the caller counts it, and goes on); None: such a line
            raises.
        errors: how bytes that are not UTF-8 are decoded: ``"replace"`` (U+FFFD), or ``"strict"`` for an
            input that must be text (a corpus), where such a line is a bad line.

    Raises:
        ConfigError: a line that is not JSON (``bad`` None), naming the file and line.
        OSError: the file cannot be opened.
    """
    path = Path(path)
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8", errors=errors))
            except ValueError as exc:
                reason = str(exc) if raw.endswith(b"\n") else f"the file ends inside it: {exc}"
                line = BadLine(path, number, reason)
                if bad is None:
                    raise ConfigError(str(line)) from None
                bad.append(line)
                continue
            yield number, value


def read_jsonl(path: Path | str, bad: list[BadLine] | None = None) -> list[Any]:
    """Every JSON value of a JSONL file, in order (:func:`iter_jsonl` without the line numbers).

    Args:
        path: the file.
        bad: where a line that is not JSON goes; None: such a line raises.

    Raises:
        ConfigError: a line that is not JSON (``bad`` None), naming the file and line.
        OSError: the file cannot be opened.
    """
    return [value for _, value in iter_jsonl(path, bad)]


def tail_jsonl(path: Path | str, offset: int = 0) -> tuple[list[Any], int]:
    """The JSON values of the whole lines a growing JSONL file holds from byte ``offset`` on, and where they end.

    Why: a display that rereads a log a writer is appending to a few times a second reads only what is
    new (the returned offset is the next call's); a last line not yet ended by ``"\\n"`` waits for the next
    call. A line that is not JSON is passed over (a display never stops on one).

    Args:
        path: the file (a missing file holds nothing).
        offset: where the previous call ended (0: the start).
    """
    try:
        with Path(path).open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    values = []
    for raw in data[:end].split(b"\n"):
        if raw.strip():
            try:
                values.append(json.loads(raw.decode("utf-8", errors="replace")))
            except ValueError:
                continue
    return values, offset + end
