"""Prompt wording for the sparse tasks, English and Chinese.

The shape follows the papers: a note that this is a long-document test, the
document between clear delimiters, then the question with its answer format.
``question_position="start"`` and the recall step are the 2024 paper's
ablations.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

__all__ = ["PromptParts", "sparse_prompt", "QUESTION_POSITIONS"]

QUESTION_POSITIONS = ("end", "start")

_TEXT = {
    "en": {
        "intro_end": (
            "This is a test of reading a long document. Read the document below carefully, "
            "then answer the question after it using only information from the document."
        ),
        "intro_start": (
            "This is a test of reading a long document. Read the question first, then answer it "
            "using only information from the document that follows."
        ),
        "doc_open": "<Document>",
        "doc_close": "</Document>",
        "question": "Question: {q}",
        "questions": "Answer each of the following questions, one by one, in this order:\n{q}",
        "format": "Answer in the form: {f}",
        "formats": "Give one numbered answer per question, in the same order, each as a full sentence.",
        "recall": (
            "Before you answer, first quote the sentence of the document that is most relevant "
            "to the question, then give the answer."
        ),
    },
    "zh": {
        "intro_end": "这是一个长文本阅读测试。请仔细阅读下面的长文档，然后只根据文档中的信息回答文档后面的问题。",
        "intro_start": "这是一个长文本阅读测试。请先阅读问题，然后只根据后面长文档中的信息回答问题。",
        "doc_open": "<文档>",
        "doc_close": "</文档>",
        "question": "问题：{q}",
        "questions": "请按顺序逐一回答下面的问题：\n{q}",
        "format": "请按照以下格式回答：{f}",
        "formats": "请按问题顺序逐条编号作答，每条用一句完整的话回答。",
        "recall": "回答之前，请先引用文档中与问题最相关的那句话，然后再给出答案。",
    },
}


@dataclass(frozen=True)
class PromptParts:
    """Text before and after the haystack; the haystack goes in between."""

    head: str
    tail: str


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {x}" for i, x in enumerate(items, 1))


def sparse_prompt(
    lang: str,
    questions: list[str],
    formats: list[str],
    question_position: str = "end",
    recall_step: bool = False,
    extra_instruction: str = "",
) -> PromptParts:
    """Assemble head and tail for one or several questions."""
    if lang not in _TEXT:
        raise ConfigError(f"lang: unknown language {lang!r}; choose from {sorted(_TEXT)}")
    if question_position not in QUESTION_POSITIONS:
        raise ConfigError(f"question_position: {question_position!r}; choose from {QUESTION_POSITIONS}")
    t = _TEXT[lang]
    if len(questions) == 1:
        ask = t["question"].format(q=questions[0])
        fmt = t["format"].format(f=formats[0]) if formats and formats[0] else ""
    else:
        ask = t["questions"].format(q=_numbered(questions))
        fmt = t["formats"]
    block = "\n".join(x for x in (ask, fmt, extra_instruction, t["recall"] if recall_step else "") if x)
    if question_position == "end":
        head = f"{t['intro_end']}\n\n{t['doc_open']}\n"
        tail = f"\n{t['doc_close']}\n\n{block}\n"
    else:
        head = f"{t['intro_start']}\n\n{block}\n\n{t['doc_open']}\n"
        tail = f"\n{t['doc_close']}\n"
    return PromptParts(head, tail)
