"""OpenCompass v1's NeedleBench prompt wording (the 2024 paper's), verbatim, and how its loaders assemble it.

``profile="v1"`` under ``prompt_style="reference"`` builds the prompts of OpenCompass 0.5.4's
``opencompass/datasets/needlebench/{origin,parallel,multi}.py`` (the loaders its
``configs/datasets/needlebench/needlebench_{4k..1000k}`` configs run): the "You are an intelligent AI
assistant ..." frame, the question after (or before) the document, and the "guide" sentence (the 2024
paper's recall step, ``guide=True`` in every v1 config) inserted where each loader inserts it. Quirks are
kept (no separator between the question and the document in the "start" forms, the multi-hop guide
appended without a space, the ``guide=False`` single-needle question cut by a fixed number of characters).

One defect is fixed (``../shared/spec/needlebench.md`` section 8, README "Where we differ"): OpenCompass's
Chinese "start" prompt of S-RT and M-RS is a tuple (a stray comma between two string literals), which its
dataset cannot hold as text; we join the two parts, as the English form joins them
(``start_tuple`` in ``tests/test_differential_prompts.py``).

The differential prompt test rebuilds these prompts with the installed loaders and compares them byte
for byte.
"""

from __future__ import annotations

from ...errors import ConfigError
from .prompts import QUESTION_POSITIONS, PromptParts

__all__ = ["V1_FORMS", "v1_question", "v1_prompt"]

# the three v1 loaders: S-RT (origin.py), M-RT (parallel.py), the 2024 multi-hop M-RS (multi.py)
V1_FORMS = ("origin", "parallel", "multi")

_ASSISTANT = {
    "en": (
        "You are an intelligent AI assistant skilled in answering user questions.\n"
        "Please keep your answers concise and clear. Do not talk about irrelevant topics or repeat your answers.\n"
    ),
    "zh": "你是一个善于回答用户问题的智能AI助手\n请保持你的回答简洁清楚。不要说和下面文档中的无关的话，或重复你的回答\n",
}
_READ_FIRST_ZH = "请先仔细阅读下面的文档再依次回答最后提出的问题\n"  # parallel.py, Chinese only

# (lang, form, position) -> the text after the assistant lines; ``{doc}`` is the document, ``{question}``
# the question line. origin.py and multi.py share their frame; parallel.py has its own.
_FRAMES: dict[tuple[str, str, str], str] = {
    ("en", "single", "end"): "The document given to you by the user is {doc}\n\nNow, the question is: {question}",
    ("en", "single", "start"): "Now, the question is: {question}The document given to you by the user is {doc}\n\n",
    ("zh", "single", "end"): "用户现在给你的文档是{doc}\n\n现在请问：{question}",
    # OpenCompass builds this one as a tuple ('...现在请问：{q}', '用户现在给你的文档是{doc}\n\n'): joined here
    ("zh", "single", "start"): "现在请问：{question}用户现在给你的文档是{doc}\n\n",
    ("en", "multi", "end"): "The document given to you by the user is {doc}\n\nNow, the questions are: {question}\n",
    ("en", "multi", "start"): "\nNow, the questions are: {question}\n\nThe document given to you by the user is {doc}",
    ("zh", "multi", "end"): _READ_FIRST_ZH + "用户现在给你的文档是{doc}\n\n现在请问：{question}\n",
    ("zh", "multi", "start"): _READ_FIRST_ZH + "现在请问：{question}\n\n用户现在给你的文档是{doc}\n",
}

# the guide sentence: where a question's answer format starts, and the sentence inserted before it
_FORMAT_MARK = {"en": "Please answer in the format", "zh": "请按照"}
_GUIDE = {
    "en": "Before answering, please consider what in the document is most relevant to this question.",
    "zh": "在回答之前，请思考文档中与此问题最相关的内容是什么。",
}
# origin.py without the guide (its "for_base" form): this quote opener is deleted and so many characters cut
_BASE_CUT = {"en": ("Please answer in the format '", 10), "zh": ("请按照'", 16)}


def _insert_guide(lang: str, question: str) -> str:
    """origin.py / parallel.py: the guide sentence put before the answer format (``split`` on its first words).

    OpenCompass keeps the text before the first mark and between the first and second (a question without the
    mark makes it raise); a question without the mark gets the guide at its end here.
    """
    mark = _FORMAT_MARK[lang]
    parts = question.split(mark)
    joint = (" " if lang == "en" else "") + mark
    if len(parts) < 2:
        return question + _GUIDE[lang]
    return parts[0] + _GUIDE[lang] + joint + parts[1]


def v1_question(lang: str, question: str, form: str, guide: bool = True) -> str:
    """A question line as OpenCompass v1's loader ``form`` words it, with or without the guide sentence.

    Args:
        lang: ``"en"`` or ``"zh"``.
        question: the question as the needle file (or, for M-RT, the joined questions) gives it.
        form: ``"origin"`` (S-RT), ``"parallel"`` (M-RT) or ``"multi"`` (2024 multi-hop M-RS).
        guide: the 2024 paper's recall step (``guide=True`` in every OpenCompass v1 config).

    Raises:
        ConfigError: an unknown language or form.
    """
    if lang not in _ASSISTANT:
        raise ConfigError(f"lang: unknown language {lang!r}; choose from {sorted(_ASSISTANT)}")
    if form not in V1_FORMS:
        raise ConfigError(f"form: unknown v1 loader {form!r}; choose from {V1_FORMS}")
    if form == "multi":
        return question + _GUIDE[lang] if guide else question
    if guide:
        return _insert_guide(lang, question)
    if form == "parallel":
        return question
    # origin.py's guide=False form: the guide inserted, the quote opener deleted, the last characters cut
    opener, cut = _BASE_CUT[lang]
    return _insert_guide(lang, question).replace(opener, "")[:-cut]


def v1_prompt(lang: str, question: str, form: str, question_position: str = "end") -> PromptParts:
    """Head and tail (the document goes between) of an OpenCompass v1 sparse-task prompt.

    Args:
        lang: ``"en"`` or ``"zh"``.
        question: the full question line (:func:`v1_question`).
        form: ``"origin"``, ``"parallel"`` or ``"multi"`` (the loader whose frame is used).
        question_position: ``"end"`` or ``"start"`` (OpenCompass's ``position`` "End" / "Start").

    Raises:
        ConfigError: an unknown language, form or question position.
    """
    if lang not in _ASSISTANT:
        raise ConfigError(f"lang: unknown language {lang!r}; choose from {sorted(_ASSISTANT)}")
    if form not in V1_FORMS:
        raise ConfigError(f"form: unknown v1 loader {form!r}; choose from {V1_FORMS}")
    if question_position not in QUESTION_POSITIONS:
        raise ConfigError(f"question_position: {question_position!r}; choose from {QUESTION_POSITIONS}")
    frame = _FRAMES[(lang, "multi" if form == "parallel" else "single", question_position)]
    head, tail = frame.split("{doc}")
    return PromptParts(_ASSISTANT[lang] + head.replace("{question}", question), tail.replace("{question}", question))
