"""Seeded model outputs around a gold answer, for the differential scoring test.

Each output is a right answer, a near miss, a formatting variant, a truncation or a hostile
text, put together from a few independent random choices so that the combinations (a tilde
inside a double-braced box after an unclosed think block, ...) come up too. Everything comes
from one ``random.Random(seed)``: the same arguments give the same list in any process.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from fractions import Fraction

from bench.hostile_outputs import hostile_outputs

__all__ = ["answer_forms", "keyword_outputs", "boxed_outputs", "letter_outputs", "chain_outputs"]

_FULLWIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
_CHAT_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<|im_start|>assistant\n")
_FILLER = "The quick brown fox jumps over the lazy dog. "
_HOSTILE = tuple(hostile_outputs(size=4000, seed=7).values())


def answer_forms(answer: str, others: Sequence[str], rng: random.Random) -> str:
    """The answer as written, or a variant of it: case, width, spacing, tildes, a near miss, another answer.

    Args:
        answer: the gold text (a name or a keyword).
        others: other answers of the same kind (wrong chain names, other needles' keywords).
        rng: the seeded source of every choice.
    """
    forms: list[Callable[[str], str]] = [
        lambda a: a,
        lambda a: a,
        lambda a: a,
        str.lower,
        str.upper,
        str.title,
        lambda a: a.translate(_FULLWIDTH),
        lambda a: a.replace(" ", "  "),
        lambda a: a.replace(" ", "~"),
        lambda a: a.replace(" ", "\\ "),
        lambda a: a.replace(" ", "\n"),
        lambda a: a.replace(" ", ""),
        lambda a: f" {a} ",
        lambda a: f'"{a}"',
        lambda a: f"'{a}'",
        lambda a: f"{a}.",
        lambda a: f"{a}s",
        lambda a: a[:-1],
        lambda a: a[1:],
        lambda a: f"{a} (great-grandmother)",
        lambda a: f"{a}{rng.choice(_CHAT_TOKENS)}",
        lambda a: a.replace(" ", rng.choice(_CHAT_TOKENS) + " ", 1),
        lambda a: a[: len(a) // 2] + rng.choice(_CHAT_TOKENS) + a[len(a) // 2 :],
        lambda a: " ".join(reversed(a.split())),
        lambda a: rng.choice(others) if others else a.lower(),
        lambda a: rng.choice(others) if others else a.upper(),
    ]
    return rng.choice(forms)(answer)


def _frame(body: str, rng: random.Random, thinking_of: str) -> str:
    """``body`` in a response: before or after reasoning, think blocks (closed or not), chat tokens, cut short."""
    think = f"<think>Let me see. Maybe {thinking_of}? {_FILLER}</think>"
    frames: list[Callable[[str], str]] = [
        lambda b: b,
        lambda b: f"Reasoning through the document step by step. {b}",
        lambda b: f"{b}\n\nI hope this helps.",
        lambda b: f"{think}\n{b}",
        lambda b: f"<THINK>{thinking_of}</THINK>{b}",
        lambda b: f"{b}\n<think>on second thought, {thinking_of}",
        lambda b: f"<think>{b}",
        lambda b: f"still thinking {thinking_of}</think> {b}",
        lambda b: f"{b}{rng.choice(_CHAT_TOKENS)}",
        lambda b: f"{rng.choice(_CHAT_TOKENS)}{b}",
        lambda b: f"{b}\x00\ufffd",
        lambda b: b[: rng.randrange(len(b) + 1)],
        lambda b: f"{rng.choice(_HOSTILE)}{b}",
        lambda b: f"{b}{rng.choice(_HOSTILE)}",
    ]
    return rng.choice(frames)(body)


def keyword_outputs(
    keywords: Sequence[str], others: Sequence[str], n: int, seed: int, long_every: int = 500
) -> list[str]:
    """``n`` outputs for keyword scoring (S-RT, M-RT, 2024 M-RS): each mentions some of ``keywords``, varied.

    Every ``long_every``-th output puts the answer after 200,000 characters of prose.

    Args:
        keywords: the gold keywords (one for S-RT, several for M-RT).
        others: wrong answers of the same kind.
        n: how many outputs.
        seed: the seed.
        long_every: how often an output is longer than 200,000 characters.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        picked = [answer_forms(k, others, rng) for k in keywords if rng.random() < 0.8]
        rng.shuffle(picked)
        body = rng.choice(("The answer is {}.", "{}", "According to the document: {}", "答案是{}。")).format(
            "; ".join(picked)
        )
        if long_every and i % long_every == long_every - 1:
            body = _FILLER * (200_000 // len(_FILLER) + 1) + body
        out.append(_frame(body, rng, rng.choice([*keywords, *others]) if others else keywords[0]))
    return out


def _box(answer: str, rng: random.Random, wrong: str) -> str:
    """``answer`` boxed in one of the ways models write it, well-formed or not."""
    boxes: list[Callable[[str], str]] = [
        lambda a: f"\\boxed{{{a}}}",
        lambda a: f"\\boxed{{{a}}}",
        lambda a: f"\\boxed{{{a}}}",
        lambda a: f"\\boxed{{{{{a}}}}}",
        lambda a: f"\\boxed{{{{{a}}}\n}}",
        lambda a: f"\\boxed {{{a}}}",
        lambda a: f"\\fbox{{{a}}}",
        lambda a: f"\\boxed{{\\text{{{a}}}}}",
        lambda a: f"\\boxed{{\\textbf{{{a}}}}}",
        lambda a: f"\\boxed{{\\mathrm{{{a}}}}}",
        lambda a: f"$\\boxed{{{a}}}$",
        lambda a: f"\\[\\boxed{{{a}}}\\]",
        lambda a: f"\\boxed{{}} {a}",
        lambda a: f"\\boxed{{{wrong}}} no wait, \\boxed{{{a}}}",
        lambda a: f"\\boxed{{{a}}} no wait, \\boxed{{{wrong}}}",
        lambda a: f"\\boxed{{{a}}} and then \\boxed{{{a}",
        lambda a: f"\\boxed{{{a}}}, as I used \\boxed as told.",
        lambda a: f"\\boxed{{{a}}} \\fbox{{{wrong}}}",
        lambda a: f"\\boxed{{{a}}}}}",
        lambda a: f"\\boxed}}{{{a}}}",
        lambda a: f"\\boxed{{{a} \\boxed{{{wrong}}}}}",
        lambda a: f"\\boxed{{\\text{{{a}}} (\\text{{{wrong}}})}}",
        lambda a: f"The answer is {a}.",
    ]
    return rng.choice(boxes)(answer)


def boxed_outputs(answer: str, others: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` outputs for boxed-answer scoring (ATC, M-RS): the answer or a near miss, boxed or not, framed.

    Args:
        answer: the gold name (or integer, as text).
        others: wrong answers of the same kind (the chain's other names).
        n: how many outputs.
        seed: the seed.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        wrong = rng.choice(others) if others else "Nobody"
        body = _box(answer_forms(answer, others, rng), rng, wrong)
        lead = rng.choice(("", "So the eldest ancestor is ", "最终答案：", "Answer: "))
        out.append(_frame(lead + body, rng, wrong))
    return out


def letter_outputs(letter: str, n: int, seed: int) -> list[str]:
    """``n`` outputs for a multiple-choice question whose right option is ``letter``.

    Args:
        letter: the gold option letter (A-D).
        n: how many outputs.
        seed: the seed.
    """
    rng = random.Random(seed)
    forms = (
        "{}",
        "Answer: {}",
        "answer: {}",
        "The answer is {}.",
        "答案是 {}",
        "答案是{}。",
        "({})",
        "{}.",
        "选项 {} 正确",
        "I choose option {} because the chain ends there.",
        "**{}**",
        "Answer:\n{}",
        "A is wrong, so the answer is {}",
        "The eldest is {} (option).",
        "{} or maybe C",
        "正确答案是：{}",
    )
    out = []
    for _ in range(n):
        chosen = letter if rng.random() < 0.6 else rng.choice("ABCD")
        chosen = chosen.lower() if rng.random() < 0.1 else chosen
        body = rng.choice(forms).format(chosen)
        out.append(_frame(body, rng, rng.choice("ABCD")))
    return out


def chain_outputs(value: str, names: Sequence[str], n: int, seed: int, paper_styles: bool = False) -> list[str]:
    """``n`` NeedleChain responses: an explanation naming some of the chain, then the value stated some way.

    Args:
        value: the gold value as the gold writes it ("3200", "12.5").
        names: the chain's names (reasoning order); some are left out of the explanation.
        n: how many responses.
        seed: the seed.
        paper_styles: only the answer lines the paper's Appendix B shows models writing ("## Answer: $200",
            "## Answer: 1600 $", "## Answer: $12.50", "## Answer: 4x", no value), right or wrong by a factor
            of two; otherwise every variant below, near misses, frames and hostile text included.
    """
    rng = random.Random(seed)
    exact = Fraction(value)
    out = []
    for _ in range(n):
        kept = [x for x in names if rng.random() < 0.9]
        explanation = "; ".join(f"{x} earns some amount" for x in kept) + "."
        if paper_styles:
            stated = rng.choice([exact] * 4 + [exact * 2, exact / 2])
            answer = rng.choice(_PAPER_FORMS).format(_decimal(stated))
            out.append(f"{explanation}\n{answer}")
            continue
        stated = rng.choice(
            [exact] * 6 + [exact * 2, exact / 2, exact + 1, Fraction(int(exact)), exact + Fraction(1, 2), 0]
        )
        number = rng.choice(_NUMBER_FORMS)(stated)
        answer = rng.choice(_ANSWER_FORMS).format(n=number, v=value, w=names[-1] if names else "X")
        out.append(_frame(f"{explanation}\n{answer}", rng, names[0] if names else "X"))
    return out


_PAPER_FORMS = (
    "## Answer: ${}",
    "## Answer: ${}",
    "## Answer: {} $",
    "## Answer: {}",
    "## Answer: ${}0",
    "## Answer: 4x",
    "## Answer: Amount undetermined under the facts given.",
)


def _decimal(value: Fraction) -> str:
    """An exact decimal rendering where one exists (``12.5``), else a fraction (``1/3``)."""
    whole, rest = divmod(value.numerator, value.denominator)
    if rest == 0:
        return str(whole)
    digits, scale = value, 0
    while digits.denominator != 1 and scale < 30:
        digits, scale = digits * 10, scale + 1
    if digits.denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    text = str(digits.numerator).rjust(scale + 1, "0")
    return f"{text[:-scale]}.{text[-scale:]}"


_NUMBER_FORMS: tuple[Callable[[Fraction], str], ...] = (
    _decimal,
    _decimal,
    _decimal,
    lambda v: f"${_decimal(v)}",
    lambda v: f"$ {_decimal(v)}",
    lambda v: f"{int(v):,}",
    lambda v: f"${int(v):,}.00",
    lambda v: f"{_decimal(v)}.0" if v.denominator == 1 else _decimal(v),
    lambda v: f"{int(v)}",
    lambda v: f"{v.numerator}/{v.denominator}",
    lambda v: f"{_decimal(v)} dollars",
    lambda v: f"{_decimal(v)}x",
    lambda v: f"{_decimal(v)}%",
    lambda v: f"-{_decimal(v)}",
    lambda v: "9" * 5000,  # past Python's int() digit limit
    lambda v: _decimal(v) + ("" if "." in _decimal(v) else ".") + "0" * 70,  # trailing zeros past 64 characters
    lambda v: "0" * 70 + _decimal(v),  # leading zeros past 64 characters
    lambda v: f"{int(v)}." + "3" * 70,  # decimals past 64 characters that int() drops
)
_ANSWER_FORMS = (
    "## Answer: {n}",
    "## Answer: {n}",
    "## Answer: {n}",
    "## Answer:{n}",
    "## answer: {n}",
    "##Answer: {n}",
    "so {n}.\n## Answer: {n}",
    "## Answer: {n} ({w} = 2 x 1600)",
    "## Answer: {n}\n## Answer: 7",
    "## Answer: 7\n## Answer: {n}",
    "{w} gets {n}",
    "{w} gets {n} in total",
    "The final value is {n}, not 1600.",
    "## Answer: **{n}**",
    "## Answer: \\boxed{{{n}}}",
    "## Answer: {w} earns {n}",
    "## Answer:\n{n}",
    "## Answer: approximately {n}",
    "## Answer: 2x, i.e. {n}",
)
