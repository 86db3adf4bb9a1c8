"""Model outputs built to break graders: the inputs of the hostile-output benchmark and tests.

A test-input generator, so it lives beside its users (``bench/hostile.py``, ``tests/test_hostile.py``,
``tests/prediction_variants.py``, ``tests/garbage_model.py``) and not in the package.
"""

from __future__ import annotations

import random

__all__ = ["hostile_outputs"]

# No digits, no capitals, no CJK: noise never holds a keyword, a number, a name or an option letter.
_NOISE = "abcdefghijklmnopqrstuvwxyz      \n\t.,;:!?'\"()[]<>/\\|@#$%^&*-_=+~`{}"


def hostile_outputs(size: int = 1_000_000, seed: int = 0) -> dict[str, str]:
    """Model outputs built to break graders, by name; none of them answers anything.

    They are what ``tests/test_hostile.py``, ``bench/hostile.py`` and ``tests/garbage_model.py`` feed the
    graders: every grader must score each 0, name a failure kind and stay linear. At the default
    size the runs are the regression cases: 1 MB of noise and of digits, 70k nested or unclosed
    ``\\boxed{``, 40k unclosed ``<think>``, 50k CJK characters, 50k ``## Answer:`` markers.
    Nothing holds a capital A-D except the markers' "Answer" (the multiple-choice extractor
    would read it as option A; the garbage model leaves that text out).

    Args:
        size: about how many characters the longest outputs have; runs scale with it.
        seed: the noise's seed.
    """
    boxes, thinks, repeats = max(1, size // 14), max(1, size // 25), max(1, size // 20)
    noise = "".join(random.Random(seed).choices(_NOISE, k=size))
    return {
        "noise": noise,
        "digits": ("0123456789" * (size // 10 + 1))[:size],
        "boxed_unclosed": "\\boxed{" * boxes,
        "boxed_nested": "\\boxed{" * boxes + "x" + "}" * boxes,
        "boxed_text_wrapped": "\\boxed{" + "\\text{" * boxes + "}" * (boxes + 1),
        "boxed_digits": "\\boxed{" + "9" * (size // 10) + "}",
        "think_unclosed": "<think>" * thinks,
        "think_closers": "</think>" * thinks + noise[: size // 10],
        "nul_bytes": ("\x00" * 9 + "\\boxed{\x00}") * (size // 18),
        "lone_surrogates": "\ud800 \udfff" * (size // 3),
        "cjk_repeated": "的" * repeats,
        "answer_markers": "## Answer:" * repeats,
        "marker_then_spaces": "## answer:" + " " * (size // 5) + "x",
        "answer_4x": "Here is my reasoning.\n## answer: 4x",
        "whitespace": " \n\t" * (size // 3),
    }
