"""NeedleChain: salary chains where every sentence is needed (the NeedleChain paper).

One data point is k people: one independent salary needle and k-1
dependent needles (twice / half / the same as the previous person). The
same needles are shown as a forward, backward or mixed chain, and as
NeedleStack (k independent salaries). Arithmetic is exact (fractions).

Two protocols. ``reference`` (the default) reproduces the NeedleChain
authors' released generator: their prompt, a roster in reasoning order,
single first names, base salary 1600 with uniform relations and chains
whose final value leaves [1600/64, 1600*64] redrawn, and NeedleStack values
drawn on their own. ``clarified`` is this project's reading of the paper: a
neutral prompt, a shuffled roster that leaks no order, full names, and a
bounded walk from a varied base so no chain is ever redrawn. Scoring: the
reference reads the stated value as the released ``evaluate.py`` does and
compares it exactly with the exact gold (the released scorer compares
``int()`` of both: our one listed fix), with needle omission only a class of
wrong answers, as the paper counts it; ``scoring="strict"`` (clarified) also
marks a right value wrong when its explanation omits a chain name. Each of
the five options can also be set on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from random import Random

from ...context.tokenizer import get_encoding
from ...errors import ConfigError, check_at_least, check_choices, unknown_option_error
from ...grading.matching import prepare
from ...protocol import PROTOCOLS, Option, ProtocolParams
from ...record import SampleScore
from ...sample import DATASET_VERSION, Sample, sample_id
from ...scoring import ScoreOptions
from ...seeding import rng
from ...taskspec import TaskSpec
from ..kinship import load_name_pool
from .answer import mentioned_positions, needed_positions, parse_answer, released_value

__all__ = [
    "NEEDLECHAIN_SAMPLING",
    "ChainParams",
    "ChainOptions",
    "DataPoint",
    "make_datapoint",
    "render",
    "chain_options",
    "generate_needlechain",
    "grade_needlechain",
    "oracle_needlechain",
    "format_value",
    "VARIANTS",
    "QUESTIONS",
    "ERROR_KINDS",
    "PROTOCOLS",
    "OPTION_CHOICES",
    "CHAIN_OPTIONS",
    "REFERENCE_SYSTEM",
    "REFERENCE_QUESTIONS",
    "SYSTEM",
]

VARIANTS = ("forward", "backward", "mixed", "stack")
QUESTIONS = ("single", "total")
RELATIONS = ("twice", "half", "same")
ERROR_KINDS = ("instruction_not_followed", "needle_omission", "calculation_error")
BASE_VALUES = (320, 480, 640, 800, 960, 1200, 1600, 2000, 2400, 3200)
MAX_EXPONENT = 6  # values stay within [v / 2**6, v * 2**6]
RELEASED_BASE = 1600  # the released generator's only base salary
STACK_FACTORS = tuple(Fraction(2) ** e for e in range(-3, 4))  # 1/8 .. 8: released NeedleStack salaries
MAX_ATTEMPTS = 10_000  # released values: redraws before giving up (k=200 needs ~2.3 on average)
_STEP = {"twice": 1, "half": -1, "same": 0}
_FACTOR = {"twice": Fraction(2), "half": Fraction(1, 2), "same": Fraction(1)}
_DEPENDENT = {
    "twice": "{x} earns twice as much as {y}.",
    "half": "{x} earns half as much as {y}.",
    "same": "{x} earns the same salary as {y}.",
}
_INDEPENDENT = "{x} received ${v} last week."

# Where ``protocol="clarified"`` differs from the authors' released generator.
CHAIN_OPTIONS: dict[str, Option] = {
    # their system prompt, user layout and questions / ours
    "prompt_style": Option("reference", "clarified"),
    # roster in reasoning order (as the paper lists it) / shuffled so it leaks no order
    "roster": Option("paper", "shuffled"),
    # single first names / "First Last"
    "names": Option("single", "full"),
    # base 1600, uniform relations, redraw out-of-bounds chains, own NeedleStack values / bounded walk
    "values": Option("released", "bounded"),
    # released: the value the answer states, read as the released evaluate.py reads it, compared exactly
    # (the paper's accuracy; needle omission only classifies wrong answers) / strict: our marker parsing,
    # and a right value whose explanation omits a chain name is wrong (lucky guesses excluded)
    "scoring": Option("released", "strict"),
}
OPTION_CHOICES: dict[str, tuple[str, ...]] = {name: opt.choices for name, opt in CHAIN_OPTIONS.items()}

SYSTEM = (
    "You are a careful payroll assistant. Answer only from the salary facts you are given; do not assume "
    "anything else. First give a brief explanation of your calculation, then end your reply with the final "
    "value on its own line, strictly in the form:\n## Answer: <value>"
)
# The released generator's system prompt, byte for byte (the paper's Table 3; note the trailing space).
REFERENCE_SYSTEM = "\n".join(
    [
        "You are a financial assistant AI skilled in calculating wages and solving salary-related queries.",
        "I will give you context with the facts about salary of several people.",
        "You need to answer the question based only on the information from the facts.",
        "Before you derive the final answer, provide me a brief explanation.",
        "Output your final verdict by strictly following this format: '## Answer: ${your_answer}' ",
    ]
)
REFERENCE_QUESTIONS = {
    "single": "How much salary did {x} get?",
    "total": "How much is the total salary of the referenced people?",
}


@dataclass(frozen=True)
class ChainOptions:
    """The resolved protocol options; see ``OPTION_CHOICES`` (defaults: the reference protocol)."""

    prompt_style: str = "reference"
    roster: str = "paper"
    names: str = "single"
    values: str = "released"
    scoring: str = "released"


REFERENCE = ChainOptions(**{name: opt.reference for name, opt in CHAIN_OPTIONS.items()})
CLARIFIED = ChainOptions(**{name: opt.clarified for name, opt in CHAIN_OPTIONS.items()})


def chain_options(protocol: str = "reference", **overrides: str) -> ChainOptions:
    """The protocol's options with any non-empty override applied, typed (``ChainParams`` resolves the same way).

    Args:
        protocol: "reference" (the authors' released generator) or "clarified".
        overrides: option name -> value; "" keeps what the protocol says.

    Raises:
        ConfigError: an unknown option, protocol or value, naming the choices.
    """
    unknown = sorted(set(overrides) - set(CHAIN_OPTIONS))
    if unknown:
        raise unknown_option_error("NeedleChain", unknown, CHAIN_OPTIONS)
    return ChainParams(protocol=protocol, **overrides).chain_options()


@dataclass(frozen=True)
class ChainParams(ProtocolParams):
    """What to generate; ``protocol`` picks the prompt and value rules, each option may override it."""

    OPTIONS = CHAIN_OPTIONS

    k_values: tuple[int, ...] = (5, 10, 20, 50, 100, 200)
    variants: tuple[str, ...] = VARIANTS
    questions: tuple[str, ...] = QUESTIONS
    points: int = 200
    seed: int = 0
    lang: str = "en"
    encoding: str = "cl100k_base"
    protocol: str = "reference"
    # Each "" means "what the protocol says"; see OPTION_CHOICES.
    prompt_style: str = ""
    roster: str = ""
    names: str = ""
    values: str = ""
    scoring: str = ""

    def chain_options(self) -> ChainOptions:
        """:meth:`options`, typed (raises ConfigError on bad values)."""
        return ChainOptions(**self.options())


@dataclass(frozen=True)
class DataPoint:
    """Names and exact salaries in reasoning order (person 1 holds the independent needle).

    ``stack_salaries`` are NeedleStack's values: the chain's own under bounded
    values, independent draws under released values (as the authors did).
    """

    k: int
    index: int
    names: tuple[str, ...]
    relations: tuple[str, ...]  # relation of person i+1 to person i
    base: int
    salaries: tuple[Fraction, ...]
    mixed_order: tuple[int, ...]
    stack_order: tuple[int, ...]
    roster_order: tuple[int, ...]
    stack_salaries: tuple[Fraction, ...]
    options: ChainOptions = REFERENCE

    def chain_needles(self) -> list[str]:
        """The chain's needles in reasoning order: the independent salary, then one relation per person."""
        out = [_INDEPENDENT.format(x=self.names[0], v=self.base)]
        for i, rel in enumerate(self.relations):
            out.append(_DEPENDENT[rel].format(x=self.names[i + 1], y=self.names[i]))
        return out

    def stack_needles(self) -> list[str]:
        # The released generator printed NeedleStack values as floats ("$800.0"); keep that wording quirk.
        """NeedleStack's needles in reasoning order: one independent salary per person."""
        show = _float_text if self.options.prompt_style == "reference" else format_value
        return [_INDEPENDENT.format(x=n, v=show(s)) for n, s in zip(self.names, self.stack_salaries)]

    def presented(self, variant: str) -> list[int]:
        """Reasoning positions (0-based) in the order the variant shows them."""
        k = self.k
        return {
            "forward": list(range(k)),
            "backward": list(range(k - 1, -1, -1)),
            "mixed": list(self.mixed_order),
            "stack": list(self.stack_order),
        }[variant]


def _float_text(value: Fraction) -> str:
    return str(float(value))


def format_value(value: Fraction) -> str:
    """Exact decimal text of a value with a finite decimal form (a denominator of 2s and 5s only): salaries are
    v * 2**e, and an answer states a decimal such as ``1600.3``.

    Raises:
        ValueError: the value has no finite decimal form (``1/3``).
    """
    if value.denominator == 1:
        return str(value.numerator)
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:
        raise ValueError(f"{value} has no finite decimal form")
    digits = max(twos, fives)
    scaled = abs(value) * 10**digits  # an integer
    text = f"{scaled.numerator:0{digits + 1}d}"
    sign = "-" if value < 0 else ""
    return sign + f"{text[:-digits]}.{text[-digits:]}".rstrip("0").rstrip(".")


def _full_names(r: Random, k: int) -> list[str]:
    """k distinct "First Last" names (clarified)."""
    pool = load_name_pool("en")
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < k:
        name = f"{r.choice(pool.first)} {r.choice(pool.last)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _single_names(r: Random, k: int) -> list[str]:
    """k distinct first names without replacement, as the released generator drew them."""
    pool = list(dict.fromkeys(load_name_pool("en").first))  # drop any repeat so no two people share a name
    if k > len(pool):
        raise ConfigError(f"k_values: {k} exceeds the {len(pool)} distinct first names (use names='full')")
    return r.sample(pool, k)


def _bounded_values(r: Random, k: int) -> tuple[int, list[str], list[Fraction]]:
    """A base from BASE_VALUES and a walk that never leaves [v/64, v*64], so nothing is redrawn."""
    base = r.choice(BASE_VALUES)
    exponent = 0
    relations: list[str] = []
    salaries = [Fraction(base)]
    for _ in range(k - 1):
        allowed = [rel for rel in RELATIONS if abs(exponent + _STEP[rel]) <= MAX_EXPONENT]
        rel = r.choice(allowed)
        exponent += _STEP[rel]
        relations.append(rel)
        salaries.append(salaries[-1] * _FACTOR[rel])
    return base, relations, salaries


def _released_values(k: int, index: int, seed: int) -> tuple[list[str], list[Fraction], list[Fraction]]:
    """Uniform relations from 1600, redrawn while the final value leaves [1600/64, 1600*64].

    Each attempt has its own rng (the attempt number is a coordinate), so the
    accepted chain is a pure function of (k, index, seed). NeedleStack gets
    its own salaries, 1600 x one of 1/8..8 each, independent of the chain.
    """
    low, high = Fraction(RELEASED_BASE, 2**MAX_EXPONENT), Fraction(RELEASED_BASE * 2**MAX_EXPONENT)
    for attempt in range(MAX_ATTEMPTS):
        r = rng("needlechain", "released-chain", k, index, seed, attempt)
        relations = [r.choice(RELATIONS) for _ in range(k - 1)]
        salaries = [Fraction(RELEASED_BASE)]
        for rel in relations:
            salaries.append(salaries[-1] * _FACTOR[rel])
        if low <= salaries[-1] <= high:
            break
    else:  # pragma: no cover - probability ~0.6**10000
        raise RuntimeError(f"no chain within bounds after {MAX_ATTEMPTS} attempts (k={k}, index={index})")
    rs = rng("needlechain", "released-stack", k, index, seed)
    stack = [RELEASED_BASE * rs.choice(STACK_FACTORS) for _ in range(k)]
    return relations, salaries, stack


def make_datapoint(k: int, index: int, seed: int, options: ChainOptions = REFERENCE) -> DataPoint:
    """A pure function of (k, index, seed, options).

    Args:
        k: people (needles) in the chain, at least 2.
        index: the data point's number within its k.
        seed: the run's seed.
        options: the resolved protocol options (reference by default).
    Under all-clarified options the draws are exactly the pre-protocol ones.
    """
    if k < 2:
        raise ConfigError(f"k_values: {k} must be at least 2")
    r = rng("needlechain", k, index, seed)
    names = _full_names(r, k) if options.names == "full" else _single_names(r, k)
    if options.values == "bounded":
        base, relations, salaries = _bounded_values(r, k)
        stack_salaries = salaries
    else:
        base = RELEASED_BASE
        relations, salaries, stack_salaries = _released_values(k, index, seed)
    mixed = list(range(k))
    r.shuffle(mixed)
    stack = list(range(k))
    r.shuffle(stack)
    roster = list(range(k))
    if options.roster == "shuffled":
        r.shuffle(roster)
    return DataPoint(
        k,
        index,
        tuple(names),
        tuple(relations),
        base,
        tuple(salaries),
        tuple(mixed),
        tuple(stack),
        tuple(roster),
        tuple(stack_salaries),
        options,
    )


def render(dp: DataPoint, variant: str, question: str) -> tuple[str, str, Fraction, str]:
    """(system, user, gold value, asked person) for one variant and question.

    The asked person is the last in reasoning order for every variant; the
    total asks for the sum of the values the variant shows.

    Args:
        dp: the data point (names, relations, salaries and orders).
        variant: one of :data:`VARIANTS`; ``stack`` shows independent salaries instead of the chain.
        question: ``"single"`` (the asked person's salary) or ``"total"`` (everyone's).

    Raises:
        ConfigError: an unknown variant or question.
    """
    if variant not in VARIANTS:
        raise ConfigError(f"variants: unknown {variant!r}; choose from {VARIANTS}")
    if question not in QUESTIONS:
        raise ConfigError(f"questions: unknown {question!r}; choose from {QUESTIONS}")
    stacked = variant == "stack"
    needles = dp.stack_needles() if stacked else dp.chain_needles()
    values = dp.stack_salaries if stacked else dp.salaries
    facts = "\n".join(needles[i] for i in dp.presented(variant))
    roster = ", ".join(dp.names[i] for i in dp.roster_order)
    target = dp.names[-1]
    gold = values[-1] if question == "single" else sum(values, Fraction(0))
    if dp.options.prompt_style == "reference":
        user = (
            f"There are {dp.k} workers in the office.\n"
            f"Their names are as follows: {roster}\n\n"
            f"Salary for each worker is as follows:\n{facts}\n\n"
        )
        return REFERENCE_SYSTEM, user + question_part(dp, question), gold, target
    user = f"There are {dp.k} workers: {roster}.\n\nSalary facts:\n{facts}\n\n"
    return SYSTEM, user + question_part(dp, question), gold, target


def question_part(dp: DataPoint, question: str) -> str:
    """The end of the user prompt after the facts: the question and its answer instruction.

    Why apart: a query-agnostic KV-cache press compresses the facts before it sees this part
    (``meta["question_chars"]``, ``methods/kv_press.py``); the task says where it starts.

    Args:
        dp: the data point.
        question: ``"single"`` or ``"total"``.
    """
    target = dp.names[-1]
    if dp.options.prompt_style == "reference":
        return f"Now, respond to my question:\n{REFERENCE_QUESTIONS[question].format(x=target)}"
    if question == "single":
        ask = f"What is {target}'s salary?"
    else:
        ask = f"What is the total salary of all {dp.k} workers combined?"
    return f"Question: {ask}\nExplain briefly, then finish with a line of the form '## Answer: <value>'."


def _validate(p: ChainParams) -> ChainOptions:
    if p.lang != "en":
        raise ConfigError(f"lang: NeedleChain is English only (got {p.lang!r})")
    check_at_least("k_values", p.k_values, 2)
    check_choices("variants", p.variants, VARIANTS)
    check_choices("questions", p.questions, QUESTIONS)
    check_at_least("points", [p.points], 1)
    return p.chain_options()


def generate_needlechain(p: ChainParams) -> Iterator[Sample]:
    """Every NeedleChain sample of a config: per k, per data point, per variant, per question.

    The variants and questions of one data point share its names and values, so they differ only in
    how the needles are shown and what is asked.

    Args:
        p: the task's parameters.

    Raises:
        ConfigError: a parameter value is wrong (naming which).
    """
    options = _validate(p)
    option_meta = dataclasses.asdict(options)
    enc = get_encoding(p.encoding)
    for k in p.k_values:
        for index in range(p.points):
            dp = make_datapoint(k, index, p.seed, options)
            for variant in p.variants:
                order = dp.presented(variant)
                for question in p.questions:
                    system, user, gold, target = render(dp, variant, question)
                    meta = {
                        "k": k,
                        "point": index,
                        "variant": variant,
                        "question": question,
                        "protocol": p.protocol,
                        "options": dict(option_meta),
                        "names_reasoning_order": list(dp.names),
                        "names_presented_order": [dp.names[i] for i in order],
                        "presented_positions": order,
                        "relations": list(dp.relations),
                        "base_value": dp.base,
                        "asked": target,
                        "prompt_tokens": len(enc.encode_ordinary(system)) + len(enc.encode_ordinary(user)),
                        "question_chars": len(question_part(dp, question)),
                        "seed": p.seed,
                        "version": DATASET_VERSION,
                    }
                    yield Sample(
                        id=sample_id("needlechain", "en", k, index, variant, question, prompt=user),
                        task="needlechain",
                        lang="en",
                        prompt=user,
                        system=system,
                        gold={
                            "value": format_value(gold),
                            "names": list(dp.names),
                            "variant": variant,
                            "question": question,
                            "asked": target,
                            "scoring": options.scoring,
                        },
                        meta=meta,
                    )


# The NeedleChain paper sampled open models at temperature 0.6, top-p 0.95 (its Appendix A); a config
# applies it with ``needlebench.opencompass.models.with_sampling(model, **NEEDLECHAIN_SAMPLING)``.
NEEDLECHAIN_SAMPLING = dict(temperature=0.6, top_p=0.95)


def grade_needlechain(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """The stated value against the exact gold, under the gold's ``scoring`` rule.

    ``released`` (reference): the value as ``released_value`` reads it from the response as returned,
    right iff it equals the gold; needle omission only classifies wrong answers (the paper's
    accuracy). ``strict`` (clarified): the first number after the last ``## Answer:`` marker (any case
    and spacing; fractions, ``$``; "4x" is no value) of the cleaned response, and a right value whose
    explanation omits a needed name is a lucky guess, scored 0 and classed ``needle_omission``.
    Either way ``extras`` report ``plain_correct`` (the value alone) and ``strict_correct`` (the value
    and every needed name), so both accuracies are shown side by side.

    Args:
        prediction: the model's response (``<think>`` stripped per ``options``).
        gold: the sample's gold (``value``, ``names``, ``variant``, ``question``, ``asked``, and ``scoring``,
            the protocol option the generator wrote in: the one place the rule is read from).
        options: scoring settings (``strip_think``).

    Returns:
        100 for a right answer, else 0 with the error kind: ``instruction_not_followed`` (no value),
        ``needle_omission`` or ``calculation_error``.
    """
    strict = gold["scoring"] == "strict"
    text = prepare(prediction, options, clean=strict)
    target = Fraction(gold["value"])
    mentioned = mentioned_positions(text, gold["names"])
    value, reason = parse_answer(text) if strict else released_value(text)
    plain = value is not None and value == target
    missing = [i + 1 for i in needed_positions(gold) if not mentioned[i]]
    extras: dict[str, object] = {
        "mentioned": mentioned,
        "plain_correct": plain,
        "strict_correct": plain and not missing,
    }
    extracted = None if value is None else format_value(value) if _finite(value) else str(value)
    if plain and (not strict or not missing):
        return SampleScore(100.0, True, extracted=extracted, extras=extras)
    if value is None:
        return SampleScore(
            0.0,
            False,
            format_failure=True,
            extracted=None,
            error="instruction_not_followed",
            extras={**extras, "reason": reason},
        )
    if missing:
        return SampleScore(
            0.0, False, extracted=extracted, error="needle_omission", extras={**extras, "missing_positions": missing}
        )
    return SampleScore(0.0, False, extracted=extracted, error="calculation_error", extras=extras)


def _finite(value: Fraction) -> bool:
    den = value.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    return den == 1


def oracle_needlechain(gold: dict) -> str:
    """A perfect NeedleChain answer: a short explanation naming every chain name, then the marker line.

    Args:
        gold: the sample's gold (``names``, ``value``).
    """
    return f"Working through the salaries of {', '.join(gold['names'])} in turn.\n## Answer: {gold['value']}"


NEEDLECHAIN = TaskSpec(
    "needlechain",
    "dense",
    ChainParams,
    generate_needlechain,
    grade_needlechain,
    "NeedleChain",
    oracle_needlechain,
    label="NeedleChain",
    results="needlebench.tasks.needlechain.results:RESULTS",
    meta_keys=("k", "variant", "question", "point", "presented_positions"),
    cell=("k",),
    error_kinds=ERROR_KINDS,
    report_text=(
        "NeedleChain: the graded accuracy per chain variant, k and question (the paper's value match under "
        'reference, strict under <code>scoring="strict"</code>) beside <i>plain</i> accuracy (the value alone) '
        "and <i>strict</i> accuracy (a right value whose explanation omits a chain name scores 0), with each "
        "wrong answer classified as instruction not followed, needle omission or calculation error."
    ),
)
