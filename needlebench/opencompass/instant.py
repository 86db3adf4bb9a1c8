"""A model that answers at once, for dry runs and for timing the framework around inference."""

from __future__ import annotations

from typing import Any

from opencompass.models.base import BaseModel

__all__ = ["InstantModel"]


class InstantModel(BaseModel):
    """Returns ``answer`` for every prompt without any compute.

    ``{max_out_len}`` in ``answer`` is replaced by the output budget OpenCompass handed the model
    for that request, so a run shows which budget each dataset really got.
    """

    is_api = True

    def __init__(
        self,
        path: str = "instant",
        max_seq_len: int = 2_000_000,
        answer: str = "",
        meta_template: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path=path, max_seq_len=max_seq_len, meta_template=meta_template)
        self.answer = answer

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[str]:
        """The configured answer for every input, with ``{max_out_len}`` filled in.

        Args:
            inputs: the prompts (only their count matters).
            max_out_len: the output budget OpenCompass gave this request.
            kwargs: ignored.
        """
        return [self.answer.replace("{max_out_len}", str(max_out_len)) for _ in inputs]

    def get_token_len(self, prompt: str) -> int:
        """A rough token count (four characters a token); no tokenizer is loaded.

        Args:
            prompt: the prompt to measure.
        """
        return len(prompt) // 4
