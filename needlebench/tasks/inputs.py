"""The data files a haystack or kinship task reads beside its corpus: their contents key the dataset cache.

Shared by the sparse tasks and both ATCs (which read OpenCompass's ``names.json`` where the corpus choice
names its data folder), so it lies below the task families.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..context.corpora import opencompass_data_file

__all__ = ["DATA_DIR", "default_needle_file", "haystack_inputs"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # package data: found the same from a wheel


def default_needle_file(lang: str) -> Path:
    """The needle file shipped with the package for a language (``data/needles/needles_<lang>.jsonl``).

    Args:
        lang: ``"en"`` or ``"zh"``.
    """
    return DATA_DIR / "needles" / f"needles_{lang}.jsonl"


def haystack_inputs(params: Any) -> dict[str, str]:
    """The files a haystack task's generator reads beside its corpus, by role (``TaskSpec.inputs``).

    The needle file (the one given, OpenCompass's ``needles.jsonl`` beside its corpus, or ours) where the task
    takes needles; OpenCompass's ``names.json`` (ATC and M-RS draw names from it) and v1 M-RS's multi-hop
    records where the corpus choice reads OpenCompass's data folder and they are there. Their contents go
    into the dataset cache key.

    Args:
        params: the task's parameter dataclass (``lang``, ``corpus``, ``needle_file`` where it has one).
    """

    lang, corpus = params.lang, params.corpus
    files: dict[str, str] = {}
    if hasattr(params, "needle_file"):
        files["needles"] = (
            params.needle_file or opencompass_data_file(lang, corpus, "needles.jsonl") or str(default_needle_file(lang))
        )
    for role, name in (("names", "names.json"), ("multihop", f"multi_needle_reasoning_{lang}.json")):
        if path := opencompass_data_file(lang, corpus, name):
            files[role] = path
    return files
