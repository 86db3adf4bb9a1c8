"""The one record every task produces, and the dataset version it belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .seeding import content_digest

__all__ = ["Sample", "DATASET_VERSION", "RECORD_KEYS", "sample_id"]

# Bump whenever generation changes what a config produces (prompts, gold, ids).
DATASET_VERSION = "4.1"

# The metadata every task may record and every layer may read: where the sample sits on the length axis
# (``length``: the nominal context size, absent for tasks without one), its size in cl100k tokens, the length
# it was cut from when shortened to fit a model, how it was made (``protocol``, ``profile``, ``version``) and
# the haystack corpus it was drawn from (absent without a haystack), and the resolved protocol ``options``
# (a task's named choices, absent where it has none: a leaderboard reads them to decide what a row may sit
# beside). With ``id``, ``task`` and ``lang`` (the sample's own fields) these are the only metadata names code
# outside ``needlebench.tasks`` uses; a task declares the rest itself (``TaskSpec.meta_keys``, ``TaskSpec.cell``).
RECORD_KEYS = ("length", "prompt_tokens", "shortened_from", "protocol", "profile", "version", "corpus", "options")


class _Undecoded:
    """The marker of a ``Sample.prompt`` given as UTF-8 bytes only (``Sample.from_utf8``), not decoded yet."""

    def __reduce__(self) -> str:
        return "_UNDECODED"  # pickles as this module's one marker, so an unpickled sample still decodes


_UNDECODED = _Undecoded()


class _PromptText:
    """``Sample.prompt``: the text, or, for a sample made by :meth:`Sample.from_utf8`, its UTF-8 bytes
    decoded the first time it is read.

    Why: the sparse tasks assemble their prompts as bytes (1 GB for the 128k suite) and the cache writer
    stores bytes, so decoding every prompt to a ``str`` nobody reads (and freeing it) was a pass over
    all of them in every cold build. A data descriptor on a dataclass field: ``__init__`` sets it,
    equality, ``repr``, ``replace`` and pickling read it like any field.
    """

    def __get__(self, obj: Any, owner: Any = None) -> str:
        if obj is None:
            raise AttributeError("prompt")  # no default: the field stays required
        text = obj.__dict__["_prompt"]
        if text is _UNDECODED:
            text = obj.prompt_utf8.decode("utf-8")
            obj.__dict__["_prompt"] = text
        return text

    def __set__(self, obj: Any, value: str) -> None:
        obj.__dict__["_prompt"] = value


@dataclass(frozen=True)
class Sample:
    """A prompt with its structured gold and the metadata the reports group by."""

    id: str
    task: str
    lang: str
    prompt: str = _PromptText()  # type: ignore[assignment]  # a plain str to every reader
    gold: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    # the prompt as UTF-8 when the generator assembled it as bytes (``from_utf8``), so the cache writer
    # stores those bytes as they are; empty: encoded from ``prompt`` when needed
    prompt_utf8: bytes = field(default=b"", repr=False, compare=False)

    @classmethod
    def from_utf8(
        cls, id: str, task: str, lang: str, prompt_utf8: bytes, gold: dict[str, Any], **fields: Any
    ) -> Sample:
        """A sample whose prompt is given as valid UTF-8 bytes, decoded only when ``prompt`` is read.

        Args:
            id: the sample id.
            task: registry name of the task.
            lang: the sample's language.
            prompt_utf8: the prompt's UTF-8 bytes (must decode strictly).
            gold: the structured gold.
            fields: ``meta`` and ``system``, as in the constructor.
        """
        return cls(id, task, lang, _UNDECODED, gold, prompt_utf8=prompt_utf8, **fields)  # type: ignore[arg-type]

    @property
    def prompt_tokens(self) -> int:
        """The prompt's size in cl100k tokens, as its generator counted it (``meta["prompt_tokens"]``).

        Raises:
            ConfigError: the task recorded no ``prompt_tokens`` (every task must: planning reads it).
        """
        if "prompt_tokens" not in self.meta:
            raise ConfigError(
                f"task {self.task!r}: sample {self.id} has no prompt_tokens in its metadata (every task must record them)"
            )
        return int(self.meta["prompt_tokens"])

    @property
    def budget_tokens(self) -> int:
        """The room the sample asks of a model, in cl100k tokens: a sparse sample's token budget
        (``meta["budget_tokens"]``: its length's, or the model's room it was cut to), else its prompt's size
        (a prompt that cannot be cut needs all of it)."""
        return int(self.meta.get("budget_tokens", self.prompt_tokens))

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
