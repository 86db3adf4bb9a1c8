"""The one record every task produces, and the dataset version it belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .seeding import content_digest

__all__ = ["Sample", "DATASET_VERSION", "RECORD_KEYS", "sample_id"]

# Bump whenever generation changes what a config produces (prompts, gold, ids).
DATASET_VERSION = "3.0"

# The metadata every task may record and every layer may read: where the sample sits on the length axis
# (``length``: the nominal context size, absent for tasks without one), its size in cl100k tokens, the length
# it was cut from when shortened to fit a model, how it was made (``protocol``, ``profile``, ``version``) and
# the haystack corpus it was drawn from (absent without a haystack). With ``id``, ``task`` and ``lang`` (the
# sample's own fields) these are the only metadata names code outside ``needlebench.tasks`` uses; a task
# declares the rest itself (``TaskSpec.meta_keys``, ``TaskSpec.cell``).
RECORD_KEYS = ("length", "prompt_tokens", "shortened_from", "protocol", "profile", "version", "corpus")


@dataclass(frozen=True)
class Sample:
    """A prompt with its structured gold and the metadata the reports group by."""

    id: str
    task: str
    lang: str
    prompt: str
    gold: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    # ``prompt`` as UTF-8 when the generator assembled it as bytes (the sparse tasks' 1 GB of haystack), so
    # the cache writer stores those bytes instead of encoding the text again; empty: encoded when needed
    prompt_utf8: bytes = field(default=b"", repr=False, compare=False)

    def export_row(self, dataset: str) -> dict[str, Any]:
        """The sample as one ``needlebench export`` JSON line (``system`` only when set).

        Args:
            dataset: the abbr of the dataset the sample belongs to.
        """
        row: dict[str, Any] = {"dataset": dataset, "id": self.id, "task": self.task, "lang": self.lang}
        if self.system:
            row["system"] = self.system
        row.update(prompt=self.prompt, gold=self.gold, meta=self.meta)
        return row


def sample_id(task: str, lang: str, *coords: object, prompt: str = "", digest: str = "") -> str:
    """Readable coordinates plus a content hash, so a changed prompt never reuses an id.

    Args:
        task: registry name of the task.
        lang: the sample's language.
        coords: further readable coordinates (length, depth, repeat, ...), joined with ``-``.
        prompt: the prompt whose digest ends the id, when ``digest`` is not given.
        digest: a precomputed content digest (only its first 8 characters are used).
    """
    head = "-".join(str(c) for c in (task, lang, *coords))
    return f"{head}-{(digest or content_digest(prompt.encode('utf-8')))[:8]}"
