"""The information-sparse tasks' shared machinery, and S-RT and M-RT (M-RS lives in ``mrs``).

One generator serves every sparse task: a task is a row of data (how many
needles, where, and how they are asked), not a function of its own.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...context.corpora import opencompass_data_file
from ...context.haystack import (
    FittedPrompt,
    Haystack,
    build_haystack,
    build_ordered_haystack,
    fit_prompt,
    load_tokenized,
    place_at,
    snap_to_sentence,
)
from ...context.reference import depth_index, document_order, safe_boundary
from ...context.tokenizer import count_tokens, get_encoding
from ...errors import ConfigError
from ...protocol import Option, ProtocolParams
from ...record import SampleScore
from ...sample import DATASET_VERSION, Sample, sample_id
from ...scoring import ScoreOptions
from ...taskspec import TaskSpec
from ..inputs import default_needle_file, haystack_inputs
from ..profiles import PROFILES, get_profile
from .needles import (
    Needle,
    load_needle_bank,
    pick_needles,
    reference_needle,
    reference_needle_set,
)
from .prompts import QUESTION_POSITIONS, PromptParts, reference_prompt, reference_question, sparse_prompt
from .recall import RECALL_ERRORS, grade_mrt, grade_srt, oracle_mrt, oracle_srt
from .reference_v1 import v1_prompt, v1_question

__all__ = [
    "SparseParams",
    "SkipSample",
    "generate_srt",
    "generate_mrt",
    "validate_sparse",
    "haystack_for",
    "fill",
    "OVERLENGTH_POLICIES",
    "SPARSE_OPTIONS",
    "cell_order",
    "haystack_sample",
    "prefix_order",
    "question_parts",
]

LANGS = ("en", "zh")
OVERLENGTH_POLICIES = ("shorten", "skip")

# Where ``protocol="clarified"`` differs from the papers and OpenCompass v2 (docs/protocol/reference-vs-clarified.md).
SPARSE_OPTIONS: dict[str, Option] = {
    # OpenCompass v2's instructions and question lines (v1's under profile="v1"), or ours (quirks fixed)
    "prompt_style": Option("reference", "clarified"),
    # reference: the document (haystack + needles) gets length - buffer tokens, the instructions come on top,
    # and a buffer shrinks only where the haystack would otherwise be empty; prompt: the whole prompt fits
    # in length - buffer, the buffer is capped at a quarter of the length and the haystack keeps min_fill
    "budget": Option("reference", "prompt"),
    # M-RS (both forms): OpenCompass's (first needle at the depth, each next one starting 10% of the haystack
    # plus twice the previous needle's length after the previous one, capped at the end), or spread over the roomier side of
    # the document; "spaced": the length counted once (the spacing OpenCompass intends)
    "placement": Option("reference", "spread", extra=("spaced",)),
    # S-RT, M-RT, 2024 M-RS: the keyword as a substring of the output as returned (OpenCompass and the 2025
    # paper's Eq. 1; 2024 M-RS: each answer word, lowercased); or ignoring case, width, whitespace and chat tokens
    "keyword_match": Option("exact", "normalised"),
    # M-RS kinship chains: OpenCompass's ATC postprocessor and evaluator (its box, cleaned, equals the gold);
    # or names ignoring case and punctuation; "contains": the gold name anywhere inside the box
    "answer_match": Option("exact", "normalised", extra=("contains",)),
    # opencompass: OpenCompass's haystack (documents as the files hold them, its compounding per-repeat
    # shuffle, no separator, cut at exactly the token budget); seeded: ours (a hash-seeded order per
    # repeat, documents stripped and joined by a blank line, English re-wrapped, cut at a sentence end,
    # the prompt fitted to its budget, needles at sentence starts)
    "haystack": Option("opencompass", "seeded"),
    # on the opencompass haystack: a needle at OpenCompass's token index (moved only where it would
    # split a word or a character), or at the sentence start nearest its depth
    "needle_position": Option("token", "sentence"),
    # per_repeat: OpenCompass's draws (S-RT one needle per repeat for every length and depth, M-RT one
    # fixed set shuffled per repeat, M-RS one chain, or 2024 multi-hop record, per repeat and count);
    # per_length: a fresh draw per (repeat, length) cell, so a suite uses more of the needle bank
    "needle_choice": Option("per_repeat", "per_length"),
}


class SkipSample(Exception):
    """A sample that cannot fit the model's context under the ``skip`` policy."""


@dataclass(frozen=True)
class SparseParams(ProtocolParams):
    """Everything that decides a sparse dataset's samples (protocol options: ``SPARSE_OPTIONS``)."""

    OPTIONS = SPARSE_OPTIONS
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
    protocol: str = "reference"
    prompt_style: str = ""  # "" = what the protocol says; see SPARSE_OPTIONS
    budget: str = ""
    placement: str = ""
    keyword_match: str = ""
    answer_match: str = ""
    haystack: str = ""
    needle_position: str = ""
    needle_choice: str = ""
    profile: str = "v2"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # depth 50 and 50.0 are the same cell: the same samples, ids and metadata
        depths = tuple(int(d) if isinstance(d, float) and d.is_integer() else d for d in self.depths)
        object.__setattr__(self, "depths", depths)

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
    if p.repeats < 1:
        raise ConfigError(f"repeats: {p.repeats} must be at least 1")
    if p.question_position not in QUESTION_POSITIONS:
        raise ConfigError(f"question_position: {p.question_position!r}; choose from {QUESTION_POSITIONS}")
    if p.overlength not in OVERLENGTH_POLICIES:
        raise ConfigError(f"overlength: {p.overlength!r}; choose from {OVERLENGTH_POLICIES}")
    if not 0 < p.min_fill < 1:
        raise ConfigError(f"min_fill: {p.min_fill} must be between 0 and 1")
    get_profile(p.profile)
    p.options()
    get_encoding(p.encoding)


def needle_path(p: SparseParams) -> str:
    """The needle file: the one given, else OpenCompass's ``needles.jsonl`` beside its corpus files, else ours.

    Args:
        p: the task's parameters (``needle_file`` and ``corpus``).
    """
    return p.needle_file or opencompass_data_file(p.lang, p.corpus, "needles.jsonl") or str(default_needle_file(p.lang))


def _bank(p: SparseParams) -> tuple[Needle, ...]:
    path = needle_path(p)
    pool = load_needle_bank(path).for_lang(p.lang)
    if not pool:
        raise ConfigError(f"needle_file: {path} has no needles for language {p.lang!r}")
    return pool


def prefix_order(values: tuple) -> list:
    """Longest and deepest first (lengths and needle counts)."""
    return sorted(values, reverse=True)


def cell_order(p: SparseParams, lengths: tuple, depths: tuple) -> list[tuple[int, float]]:
    """A repeat's (length, depth) cells in the order that lets a prefix cache reuse the most.

    Prompts of one repeat share the instructions and the haystack up to their first needle, so
    with the question at the end, sending them by that needle's token position, farthest first,
    means each prompt finds its whole shared prefix in the blocks of the prompt just before it: a
    cache holding one prompt captures all the reuse an unbounded one would
    (``bench/engine_order.py``). With the question first, prompts share only within a length.

    Args:
        p: the task's parameters (question position, buffers and budget rule).
        lengths: the lengths to order.
        depths: the depths to order.
    """
    cells = [(length, depth) for length in lengths for depth in depths]
    if p.question_position == "start":
        return sorted(cells, reverse=True)
    doc = {length: length - _buffer(p, length, 0, 0, p.options()["budget"]) for length in lengths}
    return sorted(cells, key=lambda c: (c[1] * doc[c[0]], c[0], c[1]), reverse=True)


def haystack_for(p: SparseParams, repeat: int) -> Haystack:
    """A repeat's filler, shared by every task, length and depth of that repeat.

    Args:
        p: the task's parameters (language, corpus, encoding, seed; the longest length sets the size).
        repeat: the repeat number, which seeds the document order.
    """
    if p.options()["haystack"] == "opencompass":
        tc = load_tokenized(p.lang, p.corpus, p.encoding, raw=True)
        return build_ordered_haystack(tc, document_order(len(tc.doc_tokens), repeat), max(p.lengths))
    tc = load_tokenized(p.lang, p.corpus, p.encoding)
    return build_haystack(tc, max(p.lengths), "haystack", p.lang, repeat, p.seed)


def _buffer(p: SparseParams, length: int, needle_tokens: int, text: int, rule: str) -> int:
    """The buffer a prompt really gets, shrunk only as far as the rule allows (and recorded)."""
    requested = p.buffer_for(length)
    min_hay = math.ceil(p.min_fill * length)
    if rule == "reference":
        if length - requested - needle_tokens > 0:
            return requested
        # OpenCompass's English 1k/2k cells of its 32k+ suites: a 3000-token buffer leaves no haystack at all.
        # Its own short suites build the same cells with their buffer (English 500), so we take theirs: the
        # shrunk cell is then byte for byte the cell OpenCompass's 4k suite builds (test_differential_prompts)
        # (a length shorter than that buffer: half the length, else what leaves min_fill of haystack)
        for buffer in (min(requested, SHORT_SUITE_BUFFERS[p.lang]), min(requested, length // 2)):
            if length - buffer - needle_tokens >= min_hay:
                return buffer
        return max(0, length - needle_tokens - min_hay)
    buffer = min(requested, length // 4, length - text - min_hay)
    if buffer < 0 and length - text >= math.ceil(0.1 * length):
        # many needles at a short length (M-RT, 11 needles at 1k): give the filler all that is left
        buffer = 0
    return buffer


def fill(
    p: SparseParams,
    hay: Haystack,
    length: int,
    parts: PromptParts,
    needles: list[tuple[float, str]],
    positions: Callable[[int], list[int]] | None = None,
) -> tuple:
    """Fit one prompt to its length and buffer under the protocol's budget rule.

    Args:
        p: the task's parameters (buffers, budget rule, model room and over-length policy).
        hay: the repeat's haystack.
        length: the cell's nominal length in tokens.
        parts: the prompt's head and tail (instructions and question).
        needles: (depth, text) of each needle.
        positions: on OpenCompass's haystack, the needles' requested token indices for a haystack of the
            given size (default: each at ``int(tokens * depth / 100)``, OpenCompass's S-RT and M-RT rule).

    Returns:
        (the fitted prompt, the sample's metadata: length, buffer, token counts, ``shortened_from`` if cut).

    Raises:
        SkipSample: the prompt does not fit the model and the policy is ``skip``.
        ConfigError: the length cannot hold the task's text.
    """
    options = p.options()  # resolved once per sample (the metadata records them too)
    rule = options["budget"]
    opencompass = options["haystack"] == "opencompass"
    template = count_tokens(parts.head, p.encoding) + count_tokens(parts.tail, p.encoding)
    # OpenCompass subtracts the needles' own token counts; our fitting keeps a spare token for a joining space
    needle_tokens = sum(count_tokens(t, p.encoding) + (0 if opencompass else 1) for _, t in needles)
    text = template + needle_tokens
    buffer = _buffer(p, length, needle_tokens, text, rule)
    requested = p.buffer_for(length)
    # reference: the document gets length - buffer tokens and the instructions come on top
    budget = length - buffer + (template if rule == "reference" else 0)
    if buffer < 0 or budget - text < 1:
        raise ConfigError(
            f"lengths: {length} is too short for this task's text ({text} tokens of "
            f"instructions, question and needles plus {math.ceil(p.min_fill * length)} of filler)"
        )
    shortened_from = None
    if p.max_prompt_tokens and budget > p.max_prompt_tokens:
        # never cut the question or the needles: only the haystack gets shorter
        if p.overlength == "skip" or p.max_prompt_tokens - text < 1:
            raise SkipSample(f"length {length} needs {budget} tokens, the model has {p.max_prompt_tokens}")
        shortened_from, budget = budget, p.max_prompt_tokens
    if opencompass:
        filler = budget - text
        fitted = _place(p, hay, filler, parts, needles, positions)
        # OpenCompass counts the haystack per document; where the model's room is a hard limit, the real
        # count must fit it, so a prompt that merged past it loses the excess (and is recorded as shortened)
        for _ in range(8):
            if not p.max_prompt_tokens or fitted.tokens <= p.max_prompt_tokens:
                break
            if shortened_from is None:
                shortened_from = budget
            filler -= fitted.tokens - p.max_prompt_tokens
            fitted = _place(p, hay, filler, parts, needles, positions)
    else:
        fitted = fit_prompt(hay, budget, parts.head, parts.tail, needles, p.encoding, overhead=text)
    meta = {
        "length": length,
        "buffer": buffer,
        "buffer_requested": requested,
        "buffer_shrunk": buffer < requested,
        "prompt_tokens": fitted.tokens,
        "budget_tokens": budget,
        "haystack_tokens": fitted.haystack_tokens,
        "corpus": hay.corpus_name,
        "encoding": p.encoding,
        "seed": p.seed,
        "version": DATASET_VERSION,
        "protocol": p.protocol,
        "options": options,
        "profile": p.profile,
        "question_position": p.question_position,
        "recall_step": p.recall_step,
    }
    if p.question_position == "end":
        # the prompt's last characters after the document: the question part a query-agnostic KV-cache press
        # prefills uncompressed (methods/kv_press.py); told by the task, never searched for in the prompt
        meta["question_chars"] = len(parts.tail)
    if shortened_from is not None:
        meta["shortened_from"] = shortened_from
    return fitted, meta


def _place(
    p: SparseParams,
    hay: Haystack,
    tokens: int,
    parts: PromptParts,
    needles: list[tuple[float, str]],
    positions: Callable[[int], list[int]] | None,
) -> FittedPrompt:
    """OpenCompass's assembly: the haystack cut at exactly ``tokens``, each needle at its token index.

    An index that would split a word or a character moves to the nearest boundary that splits nothing
    (the listed fix); ``needle_position="sentence"`` moves it to the nearest sentence start instead.
    """
    tokens = max(0, min(tokens, hay.n_tokens))
    wanted = positions(tokens) if positions else [depth_index(tokens, d) for d, _ in needles]
    if p.options()["needle_position"] == "sentence":
        at = [snap_to_sentence(hay, k, tokens) for k in wanted]
    else:
        at = [safe_boundary(hay, k, tokens) for k in wanted]
    return place_at(hay, tokens, parts.head, parts.tail, needles, at, p.encoding)


def needle_text(p: SparseParams, text: str) -> str:
    """A needle as inserted: OpenCompass (reference style) puts it on a line of its own; ours joins it to the prose.

    Args:
        p: the task's parameters (its ``prompt_style`` decides).
        text: the needle's sentence.
    """
    return f"\n{text}\n" if p.options()["prompt_style"] == "reference" else text


def haystack_sample(
    p: SparseParams,
    hay: Haystack,
    task: str,
    coords: tuple,
    parts: PromptParts,
    placed: list[tuple[float, str]],
    gold: dict,
    single_needle: bool = False,
    positions: Callable[[int], list[int]] | None = None,
    realised_as_depths: bool = False,
    **meta: object,
) -> Sample | None:
    """One sparse-task sample: needles placed in the haystack, or None where the model's room skips it.

    The one place the sparse tasks fit, skip and annotate a prompt, so a change to over-length
    handling or to the recorded metadata reaches S-RT, M-RT and M-RS alike.

    Args:
        p: the task's parameters.
        hay: the repeat's haystack.
        task: the task name (the sample id's first part).
        coords: the cell's coordinates for the id, the length first (``(length, depth, repeat)``).
        parts: the prompt's head and tail (instructions and question).
        placed: (depth, text) of each needle, in document order.
        gold: the sample's structured gold.
        single_needle: record the one needle's realised depth as ``realised_depth`` (S-RT's field)
            instead of the list ``realised_depths``.
        positions: on OpenCompass's haystack, the needles' token indices for a haystack size (M-RS).
        realised_as_depths: record the realised depths as ``depths`` too (M-RS, whose later needles sit
            where the placement puts them, not at a nominal depth: tables label where they are).
        meta: the task's own metadata, added to what ``fill`` records.
    """
    try:
        fitted, m = fill(p, hay, coords[0], parts, placed, positions)
    except SkipSample:
        return None
    realised = [pl.realised_depth for pl in fitted.placements]
    m.update(meta)
    if single_needle:
        m["realised_depth"] = realised[0]
    else:
        m["realised_depths"] = realised
    if realised_as_depths:
        m["depths"] = realised
    return Sample.from_utf8(  # decoded when read: the cache stores the bytes
        id=sample_id(task, p.lang, *coords, digest=fitted.digest),
        task=task,
        lang=p.lang,
        prompt_utf8=fitted.utf8,
        gold=gold,
        meta=m,
    )


def question_parts(p: SparseParams, needles: tuple[Needle, ...], multi: bool = False) -> PromptParts:
    """Head and tail of a retrieval prompt asking for ``needles`` in the protocol's wording.

    Args:
        p: the task's parameters (prompt style, language, question position, recall step).
        needles: the needles asked for.
        multi: M-RT's wording (several needles in one question).
    """
    if p.options()["prompt_style"] == "reference":
        if p.profile == "v1":  # OpenCompass v1's loaders: origin.py (S-RT), parallel.py (M-RT)
            form = "parallel" if multi else "origin"
            joined = reference_question(p.lang, [n.reference_question for n in needles], False, multi)
            return v1_prompt(p.lang, v1_question(p.lang, joined, form, p.recall_step), form, p.question_position)
        question = reference_question(p.lang, [n.reference_question for n in needles], p.recall_step, multi)
        return reference_prompt(p.lang, question, p.question_position, multi=multi)
    return sparse_prompt(
        p.lang, [n.question for n in needles], [n.answer_format for n in needles], p.question_position, p.recall_step
    )


def generate_srt(p: SparseParams) -> Iterator[Sample]:
    """S-RT: one needle per repeat (OpenCompass) or per (repeat, length), moved through every depth."""
    validate_sparse(p)
    pool = _bank(p)
    per_repeat = p.options()["needle_choice"] == "per_repeat"
    for repeat in range(p.repeats):
        hay = haystack_for(p, repeat)
        picked: dict[int, tuple[Needle, PromptParts]] = {}
        for length, depth in cell_order(p, p.lengths, p.depths):
            if length not in picked:
                if per_repeat:
                    needle = reference_needle(pool, repeat)
                else:
                    (needle,) = pick_needles(pool, 1, "srt", p.lang, repeat, length, p.seed)
                picked[length] = (needle, question_parts(p, (needle,)))
            needle, parts = picked[length]
            gold = {"keywords": list(needle.keywords), "needle": needle.text, "match": p.options()["keyword_match"]}
            sample = haystack_sample(
                p,
                hay,
                "srt",
                (length, depth, repeat),
                parts,
                [(depth, needle_text(p, needle.text))],
                gold,
                single_needle=True,
                depth=depth,
                repeat=repeat,
                needles=[needle.id],
            )
            if sample is not None:
                yield sample


def _spread(count: int) -> tuple[float, ...]:
    if count == 1:
        return (50.0,)
    return tuple(round(100.0 * i / (count - 1), 2) for i in range(count))


def generate_mrt(p: SparseParams) -> Iterator[Sample]:
    """M-RT: several distinct needles at distinct depths, all asked in one question.

    With ``num_needles`` unset there is one needle at each depth of the suite
    (OpenCompass v2); otherwise the needles are spread evenly from 0 to 100.
    ``needle_choice="per_repeat"`` (reference): OpenCompass's one fixed set for the
    whole suite (the first ``count`` of it), in ``Random(repeat)``'s order per repeat;
    ``per_length``: a fresh hash-seeded draw per (repeat, length, count).
    """
    validate_sparse(p)
    pool = _bank(p)
    counts = p.num_needles or (len(p.depths),)
    per_repeat = p.options()["needle_choice"] == "per_repeat"
    fixed = reference_needle_set(load_needle_bank(needle_path(p)), p.lang, max(counts), p.seed) if per_repeat else ()
    for repeat in range(p.repeats):
        hay = haystack_for(p, repeat)
        for length in prefix_order(p.lengths):
            for count in counts:
                depths = tuple(p.depths) if count == len(p.depths) else _spread(count)
                if per_repeat:
                    needles = list(fixed[:count])
                    random.Random(repeat).shuffle(needles)  # OpenCompass's per-repeat order of its fixed set
                    needles = tuple(needles)
                else:
                    needles = pick_needles(pool, count, "mrt", p.lang, repeat, length, count, p.seed)
                parts = question_parts(p, needles, multi=True)
                placed = [(d, needle_text(p, n.text)) for d, n in zip(depths, needles, strict=False)]
                gold = {
                    "needles": [
                        {"keywords": list(n.keywords), "needle": n.text, "depth": d}
                        for n, d in zip(needles, depths, strict=False)
                    ],
                    "match": p.options()["keyword_match"],
                }
                sample = haystack_sample(
                    p,
                    hay,
                    "mrt",
                    (length, count, repeat),
                    parts,
                    placed,
                    gold,
                    depths=list(depths),
                    num_needles=count,
                    repeat=repeat,
                    needles=[n.id for n in needles],
                )
                if sample is not None:
                    yield sample


# -- defaults inside a suite ---------------------------------------------------------------------

# The buffers of OpenCompass v2's short suites (4k, 8k), by language: what a reference buffer shrinks to where
# a longer suite's buffer would leave a cell no haystack (``_buffer``).
SHORT_SUITE_BUFFERS: dict[str, int] = dict(PROFILES["v2"].buffers["4k"])


def suite_defaults(task: str, repeats: int, suite: str, lang: str, profile: str) -> dict[str, Any]:
    """A sparse task's repeats and buffer in a suite (bound per task as ``TaskSpec.suite_defaults``).

    Args:
        task: ``"srt"``, ``"mrt"`` or ``"mrs"``.
        repeats: the task's repeats (OpenCompass v2: S-RT and M-RS 10, M-RT 25).
        suite: the suite name.
        lang: ``"en"`` or ``"zh"``.
        profile: ``"v2"`` or ``"v1"``.
    """
    return {"repeats": repeats, "buffer": get_profile(profile).buffer(suite, task, lang)}


def sparse_task(
    name: str,
    generate: Callable[[SparseParams], Iterator[Sample]],
    grade: Callable[[object, dict, ScoreOptions], SampleScore],
    oracle: Callable[[dict], str],
    title: str,
    label: str,
    repeats: int,
    results: str,
    score_options: tuple[str, ...] = (),
    report_text: str = "",
    error_kinds: tuple[str, ...] = RECALL_ERRORS,
    binary: Callable[[SparseParams, ScoreOptions], bool] | None = None,
) -> TaskSpec:
    """A sparse task's spec: a haystack that can be shortened, a row of the summary table, a suite default.

    Its weight in each suite overall is the profiles' (``profiles.py``).

    Args:
        name: the registry name.
        generate: the generator over :class:`SparseParams`.
        grade: the grader.
        oracle: a perfect answer from a gold.
        title: the task's name in prose.
        label: its short name in tables.
        repeats: samples per cell in a suite (OpenCompass v2's).
        results: ``"module:attribute"`` of its ``TaskResults``.
        score_options: grading options a suite config sets for it.
        report_text: what its numbers mean, for the report's "How to read" part.
        error_kinds: the error kinds its grader can give.
        binary: whether every score is 0 or 100 under a dataset's parameters and scoring options
            (``TaskSpec.binary``); None: scores may lie between.
    """
    return TaskSpec(
        name,
        "sparse",
        SparseParams,
        generate,
        grade,
        title,
        oracle,
        label=label,
        suite_weights={p.name: p.weights[name] for p in PROFILES.values() if name in p.weights},
        suite_defaults=functools.partial(suite_defaults, name, repeats),
        score_options=score_options,
        results=results,
        meta_keys=SPARSE_META_KEYS,
        cell=("length", "depth"),
        breakdowns={"num_needles": "needles"},
        report_text=report_text,
        error_kinds=error_kinds,
        prefix_group=haystack_group,
        inputs=haystack_inputs,
        binary=binary,
    )


def haystack_group(lang: str, meta: Mapping[str, Any]) -> tuple[Hashable, float]:
    """A sparse sample's haystack group and its first needle's token position, read from its metadata.

    Samples of one (language, corpus, seed, haystack option, repeat) open with the same haystack, so
    they share a prompt prefix up to their first needle (S-RT's and M-RS's alike); the partitioner sends
    such samples together so an engine's prefix cache reuses the haystack across datasets.

    Args:
        lang: the dataset's language.
        meta: the row's metadata (as generated: ``haystack_tokens``, ``repeat``, realised depths).
    """
    if "haystack_tokens" not in meta or "repeat" not in meta:
        return None, 0.0
    depths = meta.get("realised_depths") or [meta.get("realised_depth", meta.get("depth", 0.0))]
    first = min(float(d) for d in depths) if depths else 0.0
    options = meta.get("options") or {}
    group = (lang, meta.get("corpus"), meta.get("seed"), options.get("haystack"), meta.get("repeat"))
    return group, first * float(meta["haystack_tokens"]) / 100.0


# what a sparse sample's graded record keeps beside the generic keys: its place in the haystack (the asked
# depth, each needle's depth and where each really landed), its repeat, needle count, question type, buffer
SPARSE_META_KEYS = (
    "depth",
    "depths",
    "repeat",
    "num_needles",
    "question_type",
    "realised_depth",
    "realised_depths",
    "buffer",
)


def keyword_scored(params: SparseParams, options: ScoreOptions) -> bool:
    """A recall scored by its keyword hit (100 or 0); Levenshtein gives partial credit.

    Args:
        params: the dataset's parameters.
        options: its scoring options.
    """
    return options.metric == "keyword"


SRT = sparse_task(
    "srt",
    generate_srt,
    grade_srt,
    oracle_srt,
    "Single-needle retrieval (S-RT)",
    "S-RT",
    10,
    "needlebench.tasks.sparse.results:SINGLE",
    ("metric",),
    "S-RT asks for one hidden fact.",
    binary=keyword_scored,
)
MRT = sparse_task(
    "mrt",
    generate_mrt,
    grade_mrt,
    oracle_mrt,
    "Multi-needle retrieval (M-RT)",
    "M-RT",
    25,
    "needlebench.tasks.sparse.results:MULTI",
    ("metric",),
    "M-RT asks for several hidden facts at once (score = share recalled).",
)
