"""A scripted model whose answer is a pure function of the prompt's text, for side-by-side runs.

OpenCompass's built-in NeedleBench and ours, given byte-identical prompts, must hand
this model byte-identical inputs, so it answers both identically; any difference in
the two runs' scores is then a difference in grading. The answers mix right, wrong
and awkward ones so the scores are neither all 100 nor all 0: the whole prompt
(every needle's keyword is in it), the first or last third of the document (right
only when the needle sits there), a name taken from a line of the prompt that
states a kinship, in a ``\\boxed{}`` (right when it is the chain's answer), and that name in the formatting variants the
two graders must agree on. Importable by OpenCompass's task processes when ``tests/``
is on ``PYTHONPATH``; never part of the package.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from needlebench.opencompass.scripted import ScriptedModel, last_human_message

__all__ = ["PromptScriptedModel", "scripted_answer"]

# English "First Last" names, and Chinese names as the kinship statements write them (2-4 characters
# before a relation word); both are candidates for a boxed answer.
_EN_NAME = re.compile(r"\b[A-Z][a-z]{1,20} [A-Z][a-z]{1,20}\b")
_ZH_NAME = re.compile(r"([\u4e00-\u9fff]{2,4})(?=是|的)")
_KIN = (
    "father",
    "mother",
    "dad",
    "mom",
    "parent",
    "grand",
    "ancestor",
    "父",
    "母",
    "爸",
    "妈",
    "爷",
    "奶",
    "外公",
    "外婆",
)
_BOX_FORMS = ("\\boxed{{{}}}", "\\boxed{{{{{}}}}}", "\\boxed {{{}}}", "\\fbox{{{}}}", "The answer is \\boxed{{{} }}.")


def scripted_answer(text: str) -> str:
    """The model's answer to one prompt text: the same text always gets the same answer.

    Args:
        text: the prompt's last user turn.
    """
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    third = len(text) // 3
    kind = digest[0] % 6
    if kind == 0:
        return text
    if kind == 1:
        return text[:third]
    if kind == 2:
        return text[-third:]
    kin = "\n".join(line for line in text.splitlines() if any(word in line for word in _KIN)) or text
    names = sorted(set(_EN_NAME.findall(kin) + _ZH_NAME.findall(kin)))
    name = names[(digest[1] * 256 + digest[2]) % len(names)] if names else "nobody"
    form = _BOX_FORMS[digest[3] % len(_BOX_FORMS)] if kind == 5 else _BOX_FORMS[0]
    return f"Let me think.\n{form.format(name)}"


class PromptScriptedModel(ScriptedModel):
    """Answers with :func:`scripted_answer` of the prompt's last HUMAN turn."""

    def answer(self, prompt: Any) -> str:
        """The scripted answer to one prompt.

        Args:
            prompt: as OpenCompass passes it (a string or a PromptList).
        """
        return scripted_answer(last_human_message(prompt))
