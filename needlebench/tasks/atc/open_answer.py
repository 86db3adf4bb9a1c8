"""ATC, open answer: the 2025 NeedleBench paper's Ancestral Trace Challenge (information-dense).

No haystack: every sentence is a link of one kinship chain. Needle counts
2..512 (powers of two), R repeats per count and question type.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from ...context.corpora import opencompass_data_file
from ...context.tokenizer import get_encoding
from ...errors import ConfigError, check_at_least, check_choices
from ...protocol import Option, ProtocolParams
from ...sample import DATASET_VERSION, Sample, sample_id
from ...taskspec import TaskSpec
from ..inputs import haystack_inputs
from ..kinship import (
    QUESTION_TYPES,
    KinshipChain,
    KinshipQuestion,
    ask,
    load_name_list,
    load_name_pool,
    make_chain,
    reference_chain,
    rules_text,
)
from ..kinship_answer import BOXED_ERRORS, grade_boxed, kinship_gold, kinship_meta, oracle_boxed
from ..reference_text import REFERENCE_PROMPTS

__all__ = [
    "AtcParams",
    "generate_atc",
    "atc_prompt",
    "reference_atc_prompt",
    "DEFAULT_COUNTS",
    "ATC_OPTIONS",
]

# Where ``protocol="clarified"`` differs: our wording (correct ordinals, rules, statements joined with a
# space) and names compared ignoring case, against OpenCompass v2's prompts and exact match.
ATC_OPTIONS: dict[str, Option] = {
    "prompt_style": Option("reference", "clarified"),
    "answer_match": Option("exact", "normalised"),
    # opencompass: OpenCompass's draws (global seed((repeat + 1) + 10000 * question type), a sample of the
    # flat name list, template then term per link, then a shuffle); seeded: ours, hash-seeded by coordinates,
    # names built from first names and surnames
    "chain_draw": Option("opencompass", "seeded"),
}

DEFAULT_COUNTS: tuple[int, ...] = tuple(2**i for i in range(1, 10))

_INTRO = {
    "en": (
        "This is the Ancestral Trace Challenge, a test of multi-step reasoning. The family relationships "
        "below are given in scrambled order; follow them link by link to answer the question."
    ),
    "zh": "这是祖先追溯测试，考察多步推理能力。下面的家族关系顺序是打乱的，请逐条追溯关系来回答问题。",
}
_HEADER = {"en": "The scrambled family relationships:", "zh": "打乱顺序的家族关系如下："}


@dataclass(frozen=True)
class AtcParams(ProtocolParams):
    """Everything that decides an ATC dataset's samples (protocol options: see ``ATC_OPTIONS``)."""

    OPTIONS = ATC_OPTIONS

    lang: str
    needle_counts: tuple[int, ...] = DEFAULT_COUNTS
    question_types: tuple[str, ...] = QUESTION_TYPES
    repeats: int = 10
    seed: int = 0
    few_shot: bool = True
    encoding: str = "cl100k_base"
    corpus: str = "packaged"  # "opencompass" (or "auto" with the files present): names from its names.json
    protocol: str = "reference"
    prompt_style: str = ""  # "" = what the protocol says; see ATC_OPTIONS
    answer_match: str = ""
    chain_draw: str = ""


def _validate(p: AtcParams) -> None:
    if p.lang not in ("en", "zh"):
        raise ConfigError(f"lang: unknown language {p.lang!r}; choose from ('en', 'zh')")
    check_at_least("needle_counts", p.needle_counts, 1)
    check_choices("question_types", p.question_types, QUESTION_TYPES)
    check_at_least("repeats", [p.repeats], 1)
    p.options()


def reference_atc_prompt(chain: KinshipChain, question_type: str) -> str:
    """OpenCompass v2's ATC prompt: its per-type instructions and examples, statements joined with nothing.

    Args:
        chain: the kinship chain; its shuffled statements form the story.
        question_type: one of :data:`QUESTION_TYPES`; picks OpenCompass's template.
    """
    old, young = chain.names[0], chain.names[-1]
    person = old if question_type == "nth_descendant" else young
    return REFERENCE_PROMPTS[(chain.lang, question_type)].format(
        shuffled_story="".join(chain.statements()),
        last_person=young,
        person=person,
        n=chain.generations,
        person_a=old,
        person_b=young,
    )


def atc_prompt(chain: KinshipChain, question: KinshipQuestion, few_shot: bool = True) -> str:
    """Our ATC prompt: intro, rules (with worked examples when ``few_shot``), the shuffled statements, the question.

    Args:
        chain: the kinship chain; its statements are joined with a space (English) or nothing (Chinese).
        question: the question asked about the chain.
        few_shot: include the worked examples after the rules.
    """
    joiner = " " if chain.lang == "en" else ""
    story = joiner.join(chain.statements())
    lang = chain.lang
    return f"{_INTRO[lang]}\n\n{rules_text(lang, few_shot)}\n\n{_HEADER[lang]}\n{story}\n\n{question.text}\n"


def generate_atc(p: AtcParams) -> Iterator[Sample]:
    """Every ATC sample of a config: one per needle count x question type x repeat, in that order.

    Args:
        p: the task's parameters.

    Raises:
        ConfigError: a parameter value is wrong (naming which).
    """
    _validate(p)
    pool = load_name_pool(p.lang)
    enc = get_encoding(p.encoding)
    opts = p.options()
    reference = opts["prompt_style"] == "reference"
    drawn = opts["chain_draw"] == "opencompass"
    names_file = opencompass_data_file(p.lang, p.corpus, "names.json") if drawn else ""
    names = load_name_list(p.lang, names_file) if drawn else ()
    for n in p.needle_counts:
        for qtype in p.question_types:
            for repeat in range(p.repeats):
                if drawn:
                    # OpenCompass's seed: (i + 1) + 10000 * the question type's enum value
                    r = random.Random(repeat + 1 + 10000 * QUESTION_TYPES.index(qtype))
                    chain = reference_chain(names, n, r, p.lang)
                else:
                    chain = make_chain(pool, n, "atc", n, qtype, repeat, p.seed, style=opts["prompt_style"])
                question = ask(chain, qtype)
                prompt = reference_atc_prompt(chain, qtype) if reference else atc_prompt(chain, question, p.few_shot)
                meta = {
                    **kinship_meta(chain, question),
                    "repeat": repeat,
                    "prompt_tokens": len(enc.encode_ordinary(prompt)),
                    "needle_counts": list(p.needle_counts),  # the planned N: aggregates count a missing N as 0
                    "few_shot": p.few_shot,
                    "seed": p.seed,
                    "encoding": p.encoding,
                    "names": names_file or ("packaged name list" if drawn else "packaged name pool"),
                    "version": DATASET_VERSION,
                    "protocol": p.protocol,
                    "options": opts,
                }
                if not reference:  # the question closes our prompt (atc_prompt); OpenCompass's frames vary
                    meta["question_chars"] = len(question.text) + 1
                yield Sample(
                    id=sample_id("atc", p.lang, n, qtype, repeat, prompt=prompt),
                    task="atc",
                    lang=p.lang,
                    prompt=prompt,
                    gold=kinship_gold(chain, question, opts["answer_match"]),
                    meta=meta,
                )


ATC = TaskSpec(
    "atc",
    "dense",
    AtcParams,
    generate_atc,
    grade_boxed,
    "Ancestral Trace Challenge (ATC)",
    oracle_boxed,
    label="ATC",
    results="needlebench.tasks.atc.open_answer_results:RESULTS",
    meta_keys=("repeat", "num_needles", "question_type", "needle_counts"),
    cell=("num_needles",),
    breakdowns={"num_needles": "needles"},
    error_kinds=BOXED_ERRORS,
    report_text=(
        "ATC: accuracy per needle count N; <i>weighted</i> = sum(P_N * N) / sum(N); <i>weighted_short</i> uses "
        "N &lt;= 64; ENL-50 is the largest N with accuracy of at least 50. The weighted scores and ENL-50 cover "
        "every planned N (2..512): an N not run counts as 0, never averaged away."
    ),
    inputs=haystack_inputs,
)
