"""Needle banks: fictional facts with their question, answer format and keywords.

Loading (I/O) happens once; picking needles for a sample is a pure function
of the bank, the sample's coordinates and the suite seed.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from ...files import file_version
from ...seeding import rng
from .prompts import reference_retrieval_question

__all__ = [
    "Needle",
    "NeedleBank",
    "load_needle_bank",
    "pick_needles",
    "reference_needle",
    "reference_needle_set",
]


@dataclass(frozen=True)
class Needle:
    """A fictional fact with its question, answer format and the keywords a right answer contains."""

    id: str
    lang: str
    text: str
    question: str
    answer_format: str
    keywords: tuple[str, ...]
    retrieval_question: str = ""  # OpenCompass's one-line form: question, then answer format
    arg1: str = ""  # OpenCompass's ``arg1`` (M-RT keeps needles with distinct arg1 and arg2)
    line: int = 0  # 0-based line of the file it came from

    @property
    def reference_question(self) -> str:
        """The question as OpenCompass's ``needles.jsonl`` words it (built from ours when absent)."""
        return self.retrieval_question or reference_retrieval_question(self.lang, self.question, self.answer_format)


@dataclass(frozen=True)
class NeedleBank:
    """The needles of one file, in file order, and the file they came from."""

    source: str
    needles: tuple[Needle, ...]
    lines: int = 0  # lines of the file, blank ones included (OpenCompass shuffles them all)

    def for_lang(self, lang: str) -> tuple[Needle, ...]:
        """The bank's needles of one language, in file order.

        Args:
            lang: ``"en"`` or ``"zh"``.
        """
        return tuple(n for n in self.needles if n.lang == lang)


_OC_LANG = {"English": "en", "Chinese": "zh"}


def _parse(row: dict, path: Path, lineno: int) -> Needle:
    """Our format, or OpenCompass's needles.jsonl (needle, retrieval_question, arg2, language)."""
    try:
        if "retrieval_question" in row:
            lang = _OC_LANG.get(row["language"], row["language"])
            question = row["retrieval_question"]
            fmt = question.split("'")[1] if question.count("'") >= 2 else ""
            ask = question.split("'")[0] if fmt else question
            for marker in ("Please answer in the format of", "Please answer in the format", "请按照"):
                ask = ask.split(marker)[0]
            return Needle(
                f"oc-{lineno:04d}",
                lang,
                row["needle"],  # verbatim: OpenCompass inserts "\n" + needle + "\n"
                ask.strip(),
                fmt,
                (str(row["arg2"]),),
                question,
                str(row.get("arg1", "")),
                lineno - 1,
            )
        keywords = tuple(str(k) for k in row["keywords"])
        if not keywords or not all(keywords):
            raise ValueError("empty keywords")
        return Needle(
            str(row["id"]),
            row["lang"],
            row["needle"].strip(),
            row["question"].strip(),
            row.get("answer_format", "").strip(),
            keywords,
            arg1=str(row["id"]),
            line=lineno - 1,
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ConfigError(f"needle file {path} line {lineno}: bad needle record ({exc})") from exc


def load_needle_bank(path: str | Path) -> NeedleBank:
    """Read a needle file (JSON lines), checking every record; once per process and version of the file.

    Why the version (size and modification time) is part of the memo: the dataset cache keys a file's rows by
    the needle file's content, so a file edited while a process lives must not be served from its old reading
    (the rows would be cached under the new content's key).

    Args:
        path: the needle file.
    """
    return _read_needle_bank(os.path.abspath(path), file_version(path))


@functools.lru_cache(maxsize=16)
def _read_needle_bank(name: str, version: tuple[int, int]) -> NeedleBank:
    """:func:`load_needle_bank`'s reading, memoised per file (absolute: ``./data`` under another working folder
    is another file) and version."""
    path = Path(name)
    try:
        # split as Python's readlines() splits (OpenCompass's M-RT shuffles exactly those lines)
        lines = io.StringIO(path.read_text(encoding="utf-8")).readlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"needle_file: cannot read {path}: {exc}") from exc
    needles = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"needle file {path} line {lineno}: not JSON ({exc})") from exc
        needles.append(_parse(row, path, lineno))
    if not needles:
        raise ConfigError(f"needle_file: {path} holds no needles")
    return NeedleBank(str(path), tuple(needles), len(lines))


load_needle_bank.cache_clear = _read_needle_bank.cache_clear  # type: ignore[attr-defined]  # parity's scratch folder


def pick_needles(pool: tuple[Needle, ...], count: int, *coords: object) -> tuple[Needle, ...]:
    """``count`` distinct needles with distinct keywords, chosen by the coordinates' seed.

    Why distinct keywords: one keyword in the answer must never count for two needles.

    Args:
        pool: the language's needles.
        count: how many to pick.
        coords: the sample's coordinates (with the seed); the draw derives from them.

    Raises:
        ConfigError: the pool holds too few needles, or too few with distinct keywords.
    """
    if count > len(pool):
        raise ConfigError(f"num_needles={count} but the needle bank has only {len(pool)} for this language")
    order = list(range(len(pool)))
    rng("needles", *coords).shuffle(order)
    chosen: list[Needle] = []
    seen: set[str] = set()
    for i in order:
        needle = pool[i]
        keys = {k.casefold() for k in needle.keywords}
        if keys & seen:
            continue
        chosen.append(needle)
        seen |= keys
        if len(chosen) == count:
            return tuple(chosen)
    raise ConfigError(f"num_needles={count}: the needle bank has too few needles with distinct keywords")


def reference_needle(pool: tuple[Needle, ...], repeat: int) -> Needle:
    """S-RT's needle for a repeat as OpenCompass draws it: ``Random(repeat).choice`` over the language's needles.

    One needle per repeat for the whole suite (every length and depth), in file order.

    Args:
        pool: the language's needles, in file order.
        repeat: the repeat number (OpenCompass's ``counter``).
    """
    return random.Random(repeat).choice(pool)


def reference_needle_set(bank: NeedleBank, lang: str, count: int, seed: int) -> tuple[Needle, ...]:
    """M-RT's fixed needle set: OpenCompass's ``get_unique_entries``, seeded.

    OpenCompass shuffles every line of the needle file with the unseeded global generator, then keeps
    needles of the language whose ``arg1``, ``arg2`` and pair are all unseen, until ``count``; two
    processes disagree on the set. We run the same walk on ``random.Random(seed)`` (the listed fix).

    Args:
        bank: the needle file, with its line count.
        lang: ``"en"`` or ``"zh"``.
        count: needles wanted (OpenCompass: the number of depths).
        seed: the suite seed.

    Raises:
        ConfigError: the file holds fewer such needles than ``count``.
    """
    by_line = {n.line: n for n in bank.needles if n.lang == lang}
    order = list(range(max(bank.lines, len(bank.needles))))
    random.Random(seed).shuffle(order)
    chosen: list[Needle] = []
    seen_arg1: set[str] = set()
    seen_arg2: set[str] = set()
    for line in order:
        needle = by_line.get(line)
        if needle is None:
            continue
        arg2 = needle.keywords[0]
        if needle.arg1 in seen_arg1 or arg2 in seen_arg2:
            continue
        seen_arg1.add(needle.arg1)
        seen_arg2.add(arg2)
        chosen.append(needle)
        if len(chosen) == count:
            return tuple(chosen)
    raise ConfigError(f"num_needles={count}: {bank.source} has too few needles with distinct arg1 and arg2")
