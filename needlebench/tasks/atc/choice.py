"""ATC, multiple choice: the 2024 NeedleBench paper's Ancestral Trace Challenge (``profile="v1"``).

The 2024 paper (and OpenCompass's ``atc_choice_20`` config) asked for the
eldest ancestor of a scrambled kinship chain as a 4-option question, with
4-shot prompts in two styles ("direct" answers or answers "with reasoning
path"), scored with circular evaluation: a question counts only if it is
answered right under every rotation of its options. Task score =
sum(P_step * step) / sum(step).

The prompt wording is OpenCompass's v1 ATC, quirks included (English
statements joined with no space, the stray "w" in one Chinese reasoning
example, single quotes around the person in the generated question but
double quotes in the Chinese examples). Under ``protocol="reference"``
(``chain_draw="opencompass"``) the questions are drawn as its
``atc_choice.py`` draws them, from its ``names.json`` with
``corpus="opencompass"`` (else from the packaged flat name list):
``Random(question)`` samples the people, picks a template then a term per
link and shuffles the statements; the same files give its bytes
(``tests/test_differential_prompts.py``). ``chain_draw="seeded"``
(clarified): names built from our pools, every choice from ``seeding.rng``,
the few-shot examples' names never reused.

As in OpenCompass, "steps" is the number of people in the chain (steps - 1
statements); the options are the first four people counted from the eldest
(padded with outsiders when the chain is shorter than four), gold = eldest.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ...context.corpora import opencompass_data_file
from ...context.tokenizer import get_encoding
from ...errors import ConfigError
from ...grading.matching import prepare
from ...protocol import Option, ProtocolParams
from ...record import SampleScore
from ...sample import DATASET_VERSION, Sample, sample_id
from ...scoring import ScoreOptions
from ...seeding import rng
from ...taskspec import TaskSpec
from ..inputs import haystack_inputs
from ..kinship import NamePool, distinct_names, load_name_list, load_name_pool
from ..reference_text import REFERENCE_TERMS
from .option_letter import LETTERS, first_option

__all__ = [
    "AtcMcParams",
    "ATC_MC_OPTIONS",
    "DEFAULT_STEPS",
    "V1_TEMPLATES",
    "V1_TERMS",
    "V1_QUESTION",
    "STYLES",
    "ROTATIONS",
    "generate_atc_mc",
    "grade_atc_mc",
    "oracle_atc_mc",
    "few_shot_rounds",
    "oc_template_rounds",
    "chat_messages",
    "render_question",
]

# Where ``protocol="clarified"`` differs: opencompass: OpenCompass v1's draws (``Random(question)`` samples the
# flat name list, a template then a term per link, a shuffle of the statements); seeded: ours, hash-seeded by
# coordinates, names built from first names and surnames, the few-shot examples' names left out
ATC_MC_OPTIONS: dict[str, Option] = {"chain_draw": Option("opencompass", "seeded")}

# OpenCompass v1 (atc_choice_20.py): needle_num_list = range(2, 20); the paper's L = 19.
DEFAULT_STEPS: tuple[int, ...] = tuple(range(2, 20))
STYLES = ("direct", "reasoning")
# OpenCompass's circular patterns: rotation r shows base option (r + i) % 4 at letter i.
ROTATIONS = ("ABCD", "BCDA", "CDAB", "DABC")
_OC_LANG = {"en": "English", "zh": "Chinese"}

# ----------------------------------------------------------------------------------------------
# Protocol text, copied verbatim from OpenCompass 0.5.4
# (datasets/needlebench/atc_choice.py and configs/datasets/needlebench/atc/atc_choice_20.py).
# ----------------------------------------------------------------------------------------------

# Relationship terms, in OpenCompass's order (the same in its v1 and v2 ATC).
V1_TERMS: dict[str, tuple[str, ...]] = REFERENCE_TERMS

# Statement templates: {A} is the elder, {B} the younger (one template names no relationship).
V1_TEMPLATES: dict[str, tuple[str, ...]] = {
    "zh": (
        "{A}是{B}的{relationship}。",
        "{B}的{relationship}是{A}。",
        "{A}作为{B}的{relationship}，对{B}的成长有重要影响。",
        "{A}不仅是{B}的{relationship}，还是{B}的榜样。",
        "{B}是{A}所生的孩子。",
        "{A}对{B}来说，不只是一个{relationship}，还是一个朋友。",
        "{A}在{B}的生命中扮演着{relationship}的角色。",
        "{B}把{A}视为其{relationship}。",
    ),
    "en": (
        "{A} is {B}'s {relationship}.",
        "{B}'s {relationship} is {A}.",
        "{A}, as {B}'s {relationship}, has a significant impact on {B}'s upbringing.",
        "{A} is not only {B}'s {relationship} but also {B}'s role model.",
        "{B} is the child of {A}.",
        "For {B}, {A} is not just a {relationship}, but also a friend.",
        "{A} plays the role of {B}'s {relationship} in {B}'s life.",
        "{B} considers {A} as their {relationship}.",
    ),
}

# The question; it starts with a newline and follows the story after one space.
V1_QUESTION: dict[str, str] = {
    "zh": "\n在上面提供的打乱的家族关系文本中，'{last_person}'的能够向上追溯到的最年长的亲人是谁？",
    "en": (
        "\nGiven the scrambled family relationships described above, who is the eldest relative "
        "that '{last_person}' can trace back to in the context?"
    ),
}


# Few-shot rounds, (role, prompt), keyed by (lang, style); the last ``shots`` pairs are used.
_SHOTS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    ("zh", "direct"): (
        (
            "HUMAN",
            '问题: 毕东作为刘红的爸爸，对刘红的成长有重要影响。 \n在上面提供的打乱的家族关系文本中，"刘红"的能够向上追溯到的最年长的亲人是谁？\nA. 毕东\nB. 刘红\nC. 李清亮\nD. 王展\n',
        ),
        ("BOT", "回答: A"),
        (
            "HUMAN",
            '问题: 梅建平作为黄玉兰的姥姥，对黄玉兰的成长有重要影响。梅建平的妈妈是朱丽丽。蓝鑫把黄玉兰视为其母亲。焦慧不仅是朱丽丽的妈妈，还是朱丽丽的榜样。 \n在上面提供的打乱的家族关系文本中，"蓝鑫"的能够向上追溯到的最年长的亲人是谁？\nA. 梅建平\nB. 朱丽丽\nC. 蓝鑫\nD. 焦慧\n',
        ),
        ("BOT", "回答: D"),
        (
            "HUMAN",
            '问题: 毕东把柳金凤视为其姥姥。奉兵作为柳金凤的妈妈，对柳金凤的成长有重要影响。余萍把杨颖视为其爸爸。毕东在郭建华的生命中扮演着父亲的角色。常宁的外公是余萍。刘慧是郭建华所生的孩子。刘慧在杨颖的生命中扮演着外公的角色。 \n在上面提供的打乱的家族关系文本中，"常宁"的能够向上追溯到的最年长的亲人是谁？\nA. 柳金凤\nB. 毕东\nC. 奉兵\nD. 余萍\n',
        ),
        ("BOT", "回答: C"),
        (
            "HUMAN",
            '问题: 魏丽丽在谢平的生命中扮演着奶奶的角色。郭兵是魏阳的姥姥。谢平是郑玉珍的外婆。丁颖把武波视为其外公。丁颖在李建国的生命中扮演着外婆的角色。武波的父亲是刘瑜。许玲把余桂芳视为其父亲。刘瑜把许玲视为其爷爷。李建国对郭兵来说，不只是一个爷爷，还是一个朋友。魏丽丽的外公是魏阳。 \n在上面提供的打乱的家族关系文本中，"郑玉珍"的能够向上追溯到的最年长的亲人是谁？\nA. 魏丽丽\nB. 刘瑜\nC. 李建国\nD. 余桂芳\n',
        ),
        ("BOT", "回答: D"),
    ),
    ("en", "direct"): (
        (
            "HUMAN",
            "Question: Jasmine Lane plays the role of James Hill's father in James Hill's life. \nGiven the scrambled family relationships described above, who is the eldest relative that 'James Hill' can trace back to in the context?\nA. Jasmine Lane\nB. James Hill\nC. Christopher Flores\nD. Paula Reeves\n",
        ),
        ("BOT", "Answer: A"),
        (
            "HUMAN",
            "Question: For Michael Goodwin, Annette Valdez is not just a dad, but also a friend.For Annette Valdez, Mary Sanders is not just a father, but also a friend. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Michael Goodwin' can trace back to in the context?\nA. Michael Goodwin\nB. Annette Valdez\nC. Mary Sanders\nD. James Mitchell\n",
        ),
        ("BOT", "Answer: C"),
        (
            "HUMAN",
            "Question: Laura Garcia considers Mr. Stephen Valdez DDS as their mom.Mr. Stephen Valdez DDS's maternal grandfather is Elizabeth Smith.Laura Garcia is Ashley Johnson's mom. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Ashley Johnson' can trace back to in the context?\nA. Ashley Johnson\nB. Mr. Stephen Valdez DDS\nC. Laura Garcia\nD. Elizabeth Smith\n",
        ),
        ("BOT", "Answer: D"),
        (
            "HUMAN",
            "Question: Justin Sanchez's paternal grandfather is Laurie Bean.For Laurie Bean, Christina Kim is not just a mother, but also a friend.Jessica Bass, as Christina Kim's maternal grandfather, has a significant impact on Christina Kim's upbringing.Sarah Hampton considers Justin Sanchez as their father. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Sarah Hampton' can trace back to in the context?\nA. Christina Kim\nB. Jessica Bass\nC. Laurie Bean\nD. Justin Sanchez\n",
        ),
        ("BOT", "Answer: B"),
    ),
    ("zh", "reasoning"): (
        (
            "HUMAN",
            '问题: 毕东作为刘红的爸爸，对刘红的成长有重要影响。 \n在上面提供的打乱的家族关系文本中，"刘红"的能够向上追溯到的最年长的亲人是谁？\nA. 毕东\nB. 刘红\nC. 李清亮\nD. 王展\n',
        ),
        (
            "BOT",
            '回答: 根据提供的信息，我们可以构建以下家族关系链：\n\n- 刘红的爸爸是毕东。\n\n因此，"刘红"能够向上追溯到的最年长的亲人是毕东。所以答案是：A',
        ),
        (
            "HUMAN",
            '问题: 梅建平作为黄玉兰的姥姥，对黄玉兰的成长有重要影响。梅建平的妈妈是朱丽丽。蓝鑫把黄玉兰视为其母亲。焦慧不仅是朱丽丽的妈妈，还是朱丽丽的榜样。 \n在上面提供的打乱的家族关系文本中，"蓝鑫"的能够向上追溯到的最年长的亲人是谁？\nA. 梅建平\nB. 朱丽丽\nC. 蓝鑫\nD. 焦慧\n',
        ),
        (
            "BOT",
            '回答: 根据提供的信息，我们可以构建以下家族关系链：\n\n- 蓝鑫把黄玉兰视为其母亲。\n- 黄玉兰的姥姥是梅建平。\n- 梅建平的妈妈是朱丽丽。\n- 朱丽丽的妈妈是焦慧。\n\n因此，"蓝鑫"能够向上追溯到的最年长的亲人是焦慧。所以答案是：D',
        ),
        (
            "HUMAN",
            '问题: 毕东把柳金凤视为其姥姥。奉兵作为柳金凤的妈妈，对柳金凤的成长有重要影响。余萍把杨颖视为其爸爸。毕东在郭建华的生命中扮演着父亲的角色。常宁的外公是余萍。刘慧是郭建华所生的孩子。刘慧在杨颖的生命中扮演着外公的角色。 \n在上面提供的打乱的家族关系文本中，"常宁"的能够向上追溯到的最年长的亲人是谁？\nA. 柳金凤\nB. 毕东\nC. 奉兵\nD. 余萍\n',
        ),
        (
            "BOT",
            '回答: 根据提供的信息，我们可以构建以下家族关系链：\n\n- 常宁的外公是余萍。\n- 余萍把杨颖视为其爸爸。\n- 杨颖的外公是刘慧。\n- 刘慧是郭建华所生的孩子。\n- 郭建华的父亲是毕东。\n- 毕东的姥姥是柳金凤。\n- 柳金凤的妈妈是奉兵。\n\n因此，"常宁"能够向上追溯到的最年长的亲人是奉兵。所以答案是：C',
        ),
        (
            "HUMAN",
            '问题: 魏丽丽在谢平的生命中扮演着w奶奶的角色。郭兵是魏阳的姥姥。谢平是郑玉珍的外婆。丁颖把武波视为其外公。丁颖在李建国的生命中扮演着外婆的角色。武波的父亲是刘瑜。许玲把余桂芳视为其父亲。刘瑜把许玲视为其爷爷。李建国对郭兵来说，不只是一个爷爷，还是一个朋友。魏丽丽的外公是魏阳。 \n在上面提供的打乱的家族关系文本中，"郑玉珍"的能够向上追溯到的最年长的亲人是谁？\nA. 魏丽丽\nB. 刘瑜\nC. 李建国\nD. 余桂芳\n',
        ),
        (
            "BOT",
            '回答: 根据提供的信息，我们可以构建以下家族关系链：\n\n- 郑玉珍的外婆是谢平。\n- 谢平的奶奶是魏丽丽。\n- 魏丽丽的外公是魏阳。 \n- 魏阳的姥姥是郭兵。\n- 郭兵的爷爷是李建国。 \n- 李建国的外婆是丁颖。 \n- 丁颖的外公是武波。 \n- 武波的父亲是刘瑜。\n- 刘瑜的爷爷是许玲。\n- 许玲的父亲是余桂芳。 \n\n因此，"郑玉珍"能够向上追溯到的最年长的亲人是余桂芳。所以答案是：D',
        ),
    ),
    ("en", "reasoning"): (
        (
            "HUMAN",
            "Question: Sharon House, as Jessica Stewart's father, has a significant impact on Jessica Stewart's upbringing. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Jessica Stewart' can trace back to in the context?\nA. Jack Burch\nB. Jessica Stewart\nC. Sharon House\nD. Carolyn Jackson\n",
        ),
        (
            "BOT",
            "Answer: Based on the provided information, we can construct the following family relationship chain：\n\n- Sharon House, as Jessica Stewart's father, has a significant impact on Jessica Stewart's upbringing.\n\nTherefore, the eldest relative that 'Jessica Stewart' can trace back to in the context is Sharon House. The answer is: C",
        ),
        (
            "HUMAN",
            "Question: For Robert Hill, Mikayla Scott is not just a paternal grandfather, but also a friend.Jacob Oconnor's paternal grandmother is Robert Hill. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Jacob Oconnor' can trace back to in the context?\nA. Laura Holland\nB. Robert Hill\nC. Jacob Oconnor\nD. Mikayla Scott\n",
        ),
        (
            "BOT",
            "Answer: Based on the provided information, we can construct the following family relationship chain：\n\n-Jacob Oconnor's paternal grandmother is Robert Hill. \n- For Robert Hill, Mikayla Scott is not just a paternal grandfather, but also a friend.\n\nTherefore, the eldest relative that 'Jacob Oconnor' can trace back to in the context is Mikayla Scott. The answer is: D",
        ),
        (
            "HUMAN",
            "Question: Misty Moore plays the role of Barbara Fuentes's maternal grandfather in Barbara Fuentes's life.Jennifer Garcia, as Michael Martinez's grandmother, has a significant impact on Michael Martinez's upbringing.Michael Martinez is not only Misty Moore's father but also Misty Moore's role model. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Barbara Fuentes' can trace back to in the context?\nA. Michael Martinez\nB. Jennifer Garcia\nC. Misty Moore\nD. Barbara Fuentes\n",
        ),
        (
            "BOT",
            "Answer: Based on the provided information, we can construct the following family relationship chain：\n- Misty Moore plays the role of Barbara Fuentes's maternal grandfather in Barbara Fuentes's life. \n- Michael Martinez is not only Misty Moore's father but also Misty Moore's role model.\n- Jennifer Garcia, as Michael Martinez's grandmother, has a significant impact on Michael Martinez's upbringing.\n\nTherefore, the eldest relative that 'Barbara Fuentes' can trace back to in the context is Jennifer Garcia. The answer is: B",
        ),
        (
            "HUMAN",
            "Question: Carlos Smith, as Mary Gay's grandfather, has a significant impact on Mary Gay's upbringing.Victor Dean considers Mary Gay as their grandfather.Marcus Miller, as Carlos Smith's paternal grandfather, has a significant impact on Carlos Smith's upbringing.Victor Dean is not only Danielle Yates's maternal grandmother but also Danielle Yates's role model.Danielle Yates is not only David Hernandez's paternal grandmother but also David Hernandez's role model.David Hernandez is Jennifer Williams's mom. \nGiven the scrambled family relationships described above, who is the eldest relative that 'Jennifer Williams' can trace back to in the context?\nA. Marcus Miller\nB. Carlos Smith\nC. Mary Gay\nD. Victor Dean\n",
        ),
        (
            "BOT",
            "Answer: Based on the provided information, we can construct the following family relationship chain：\n\n- David Hernandez is Jennifer Williams's mom.\n- Danielle Yates is not only David Hernandez's paternal grandmother but also David Hernandez's role model.\n- Victor Dean is not only Danielle Yates's maternal grandmother but also Danielle Yates's role model.\n- Victor Dean considers Mary Gay as their grandfather. \n- Carlos Smith, as Mary Gay's grandfather, has a significant impact on Mary Gay's upbringing.\n- Marcus Miller, as Carlos Smith's paternal grandfather, has a significant impact on Carlos Smith's upbringing.\n\nTherefore, the eldest relative that 'Jennifer Williams' can trace back to in the context is Marcus Miller. The answer is: A",
        ),
    ),
}
_FINAL_TURN = {
    "zh": "问题: {question}",
    "en": "Question: {question}",
}


def grade_atc_mc(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """One rotation: correct iff the extracted letter is the gold letter.

    Args:
        prediction: the model output, read as OpenCompass reads it (unchanged; thinking stripped only when
            ``options.strip_think`` is True).
        gold: ``{"answer": letter, "options": [...], "answer_text": name}``.
        options: evaluator settings; only ``strip_think`` matters here.

    No letter is a format failure (``no_option``); a wrong letter is ``wrong_option``.
    """
    letter = first_option(prepare(prediction, options, clean=False))
    if not letter:
        return SampleScore(0.0, False, format_failure=True, error="no_option")
    chosen = gold["options"][LETTERS.index(letter)] if len(gold.get("options", ())) == 4 else None
    correct = letter == gold["answer"]
    return SampleScore(
        100.0 if correct else 0.0,
        correct,
        extracted=letter,
        error=None if correct else "wrong_option",
        extras={"chosen": chosen},
    )


def oracle_atc_mc(gold: dict) -> str:
    """A perfect answer to one rotation: the gold letter, as OpenCompass's extraction reads it.

    Args:
        gold: the sample's gold (``answer``: the letter).
    """
    return f"Answer: {gold['answer']}"


# ----------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AtcMcParams(ProtocolParams):
    """Parameters of the 2024 multiple-choice ATC.

    Args:
        lang: "en" or "zh".
        steps: people per chain (OpenCompass's ``num_needles``); the paper's 2..19 by default.
        style: "direct", "reasoning" (few-shot answers with a reasoning path) or "both".
        repeats: questions per step count (the paper's R = 10).
        seed: varies every name and choice under ``chain_draw="seeded"`` (OpenCompass's draw, the reference
            one, depends on the question's index alone, as its ``atc_choice.py`` seeds it).
        shots: few-shot examples, 1..4 (the last ones, as OpenCompass slices them); the paper used 4.
        encoding: tokenizer for ``prompt_tokens``.
        corpus: ``"opencompass"`` (or ``"auto"`` with the files present): names from its ``names.json``.
        protocol: ``"reference"`` or ``"clarified"``.
        chain_draw: ``""`` (what the protocol says), ``"opencompass"`` or ``"seeded"`` (``ATC_MC_OPTIONS``).
    """

    OPTIONS = ATC_MC_OPTIONS
    lang: str
    steps: tuple[int, ...] = DEFAULT_STEPS
    style: str = "both"
    repeats: int = 10
    seed: int = 0
    shots: int = 4
    encoding: str = "cl100k_base"
    corpus: str = "packaged"
    protocol: str = "reference"
    chain_draw: str = ""

    @property
    def styles(self) -> tuple[str, ...]:
        """The styles to generate: both for ``style="both"``, else the one named."""
        return STYLES if self.style == "both" else (self.style,)


def _validate(p: AtcMcParams) -> None:
    if p.lang not in _OC_LANG:
        raise ConfigError(f"lang: unknown language {p.lang!r}; choose from {tuple(_OC_LANG)}")
    if p.style not in (*STYLES, "both"):
        raise ConfigError(f"style: unknown style {p.style!r}; choose from {(*STYLES, 'both')}")
    if not p.steps:
        raise ConfigError("steps: give at least one step count")
    for n in p.steps:
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ConfigError(f"steps: {n!r} must be an integer of at least 2 (people in the chain)")
    if len(set(p.steps)) != len(p.steps):
        raise ConfigError(f"steps: {list(p.steps)} repeats a step count")
    if not isinstance(p.repeats, int) or p.repeats < 1:
        raise ConfigError(f"repeats: {p.repeats!r} must be at least 1")
    if not isinstance(p.shots, int) or not 1 <= p.shots <= 4:
        raise ConfigError(f"shots: {p.shots!r} must be 1..4 (OpenCompass has four examples)")
    p.options()


def few_shot_rounds(lang: str, style: str, shots: int = 4) -> list[dict[str, str]]:
    """The few-shot turns (OpenCompass roles HUMAN/BOT) that precede the question.

    Args:
        lang: "en" or "zh".
        style: "direct" or "reasoning".
        shots: how many examples, taken from the end as OpenCompass does.
    """
    rounds = _SHOTS[(lang, style)]
    return [dict(role=role, prompt=text) for role, text in rounds[len(rounds) - 2 * shots :]]


def oc_template_rounds(lang: str, style: str, shots: int = 4) -> list[dict[str, str]]:
    """An OpenCompass ``PromptTemplate`` round list: the few-shot turns, then the sample's ``{prompt}``.

    Our ``Sample.prompt`` already holds the whole last turn ("Question: ..."), so the
    rendered dialogue equals OpenCompass's v1 ATC dialogue.

    Args:
        lang: ``"en"`` or ``"zh"``.
        style: ``"direct"`` or ``"reasoning"``.
        shots: how many examples, taken from the end as OpenCompass does.
    """
    return [*few_shot_rounds(lang, style, shots), dict(role="HUMAN", prompt="{prompt}")]


def chat_messages(sample: Sample) -> list[dict[str, str]]:
    """The full dialogue of one sample as chat messages (user/assistant), for runners without templates."""
    roles = {"HUMAN": "user", "BOT": "assistant"}
    rounds = few_shot_rounds(sample.lang, sample.meta["style"], sample.meta["shots"])
    return [{"role": roles[r["role"]], "content": r["prompt"]} for r in rounds] + [
        {"role": "user", "content": sample.prompt}
    ]


@dataclass(frozen=True)
class _Question:
    """One question before rotation: chain eldest-first, statements in presented order, base options."""

    names: tuple[str, ...]
    statements: tuple[str, ...]
    links: tuple[tuple[int, int], ...]  # (template index, term index) per link, eldest link first
    options: tuple[str, ...]


@functools.cache
def _example_names(lang: str) -> frozenset[str]:
    """Names in the few-shot examples' option lists; our chains never reuse them."""
    found: set[str] = set()
    for style in STYLES:
        for role, text in _SHOTS[(lang, style)]:
            if role == "HUMAN":
                found.update(re.findall(r"^[A-D]\. (.+)$", text, re.M))
    return frozenset(found)


def _draw_names(pool: NamePool, count: int, *coords: object) -> list[str]:
    return list(distinct_names(pool, count, rng("atc_mc", "names", *coords), _example_names(pool.lang)))


def _make_question(pool: NamePool, steps: int, repeat: int, seed: int) -> _Question:
    """A chain of ``steps`` people, its shuffled statements and the four base options (gold first).

    Independent of the prompt style, so "direct" and "reasoning" ask the same questions.
    """
    lang = pool.lang
    people = _draw_names(pool, max(steps, 4), lang, steps, repeat, seed)
    names, outsiders = people[:steps], people[steps:]
    r = rng("atc_mc", "chain", lang, steps, repeat, seed)
    links, statements = [], []
    for elder, younger in zip(names, names[1:]):
        t = r.randrange(len(V1_TEMPLATES[lang]))
        k = r.randrange(len(V1_TERMS[lang]))
        links.append((t, k))
        statements.append(V1_TEMPLATES[lang][t].format(A=elder, B=younger, relationship=V1_TERMS[lang][k]))
    r.shuffle(statements)
    options = (names + outsiders)[:4]
    return _Question(tuple(names), tuple(statements), tuple(links), tuple(options))


def _reference_question(names: Sequence[str], steps: int, repeat: int, lang: str) -> _Question:
    """Question ``repeat`` of a step count as OpenCompass v1's ``atc_choice.py`` draws it.

    Its global ``seed(id)`` made private: ``sample(names, steps)``, then per link ``choice(templates)`` and
    ``choice(terms)``; the statements, each ended by a ``*`` and split on it (an empty last fragment
    included), are shuffled and joined; a chain of fewer than four people gets outsiders from ``sample``
    over the other names. The same draw for both styles, as OpenCompass seeds each question by its index.

    Raises:
        ConfigError: the name list is too short for the chain and its options.
    """
    if max(steps, 4) > len(names):
        raise ConfigError(f"names: {max(steps, 4)} names needed, the name list holds {len(names)}")
    r = random.Random(repeat)
    people = r.sample(list(names), steps)
    templates, terms = V1_TEMPLATES[lang], V1_TERMS[lang]
    links, fragments = [], []
    for elder, younger in zip(people, people[1:]):
        t = r.choice(range(len(templates)))  # the same draw as choice(templates)
        k = r.choice(range(len(terms)))
        links.append((t, k))
        fragments.append(templates[t].format(A=elder, B=younger, relationship=terms[k]))
    fragments.append("")  # "a*b*".split("*") ends with an empty fragment, shuffled with the rest
    r.shuffle(fragments)
    outsiders = r.sample([n for n in names if n not in people], 4 - steps) if steps < 4 else []
    statements = tuple(f for f in fragments if f)
    return _Question(tuple(people), statements, tuple(links), tuple([*people, *outsiders][:4]))


def render_question(lang: str, statements: Sequence[str], last_person: str, options: Sequence[str]) -> str:
    """OpenCompass's v1 question text for one rotation: story, question line, lettered options.

    Args:
        lang: "en" or "zh".
        statements: the relationship sentences in presented order (joined with no separator).
        last_person: the youngest person, whose eldest relative is asked for.
        options: the four option texts in displayed order.
    """
    question = "".join(statements) + " " + V1_QUESTION[lang].format(last_person=last_person)
    lettered = "".join(f"{letter}. {option}\n" for letter, option in zip(LETTERS, options))
    return question.strip() + "\n" + lettered


def _last_turn(lang: str, question: str) -> str:
    return _FINAL_TURN[lang].replace("{question}", question)


def generate_atc_mc(p: AtcMcParams) -> Iterator[Sample]:
    """Four samples (one per rotation of the options) per (style, steps, repeat).

    Args:
        p: the task parameters.
    """
    _validate(p)
    opts = p.options()
    drawn = opts["chain_draw"] == "opencompass"
    names_file = opencompass_data_file(p.lang, p.corpus, "names.json") if drawn else ""
    names = load_name_list(p.lang, names_file) if drawn else ()
    pool = load_name_pool(p.lang)
    enc = get_encoding(p.encoding)
    shot_tokens = {
        style: sum(len(enc.encode_ordinary(r["prompt"])) for r in few_shot_rounds(p.lang, style, p.shots))
        for style in p.styles
    }
    for style in p.styles:
        for steps in p.steps:
            for repeat in range(p.repeats):
                q = (
                    _reference_question(names, steps, repeat, p.lang)
                    if drawn
                    else _make_question(pool, steps, repeat, p.seed)
                )
                base = render_question(p.lang, q.statements, q.names[-1], q.options)
                group = sample_id("atc_mc", p.lang, style, steps, repeat, prompt=base)
                for rotation, pattern in enumerate(ROTATIONS):
                    shown = [q.options[(rotation + i) % 4] for i in range(4)]
                    letter = LETTERS[shown.index(q.options[0])]
                    prompt = _last_turn(p.lang, render_question(p.lang, q.statements, q.names[-1], shown))
                    meta = {
                        "num_needles": steps,
                        "repeat": repeat,
                        "style": style,
                        "shots": p.shots,
                        "circular_group": group,
                        "rotation": rotation,
                        "circular_pattern": pattern,
                        "chain": list(q.names),
                        "protocol": p.protocol,
                        "options": opts,
                        "names": names_file or ("packaged name list" if drawn else "packaged name pool"),
                        "profile": "v1",
                        "prompt_tokens": shot_tokens[style] + len(enc.encode_ordinary(prompt)),
                        "seed": p.seed,
                        "encoding": p.encoding,
                        "version": DATASET_VERSION,
                    }
                    yield Sample(
                        id=sample_id("atc_mc", p.lang, style, steps, repeat, f"r{rotation}", prompt=prompt),
                        task="atc_mc",
                        lang=p.lang,
                        prompt=prompt,
                        gold={"answer": letter, "options": shown, "answer_text": q.options[0]},
                        meta=meta,
                    )


ATC_MC = TaskSpec(
    "atc_mc",
    "dense",
    AtcMcParams,
    generate_atc_mc,
    grade_atc_mc,
    "Ancestral Trace Challenge, multiple choice (2024)",
    oracle_atc_mc,
    label="ATC (v1)",
    results="needlebench.tasks.atc.choice_results:RESULTS",
    meta_keys=("repeat", "num_needles", "style", "circular_group", "rotation", "circular_pattern"),
    cell=("num_needles",),
    breakdowns={"num_needles": "needles"},
    error_kinds=("no_option", "wrong_option"),
    report_text=(
        "ATC (v1): multiple choice under circular evaluation: a question counts as right only when all four "
        "rotations of its options are answered right."
    ),
    inputs=haystack_inputs,
)
