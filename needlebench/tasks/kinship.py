"""Kinship chains: the generator behind ATC and M-RS.

A chain p1 -> p2 -> ... -> pN+1 has one statement per link saying that
p_i is p_{i+1}'s parent-level (1 generation) or grandparent-level (2)
relative. Statements are shuffled; questions ask for the eldest ancestor,
the G-th ancestor or descendant, or the distance G. Everything is a pure
function of the name pool, the sample's coordinates and the seed.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..seeding import rng
from .reference_text import REFERENCE_TEMPLATES, REFERENCE_TERMS

__all__ = [
    "QUESTION_TYPES",
    "Relation",
    "Link",
    "KinshipChain",
    "KinshipQuestion",
    "NamePool",
    "load_name_pool",
    "make_chain",
    "reference_chain",
    "load_name_list",
    "ask",
    "ordinal",
    "RELATIONS",
    "TEMPLATES",
    "rules_text",
]

QUESTION_TYPES = ("eldest_ancestor", "nth_ancestor", "nth_descendant", "relationship_distance")
_NAMES_DIR = Path(__file__).resolve().parents[1] / "data" / "names"


@dataclass(frozen=True)
class Relation:
    """A kinship term and the generations it spans (1 or 2)."""

    term: str
    generations: int


RELATIONS: dict[str, tuple[Relation, ...]] = {
    "en": tuple(
        Relation(t, g)
        for t, g in (
            ("father", 1),
            ("mother", 1),
            ("dad", 1),
            ("mom", 1),
            ("grandfather", 2),
            ("grandmother", 2),
            ("maternal grandmother", 2),
            ("maternal grandfather", 2),
            ("paternal grandfather", 2),
            ("paternal grandmother", 2),
        )
    ),
    "zh": tuple(
        Relation(t, g)
        for t, g in (
            ("父亲", 1),
            ("母亲", 1),
            ("爸爸", 1),
            ("妈妈", 1),
            ("爷爷", 2),
            ("奶奶", 2),
            ("姥姥", 2),
            ("姥爷", 2),
            ("外公", 2),
            ("外婆", 2),
        )
    ),
}

# {A} is the elder, {B} the younger. The younger's possessive always sits right
# before the term ("B's mother", "B的母亲"), and the dual-role templates add a
# second role that carries no generations.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "en": (
        "{A} is {B}'s {rel}.",
        "{B}'s {rel} is {A}.",
        "{A}, as {B}'s {rel}, has shaped much of {B}'s upbringing.",
        "{A} is not only {B}'s {rel} but also {B}'s role model.",
        "{A} is {B}'s {rel} and, beyond that, {B}'s lifelong mentor.",
        "{B} looks up to {A}, who is {B}'s {rel} and also {B}'s guardian.",
        "{B}'s {rel}, {A}, taught {B} to read.",
    ),
    "zh": (
        "{A}是{B}的{rel}。",
        "{B}的{rel}是{A}。",
        "{A}作为{B}的{rel}，对{B}的成长影响很大。",
        "{A}不仅是{B}的{rel}，也是{B}的老师。",
        "在{B}的成长过程中，{A}既是{B}的{rel}，也是{B}的监护人。",
        "{A}身为{B}的{rel}，一直是{B}最信任的人。",
        "{B}的{rel}{A}教会了{B}读书写字。",
    ),
}


@dataclass(frozen=True)
class NamePool:
    """First names and surnames of one language."""

    lang: str
    first: tuple[str, ...]
    last: tuple[str, ...]


@functools.lru_cache(maxsize=4)
def load_name_pool(lang: str) -> NamePool:
    """The committed name snapshot (from Faker), so names never change with a library upgrade."""
    path = _NAMES_DIR / f"names_{lang}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"names: cannot read {path}: {exc}") from exc
    # Chinese: one-character surnames and given-name characters, so every name is
    # exactly three characters and none is a prefix of another.
    last = tuple(n for n in data["last"] if lang != "zh" or len(n) == 1)
    first = tuple(n for n in data["first"] if lang != "zh" or len(n) == 1)
    return NamePool(lang, first, last)


# Names used in the worked examples; a chain never uses them.
_EXAMPLE_NAMES = frozenset(
    {"Kim Ray", "Lee Fox", "Ann Cole", "Bo Hart", "Cy Lund", "Jane Doe", "张明", "李强", "王芳", "赵红", "钱进", "张三"}
)


def distinct_names(
    pool: NamePool, count: int, r: random.Random, exclude: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """``count`` distinct full names drawn with ``r`` (Chinese: surname + two-character given name).

    Args:
        pool: the language's name pool.
        count: how many names.
        r: the caller's seeded generator (its coordinates decide the names).
        exclude: names never to use (those of worked examples).

    Raises:
        ConfigError: the pool cannot supply that many distinct names.
    """
    names: list[str] = []
    seen: set[str] = set(exclude)
    attempts = 0
    while len(names) < count:
        attempts += 1
        if attempts > 100 * count + 1000:
            raise ConfigError(f"names: the {pool.lang} name pool cannot supply {count} distinct names")
        if pool.lang == "zh":
            name = r.choice(pool.last) + r.choice(pool.first) + r.choice(pool.first)
        else:
            name = f"{r.choice(pool.first)} {r.choice(pool.last)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return tuple(names)


def _names(pool: NamePool, count: int, *coords: object) -> tuple[str, ...]:
    return distinct_names(pool, count, rng("names", *coords), _EXAMPLE_NAMES)


@dataclass(frozen=True)
class Link:
    """One link of a chain: elder, younger, the term between them, its generations and its sentence."""

    elder: str
    younger: str
    term: str
    generations: int
    statement: str


@dataclass(frozen=True)
class KinshipChain:
    """Names from eldest (p1) to youngest (pN+1), links in reasoning order, and a presentation order."""

    lang: str
    names: tuple[str, ...]
    links: tuple[Link, ...]
    presented: tuple[int, ...]

    @property
    def generations(self) -> int:
        """Total generations from the eldest to the youngest name."""
        return sum(link.generations for link in self.links)

    def statements(self) -> list[str]:
        """The link statements in presentation (shuffled) order."""
        return [self.links[i].statement for i in self.presented]

    def as_meta(self) -> list[dict[str, object]]:
        """The links in reasoning order as plain dicts, for a sample's metadata."""
        return [
            {"elder": x.elder, "younger": x.younger, "term": x.term, "generations": x.generations} for x in self.links
        ]


def make_chain(pool: NamePool, num_needles: int, *coords: object, style: str = "clarified") -> KinshipChain:
    """A chain of ``num_needles`` links over ``num_needles + 1`` distinct names.

    Args:
        pool: the language's name pool.
        num_needles: links in the chain.
        *coords: the sample's coordinates (with the seed); every draw derives from them.
        style: ``"reference"`` uses OpenCompass v2's sentence templates, ``"clarified"`` ours.
    """
    if num_needles < 1:
        raise ConfigError(f"num_needles: {num_needles} must be at least 1")
    lang = pool.lang
    names = _names(pool, num_needles + 1, lang, *coords)
    r = rng("chain", lang, *coords)
    templates = REFERENCE_TEMPLATES[lang] if style == "reference" else TEMPLATES[lang]
    links = []
    for elder, younger in zip(names, names[1:]):
        rel = r.choice(RELATIONS[lang])
        template = r.choice(templates)
        statement = template.format(A=elder, B=younger, rel=rel.term, relationship=rel.term)
        links.append(Link(elder, younger, rel.term, rel.generations, statement))
    order = list(range(len(links)))
    r.shuffle(order)
    return KinshipChain(lang, names, tuple(links), tuple(order))


def reference_chain(names: Sequence[str], num_needles: int, r: random.Random, lang: str) -> KinshipChain:
    """A chain drawn exactly as OpenCompass v2 draws it, from ``r`` (the sequence of its global ``seed(seed)``).

    ``atc.py`` and ``multi.py``: ``sample(names, num_needles + 1)``; per link ``choice(templates)`` then
    ``choice(terms)``; then ``shuffle`` of the statements. Generations follow OpenCompass's map (an
    unknown term counts 1). The caller owns ``r``: a private ``random.Random(seed)``, never the global one.

    Args:
        names: the flat name list (``names.json``'s comma-separated list of the language).
        num_needles: links in the chain.
        r: the seeded generator, fresh at OpenCompass's seed.
        lang: ``"en"`` or ``"zh"``.

    Raises:
        ConfigError: the name list is shorter than the chain.
    """
    if num_needles + 1 > len(names):
        raise ConfigError(f"names: {num_needles + 1} names needed, the name list holds {len(names)}")
    chosen = tuple(r.sample(list(names), num_needles + 1))
    weight = {rel.term: rel.generations for rel in RELATIONS[lang]}
    links = []
    for elder, younger in zip(chosen, chosen[1:]):
        template = r.choice(REFERENCE_TEMPLATES[lang])
        term = r.choice(REFERENCE_TERMS[lang])
        statement = template.format(A=elder, B=younger, relationship=term)
        links.append(Link(elder, younger, term, weight.get(term, 1), statement))
    order = list(range(len(links)))
    r.shuffle(order)  # the same swaps as shuffling the statements themselves
    return KinshipChain(lang, chosen, tuple(links), tuple(order))


_OC_LANGUAGE = {"en": "English", "zh": "Chinese"}


@functools.lru_cache(maxsize=8)
def load_name_list(lang: str, path: str = "") -> tuple[str, ...]:
    """The flat name list OpenCompass's ATC and M-RS draw from.

    With ``path`` (OpenCompass's ``names.json``: ``{"English": "name,name,...", "Chinese": ...}``) its
    list, split on commas as OpenCompass splits it; without, 2000 distinct names drawn once from the
    packaged pool (the worked examples' names left out), so the reference algorithm also runs offline.

    Args:
        lang: ``"en"`` or ``"zh"``.
        path: a ``names.json`` file, or ``""`` for the packaged pool.

    Raises:
        ConfigError: the file cannot be read or lacks the language.
    """
    if not path:
        return distinct_names(load_name_pool(lang), 2000, rng("name-list", lang), _EXAMPLE_NAMES)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return tuple(data[_OC_LANGUAGE[lang]].split(","))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"names: {path} is not OpenCompass's names.json ({exc})") from exc


def ordinal(n: int, lang: str = "en") -> str:
    """An ordinal for question text: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ...; Chinese 第N代.

    Args:
        n: the number.
        lang: ``"en"`` or ``"zh"``.
    """
    if lang == "zh":
        return f"第{n}代"
    if 10 <= n % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class KinshipQuestion:
    """A question about a chain: its type and text, the answer, its kind and the person asked about."""

    type: str
    text: str
    answer: str
    kind: str  # "name" or "int"
    subject: str


_QUESTIONS = {
    "en": {
        "eldest_ancestor": "Given the scrambled family relationships above, who is the eldest ancestor that '{young}' can be traced back to?",
        "nth_ancestor": "Given the scrambled family relationships above, who is the {ord} generation ancestor of '{young}'?",
        "nth_descendant": "Given the scrambled family relationships above, who is the {ord} generation descendant of '{old}'?",
        "relationship_distance": "Given the scrambled family relationships above, how many generations apart are '{old}' and '{young}'? Answer with a whole number.",
    },
    "zh": {
        "eldest_ancestor": "根据上面打乱顺序的家族关系，'{young}'能够向上追溯到的最年长的祖先是谁？",
        "nth_ancestor": "根据上面打乱顺序的家族关系，'{young}'的{ord}祖先是谁？",
        "nth_descendant": "根据上面打乱顺序的家族关系，'{old}'的{ord}后代是谁？",
        "relationship_distance": "根据上面打乱顺序的家族关系，'{old}'和'{young}'之间相隔多少代？请用阿拉伯数字回答。",
    },
}


def ask(chain: KinshipChain, question_type: str) -> KinshipQuestion:
    """The question of one type about a chain, with its answer.

    Eldest ancestor and N-th ancestor ask about the youngest name (answer: the eldest); N-th descendant
    asks about the eldest (answer: the youngest); distance asks for the total generations.

    Args:
        chain: the chain to ask about.
        question_type: one of :data:`QUESTION_TYPES`.

    Raises:
        ConfigError: an unknown question type.
    """
    if question_type not in QUESTION_TYPES:
        raise ConfigError(f"question_types: unknown {question_type!r}; choose from {QUESTION_TYPES}")
    old, young = chain.names[0], chain.names[-1]
    g = chain.generations
    text = _QUESTIONS[chain.lang][question_type].format(old=old, young=young, ord=ordinal(g, chain.lang))
    if question_type == "relationship_distance":
        return KinshipQuestion(question_type, text, str(g), "int", young)
    if question_type == "nth_descendant":
        return KinshipQuestion(question_type, text, young, "name", old)
    return KinshipQuestion(question_type, text, old, "name", young)


_RULES = {
    "en": (
        "Notes:\n"
        "1. Ignore whether a name sounds male or female, and ignore surnames: only generations matter.\n"
        "2. Father, mother, dad and mom are 1 generation; grandfather, grandmother and their maternal or "
        "paternal forms are 2 generations. Other roles (mentor, guardian, role model) add nothing.\n"
        "3. Think step by step, then put your final answer inside \\boxed{}, for example \\boxed{Jane Doe} "
        "or \\boxed{7}."
    ),
    "zh": (
        "注意：\n"
        "1. 不必考虑名字的性别或姓氏，只关注辈分。\n"
        "2. 父亲、母亲、爸爸、妈妈算1代；爷爷、奶奶、姥姥、姥爷、外公、外婆算2代。老师、监护人等其他身份不计代数。\n"
        "3. 请逐步推理，最后把答案放在\\boxed{}中，例如\\boxed{张三}或\\boxed{7}。"
    ),
}

_EXAMPLES = {
    "en": (
        "Examples:\n"
        "- If Kim Ray's father is Lee Fox, then Lee Fox is Kim Ray's 1st generation ancestor, Kim Ray is "
        "Lee Fox's 1st generation descendant, and they are 1 generation apart.\n"
        "- If Ann Cole's grandmother is Bo Hart (2 generations) and Bo Hart's mom is Cy Lund (1 generation), "
        "then the eldest ancestor Ann Cole can be traced back to is \\boxed{Cy Lund}, Cy Lund is Ann Cole's "
        "3rd generation ancestor, and Ann Cole and Cy Lund are \\boxed{3} generations apart."
    ),
    "zh": (
        "例子：\n"
        "- 如果张明的父亲是李强，那么李强是张明的第1代祖先，张明是李强的第1代后代，两人相隔1代。\n"
        "- 如果王芳的奶奶是赵红（2代），赵红的妈妈是钱进（1代），那么王芳能追溯到的最年长的祖先是\\boxed{钱进}，"
        "钱进是王芳的第3代祖先，王芳和钱进相隔\\boxed{3}代。"
    ),
}


def rules_text(lang: str, few_shot: bool = True) -> str:
    """The rules a kinship prompt states (generations per relation, \\boxed{} answer), with worked examples.

    Args:
        lang: ``"en"`` or ``"zh"``.
        few_shot: append the worked examples.
    """
    return _RULES[lang] + ("\n\n" + _EXAMPLES[lang] if few_shot else "")
