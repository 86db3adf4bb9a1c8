"""OpenCompass's prediction files, written and read a sample at a time.

OpenCompass's ``GenInferencer`` keeps every sample of its task in one dict, appends each batch to
``tmp_<abbr>.jsonl`` (one ``{"idx": "0", "origin_prompt": ..., "prediction": ..., "gold": ...}`` line
per sample, for a resume) and at the end writes ``<abbr>.json`` with one ``json.dump(..., indent=4,
ensure_ascii=False)`` of the dict; its eval task ``json.load``s that file whole. Every sample holds its
whole prompt, so both tasks' memory grows with their shard: gigabytes for a 1000k shard.

These helpers produce and read the same files with one sample in memory at a time:

* :class:`PredictionLog` restores and appends the ``tmp_`` file as OpenCompass's output handler does,
  keeping only where each sample's line starts;
* :class:`PredictionFile` writes ``<abbr>.json`` as the samples come, byte for byte what ``json.dump`` of
  the dict writes (``tests/test_inferencer.py``), and renames it into place when the task ends;
* :func:`iter_prediction_file` reads a prediction file (any JSON object) one top-level entry at a time,
  in time linear in its size;
* :func:`prompt_digest` is what an entry keeps of its prompt under ``runtime(prompts="digest")``
  (:func:`digested_entry`), and what a re-plan matches carried answers by (:func:`entry_digest`);
* :func:`looks_whole` tells a finished prediction file from one a kill or a full disk cut short without
  reading it (the indent-4 layout ends with a line holding only ``}``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = [
    "PROMPT_KEY",
    "PredictionLog",
    "PredictionFile",
    "dataset_prediction_files",
    "digested_entry",
    "entry_digest",
    "prompt_digest",
    "iter_prediction_file",
    "looks_whole",
    "entry_text",
]

log = logging.getLogger(__name__)

PROMPT_KEY = "origin_prompt"  # an entry's prompt as the model was sent it (OpenCompass's key)
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 22  # characters read at a time


def dataset_prediction_files(filename: str) -> list[str]:
    """A dataset's prediction files, as OpenCompass's eval task finds them: ``<abbr>.json`` where it exists,
    else the parts ``<abbr>_0.json``, ``<abbr>_1.json``, ... while they exist (none: an empty list).

    Args:
        filename: the dataset's whole prediction file (``get_infer_output_path``'s).
    """
    if os.path.exists(os.path.realpath(filename)):
        return [filename]
    root, ext = os.path.splitext(filename)
    files: list[str] = []
    while os.path.exists(os.path.realpath(f"{root}_{len(files)}{ext}")):
        files.append(f"{root}_{len(files)}{ext}")
    return files


# A lone surrogate (a server's "\\ud800" escape decodes to one) has no UTF-8 form: writing it would end the
# task and lose its samples. "backslashreplace" writes it as the very JSON escape it came as (it only occurs
# inside a JSON string), so the line stays UTF-8 JSON and reads back the same text.
LONE_SURROGATES = "backslashreplace"


def entry_text(key: Any, value: Any) -> str:
    """One ``"key": value`` entry as ``json.dump(dict, indent=4, ensure_ascii=False)`` writes it inside the dict.

    ``json.dumps`` of a one-entry dict with the same settings, less its opening ``{\\n`` and closing ``\\n}``:
    the encoder indents an entry by its depth only, so the text is the same wherever the entry stands.

    Args:
        key: the entry's key (OpenCompass's sample index as a string).
        value: the sample's dict.
    """
    return json.dumps({key: value}, indent=4, ensure_ascii=False)[2:-2]


class PredictionLog:
    """``tmp_<abbr>.jsonl``: the samples predicted so far, restored and appended a line at a time.

    Holds each sample's key and the offset of its line (the last line wins, at the place of the first,
    as a dict restored from the file has it), never a prompt.

    Args:
        path: the ``tmp_<abbr>.jsonl`` file (it need not exist).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.offsets: dict[Any, int] = {}

    @classmethod
    def of(cls, prediction_file: Path | str) -> PredictionLog:
        """The log of a prediction file (``<folder>/<abbr>.json`` -> ``<folder>/tmp_<abbr>.jsonl``).

        Args:
            prediction_file: the prediction file the log is written for.
        """
        path = Path(prediction_file)
        return cls(path.with_name("tmp_" + path.with_suffix(".jsonl").name))

    def restore(self) -> int:
        """Read the file left by an earlier run of the task, as OpenCompass's ``restore_from_jsonl`` does.

        A file with a line that is not JSON is moved aside to ``<name>.bak`` and nothing is restored,
        as OpenCompass does (``resume.py`` cuts such a file back to its whole lines before a resume).
        Unlike OpenCompass's, lines are split at ``\\n`` only: a prompt or answer holding U+2028 or another
        character ``str.splitlines`` breaks at does not make the whole file unreadable.

        Returns:
            The number of samples restored: the task goes on from the next one.
        """
        self.offsets = {}
        if not self.path.exists():
            return 0
        offsets: dict[Any, int] = {}
        try:
            with self.path.open("rb") as fh:
                at = 0
                for line in fh:
                    if line.strip():
                        offsets[json.loads(line)["idx"]] = at
                    at += len(line)
        except (ValueError, KeyError, TypeError, AttributeError):
            backup = self.path.with_name(self.path.name + ".bak")
            shutil.move(self.path, backup)
            log.warning(f"Failed to load {self.path}, move to {backup} to avoid error.")
            return 0
        self.offsets = offsets
        return len(offsets)

    def append(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        """Append one batch's samples, one line each, in one write (as OpenCompass's ``write_to_jsonl``).

        Args:
            entries: ``(key, sample dict)`` pairs in order.
        """
        lines = [
            (key, (json.dumps({"idx": key, **value}, ensure_ascii=False) + "\n").encode("utf-8", LONE_SURROGATES))
            for key, value in entries
        ]
        if not lines:
            return
        with self.path.open("ab") as fh:
            at = fh.tell()
            for key, line in lines:
                self.offsets[key] = at  # a key seen before keeps its place (a dict's update)
                at += len(line)
            fh.write(b"".join(line for _, line in lines))

    def samples(self) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Each sample's ``(key, dict)`` in the order of the dict OpenCompass would hold, read back one at a time."""
        if not self.offsets:
            return
        with self.path.open("rb") as fh:
            for key, at in self.offsets.items():
                fh.seek(at)
                value = json.loads(fh.readline())
                value.pop("idx")
                yield key, value

    def write_json(self, target: Path | str) -> list[Any]:
        """Write ``<abbr>.json`` from this file alone (re-reading every sample), atomically.

        Args:
            target: the prediction file.

        Returns:
            Every sample's prediction, in order (what OpenCompass's ``inference`` returns).
        """
        out = PredictionFile(target)
        out.extend(self.samples())
        return out.finish()


class PredictionFile:
    """``<abbr>.json`` written as the samples come: the bytes ``json.dump(results, indent=4, ensure_ascii=False)``
    writes at the end of OpenCompass's task.

    The entries go to ``.<abbr>.json.part`` beside it, which :meth:`finish` closes and renames into place
    (never a file that looks finished before it is); a resumed task starts that file again. Each sample is
    encoded once, as OpenCompass encodes it at the end, and never read back. A key written twice (possible
    only in a ``tmp_`` file written by hand) makes the entries no longer the dict's: :attr:`whole` turns false
    and the caller writes the file from the log (:meth:`PredictionLog.write_json`) instead.

    Args:
        target: the prediction file.
    """

    def __init__(self, target: Path | str) -> None:
        self.target = Path(target)
        self.part = self.target.with_name(f".{self.target.name}.part")
        self.part.parent.mkdir(parents=True, exist_ok=True)
        self._out: IO[str] | None = self.part.open("w", encoding="utf-8", errors=LONE_SURROGATES)
        self._keys: set[Any] = set()
        self.predictions: list[Any] = []
        self.whole = True

    def extend(self, samples: Iterable[tuple[Any, dict[str, Any]]]) -> None:
        """Write these samples' entries.

        Args:
            samples: ``(key, sample dict)`` pairs in order.
        """
        assert self._out is not None, "finished"
        for key, value in samples:
            if key in self._keys:
                self.whole = False
            self._keys.add(key)
            self._out.write((",\n" if self.predictions else "{\n") + entry_text(key, value))
            self.predictions.append(value.get("prediction"))

    def finish(self) -> list[Any]:
        """Close the object, make the file durable and rename it into place.

        Returns:
            Every sample's prediction, in order (what OpenCompass's ``inference`` returns).
        """
        assert self._out is not None, "finished twice"
        out, self._out = self._out, None
        try:
            out.write("\n}" if self.predictions else "{}")
            out.flush()
            os.fsync(out.fileno())
        finally:
            out.close()
        os.replace(self.part, self.target)
        return self.predictions

    def discard(self) -> None:
        """Close and remove the partial file (the caller writes the prediction file another way)."""
        if self._out is not None:
            self._out.close()
            self._out = None
        self.part.unlink(missing_ok=True)


class _Reader:
    """JSON values read one after another from a text file: only what one value needs is held."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False

    def _more(self, at_least: int) -> None:
        """Drop what was parsed and read at least ``at_least`` more characters (or to the end)."""
        self.buf = self.buf[self.pos :]
        self.pos = 0
        data = self.fh.read(max(_CHUNK, at_least))
        self.eof = not data
        self.buf += data

    def peek(self) -> str:
        """The next character that is not white space; ``""`` at the end of the file."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self._more(0)

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at character {self.pos} of this chunk, found {self.peek()!r}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value. Where the text read so far ends inside it, the unparsed part is read again
        with at least as much more text: each value is parsed O(1) times over, so reading stays linear."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
                if end < len(self.buf) or self.eof:  # a number may go on in the next chunk
                    self.pos = end
                    return value
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")
                if self.eof or not cut:
                    raise
            self._more(len(self.buf) - self.pos)


def iter_prediction_file(path: Path | str) -> Iterator[tuple[str, Any]]:
    """The ``(key, value)`` entries of a JSON object file, read one at a time (a prediction file's samples).

    Args:
        path: the file.

    Raises:
        ValueError: the file is not one whole JSON object (a ``json.JSONDecodeError`` where its JSON breaks).
    """
    with Path(path).open(encoding="utf-8") as fh:
        reader = _Reader(fh)
        reader.expect("{")
        if reader.peek() == "}":
            reader.pos += 1
        else:
            while True:
                key = reader.value()
                if not isinstance(key, str):
                    raise ValueError(f"{path}: a key that is not a string: {key!r}")
                reader.expect(":")
                yield key, reader.value()
                if reader.peek() == ",":
                    reader.pos += 1
                    continue
                reader.expect("}")
                break
        if reader.peek():
            raise ValueError(f"{path}: text after the JSON object")


def looks_whole(path: Path | str) -> bool:
    """Whether a prediction file is whole, judged from its last bytes, or by reading it where they do not say.

    ``json.dump(..., indent=4)`` ends the file with a ``}`` at the start of a line, where every other ``}`` is
    indented and a line break never stands inside a JSON string, so a file cut short anywhere ends otherwise. Files written another way
    (no indent) are read through (:func:`iter_prediction_file`, one entry in memory at a time).

    Args:
        path: the prediction file.
    """
    path = Path(path)
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 2))
        tail = fh.read()
        fh.seek(0)
        head = fh.read(7)
    if (tail == b"\n}" and head == b'{\n    "') or (head == b"{}" and size == 2):
        return True
    try:
        for _ in iter_prediction_file(path):
            pass
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def prompt_digest(prompt: Any) -> str:
    """The digest of a prompt as the model was sent it (OpenCompass's ``origin_prompt``: text or messages).

    Each string's bytes (ASCII, or UTF-16-LE where it has other characters: both canonical, and cheap to
    make from Python's own storage of a string) go into the hash as they are, behind a type tag and their
    length, so a 4 MB prompt costs one copy and one SHA-256 pass (a JSON dump of it first cost 18 ms at 1000k).
    The digest is the same for the rendered prompt and for the prompt read back from a prediction file:
    lists and tuples are alike, keys are hashed as the strings JSON makes them, and a value JSON cannot
    hold is hashed as the string OpenCompass's dump writes for it.

    Args:
        prompt: the rendered prompt, as the prediction file stores it.
    """
    digest = hashlib.sha256()
    _hash_into(digest, prompt)
    return digest.hexdigest()


def _hash_into(digest: Any, value: Any) -> None:
    if isinstance(value, str):  # ASCII as its bytes, else UTF-16-LE: a fifth of UTF-8's encoding time for CJK text
        data = value.encode("ascii") if value.isascii() else value.encode("utf-16-le", "surrogatepass")
        digest.update(b"s%d:" % len(data))
        digest.update(data)
    elif isinstance(value, Mapping):
        digest.update(b"d%d:" % len(value))
        for key in sorted(value, key=_json_key):
            _hash_into(digest, _json_key(key))
            _hash_into(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(b"l%d:" % len(value))
        for item in value:
            _hash_into(digest, item)
    elif value is None or isinstance(value, (bool, int, float)):
        digest.update(b"j%s;" % json.dumps(value).encode("ascii"))
    else:  # what a dump with default=str writes
        _hash_into(digest, str(value))


def _json_key(key: Any) -> str:
    """A mapping key as JSON writes it (``1`` -> ``"1"``, ``True`` -> ``"true"``, ``None`` -> ``"null"``)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return str(key)


def digested_entry(entry: Mapping[str, Any], sample_id: str) -> dict[str, Any]:
    """A prediction entry with its prompt kept as a digest and the sample's id (``runtime(prompts="digest")``).

    ``origin_prompt`` gives way to ``prompt_digest`` and ``sample_id`` at its place; every other key stays
    as OpenCompass's output handler wrote it. The prompt itself is the dataset cache's row ``sample_id``
    rendered by the model's template, and its digest tells whether a later rendering is the same prompt.

    Args:
        entry: the entry as OpenCompass's ``GenInferencerOutputHandler`` makes it.
        sample_id: the sample's ``id`` in the dataset.
    """
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key == PROMPT_KEY:
            out["prompt_digest"] = prompt_digest(value)
            out["sample_id"] = sample_id
        else:
            out[key] = value
    return out


def entry_digest(entry: Mapping[str, Any]) -> str:
    """The digest of the prompt a saved prediction entry was asked with, kept as text or as a digest.

    Args:
        entry: a prediction file's entry.
    """
    return entry["prompt_digest"] if "prompt_digest" in entry else prompt_digest(entry[PROMPT_KEY])
