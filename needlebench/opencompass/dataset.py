"""OpenCompass dataset class for every needlebench task.

One class serves all tasks; ``task`` picks the generator from the registry.
A dataset is one (task, language) with per-sample metadata, not one
(length, depth) cell. Rows are written once to an Arrow file keyed by the
full config, in record batches built column by column, and read back
memory-mapped by the infer and eval tasks.

Why the class has its own constructor: OpenCompass's ``BaseDataset.__init__``
adds the ``subdivision`` and ``idx`` columns with ``Dataset.map``, which
rewrites every prompt of the dataset (about 1 GB for the 128k suite) in every
infer and eval task, even for a shard of a few rows. Ours adds the same two
columns beside the memory-mapped ones, without touching the prompts, and keeps
the rest of the contract (``k``/``n`` repeats, the reader and its
``test_range``); ``tests/test_dataset_contract.py`` compares the two row by row.
"""

from __future__ import annotations

import hashlib
from typing import Any

from datasets import Dataset, Features, Value, concatenate_datasets
from datasets.table import InMemoryTable, concat_tables
from opencompass.datasets.base import BaseDataset

from ..cache.rows import load_rows, selected_rows

__all__ = ["NeedleBenchDataset", "with_reader_columns"]
# the columns OpenCompass's BaseDataset adds, with the types its ``.map`` gives them
READER_FEATURES = Features({"subdivision": Value("string"), "idx": Value("int64")})


def with_reader_columns(ds: Dataset, abbr: str) -> Dataset:
    """``ds`` with OpenCompass's ``subdivision`` (the dataset's abbr) and ``idx`` (row number) columns.

    The columns ``BaseDataset`` adds with ``Dataset.map``, here set beside the existing ones: the
    prompts stay in the memory-mapped file, nothing is rewritten.

    Args:
        ds: the rows as loaded (a memory-mapped cache file, or a selection of it).
        abbr: the dataset config's ``abbr``.
    """
    ds = selected_rows(ds)  # a filtered selection (dense tasks over a model's room): only those rows
    extra = InMemoryTable.from_pydict(
        {"subdivision": [abbr] * len(ds), "idx": list(range(len(ds)))}, schema=READER_FEATURES.arrow_schema
    )
    features = Features({**ds.features, **READER_FEATURES})
    table = concat_tables([ds.data, extra], axis=1)
    # the prompt last: OpenCompass's template fills a row's columns in order (``safe_format``), and every
    # ``str.replace`` after the prompt's would scan the whole prompt again (10 ms a sample at 1000k)
    names = [n for n in table.column_names if n != "prompt"] + ["prompt"] * ("prompt" in table.column_names)
    table, features = table.select(names), Features({n: features[n] for n in names})
    # the rows' own fingerprint and the abbr name the result: without one, ``datasets`` hashes the whole
    # table's pickled state (about 10 ms a dataset, once per piece of every infer and eval task)
    fingerprint = hashlib.sha256(f"{ds._fingerprint}\0{abbr}\0reader columns".encode()).hexdigest()[:16]
    return Dataset(
        table.replace_schema_metadata(features.arrow_schema.metadata), split=ds.split, fingerprint=fingerprint
    )


class NeedleBenchDataset(BaseDataset):
    """``type=NeedleBenchDataset, task='srt', lang='en', lengths=[...], ...``."""

    def __init__(self, reader_cfg: dict | None = None, k: int | list[int] = 1, n: int = 1, **kwargs: Any) -> None:
        """``BaseDataset``'s contract without its full rewrite of the prompts.

        Args:
            reader_cfg: OpenCompass's reader settings (columns, ``test_range``).
            k: as in OpenCompass, at most ``n``.
            n: each row ``n`` times (OpenCompass's repeated sampling).
            kwargs: ``abbr`` and the task's parameters, passed to :meth:`load`.
        """
        abbr = kwargs.pop("abbr", "dataset")
        if (max(k) if isinstance(k, list) else k) > n:
            raise ValueError("Maximum value of `k` must less than or equal to `n`")
        ds = with_reader_columns(self.load(**kwargs), abbr)
        # concatenate_datasets puts the prompt column back among the others: again last (see with_reader_columns)
        self.dataset = concatenate_datasets([ds] * n).select_columns(ds.column_names) if n > 1 else ds
        self._init_reader(**(reader_cfg or {}))

    @staticmethod
    def load(task: str, **params: Any) -> Dataset:
        """The rows of one dataset config (OpenCompass's ``load`` hook).

        Args:
            task: registry name of the task.
            params: the task's parameters plus ``max_prompt_tokens`` / ``overlength`` (see :func:`load_rows`).
        """
        return load_rows(task, **params)
