"""The oracle model, writing down each prompt it is asked: a resume test counts what a model was asked."""

from __future__ import annotations

import hashlib
from typing import Any

from needlebench.opencompass.scripted import OracleModel, last_human_message


class CountingOracle(OracleModel):
    """:class:`OracleModel` that appends one line per prompt it answers (its digest) to ``calls``.

    Args:
        calls: the file the lines go to.
        kwargs: as for :class:`OracleModel`.
    """

    def __init__(self, calls: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = calls

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[str]:
        """The oracle's answers, each prompt written down first."""
        if self.calls:
            with open(self.calls, "a", encoding="utf-8") as fh:
                for prompt in inputs:
                    fh.write(hashlib.sha256(last_human_message(prompt).encode("utf-8")).hexdigest() + "\n")
        return super().generate(inputs, max_out_len, **kwargs)
