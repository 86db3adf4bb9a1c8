"""NeedleChain: salary chains where every sentence is needed (spec: needlechain.md).

One data point is k people: one independent salary needle and k-1
dependent needles (twice / half / the same as the previous person). The
same needles are shown as a forward, backward or mixed chain, and as
NeedleStack (k independent salaries). Arithmetic is exact (fractions); every
running value stays within [v/64, v*64] by construction, so no chain is
rejected and redrawn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .errors import ConfigError
from .graders import SampleScore, ScoreOptions, prepare
from .kinship import load_name_pool
from .sample import DATASET_VERSION, Sample, sample_id
from .seeding import rng
from .tasks import TaskSpec, register_task
from .tokenizer import get_encoding

__all__ = [
    "ChainParams",
    "DataPoint",
    "make_datapoint",
    "render",
    "generate_needlechain",
    "grade_needlechain",
    "parse_answer",
    "format_value",
    "VARIANTS",
    "QUESTIONS",
    "ERROR_KINDS",
]

VARIANTS = ("forward", "backward", "mixed", "stack")
QUESTIONS = ("single", "total")
RELATIONS = ("twice", "half", "same")
ERROR_KINDS = ("instruction_not_followed", "needle_omission", "calculation_error")
BASE_VALUES = (320, 480, 640, 800, 960, 1200, 1600, 2000, 2400, 3200)
MAX_EXPONENT = 6  # values stay within [v / 2**6, v * 2**6]
_FACTOR = {"twice": Fraction(2), "half": Fraction(1, 2), "same": Fraction(1)}
_DEPENDENT = {
    "twice": "{x} earns twice as much as {y}.",
    "half": "{x} earns half as much as {y}.",
    "same": "{x} earns the same salary as {y}.",
}
_INDEPENDENT = "{x} received ${v} last week."

SYSTEM = (
    "You are a careful payroll assistant. Answer only from the salary facts you are given; do not assume "
    "anything else. First give a brief explanation of your calculation, then end your reply with the final "
    "value on its own line, strictly in the form:\n## Answer: <value>"
)


@dataclass(frozen=True)
class ChainParams:
    k_values: tuple[int, ...] = (5, 10, 20, 50, 100, 200)
    variants: tuple[str, ...] = VARIANTS
    questions: tuple[str, ...] = QUESTIONS
    points: int = 200
    seed: int = 0
    lang: str = "en"
    encoding: str = "cl100k_base"


@dataclass(frozen=True)
class DataPoint:
    """Names and exact salaries in reasoning order (person 1 holds the independent needle)."""

    k: int
    index: int
    names: tuple[str, ...]
    relations: tuple[str, ...]  # relation of person i+1 to person i
    base: int
    salaries: tuple[Fraction, ...]
    mixed_order: tuple[int, ...]
    stack_order: tuple[int, ...]
    roster_order: tuple[int, ...]

    def chain_needles(self) -> list[str]:
        out = [_INDEPENDENT.format(x=self.names[0], v=self.base)]
        for i, rel in enumerate(self.relations):
            out.append(_DEPENDENT[rel].format(x=self.names[i + 1], y=self.names[i]))
        return out

    def stack_needles(self) -> list[str]:
        return [_INDEPENDENT.format(x=n, v=format_value(s)) for n, s in zip(self.names, self.salaries)]

    def presented(self, variant: str) -> list[int]:
        """Reasoning positions (0-based) in the order the variant shows them."""
        k = self.k
        return {
            "forward": list(range(k)),
            "backward": list(range(k - 1, -1, -1)),
            "mixed": list(self.mixed_order),
            "stack": list(self.stack_order),
        }[variant]


def format_value(value: Fraction) -> str:
    """Exact decimal text: salaries are v * 2**e, so every value has a finite decimal form."""
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    if den & (den - 1):
        raise ValueError(f"{value} has no finite decimal form")
    digits = den.bit_length() - 1
    scaled = value * 10**digits
    text = f"{scaled.numerator // scaled.denominator:0{digits + 1}d}"
    out = f"{text[:-digits]}.{text[-digits:]}".rstrip("0").rstrip(".")
    return out


def make_datapoint(k: int, index: int, seed: int) -> DataPoint:
    """A pure function of (k, index, seed)."""
    if k < 2:
        raise ConfigError(f"k_values: {k} must be at least 2")
    r = rng("needlechain", k, index, seed)
    pool = load_name_pool("en")
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < k:
        name = f"{r.choice(pool.first)} {r.choice(pool.last)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    base = r.choice(BASE_VALUES)
    exponent = 0
    relations = []
    salaries = [Fraction(base)]
    for _ in range(k - 1):
        allowed = [rel for rel in RELATIONS if abs(exponent + {"twice": 1, "half": -1, "same": 0}[rel]) <= MAX_EXPONENT]
        rel = r.choice(allowed)
        exponent += {"twice": 1, "half": -1, "same": 0}[rel]
        relations.append(rel)
        salaries.append(salaries[-1] * _FACTOR[rel])
    mixed = list(range(k))
    r.shuffle(mixed)
    stack = list(range(k))
    r.shuffle(stack)
    roster = list(range(k))
    r.shuffle(roster)
    return DataPoint(
        k, index, tuple(names), tuple(relations), base, tuple(salaries), tuple(mixed), tuple(stack), tuple(roster)
    )


def render(dp: DataPoint, variant: str, question: str) -> tuple[str, str, Fraction, str]:
    """(system, user, gold value, asked person) for one variant and question."""
    if variant not in VARIANTS:
        raise ConfigError(f"variants: unknown {variant!r}; choose from {VARIANTS}")
    if question not in QUESTIONS:
        raise ConfigError(f"questions: unknown {question!r}; choose from {QUESTIONS}")
    needles = dp.stack_needles() if variant == "stack" else dp.chain_needles()
    facts = "\n".join(needles[i] for i in dp.presented(variant))
    roster = ", ".join(dp.names[i] for i in dp.roster_order)
    target = dp.names[-1]
    if question == "single":
        ask = f"What is {target}'s salary?"
        gold = dp.salaries[-1]
    else:
        ask = f"What is the total salary of all {dp.k} workers combined?"
        gold = sum(dp.salaries, Fraction(0))
    user = (
        f"There are {dp.k} workers: {roster}.\n\n"
        f"Salary facts:\n{facts}\n\n"
        f"Question: {ask}\n"
        "Explain briefly, then finish with a line of the form '## Answer: <value>'."
    )
    return SYSTEM, user, gold, target


def _validate(p: ChainParams) -> None:
    if p.lang != "en":
        raise ConfigError(f"lang: NeedleChain is English only (got {p.lang!r})")
    for k in p.k_values:
        if not isinstance(k, int) or k < 2:
            raise ConfigError(f"k_values: {k!r} must be an integer of at least 2")
    for v in p.variants:
        if v not in VARIANTS:
            raise ConfigError(f"variants: unknown {v!r}; choose from {VARIANTS}")
    for q in p.questions:
        if q not in QUESTIONS:
            raise ConfigError(f"questions: unknown {q!r}; choose from {QUESTIONS}")
    if p.points < 1:
        raise ConfigError(f"points: {p.points} must be at least 1")


def generate_needlechain(p: ChainParams) -> Iterator[Sample]:
    _validate(p)
    enc = get_encoding(p.encoding)
    for k in p.k_values:
        for index in range(p.points):
            dp = make_datapoint(k, index, p.seed)
            for variant in p.variants:
                order = dp.presented(variant)
                for question in p.questions:
                    system, user, gold, target = render(dp, variant, question)
                    meta = {
                        "k": k,
                        "point": index,
                        "variant": variant,
                        "question": question,
                        "names_reasoning_order": list(dp.names),
                        "names_presented_order": [dp.names[i] for i in order],
                        "presented_positions": order,
                        "relations": list(dp.relations),
                        "base_value": dp.base,
                        "asked": target,
                        "prompt_tokens": len(enc.encode_ordinary(system)) + len(enc.encode_ordinary(user)),
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
                        },
                        meta=meta,
                    )


_NUMBER = re.compile(r"-?\$?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?")


_MARKER = re.compile(r"##\s*answer\s*:", re.I)


def parse_answer(text: str) -> tuple[Fraction | None, str | None]:
    """The first number after the last '## Answer:' marker, or (None, why not).

    Accepts ``$``, thousands separators, decimals and simple fractions; a
    multiplier or percentage ("4x", "50%") is no determinate value.
    """
    markers = list(_MARKER.finditer(text))
    if not markers:
        return None, "no_marker"
    tail = text[markers[-1].end() :]
    m = _NUMBER.search(tail)
    if not m:
        return None, "no_number"
    if tail[m.end() : m.end() + 2].lstrip()[:1] in ("x", "X", "×", "%"):
        return None, "indeterminate"
    raw = m.group().replace("$", "").replace(",", "").replace(" ", "")
    try:
        if "/" in raw:
            num, den = raw.split("/")
            return Fraction(num) / Fraction(den), None
        return Fraction(raw), None
    except (ValueError, ZeroDivisionError):
        return None, "no_number"


def _lenient(text: str) -> Fraction | None:
    """The released scorer's reading: the last number anywhere in the response, integer part."""
    numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", text)
    if not numbers:
        return None
    return Fraction(int(float(numbers[-1].replace(",", ""))))


def mentioned_positions(text: str, names: Sequence[str]) -> list[bool]:
    low = text.casefold()
    return [n.casefold() in low for n in names]


def grade_needlechain(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    text = prepare(prediction, options)
    target = Fraction(gold["value"])
    names = gold["names"]
    mentioned = mentioned_positions(text, names)
    extras = {"mentioned": mentioned}
    if options.lenient:
        value, reason = _lenient(text), None
        correct = value is not None and value == Fraction(int(target))
    else:
        value, reason = parse_answer(text)
        correct = value is not None and value == target
    extracted = None if value is None else format_value(value) if _finite(value) else str(value)
    if correct:
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
    needed = list(range(len(names)))
    if gold["variant"] == "stack" and gold["question"] == "single":
        needed = [names.index(gold["asked"])]
    missing = [i + 1 for i in needed if not mentioned[i]]
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


register_task(TaskSpec("needlechain", "dense", ChainParams, generate_needlechain, grade_needlechain, "NeedleChain"))


def position_profile(details: Sequence[dict], bins: int = 10, min_k: int = 0) -> dict[str, dict[str, list[float]]]:
    """Mention rate of chain names by position, per variant, in reasoning and in presented order.

    Positions are binned into ``bins`` equal shares of the chain so different k
    can be pooled; only samples with k >= ``min_k`` count (the paper used k=200).
    """
    sums: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, dict[str, list[int]]] = {}
    for d in details:
        if d.get("task") != "needlechain" or "mentioned" not in d or d.get("k", 0) < min_k:
            continue
        mentioned = d["mentioned"]
        k = len(mentioned)
        presented = d.get("presented_positions") or list(range(k))
        variant = d["variant"]
        s = sums.setdefault(variant, {"reasoning": [0.0] * bins, "presented": [0.0] * bins})
        c = counts.setdefault(variant, {"reasoning": [0] * bins, "presented": [0] * bins})
        for pos, hit in enumerate(mentioned):
            b = min(bins - 1, pos * bins // k)
            s["reasoning"][b] += hit
            c["reasoning"][b] += 1
        for shown_at, pos in enumerate(presented):
            b = min(bins - 1, shown_at * bins // k)
            s["presented"][b] += mentioned[pos]
            c["presented"][b] += 1
    return {
        v: {
            axis: [100.0 * x / n if n else float("nan") for x, n in zip(sums[v][axis], counts[v][axis])]
            for axis in ("reasoning", "presented")
        }
        for v in sums
    }
