"""The garbage model: answers hostile text whatever the prompt, so every grader must score it 0.

It runs in real ``opencompass`` runs (``tests/configs/e2e_oracle.py`` names it
``garbage_model.GarbageModel``; the run needs ``tests/`` and the repository root on ``PYTHONPATH``)
and feeds the graders ``bench.hostile_outputs``: a test input, so it lives with the tests, not in the package.
"""

from __future__ import annotations

from typing import Any

from bench.hostile_outputs import hostile_outputs
from needlebench.opencompass.scripted import ScriptedModel

__all__ = ["GarbageModel", "GARBAGE_OUTPUTS"]

# The rotation: hostile outputs, 200 kB at most so runs stay fast. Left out: lone surrogates (no UTF-8
# prediction file can hold them) and the "## Answer:" run, whose capital A is a fair answer "A" to the
# multiple-choice task; "## answer: 4x" tests the marker instead.
GARBAGE_OUTPUTS = (
    "noise",
    "boxed_unclosed",
    "nul_bytes",
    "cjk_repeated",
    "answer_4x",
    "think_unclosed",
    "boxed_nested",
    "digits",
    "boxed_digits",
    "marker_then_spaces",
)


class GarbageModel(ScriptedModel):
    """Answers a fixed rotation of hostile texts (``GARBAGE_OUTPUTS``), whatever the prompt.

    Args:
        path: a label.
        size: about how long the longest texts are, in characters.
        kwargs: as for ``ScriptedModel``.
    """

    def __init__(self, path: str = "garbage", size: int = 200_000, **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        outputs = hostile_outputs(size)
        self.texts = [outputs[name] for name in GARBAGE_OUTPUTS]
        self._turn = 0

    def answer(self, prompt: Any) -> str:
        """The next hostile text of the rotation (the prompt is ignored)."""
        text = self.texts[self._turn % len(self.texts)]
        self._turn += 1
        return text
