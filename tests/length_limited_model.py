"""The oracle, right only on prompts shorter than a set length: a model whose effective context length is known."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from needlebench.context.tokenizer import count_tokens
from needlebench.opencompass.scripted import OracleModel, last_human_message
from needlebench.record import failed_prediction

_CJK = re.compile(r"[\u4e00-\u9fff]")


class LengthLimitedOracle(OracleModel):
    """:class:`OracleModel` that answers right only where the prompt has fewer than ``right_below`` cl100k tokens,
    and whose requests of one task and language within a range of prompt lengths fail (as a dead server's would).

    Args:
        right_below: the prompt length (cl100k tokens of the last user turn) from which every answer is wrong.
        fail_task: the task whose requests fail in ``fail_between`` ("": none).
        fail_lang: their language (``en``: no CJK character in the prompt; ``zh``: some).
        fail_between: ``[lowest, highest)`` prompt tokens of the failing requests.
        kwargs: as for :class:`OracleModel`.
    """

    def __init__(
        self,
        right_below: int = 0,
        fail_task: str = "",
        fail_lang: str = "en",
        fail_between: Sequence[int] = (0, 0),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.right_below = right_below
        self.fail_task, self.fail_lang, self.fail_between = fail_task, fail_lang, tuple(fail_between)

    def answer(self, prompt: Any) -> Any:
        """The oracle's answer below the length, a wrong one from it on; a failed request where asked."""
        text = last_human_message(prompt)
        tokens = count_tokens(text)
        if self.fail_task and self.fail_between[0] <= tokens < self.fail_between[1]:
            lang = "zh" if _CJK.search(text) else "en"
            if lang == self.fail_lang and self._find(text)[0][0] == self.fail_task:
                return failed_prediction("scripted: the server did not answer")
        if tokens < self.right_below:
            return super().answer(prompt)
        return "I cannot find it."
