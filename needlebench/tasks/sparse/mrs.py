"""M-RS, multi-needle reasoning (2025 form), and the 2024 bring-your-own-needles form.

2025: 2-5 kinship statements in the haystack, asked with the ATC question
types, answered in ``\\boxed{}``. Reference placement is OpenCompass v2's
(``multi.py`` with ``diff=10``): the first needle at the requested depth,
each next one starting 10% of the haystack plus twice the previous needle's
length after the previous one (it counts that length twice), capped at the
end; the needles' realised depths are recorded and are what the tables
label. ``placement="spaced"`` counts the length once (the spacing OpenCompass
intends); the clarified placement spreads the needles over the roomier side
of the document.
2024: records of OpenCompass's ``multi_needle_reasoning_{en,zh}.json``
layout (``derivation_count``, ``derivations``, ``question``, ``answer``),
under reference drawn, worded and placed as OpenCompass v1's ``multi.py``
does it (its insertion points included: they count the previous needle's
length twice, which moves later needles but not what is asked), scored by
the answer's words (OpenCompass v1) or, clarified, the whole answer.
"""

from __future__ import annotations

import functools
import json
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from ...context.corpora import opencompass_data_file
from ...context.haystack import Haystack
from ...context.reference import chain_positions, opencompass_chain_positions
from ...context.tokenizer import count_tokens
from ...errors import ConfigError
from ...files import file_version
from ...grading.matching import prepare
from ...record import SampleScore
from ...sample import Sample
from ...scoring import ScoreOptions
from ...seeding import rng
from ..kinship import (
    QUESTION_TYPES,
    KinshipChain,
    ask,
    load_name_list,
    load_name_pool,
    make_chain,
    reference_chain,
    rules_text,
)
from ..kinship_answer import BOXED_ERRORS, grade_boxed, kinship_gold, kinship_meta, oracle_boxed
from ..reference_text import MRS_REFERENCE_FRAMES, MRS_REFERENCE_QUESTION
from .prompts import PromptParts, sparse_prompt
from .recall import RECALL_ERRORS, grade_srt, oracle_srt
from .reference_v1 import v1_prompt, v1_question
from .retrieval import (
    SparseParams,
    cell_order,
    haystack_for,
    haystack_sample,
    needle_text,
    prefix_order,
    sparse_task,
    validate_sparse,
)

__all__ = [
    "needle_depths",
    "generate_mrs",
    "grade_mrs",
    "grade_words",
    "oracle_mrs",
    "multihop_file",
    "MRS_COUNTS",
    "REFERENCE_DIFF",
]

MRS_COUNTS = (2, 3, 4, 5)
REFERENCE_DIFF = 10.0  # OpenCompass v2's ``diff``: percent of the haystack between consecutive needles


def needle_depths(depth: float, count: int, placement: str = "reference") -> tuple[float, ...]:
    """The depths of ``count`` needles whose first goes at ``depth``.

    Args:
        depth: the sample's depth (0..100).
        count: number of needles.
        placement: ``"reference"`` and ``"spaced"``: depth, depth + 10, depth + 20, ... capped at 100, in
            chain presentation order (OpenCompass v2's nominal depths; on its haystack ``reference`` puts
            the needles where its ``multi.py`` does, further on, and records where they went);
            ``"spread"``: distinct depths spread toward the roomier end, spacing (room / count) computed once.
    """
    if placement in ("reference", "spaced"):
        return tuple(min(100.0, round(float(depth) + i * REFERENCE_DIFF, 3)) for i in range(count))
    if count == 1:
        return (float(depth),)
    if depth <= 50:
        step = (100.0 - depth) / count
        out = [depth + i * step for i in range(count)]
    else:
        step = depth / count
        out = [depth - i * step for i in range(count)]
    return tuple(sorted(round(x, 3) for x in out))


def _multihop_records(path: str) -> tuple[dict, ...]:
    """The multi-hop records of a file, read once per process and version of the file (``files.file_version``)."""
    return _read_multihop_records(os.path.abspath(path), file_version(path))


@functools.lru_cache(maxsize=8)
def _read_multihop_records(path: str, version: tuple[int, int]) -> tuple[dict, ...]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        records = tuple(
            {
                "count": int(r["derivation_count"]),
                "needles": list(r["derivations"]),
                "question": str(r["question"]),
                "answer": str(r["answer"]),
            }
            for r in data
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"needle_file: {path} is not a multi_needle_reasoning JSON list ({exc})") from exc
    if not records:
        raise ConfigError(f"needle_file: {path} holds no records")
    return records


def _kinship_parts(p: SparseParams, chain: KinshipChain, question_text: str) -> PromptParts:
    """OpenCompass v2's M-RS frame (eldest ancestor, its examples and notes), or ours."""
    if p.options()["prompt_style"] == "reference":
        young = chain.names[-1]
        frame = MRS_REFERENCE_FRAMES[(p.lang, p.question_position)].format(
            context="\0", retrieval_question=MRS_REFERENCE_QUESTION[p.lang].format(last_person=young), last_person=young
        )
        head, tail = frame.split("\0")
        return PromptParts(head, tail)
    return sparse_prompt(
        p.lang,
        [question_text],
        [""],
        p.question_position,
        p.recall_step,
        extra_instruction=rules_text(p.lang, few_shot=False),
    )


def _kinship_samples(p: SparseParams, qtypes: tuple[str, ...]) -> Iterator[Sample]:
    pool = load_name_pool(p.lang)
    counts = p.num_needles or MRS_COUNTS
    opts = p.options()
    reference = opts["prompt_style"] == "reference"
    if reference and set(qtypes) != {"eldest_ancestor"}:
        raise ConfigError(
            "question_types: OpenCompass's M-RS asks only eldest_ancestor; "
            "use prompt_style='clarified' for the other question types"
        )
    per_repeat = opts["needle_choice"] == "per_repeat"
    names = load_name_list(p.lang, opencompass_data_file(p.lang, p.corpus, "names.json")) if per_repeat else ()
    match = opts["answer_match"]
    chains: dict[tuple[int, int], KinshipChain] = {}
    for hay, length, depth, count, repeat in _cells(p, counts):
        coords = ("mrs", p.lang, length, count, depth, repeat, p.seed)
        # one question type: the draw could only pick it (a private generator, so nothing else moves)
        qtype = qtypes[0] if len(qtypes) == 1 else rng("mrs-question", *coords).choice(qtypes)
        if per_repeat:
            # OpenCompass: the global seed(counter), one chain per repeat and count for every length and depth;
            # a fresh Random(repeat) draws the same chain every time, so it is drawn once per (repeat, count)
            if (repeat, count) not in chains:
                chains[repeat, count] = reference_chain(names, count, random.Random(repeat), p.lang)
            chain = chains[repeat, count]
        else:
            chain = make_chain(pool, count, *coords, style=opts["prompt_style"])
        question = ask(chain, qtype)
        parts = _kinship_parts(p, chain, question.text)
        gold = {**kinship_gold(chain, question, match), "form": "kinship"}
        cell = (hay, length, depth, count, repeat)
        meta = {**kinship_meta(chain, question), "statements": chain.statements()}
        yield from _sample(p, cell, parts, chain.statements(), gold, **meta)


def _cells(p: SparseParams, counts: Sequence[int]) -> Iterator[tuple[Haystack, int, float, int, int]]:
    """(haystack, length, depth, needle count, repeat) in the prefix-cache order of both M-RS forms."""
    for repeat in range(p.repeats):
        hay = haystack_for(p, repeat)
        for length, depth in cell_order(p, p.lengths, p.depths):
            for count in prefix_order(counts):
                yield hay, length, depth, count, repeat


def _sample(
    p: SparseParams,
    cell: tuple[Haystack, int, float, int, int],
    parts: PromptParts,
    texts: Sequence[str],
    gold: dict,
    **meta: object,
) -> Iterator[Sample]:
    """One M-RS sample of a cell, its needles spread from the cell's depth (none if it is skipped)."""
    hay, length, depth, count, repeat = cell
    placement = p.options()["placement"]
    depths = needle_depths(depth, count, placement)
    needles = list(zip(depths, [needle_text(p, x) for x in texts]))
    positions = None
    if placement == "reference":
        # on OpenCompass's haystack: its multi.py's insertion points, which depend on the needles' token counts
        sizes = tuple(count_tokens(text, p.encoding) for _, text in needles)
        positions = functools.partial(
            opencompass_chain_positions, depth=depth, needle_tokens=sizes, diff=REFERENCE_DIFF
        )
    elif placement == "spaced":
        positions = functools.partial(chain_positions, depth=depth, count=count, diff=REFERENCE_DIFF)
    sample = haystack_sample(
        p,
        hay,
        "mrs",
        (length, count, depth, repeat),
        parts,
        needles,
        gold,
        positions=positions,
        realised_as_depths=True,
        depth=depth,
        depths=list(depths),
        repeat=repeat,
        **meta,
    )
    if sample is not None:
        yield sample


def multihop_file(p: SparseParams) -> str:
    """The 2024 multi-hop records M-RS reads: the ``needle_file`` given, else, for ``profile="v1"`` on
    OpenCompass's files, its ``multi_needle_reasoning_{lang}.json`` (what its 2024 configs read); "" for
    the 2025 kinship form.

    Args:
        p: the task's parameters (``needle_file``, ``profile``, ``corpus``, ``lang``).
    """
    if p.needle_file or p.profile != "v1":
        return p.needle_file
    return opencompass_data_file(p.lang, p.corpus, f"multi_needle_reasoning_{p.lang}.json")


def _multihop_samples(p: SparseParams, path: str) -> Iterator[Sample]:
    """The 2024 form: OpenCompass v1's ``multi.py`` under reference (its record draw, prompt and placement).

    ``needle_choice="per_repeat"`` draws the record as OpenCompass does, ``Random(repeat).choice`` over the
    records with the cell's needle count (one record per repeat for every length and depth; its global
    ``seed(counter)`` made private); ``per_length`` draws a record per (repeat, length, count), hash-seeded.
    The reference prompt style is v1's frame and guide; the clarified one is our wording.
    """
    records = _multihop_records(path)
    counts = p.num_needles or MRS_COUNTS
    for count in counts:
        if not any(r["count"] == count for r in records):
            raise ConfigError(f"needle_file: {path} has no records with derivation_count={count}")
    opts = p.options()
    for hay, length, depth, count, repeat in _cells(p, counts):
        pool = [r for r in records if r["count"] == count]
        if opts["needle_choice"] == "per_repeat":
            record = random.Random(repeat).choice(pool)
        else:
            record = rng("mrs-record", p.lang, length, count, repeat, p.seed).choice(pool)
        if opts["prompt_style"] == "reference":
            question = v1_question(p.lang, record["question"], "multi", p.recall_step)
            parts = v1_prompt(p.lang, question, "multi", p.question_position)
        else:
            parts = sparse_prompt(p.lang, [record["question"]], [""], p.question_position, p.recall_step)
        gold = {
            "form": "multihop",
            "keywords": [record["answer"]],
            "needle": record["answer"],
            "match": opts["keyword_match"],
        }
        cell = (hay, length, depth, count, repeat)
        needles = record["needles"]
        yield from _sample(p, cell, parts, needles, gold, num_needles=count, statements=needles)


def generate_mrs(p: SparseParams) -> Iterator[Sample]:
    """Every M-RS sample of a config: kinship chains, or the 2024 records (:func:`multihop_file`).

    Args:
        p: the task's parameters; ``extra["question_types"]`` picks the kinship questions
            (default ``eldest_ancestor``).

    Raises:
        ConfigError: a parameter value is wrong (naming which).
    """
    validate_sparse(p)
    qtypes = tuple(p.extra.get("question_types", ("eldest_ancestor",))) if p.extra else ("eldest_ancestor",)
    for q in qtypes:
        if q not in QUESTION_TYPES:
            raise ConfigError(f"question_types: unknown {q!r}; choose from {QUESTION_TYPES}")
    path = multihop_file(p)
    if path:
        yield from _multihop_samples(p, path)
    else:
        yield from _kinship_samples(p, qtypes)


def grade_words(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """The 2024 multi-hop M-RS form: a share of the answer's words, as OpenCompass v1 scores it.

    ``NeedleBenchMultiEvaluator`` lowercases the answer and the prediction, splits the answer on
    whitespace and gives each word found in the prediction (as a substring) an equal share of 100.
    Under the clarified rule (``match`` "normalised") the whole answer must appear, ignoring case,
    width and whitespace, as for S-RT.

    Args:
        prediction: the model output.
        gold: ``{"keywords": [answer], "needle": answer, "match": ...}``.
        options: evaluator settings (strip_think).
    """
    if gold["match"] != "exact":
        return grade_srt(prediction, gold, options)
    text = prepare(prediction, options, clean=False).lower()
    words = str(gold["keywords"][0]).lower().split()
    found = [w in text for w in words]
    score = sum(found) * (100 / len(words)) if words else 0
    correct = bool(words) and all(found)
    error = None if correct else ("empty" if not text.strip() else "missed")
    return SampleScore(float(score), correct, error=error, extras={"recalled": found})


def grade_mrs(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """Grade an M-RS answer: by the answer's words for the 2024 form, by the boxed answer for kinship chains.

    OpenCompass scores the kinship form with its ATC evaluator (``answer_match``) and the 2024 form
    with ``NeedleBenchMultiEvaluator``'s per-word credit (``keyword_match`` "exact").

    Args:
        prediction: the model's response.
        gold: the sample's gold (``form`` is ``"multihop"`` for the 2024 form).
        options: scoring settings.
    """
    if gold.get("form") == "multihop":
        return grade_words(prediction, gold, options)
    return grade_boxed(prediction, gold, options)


def kinship_form(params: SparseParams, options: ScoreOptions) -> bool:
    """The kinship form's boxed answer is right or wrong (100 or 0); the 2024 form credits each word.

    Args:
        params: the dataset's parameters (the form is the 2024 one where a multihop file is read).
        options: its scoring options.
    """
    return not multihop_file(params)


def oracle_mrs(gold: dict) -> str:
    """A perfect M-RS answer: the boxed kinship answer, or the multihop form's keyword in a sentence.

    Args:
        gold: the sample's gold (``form`` picks the answer format).
    """
    return oracle_srt(gold) if gold.get("form") == "multihop" else oracle_boxed(gold)


MRS = sparse_task(
    "mrs",
    generate_mrs,
    grade_mrs,
    oracle_mrs,
    "Multi-needle reasoning (M-RS)",
    "M-RS",
    10,
    "needlebench.tasks.sparse.results:REASONING",
    report_text="M-RS needs several hidden facts combined (answer in <code>\\boxed{}</code>).",
    error_kinds=(*RECALL_ERRORS, *BOXED_ERRORS),  # the 2024 multihop form is graded as a recall
    binary=kinship_form,
)
