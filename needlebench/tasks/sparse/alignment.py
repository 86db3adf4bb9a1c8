"""How our sparse samples line up with OpenCompass's: its config entries, its rows, and the listed fixes.

OpenCompass builds S-RT, M-RT and M-RS from one config entry per cell (``needlebench_v2`` and ``needlebench``
configs); this module names which of ours answer an entry (``ours_for_cells``), how a row's answer column
reads ours (``opencompass_answer``), and why a prompt of ours differs from the one OpenCompass built
(``Explainer``): each listed fix is applied to OpenCompass's own output (its token list, or its loader run
again), never taken from our generator, so a difference no fix explains stays ``UNATTRIBUTED``.
``needlebench parity`` (``parity.py``) runs OpenCompass's loaders and hands the rows here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...context.tokenizer import get_encoding
from ...jsonl import read_jsonl
from ..registry import get_task, make_params

__all__ = [
    "CONFIG_FILES",
    "LOADER_FILES",
    "Explainer",
    "UNATTRIBUTED",
    "WrappingRandom",
    "describe_cell",
    "opencompass_answer",
    "ours_for_cells",
    "rebuild_split",
    "row_key",
    "sample_cells",
]

# each task's OpenCompass config file, as ``needlebench[_v2]_{name}_{suite}.py`` names it
CONFIG_FILES = {"srt": "single", "mrt": "multi_retrieval", "mrs": "multi_reasoning"}
# what OpenCompass's loader of each task opens beside the corpus files, per profile (v2's M-RS draws its names
# from names.json, v1's reads the multi-hop records): `needlebench parity` checks a data folder holds them
LOADER_FILES = {
    ("v1", "srt"): ("needles.jsonl",),
    ("v1", "mrt"): ("needles.jsonl",),
    ("v1", "mrs"): ("multi_needle_reasoning_en.json", "multi_needle_reasoning_zh.json"),
    ("v2", "srt"): ("needles.jsonl",),
    ("v2", "mrt"): ("needles.jsonl",),
    ("v2", "mrs"): ("names.json",),
}
UNATTRIBUTED = "UNATTRIBUTED"
# an OpenCompass run of a cell again: (its config entry, another data folder or None, a generator or None) -> rows
Rerun = Callable[[dict, "Path | None", "random.Random | None"], list[tuple]]


class WrappingRandom(random.Random):
    """OpenCompass's generator for a corpus file holding its documents twice: the first copy shuffled as the
    documents alone are, the second following in that order (the loader then reads that order again).

    Args:
        docs: the documents in the file once.
    """

    def __init__(self, docs: int) -> None:
        super().__init__(0)
        self.docs = docs

    def shuffle(self, x: list) -> None:  # type: ignore[override]
        if len(x) != 2 * self.docs:
            super().shuffle(x)
            return
        head = x[: self.docs]
        super().shuffle(head)
        x[:] = head + head


def _is_word(ch: str) -> bool:
    cjk = ("\u2e80" <= ch <= "\u9fff") or ("\uf900" <= ch <= "\ufaff") or ("\uff00" <= ch <= "\uffef")
    return ch.isalnum() and not cjk and not ("\u3040" <= ch <= "\u30ff") and not ("\uac00" <= ch <= "\ud7af")


def _splits(data: bytes, off: int) -> bool:
    """Whether a cut at byte ``off`` falls inside a character or a word."""
    if off <= 0 or off >= len(data):
        return False
    if data[off] & 0xC0 == 0x80:
        return True
    left = data[max(0, off - 4) : off].decode("utf-8", errors="ignore")[-1:]
    right = data[off : off + 4].decode("utf-8", errors="ignore")[:1]
    return bool(left and right) and _is_word(left) and _is_word(right)


def _find(tokens: Sequence[int], part: Sequence[int], start: int) -> int:
    """The first index >= ``start`` where ``part`` occurs in ``tokens`` (linear: a window compared per match
    of its first token)."""
    first, n = part[0], len(part)
    for i in range(start, len(tokens) - n + 1):
        if tokens[i] == first and list(tokens[i : i + n]) == list(part):
            return i
    raise LookupError("needle tokens not found in OpenCompass's token list")


def rebuild_split(tokens: Sequence[int], needle_texts: Sequence[str]) -> tuple[str, list[int]]:
    """OpenCompass's context with the ``split`` fix applied: each needle moved to the nearest token boundary that
    splits neither a word nor a character.

    Args:
        tokens: the token list OpenCompass decoded the context from.
        needle_texts: the needles' texts as inserted, in their order in the context.

    Returns:
        (the fixed context, how many tokens each needle moved, in order).
    """
    enc = get_encoding("cl100k_base")
    parts = [enc.encode(t) for t in needle_texts]
    hay: list[int] = []
    points: list[int] = []
    cursor = 0
    for part in parts:
        at = _find(tokens, part, cursor)
        hay += tokens[cursor:at]
        points.append(len(hay))
        cursor = at + len(part)
    hay += tokens[cursor:]
    pieces = enc.decode_tokens_bytes(hay)
    ends = [0, *itertools.accumulate(len(x) for x in pieces)]
    data = b"".join(pieces)
    moved = []
    for k in points:
        best = k
        for step in range(len(hay) + 1):
            hits = [c for c in (k - step, k + step) if 0 <= c <= len(hay) and not _splits(data, ends[c])]
            if hits:
                best = hits[0]
                break
        moved.append(best)
    out = b""
    last = 0
    for k, text in sorted(zip(moved, needle_texts, strict=True), key=lambda x: x[0]):
        out += data[ends[last] : ends[k]] + text.encode()
        last = k
    out += data[ends[last] :]
    return out.decode("utf-8", errors="replace"), [abs(m - k) for m, k in zip(moved, points, strict=True)]


def needle_texts(task: str, sample: Any) -> list[str]:
    """The needles' texts as inserted into the context, in their order there."""
    if task == "srt":
        return [f"\n{sample.gold['needle']}\n"]
    if task == "mrt":
        return [f"\n{n['needle']}\n" for n in sample.gold["needles"]]
    return [f"\n{t}\n" for t in sample.meta["statements"]]  # the chain's statements, in presented order


def opencompass_answer(profile: str, task: str, sample: Any) -> str:
    """Our gold in OpenCompass's answer-column form (its row's ``answer``).

    Args:
        profile: ``v2`` or ``v1``.
        task: the sample's task.
        sample: our sample.
    """
    gold = sample.gold
    if task == "srt":
        return f"\n{gold['needle']}\n*{gold['keywords'][0]}"
    if task == "mrt":
        needles = gold["needles"]
        return "*".join(n["keywords"][0] for n in needles) + "#" + "*".join(str(n["depth"]) for n in needles)
    if profile == "v1":
        return f"{gold['keywords'][0]}*{gold['keywords'][0]}"
    return gold["answer"]


def row_key(task: str, meta: dict, repeat: int | None = None) -> tuple:
    """A sample's place in its cell (length, depth, needles, repeat: what the task's cells have), from our
    metadata or from a config entry and the row's repeat.

    Args:
        task: the task.
        meta: the sample's metadata, or a config entry.
        repeat: the row's repeat, where ``meta`` is a config entry.
    """
    rep = meta["repeat"] if repeat is None else repeat
    if task == "srt":
        return (meta["length"], meta["depth"], rep)
    if task == "mrt":
        return (meta["length"], rep)
    return (meta["length"], meta["depth"], meta["num_needles"], rep)


def question_position(profile: str, cell: dict) -> str:
    """The question's position as the config entry gives it (v2 spells its key ``quesiton_position``)."""
    return str(cell.get("quesiton_position" if profile == "v2" else "position", "End"))


def ours_for_cells(profile: str, task: str, lang: str, cells: list[dict], repeats: int) -> dict[tuple, Any]:
    """Our samples of OpenCompass's config entries, generated from the same files (``corpus="opencompass"``).

    Args:
        profile: ``v2`` or ``v1`` (how the entries spell their settings).
        task: the task.
        lang: the entries' language.
        cells: config entries of one language and buffer.
        repeats: samples per cell.

    Returns:
        Our samples by :func:`row_key`.
    """
    first = cells[0]
    kwargs: dict[str, Any] = {
        "lang": lang,
        "lengths": tuple(sorted({c["length"] for c in cells})),
        "repeats": repeats,
        "buffer": first["length_buffer"],
        "corpus": "opencompass",
        "question_position": question_position(profile, first).lower(),
        "profile": profile,
    }
    if profile == "v1":
        kwargs["recall_step"] = first["guide"]
    kwargs["depths"] = tuple(first["depths"]) if task == "mrt" else tuple(sorted({c["depth"] for c in cells}))
    if task == "mrs":
        kwargs["num_needles"] = tuple(sorted({c["num_needles"] for c in cells}))
    wanted = {row_key(task, c, r) for c in cells for r in range(repeats)} if task != "mrt" else None
    out = {}
    for s in get_task(task).generate(make_params(task, **kwargs)):
        key = row_key(task, s.meta)
        if wanted is None or key in wanted:
            out[key] = s
    return out


class Explainer:
    """Why our prompt differs from OpenCompass's: ``identical`` (``seeded`` for M-RT), the listed fixes, or
    ``UNATTRIBUTED``.

    Args:
        task: the task.
        profile: ``v2`` or ``v1``.
        rerun: OpenCompass's loader on a config entry again (another data folder, another generator).
        folder: the data folder its loader read.
        wrapped: the same files, each corpus file holding its documents twice (``wrap``).
        short_cells: v2 only: the entries of OpenCompass's own 4k suite config (``buffer_shrink``).
    """

    def __init__(
        self, task: str, profile: str, rerun: Rerun, folder: Path, wrapped: Path, short_cells: Sequence[dict] = ()
    ) -> None:
        self.task, self.profile, self.rerun, self.folder, self.wrapped = task, profile, rerun, folder, wrapped
        self.short_cells = list(short_cells)
        self.moves: tuple[int, ...] = ()

    def _short_suite_cell(self, cell: dict) -> dict | None:
        keys = ("language", "length", "depth", "num_needles", "depths", "diff")
        same = [c for c in self.short_cells if all(c.get(k) == cell.get(k) for k in keys)]
        return {**same[0], "quesiton_position": question_position("v2", cell)} if len(same) == 1 else None

    def __call__(self, cell: dict, built: tuple, mine: Any) -> tuple[str, tuple[int, ...]]:
        """The tag, and under ``split`` how many tokens each needle moved.

        Args:
            cell: the config entry.
            built: OpenCompass's row: (prompt, answer, decoded tokens, built as a tuple).
            mine: our sample of it.
        """
        tag = self._explain(cell, built, mine)
        return tag, (self.moves if "split" in tag.split("+") else ())

    def _explain(self, cell: dict, built: tuple, mine: Any) -> str:
        self.moves = ()
        prompt, _, tokens, tupled = built
        tags = {"start_tuple"} if tupled else set()
        if mine.prompt == prompt:
            return "+".join(sorted(tags)) or ("seeded" if self.task == "mrt" else "identical")
        enc = get_encoding("cl100k_base")
        texts = needle_texts(self.task, mine)
        repeat = mine.meta["repeat"]
        if mine.meta.get("buffer_shrunk"):
            rerun = (
                self._short_suite_cell(cell) if self.profile == "v2" else {**cell, "length_buffer": mine.meta["buffer"]}
            )
            if rerun is None:
                return UNATTRIBUTED
            prompt, _, tokens, _ = self.rerun({**rerun, "num_repeats_per_file": repeat + 1}, None, None)[repeat]
            tags.add("buffer_shrink")
        if mine.prompt != prompt and self.profile == "v2":
            if len(tokens) - sum(len(enc.encode(t)) for t in texts) < mine.meta.get("haystack_tokens", 0):
                docs = len(read_jsonl(self.folder / cell["file_list"][0]))  # the loader's documents, a line each
                again = {**cell, "num_repeats_per_file": repeat + 1}
                prompt, _, tokens, _ = self.rerun(again, self.wrapped, WrappingRandom(docs))[repeat]
                tags.add("wrap")
        if mine.prompt != prompt:
            try:
                fixed, moves = rebuild_split(tokens, texts)
            except LookupError:
                return UNATTRIBUTED
            self.moves = tuple(moves)
            if any(moves):
                tags.add("split")
            prompt = prompt.replace(enc.decode(tokens), fixed, 1)
        if mine.prompt != prompt or not tags - {"start_tuple"}:
            return UNATTRIBUTED
        return "+".join(sorted(tags))


def sample_cells(cells: list[dict], task: str, every: bool) -> list[dict]:
    """A few cells per length, depth and task: each length once, the depths taken in turn across lengths (M-RS:
    its needle counts in turn too); ``every``: all of them.

    Args:
        cells: a task's config entries of one language.
        task: the task.
        every: keep them all.
    """
    if every:
        return cells
    lengths = sorted({c["length"] for c in cells})
    if task == "mrt":
        return [next(c for c in cells if c["length"] == n) for n in lengths]
    depths = sorted({c.get("depth") for c in cells})
    counts = sorted({c.get("num_needles") for c in cells}, key=lambda x: (x is None, x))
    out = []
    for i, n in enumerate(lengths):
        want = (depths[i % len(depths)], counts[i % len(counts)])
        pick = [c for c in cells if c["length"] == n and (c.get("depth"), c.get("num_needles")) == want]
        out += pick[:1] or [c for c in cells if c["length"] == n][:1]
    return out


def describe_cell(task: str, cell: dict, repeat: int | None, profile: str) -> str:
    """A cell's coordinates, as a reader finds them in OpenCompass's config.

    Args:
        task: the task.
        cell: its config entry.
        repeat: the row's repeat, if one row is meant.
        profile: ``v2`` or ``v1``.
    """
    parts = [f"length {cell['length']}"]
    if task != "mrt":
        parts.append(f"depth {cell['depth']}")
    if task == "mrs":
        parts.append(f"needles {cell['num_needles']}")
    parts.append(f"position {question_position(profile, cell)}")
    if repeat is not None:
        parts.append(f"repeat {repeat}")
    return ", ".join(parts)
