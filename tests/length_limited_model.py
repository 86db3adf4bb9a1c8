"""The oracle, right only on prompts shorter than a set length: a model whose effective context length is known."""

from __future__ import annotations

from typing import Any

from needlebench.context.tokenizer import count_tokens
from needlebench.opencompass.scripted import OracleModel, last_human_message


class LengthLimitedOracle(OracleModel):
    """:class:`OracleModel` that answers right only where the prompt has fewer than ``right_below`` cl100k tokens.

    Args:
        right_below: the prompt length (cl100k tokens of the last user turn) from which every answer is wrong.
        kwargs: as for :class:`OracleModel`.
    """

    def __init__(self, right_below: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.right_below = right_below

    def answer(self, prompt: Any) -> str:
        """The oracle's answer below the length, a wrong one from it on."""
        if count_tokens(last_human_message(prompt)) < self.right_below:
            return super().answer(prompt)
        return "I cannot find it."
