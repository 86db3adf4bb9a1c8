"""The cache's row format: a sample as one row of strings (``ROW_COLUMNS``) and its token counts (``TOKEN_COLUMNS``).

OpenCompass builds every dataset in the infer task and again in the eval
task. Both see the same samples because generation is deterministic; the
cache (``arrow_rows``) also makes the second build a memory-mapped file read.
Its key covers the task parameters, the dataset version, the generator code
and the contents of the corpus and needle files, so an edited input never
serves stale samples. The bytes land through :mod:`needlebench.files`.
"""

from __future__ import annotations

import hashlib
import json

from ..sample import Sample

__all__ = [
    "PROMPT_COLUMN",
    "RowsDigest",
    "ROW_COLUMNS",
    "TOKEN_COLUMNS",
    "sample_to_row",
    "sample_values",
    "sample_utf8",
    "sample_tokens",
]

ROW_COLUMNS = ("id", "task", "lang", "prompt", "system", "answer", "meta")  # strings
PROMPT_COLUMN = ROW_COLUMNS.index("prompt")  # where a row holds its prompt (the largest value)
# integers after the strings: what planning and the model's limit read of every row (``Sample.prompt_tokens``,
# ``Sample.budget_tokens``), so they never parse ``meta`` for them (the JSON keeps them too, for the records)
TOKEN_COLUMNS = ("prompt_tokens", "budget_tokens")


def sample_values(sample: Sample) -> tuple[str, ...]:
    """A sample's cache-row values in ``ROW_COLUMNS`` order: strings only, gold and meta as sorted JSON."""
    return _values(sample, sample.prompt)


def sample_utf8(sample: Sample) -> tuple[bytes, ...]:
    """:func:`sample_values` as UTF-8, what the Arrow file stores. The prompt's bytes are the ones its
    generator assembled when it kept them (``Sample.prompt_utf8``): the largest column is neither decoded
    nor encoded again."""
    prompt = sample.prompt_utf8 or sample.prompt.encode("utf-8")
    return tuple(prompt if i == PROMPT_COLUMN else v.encode("utf-8") for i, v in enumerate(_values(sample, "")))


def _values(sample: Sample, prompt: str) -> tuple[str, ...]:
    """The row in ``ROW_COLUMNS`` order with ``prompt`` in the prompt's place (the one definition of a row)."""
    return (
        sample.id,
        sample.task,
        sample.lang,
        prompt,
        sample.system,
        _to_json(sample.gold),
        _to_json(sample.meta),
    )


# ``json.dumps(value, ensure_ascii=False, sort_keys=True)`` without building an encoder for every call
_to_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def sample_tokens(sample: Sample) -> tuple[int, int]:
    """A sample's ``TOKEN_COLUMNS`` values."""
    return sample.prompt_tokens, sample.budget_tokens


def sample_to_row(sample: Sample) -> dict[str, str | int]:
    """A sample as a cache row: ``ROW_COLUMNS`` -> :func:`sample_values`, ``TOKEN_COLUMNS`` -> :func:`sample_tokens`."""
    return {
        **dict(zip(ROW_COLUMNS, sample_values(sample), strict=True)),
        **dict(zip(TOKEN_COLUMNS, sample_tokens(sample), strict=True)),
    }


class RowsDigest:
    """A dataset's fingerprint: a digest of every row's values (id, prompt, gold, meta, ...), in order.

    Why: a resume must know that the rows a stored plan was made for are still the rows a config gives,
    without planning again; token counts alone miss a changed needle of the same length. The cache writer
    folds each row in as it writes it (kept in the file's sidecar), so a resume reads 32 hex digits per
    dataset instead of its prompts.
    """

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)

    def add(self, values: tuple[bytes, ...]) -> None:
        """Fold in one row's UTF-8 values (:func:`sample_utf8`), each with its length.

        Args:
            values: the row's values in ``ROW_COLUMNS`` order.
        """
        for value in values:
            self._hash.update(len(value).to_bytes(8, "little"))
            self._hash.update(value)

    def hexdigest(self) -> str:
        """The fingerprint of the rows folded in so far."""
        return self._hash.hexdigest()
