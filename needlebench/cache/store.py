"""The cache's row format: a sample as one row of strings, in ``ROW_COLUMNS`` order.

OpenCompass builds every dataset in the infer task and again in the eval
task. Both see the same samples because generation is deterministic; the
cache (``arrow_rows``) also makes the second build a memory-mapped file read.
Its key covers the task parameters, the dataset version, the generator code
and the contents of the corpus and needle files, so an edited input never
serves stale samples. The bytes land through :mod:`needlebench.files`.
"""

from __future__ import annotations

import json

from ..sample import Sample

__all__ = ["ROW_COLUMNS", "sample_to_row", "sample_values", "sample_utf8"]

ROW_COLUMNS = ("id", "task", "lang", "prompt", "system", "answer", "meta")


def sample_values(sample: Sample) -> tuple[str, ...]:
    """A sample's cache-row values in ``ROW_COLUMNS`` order: strings only, gold and meta as sorted JSON."""
    return (
        sample.id,
        sample.task,
        sample.lang,
        sample.prompt,
        sample.system,
        json.dumps(sample.gold, ensure_ascii=False, sort_keys=True),
        json.dumps(sample.meta, ensure_ascii=False, sort_keys=True),
    )


def sample_utf8(sample: Sample) -> tuple[bytes, ...]:
    """:func:`sample_values` as UTF-8, what the Arrow file stores: the prompt's bytes as its generator
    assembled them when it kept them (``Sample.prompt_utf8``), so the largest column is never re-encoded."""
    values = sample_values(sample)
    return tuple(
        sample.prompt_utf8 if i == _PROMPT and sample.prompt_utf8 else v.encode("utf-8") for i, v in enumerate(values)
    )


_PROMPT = ROW_COLUMNS.index("prompt")


def sample_to_row(sample: Sample) -> dict[str, str]:
    """A sample as a cache row (``ROW_COLUMNS`` -> :func:`sample_values`)."""
    return dict(zip(ROW_COLUMNS, sample_values(sample), strict=True))
