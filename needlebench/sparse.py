"""The information-sparse tasks: S-RT and M-RT (M-RS lives in ``reasoning``).

One generator serves every sparse task: a task is a row of data (how many
needles, where, and how they are asked), not a function of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import ConfigError
from .haystack import Haystack, build_haystack, fit_prompt, load_tokenized, text_tokens
from .needles import Needle, default_needle_file, load_needle_bank, pick_needles
from .prompts import QUESTION_POSITIONS, sparse_prompt
from .sample import DATASET_VERSION, Sample, sample_id
from .tokenizer import get_encoding

__all__ = [
    "SparseParams",
    "SkipSample",
    "generate_srt",
    "generate_mrt",
    "validate_sparse",
    "haystack_for",
    "fill",
    "OVERLENGTH_POLICIES",
    "prefix_order",
]

LANGS = ("en", "zh")
OVERLENGTH_POLICIES = ("shorten", "skip")


class SkipSample(Exception):
    """A sample that cannot fit the model's context under the ``skip`` policy."""


@dataclass(frozen=True)
class SparseParams:
    """Everything that decides a sparse dataset's samples."""

    lang: str
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    repeats: int = 10
    buffer: int | dict[int, int] = 200
    seed: int = 0
    corpus: str = "packaged"
    needle_file: str = ""
    num_needles: tuple[int, ...] = ()
    question_position: str = "end"
    recall_step: bool = False
    encoding: str = "cl100k_base"
    min_fill: float = 0.25
    max_prompt_tokens: int = 0  # the model's room (max_seq_len - output budget); 0 = no limit
    overlength: str = "shorten"  # what to do with prompts over max_prompt_tokens
    extra: dict = field(default_factory=dict)

    def buffer_for(self, length: int) -> int:
        """A suite may give each length its own buffer (``{length: buffer}``)."""
        if isinstance(self.buffer, dict):
            value = self.buffer.get(length, self.buffer.get(str(length)))  # type: ignore[call-overload]
            if value is None:
                raise ConfigError(f"buffer: no buffer given for length {length}")
            return int(value)
        return int(self.buffer)


def validate_sparse(p: SparseParams) -> None:
    """Reject bad values with a message naming the field."""
    if p.lang not in LANGS:
        raise ConfigError(f"lang: unknown language {p.lang!r}; choose from {LANGS}")
    if not p.lengths:
        raise ConfigError("lengths: at least one length is needed")
    for d in p.depths:
        if not (isinstance(d, (int, float)) and 0 <= d <= 100):
            raise ConfigError(f"depths: {d!r} is outside 0..100")
    for L in p.lengths:
        if not isinstance(L, int) or isinstance(L, bool) or L <= 0:
            raise ConfigError(f"lengths: {L!r} is not a positive integer")
        buffer = p.buffer_for(L)
        if buffer < 0:
            raise ConfigError(f"buffer: {buffer} must not be negative")
        if L <= buffer:
            raise ConfigError(f"lengths: {L} is not larger than its buffer ({buffer})")
    if p.repeats < 1:
        raise ConfigError(f"repeats: {p.repeats} must be at least 1")
    if p.question_position not in QUESTION_POSITIONS:
        raise ConfigError(f"question_position: {p.question_position!r}; choose from {QUESTION_POSITIONS}")
    if p.overlength not in OVERLENGTH_POLICIES:
        raise ConfigError(f"overlength: {p.overlength!r}; choose from {OVERLENGTH_POLICIES}")
    if not 0 < p.min_fill < 1:
        raise ConfigError(f"min_fill: {p.min_fill} must be between 0 and 1")
    get_encoding(p.encoding)


def _bank(p: SparseParams) -> tuple[Needle, ...]:
    path = p.needle_file or str(default_needle_file(p.lang))
    pool = load_needle_bank(path).for_lang(p.lang)
    if not pool:
        raise ConfigError(f"needle_file: {path} has no needles for language {p.lang!r}")
    return pool


def prefix_order(values: tuple) -> list:
    """Longest and deepest first: each later prompt of a repeat finds its prefix already computed."""
    return sorted(values, reverse=True)


def haystack_for(p: SparseParams, repeat: int) -> Haystack:
    """A repeat's filler, shared by every task, length and depth of that repeat."""
    tc = load_tokenized(p.lang, p.corpus, p.encoding)
    return build_haystack(tc, max(p.lengths), "haystack", p.lang, repeat, p.seed)


def fill(
    p: SparseParams, hay: Haystack, length: int, head: str, tail: str, needles: list[tuple[float, str]]
) -> tuple[object, dict]:
    """Fit one prompt, shrinking the buffer (and saying so) if it would eat the haystack."""
    text = text_tokens(head, tail, needles, p.encoding)
    min_hay = math.ceil(p.min_fill * length)
    requested = p.buffer_for(length)
    buffer = min(requested, length - text - min_hay)
    if buffer < 0 and length - text >= math.ceil(0.1 * length):
        # many needles at a short length (M-RT, 11 needles at 1k): give the filler all that is left
        buffer = 0
    if buffer < 0:
        raise ConfigError(
            f"lengths: {length} is too short for this task's text ({text} tokens of "
            f"instructions, question and needles plus {min_hay} of filler)"
        )
    budget = length - buffer
    shortened_from = None
    if p.max_prompt_tokens and budget > p.max_prompt_tokens:
        # never cut the question or the needles: only the haystack gets shorter
        if p.overlength == "skip" or p.max_prompt_tokens - text < 1:
            raise SkipSample(f"length {length} needs {budget} tokens, the model has {p.max_prompt_tokens}")
        shortened_from, budget = budget, p.max_prompt_tokens
    fitted = fit_prompt(hay, budget, head, tail, needles, p.encoding, overhead=text)
    meta = {
        "length": length,
        "buffer": buffer,
        "buffer_requested": requested,
        "buffer_shrunk": buffer < requested,
        "prompt_tokens": fitted.tokens,
        "haystack_tokens": fitted.haystack_tokens,
        "corpus": hay.corpus_name,
        "encoding": p.encoding,
        "seed": p.seed,
        "version": DATASET_VERSION,
        "question_position": p.question_position,
        "recall_step": p.recall_step,
    }
    if shortened_from is not None:
        meta["shortened_from"] = shortened_from
    return fitted, meta


def generate_srt(p: SparseParams) -> Iterator[Sample]:
    """S-RT: one needle per (repeat, length), moved through every depth."""
    validate_sparse(p)
    pool = _bank(p)
    for repeat in range(p.repeats):
        hay = haystack_for(p, repeat)
        for length in prefix_order(p.lengths):
            (needle,) = pick_needles(pool, 1, "srt", p.lang, repeat, length, p.seed)
            parts = sparse_prompt(p.lang, [needle.question], [needle.answer_format], p.question_position, p.recall_step)
            for depth in prefix_order(p.depths):
                try:
                    fitted, meta = fill(p, hay, length, parts.head, parts.tail, [(depth, needle.text)])
                except SkipSample:
                    continue
                placement = fitted.placements[0]
                meta.update(
                    depth=depth,
                    realised_depth=placement.realised_depth,
                    repeat=repeat,
                    needles=[needle.id],
                )
                yield Sample(
                    id=sample_id("srt", p.lang, length, depth, repeat, digest=fitted.digest),
                    task="srt",
                    lang=p.lang,
                    prompt=fitted.text,
                    gold={"keywords": list(needle.keywords), "needle": needle.text},
                    meta=meta,
                )


def _spread(count: int) -> tuple[float, ...]:
    if count == 1:
        return (50.0,)
    return tuple(round(100.0 * i / (count - 1), 2) for i in range(count))


def generate_mrt(p: SparseParams) -> Iterator[Sample]:
    """M-RT: several distinct needles at distinct depths, all asked in one question.

    With ``num_needles`` unset there is one needle at each depth of the suite
    (OpenCompass v2); otherwise the needles are spread evenly from 0 to 100.
    """
    validate_sparse(p)
    pool = _bank(p)
    counts = p.num_needles or (len(p.depths),)
    for repeat in range(p.repeats):
        hay = haystack_for(p, repeat)
        for length in prefix_order(p.lengths):
            for count in counts:
                depths = tuple(p.depths) if count == len(p.depths) else _spread(count)
                needles = pick_needles(pool, count, "mrt", p.lang, repeat, length, count, p.seed)
                parts = sparse_prompt(
                    p.lang,
                    [n.question for n in needles],
                    [n.answer_format for n in needles],
                    p.question_position,
                    p.recall_step,
                )
                fitted, meta = fill(
                    p, hay, length, parts.head, parts.tail, list(zip(depths, (n.text for n in needles), strict=False))
                )
                meta.update(
                    depths=list(depths),
                    realised_depths=[pl.realised_depth for pl in fitted.placements],
                    num_needles=count,
                    repeat=repeat,
                    needles=[n.id for n in needles],
                )
                yield Sample(
                    id=sample_id("mrt", p.lang, length, count, repeat, digest=fitted.digest),
                    task="mrt",
                    lang=p.lang,
                    prompt=fitted.text,
                    gold={
                        "needles": [
                            {"keywords": list(n.keywords), "needle": n.text, "depth": d}
                            for n, d in zip(needles, depths, strict=False)
                        ]
                    },
                    meta=meta,
                )
