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

import json
from typing import Any

from datasets import Dataset, Features, Value, concatenate_datasets
from datasets.table import InMemoryTable, concat_tables
from opencompass.datasets.base import BaseDataset

from ..arrow_rows import ARROW_SCHEMA, materialize_file
from ..store import sample_to_row
from ..tasks import get_task, make_params

__all__ = ["NeedleBenchDataset", "materialize", "load_rows", "with_reader_columns"]

FEATURES = Features.from_arrow_schema(ARROW_SCHEMA)  # the cache files' features, for in-memory rows too
# the columns OpenCompass's BaseDataset adds, with the types its ``.map`` gives them
READER_FEATURES = Features({"subdivision": Value("string"), "idx": Value("int64")})


def materialize(task: str, **params: Any) -> Dataset:
    """The task's rows, written to the cache once and memory-mapped; in memory if uncacheable.

    Concurrent processes asking for the same dataset build it once (file
    lock); the file is checked against its sidecar before use (its size, and
    its checksum whenever it was written since), so a truncated or corrupt
    file is rebuilt, never read.

    Args:
        task: registry name of the task.
        params: the task's parameters, as in a dataset config.
    """
    try:
        path, count = materialize_file(task, **params)
    except OSError:
        p = make_params(task, **params)
        return Dataset.from_list([sample_to_row(x) for x in get_task(task).generate(p)], features=FEATURES)
    ds = Dataset.from_file(str(path))
    if len(ds) != count:  # checksum matched, so only a writer bug gets here
        raise RuntimeError(f"{path}: {len(ds)} rows, its sidecar says {count}")
    return ds


def _budgets_fit(ds: Dataset, max_prompt_tokens: int) -> bool:
    """Whether every sample's token budget already fits: the limit would change no row."""
    return all(json.loads(m)["budget_tokens"] <= max_prompt_tokens for m in ds["meta"])


def load_rows(task: str, max_prompt_tokens: int = 0, overlength: str = "shorten", **params: Any) -> Dataset:
    """The rows a model actually gets, after its context limit is applied.

    Sparse tasks shorten the haystack (or skip the sample) at generation;
    dense tasks cannot be shortened, so their over-length samples are skipped.
    The partitioner injects ``max_prompt_tokens`` and ``overlength`` per model
    into both the infer and the eval config, so both see the same rows. A
    limit every sample fits in reads the unlimited file: one file per dataset
    however many models share it.

    Args:
        task: registry name of the task.
        max_prompt_tokens: the model's room in cl100k tokens (0: no limit).
        overlength: ``shorten`` or ``skip`` a sparse sample over the room.
        params: the task's parameters, as in a dataset config.
    """
    spec = get_task(task)
    ds = materialize(task, **params)
    if spec.family == "sparse" and max_prompt_tokens and not _budgets_fit(ds, int(max_prompt_tokens)):
        # a limit decides only over-length samples: where none is, the unlimited file is the same rows
        ds = materialize(task, **params, max_prompt_tokens=int(max_prompt_tokens), overlength=overlength)
    if spec.family != "sparse" and max_prompt_tokens:
        keep = [i for i, m in enumerate(ds["meta"]) if json.loads(m)["prompt_tokens"] <= max_prompt_tokens]
        if len(keep) < len(ds):
            ds = ds.select(keep)
    return ds


def with_reader_columns(ds: Dataset, abbr: str) -> Dataset:
    """``ds`` with OpenCompass's ``subdivision`` (the dataset's abbr) and ``idx`` (row number) columns.

    The columns ``BaseDataset`` adds with ``Dataset.map``, here set beside the existing ones: the
    prompts stay in the memory-mapped file, nothing is rewritten.

    Args:
        ds: the rows as loaded (a memory-mapped cache file, or a selection of it).
        abbr: the dataset config's ``abbr``.
    """
    if ds._indices is not None:  # a filtered selection (dense tasks over a model's room): only those rows
        ds = ds.flatten_indices()
    extra = InMemoryTable.from_pydict(
        {"subdivision": [abbr] * len(ds), "idx": list(range(len(ds)))}, schema=READER_FEATURES.arrow_schema
    )
    features = Features({**ds.features, **READER_FEATURES})
    table = concat_tables([ds._data, extra], axis=1)
    return Dataset(table.replace_schema_metadata(features.arrow_schema.metadata), split=ds.split)


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
        self.dataset = concatenate_datasets([ds] * n) if n > 1 else ds
        self._init_reader(**(reader_cfg or {}))

    @staticmethod
    def load(task: str, **params: Any) -> Dataset:
        """The rows of one dataset config (OpenCompass's ``load`` hook); each is also kept in :data:`LOADED`.

        Args:
            task: registry name of the task.
            params: the task's parameters plus ``max_prompt_tokens`` / ``overlength`` (see :func:`load_rows`).
        """
        ds = load_rows(task, **params)
        LOADED.append(ds)
        return ds


# Every dataset this process loaded, in order: the scripted models (``scripted.OracleModel``) look
# a prompt's gold up here, since OpenCompass builds the datasets in the process that runs the model.
LOADED: list[Dataset] = []
