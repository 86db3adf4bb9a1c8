"""Prompt wording for the sparse tasks, English and Chinese.

Two styles. ``reference`` is OpenCompass v2's wording, character for
character (its quirks included: the English multi-question joined with a
Chinese comma), because the published scores were produced with it.
``clarified`` is ours: the same shape (a note that this is a long-document
test, the document between clear delimiters, then the question with its
answer format) with the quirks fixed. ``question_position="start"`` and the
recall step are the 2024 paper's ablations; under ``reference`` the recall
step is OpenCompass's "guide" sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError

__all__ = [
    "PromptParts",
    "sparse_prompt",
    "reference_prompt",
    "reference_question",
    "reference_retrieval_question",
    "QUESTION_POSITIONS",
    "PROMPT_STYLES",
]

QUESTION_POSITIONS = ("end", "start")
PROMPT_STYLES = ("reference", "clarified")

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
    """Our (clarified) prompt's head and tail for one or several questions, the haystack going in between.

    Args:
        lang: ``"en"`` or ``"zh"``.
        questions: the questions; several are numbered and answered one by one.
        formats: the answer format of each question (only a single question's is shown).
        question_position: ``"end"`` (after the document) or ``"start"`` (before it).
        recall_step: ask the model to quote the most relevant sentence before answering.
        extra_instruction: a further instruction line after the question, if any.

    Raises:
        ConfigError: an unknown language or question position.
    """
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


# OpenCompass v2 (needlebench_v2/origin.py, parallel.py, multi.py). ``{doc}`` marks where the haystack goes.
_REF_INTRO = {
    ("en", "single", "end"): (
        "This is a test of long-text capability. You need to first read the long document below, "
        "and then answer the final question based on the information in the document."
    ),
    ("en", "single", "start"): (
        "This is a test of long-text capability. You need to first read the question below, "
        "and then answer it based on the information in the long document that follows."
    ),
    ("en", "multi", "end"): (
        "This is a test of long-text capability. You need to first read the long document below, "
        "and then answer the final questions one by one based on the information in the document."
    ),
    ("en", "multi", "start"): (
        "This is a test of long-text capability. You need to first read the questions below, "
        "and then answer them one by one based on the information in the long document that follows."
    ),
    (
        "zh",
        "single",
        "end",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的长文档，然后根据文档中的信息回答最后的问题。",
    (
        "zh",
        "single",
        "start",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的问题，然后根据最后长文档中的信息回答下面的问题。",
    (
        "zh",
        "multi",
        "end",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的长文档，然后根据文档中的信息，依次回答最后的问题。",
    (
        "zh",
        "multi",
        "start",
    ): "这是一个长文本能力的测试，你需要首先阅读下面的问题，然后根据最后长文档中的信息，依次回答下面的问题。",
}
_REF_FRAME = {
    "en": {
        "end": "{intro}\nThe content of the long document is as follows\n\n<Document>\n{doc}\n</Document>\n\n"
        "Based on the information in the document, now please answer: {question}\n{after}",
        "start": "{intro}\nNow please answer: {question}\n{after}\nThe content of the long document is as follows"
        "\n\n<Document>\n{doc}\n</Document>\n\n",
    },
    "zh": {
        "end": "{intro}\n长文档的内容如下\n\n<文档>\n{doc}\n</文档>\n\n根据文档中的信息，现在请问：{question}\n{after}",
        "start": "{intro}\n现在请问：{question}\n{after}\n长文档内容的如下\n\n<文档>\n{doc}\n</文档>\n\n",
    },
}
_REF_GUIDE = {
    "en": (
        "Please answer in the format",
        "Before answering, please consider what in the document is most relevant "
        "to this question. Please answer in the format",
    ),
    "zh": ("请按照", "在回答之前，请思考文档中与此问题最相关的内容是什么。请按照"),
}


def reference_retrieval_question(lang: str, question: str, answer_format: str) -> str:
    """A needle's question in OpenCompass's ``needles.jsonl`` form: the question, then its answer format.

    Args:
        lang: ``"en"`` or ``"zh"``.
        question: the question.
        answer_format: the answer format, quoted in the result.
    """
    if lang == "zh":
        return f"{question}请按照'{answer_format}'的格式回答。"
    return f"{question} Please answer in the format of '{answer_format}'"


def reference_question(
    lang: str, retrieval_questions: list[str], recall_step: bool = False, multi: bool = False
) -> str:
    """The question line OpenCompass v2 asks: S-RT's as it is; M-RT's questions joined with '、'.

    Args:
        lang: ``"en"`` or ``"zh"``.
        retrieval_questions: each needle's question in ``needles.jsonl`` form.
        recall_step: insert the 2024 paper's "guide" sentence before the answer format.
        multi: M-RT's joined form (even for one needle, as OpenCompass builds it).
    """
    if not multi:
        question = retrieval_questions[0]
    else:
        mark, stop = ("？", "。") if lang == "zh" else ("?", ".")
        asks = "、".join(q.split(mark)[0] + mark for q in retrieval_questions)
        formats = "、".join(q.split("'")[1].split(stop)[0] for q in retrieval_questions)
        question = (
            f"{asks}请按照'{formats}'的格式回答。"
            if lang == "zh"
            else f"{asks}Please answer in the format of '{formats}'"
        )
    if recall_step:
        old, new = _REF_GUIDE[lang]
        head, sep, rest = question.partition(old)
        question = head + new + rest if sep else question + new.removesuffix(old).rstrip()
    return question


def reference_prompt(
    lang: str, question: str, question_position: str = "end", multi: bool = False, after: str = ""
) -> PromptParts:
    """Head and tail of an OpenCompass v2 sparse-task prompt.

    Args:
        lang: ``"en"`` or ``"zh"``.
        question: the full question line (see ``reference_question``).
        question_position: ``"end"`` or ``"start"``.
        multi: M-RT's wording ("answer the final questions one by one").
        after: text OpenCompass puts after the question (M-RS's examples and notes), with its blank lines.
    """
    if lang not in _TEXT:
        raise ConfigError(f"lang: unknown language {lang!r}; choose from {sorted(_TEXT)}")
    if question_position not in QUESTION_POSITIONS:
        raise ConfigError(f"question_position: {question_position!r}; choose from {QUESTION_POSITIONS}")
    intro = _REF_INTRO[(lang, "multi" if multi else "single", question_position)]
    frame = _REF_FRAME[lang][question_position].format(intro=intro, question=question, after=after, doc="\0")
    head, tail = frame.split("\0")
    return PromptParts(head, tail)
