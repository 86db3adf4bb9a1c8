"""A scripted reasoning model: the oracle's answers wrapped in think blocks, some cut off at the budget, some unclosed.

It runs in real ``opencompass`` runs (``tests/configs/e2e_oracle.py`` names it ``thinking_model.ThinkingModel``
inside ``reasoning()``; the run needs ``tests/`` and the repository root on ``PYTHONPATH``). Which way a
prompt is answered is a pure function of the prompt's text (:func:`style_of`), so the test knows every
sample's fate whatever shard or batch it ran in. A cut-off answer is what an OpenAI-compatible server's
is through our API model: its text, cut at ``max_out_len`` cl100k tokens, with ``finish_reason="length"``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from needlebench.context.tokenizer import get_encoding
from needlebench.opencompass.scripted import OracleModel, last_human_message
from needlebench.record import cut_prediction

__all__ = ["ThinkingModel", "STYLES", "style_of"]

# how a prompt is answered, and what OpenCompass's think strip leaves of it:
# closed: "<think>...</think> answer" -> the answer (right)
# cut: thinking that runs past the budget, cut there, finish_reason "length" -> no answer (wrong, truncated)
# unclosed: "<think>... answer" that never closes -> kept whole by OpenCompass (right; think_unclosed)
# inside: "<think>answer</think> unsure" -> the answer is stripped away (wrong)
# early: an ATC-style answer naming the next person up the chain instead of the eldest (wrong: under-thinking)
STYLES = ("closed", "cut", "unclosed", "inside", "early")
_THOUGHT = "Let me trace the relevant sentences one by one and check each against the question. "


def style_of(prompt: str) -> str:
    """The style a prompt is answered in: a stable hash of its text (never Python's salted ``hash``)."""
    digest = hashlib.blake2b(prompt.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return STYLES[int.from_bytes(digest, "big") % len(STYLES)]


class ThinkingModel(OracleModel):
    """Answers like a reasoning model, in the style :func:`style_of` picks for each prompt.

    Args:
        path: a label.
        kwargs: as for :class:`~needlebench.opencompass.scripted.OracleModel` (``datasets=`` the run's datasets).
    """

    def __init__(self, path: str = "thinker", **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        self._budget = 0

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[Any]:
        """The scripted answers; a cut-off one as its text with ``finish_reason="length"``.

        Args:
            inputs: prompts as OpenCompass passes them.
            max_out_len: the output budget (where the cut-off answers stop).
            kwargs: further OpenCompass arguments (ignored).
        """
        self._budget = max_out_len
        return super().generate(inputs, max_out_len, **kwargs)

    def answer(self, prompt: Any) -> Any:
        """One scripted answer (see ``STYLES``).

        Args:
            prompt: as OpenCompass passes it.
        """
        right = super().answer(prompt)
        style = style_of(last_human_message(prompt))
        if style == "closed":
            return f"<think>{_THOUGHT}</think>\n{right}"
        if style == "unclosed":
            return f"<think>{_THOUGHT}So: {right}"
        if style == "inside":
            return f"<think>{right}</think>\nI am not sure."
        if style == "early":
            gold = json.loads(self._find_gold(prompt))
            names = gold.get("chain_names") or []
            return f"<think>{_THOUGHT}</think>\\boxed{{{names[1] if len(names) > 2 else 'Nobody'}}}"
        encoding = get_encoding()
        tokens = encoding.encode_ordinary(f"<think>{_THOUGHT * (self._budget // 10 + 2)}")[: self._budget]
        return cut_prediction(encoding.decode(tokens), "length")

    def _find_gold(self, prompt: Any) -> str:
        """The gold (JSON) of a prompt, as the oracle found it."""
        found = self._find(last_human_message(prompt))
        assert found  # answer() found it first
        return found[0][1]
