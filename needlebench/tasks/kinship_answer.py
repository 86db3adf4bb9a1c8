"""A kinship question's answer: its gold, its metadata, and the ``\\boxed{}`` grader ATC and M-RS share.

Both tasks ask about a kinship chain (``kinship.py``) and take the answer from the model's last box;
OpenCompass's ATC evaluator compares it exactly after its own cleaning (``reference_clean``), the
clarified protocol compares names ignoring case, and M-RS accepts the name anywhere inside the box.
"""

from __future__ import annotations

import re

from ..grading.matching import is_repetitive, last_boxed, normalise_answer, parse_int, prepare, reference_boxed
from ..record import SampleScore
from ..scoring import ScoreOptions
from .kinship import KinshipChain, KinshipQuestion

__all__ = ["BOXED_ERRORS", "grade_boxed", "kinship_gold", "kinship_meta", "oracle_boxed", "reference_clean"]


def kinship_gold(chain: KinshipChain, question: KinshipQuestion, match: str = "normalised") -> dict:
    """The structured gold of a kinship question; ``match`` is how the grader compares the boxed answer.

    Args:
        chain: the chain asked about (its names go into the gold, eldest first).
        question: the question, with its answer and answer kind.
        match: ``"exact"`` (OpenCompass's ATC evaluator), ``"normalised"`` (names compared ignoring case)
            or ``"contains"`` (M-RS: the name anywhere inside the box); see ``grade_boxed``.
    """
    return {
        "answer": question.answer,
        "kind": question.kind,
        "subject": question.subject,
        "question_type": question.type,
        "chain_names": list(chain.names),
        "match": match,
    }


def kinship_meta(chain: KinshipChain, question: KinshipQuestion) -> dict:
    """The metadata a kinship sample is grouped and checked by: needle count, question type, generations, links.

    Args:
        chain: the chain asked about.
        question: the question asked.
    """
    return {
        "num_needles": len(chain.links),
        "question_type": question.type,
        "generations": chain.generations,
        "chain": chain.as_meta(),
        "names_reasoning_order": list(chain.names),
    }


def oracle_boxed(gold: dict) -> str:
    """A perfect kinship answer (ATC, M-RS): the gold name or number in ``\\boxed{}``.

    Args:
        gold: the sample's gold (``answer``).
    """
    return f"Following the chain link by link, the answer is \\boxed{{{gold['answer']}}}."


# the error kinds of the boxed-answer grader (ATC, M-RS), as ``grade_boxed`` explains them
BOXED_ERRORS = ("no_boxed_answer", "repetition", "stopped_early", "wrong_chain_name", "hallucination", "wrong_distance")


def grade_boxed(prediction: object, gold: dict, options: ScoreOptions) -> SampleScore:
    """ATC and M-RS: the boxed answer against a name or an integer, with an error kind.

    Error kinds: ``no_boxed_answer`` (instruction following), ``repetition`` (looping output),
    ``stopped_early`` (a chain name between the asked person and the answer),
    ``wrong_chain_name`` (another chain name), ``hallucination`` (a name not in the context),
    ``wrong_distance`` (a wrong or unparsable number).

    Args:
        prediction: the model's response (``<think>`` stripped per ``options``).
        gold: the sample's gold (``answer``, ``kind`` "name" or "int", ``subject``, ``chain_names``,
            ``match``: ``"exact"``, OpenCompass's ATC postprocessor and evaluator (its box extraction,
            its cleaning, then equality); ``"normalised"``, the last balanced ``\\boxed{}`` or ``\\fbox{}``
            of the clarified text, names ignoring case and punctuation, integers as numbers;
            ``"contains"``, that box holding the gold name anywhere).
        options: scoring settings.
    """
    match = gold["match"]
    text = prepare(prediction, options, clean=match != "exact")
    boxed = reference_boxed(text) if match == "exact" else last_boxed(text)
    if boxed is None:
        kind = "repetition" if is_repetitive(text) else "no_boxed_answer"
        return SampleScore(0.0, False, format_failure=True, error=kind)
    if _boxed_right(boxed, gold, match):
        return SampleScore(100.0, True, extracted=boxed)
    answer = normalise_answer(boxed)
    if gold["kind"] == "int":
        return SampleScore(0.0, False, extracted=boxed, error="wrong_distance")
    chain = [normalise_answer(x) for x in gold.get("chain_names", [])]
    if answer in chain:
        subject = normalise_answer(gold.get("subject", ""))
        target = normalise_answer(gold["answer"])
        i, j, k = chain.index(answer), chain.index(subject) if subject in chain else -1, chain.index(target)
        between = j >= 0 and min(j, k) < i < max(j, k)
        kind = "stopped_early" if between else "wrong_chain_name"
    else:
        kind = "repetition" if is_repetitive(text) else "hallucination"
    return SampleScore(0.0, False, extracted=boxed, error=kind)


def _boxed_right(boxed: str, gold: dict, match: str) -> bool:
    """Whether a boxed answer is right under the gold's rule (see ``grade_boxed``)."""
    expected = str(gold["answer"])
    if match == "exact":  # needlebench_atc_postprocess_v2 ('None' for an empty box), then NeedleBenchATCEvaluator
        return (reference_clean(boxed) if boxed else "None").strip() == expected.strip()
    if match == "contains":
        return bool(expected) and expected in boxed
    answer = normalise_answer(boxed)
    if gold["kind"] == "int":
        value = parse_int(answer)
        return value is not None and value == int(expected)
    return answer == normalise_answer(expected)


_LATEX_TEXT = re.compile(r"\\text\{([^}]+)\}")
_LATEX_BOX = re.compile(r"\\boxed\{([^}]+)\}")


def _sub_before_last_brace(pattern: re.Pattern[str], text: str) -> str:
    """``pattern.sub(r"\\1", text)`` for a ``\\cmd{([^}]+)}`` pattern, in linear time.

    Every match ends at a ``}``, so none lies past the last one; searching only up to it
    keeps the regex from rescanning the tail once per opening (a run of unclosed
    ``\\text{`` is otherwise quadratic).
    """
    end = text.rfind("}") + 1
    return pattern.sub(r"\1", text[:end]) + text[end:] if end else text


def reference_clean(answer: str) -> str:
    """A boxed answer cleaned the way OpenCompass's ATC postprocessor does (no case folding).

    Args:
        answer: the boxed answer.
    """
    if not answer:
        return "None"
    answer = _sub_before_last_brace(_LATEX_BOX, _sub_before_last_brace(_LATEX_TEXT, answer))
    answer = re.sub(r"\\[\[\]]", "", answer).replace("\\", "")
    answer = re.sub(r"\s+", " ", answer).strip()
    return answer.replace('"', "").replace("'", "").replace("~", " ")
