"""Our dataset class keeps OpenCompass's ``BaseDataset`` contract without rewriting the prompts.

``BaseDataset.__init__`` adds ``subdivision`` and ``idx`` with ``Dataset.map`` (a full rewrite of the
rows); ours sets the same columns beside the memory-mapped ones, with the prompt column last. Here both
constructors build every task's dataset from the same config, and every row, feature and reader split must
be equal.
"""

from __future__ import annotations

from typing import Any

import pytest
from opencompass.datasets.base import BaseDataset

from needlebench.opencompass.configs import atc_datasets, atc_mc_datasets, needlebench_datasets, needlechain_datasets
from needlebench.opencompass.dataset import NeedleBenchDataset


class BuiltinContract(NeedleBenchDataset):
    """Our loader under OpenCompass's own constructor: the reference for the contract."""

    __init__ = BaseDataset.__init__  # type: ignore[assignment]


def _configs() -> list[dict[str, Any]]:
    small = dict(lengths=[1000, 2000], depths=[0, 50, 100], repeats=2)
    return [
        *needlebench_datasets(suite="4k", tasks=["srt", "mrt", "mrs"], langs=["en", "zh"], **small),
        *atc_datasets(langs=["en"], needle_counts=[2, 4], question_types=["eldest_ancestor"], repeats=2),
        *atc_mc_datasets(langs=["en"], styles=["direct"], steps=[2], repeats=2),
        *needlechain_datasets(k_values=[5], points=2, variants=["forward"], questions=["single"]),
    ]


CONFIGS = _configs()


def _build(cls: type, cfg: dict[str, Any], **over: Any) -> Any:
    kwargs = {k: v for k, v in cfg.items() if k not in ("type", "infer_cfg", "eval_cfg")}
    return cls(**{**kwargs, **over})


@pytest.mark.parametrize("cfg", CONFIGS, ids=[c["abbr"] for c in CONFIGS])
def test_rows_equal_what_basedataset_would_build(cfg: dict[str, Any]) -> None:
    reader = dict(cfg["reader_cfg"])
    for over in ({}, {"reader_cfg": {**reader, "test_range": "[1:3]"}}, {"n": 2, "k": [1, 2]}):
        ours, ref = _build(NeedleBenchDataset, cfg, **over), _build(BuiltinContract, cfg, **over)
        assert ours.dataset.features == ref.dataset.features
        # the same columns, the prompt moved last: OpenCompass fills a template column by column
        # (``safe_format``), and no column is filled into the prompt after it (nor rescanned through it)
        assert ours.dataset.column_names == [c for c in ref.dataset.column_names if c != "prompt"] + ["prompt"]
        assert ref.dataset.column_names[-2:] == ["subdivision", "idx"]
        for split in ("train", "test"):
            mine, theirs = getattr(ours, split), getattr(ref, split)
            assert len(mine) == len(theirs) > 0
            assert mine.to_list() == theirs.to_list()
        assert ours.test[0]["subdivision"] == cfg["abbr"]


def test_prompts_stay_in_the_cache_file() -> None:
    """The prompt column is the memory-mapped cache file itself, not a rewritten copy."""
    import os

    ds = _build(NeedleBenchDataset, CONFIGS[0]).dataset
    (cache,) = {f["filename"] for f in ds.cache_files}
    assert cache.startswith(os.environ["NEEDLEBENCH_CACHE"]) and cache.endswith(".arrow")


def test_k_above_n_is_refused_as_opencompass_does() -> None:
    with pytest.raises(ValueError, match="must less than or equal to `n`"):
        _build(NeedleBenchDataset, CONFIGS[0], k=2, n=1)


def test_private_fields_we_read_still_mean_what_we_read() -> None:
    """Where no public API exists we read private fields; these break loudly if a release changes them.

    ``datasets``: ``_indices`` is None for a whole dataset and set for a selection (``rows.selected_rows``).
    OpenCompass: its eval task sets ``evaluator._out_dir`` to the result path without extension, where our
    evaluator writes ``<dataset>.samples.jsonl`` (``opencompass/evaluator.py``).
    """
    import inspect

    from datasets import Dataset
    from opencompass.tasks.openicl_eval import OpenICLEvalTask

    from needlebench.cache.rows import selected_rows

    whole = Dataset.from_dict({"x": [0, 1, 2, 3]})
    picked = whole.select([1, 3])
    assert whole._indices is None and picked._indices is not None
    assert selected_rows(whole) is whole and selected_rows(picked)["x"] == [1, 3]
    assert selected_rows(picked)._indices is None
    assert "evaluator._out_dir = osp.splitext(out_path)[0]" in inspect.getsource(OpenICLEvalTask)


def test_private_methods_we_call_or_override_still_mean_what_we_use() -> None:
    """OpenCompass's private methods our adapters rely on, where no public hook exists.

    ``BaseDataset._init_reader(**reader_cfg)`` builds ``self.reader`` from ``self.dataset`` (our dataset's
    constructor calls it as ``BaseDataset.__init__`` does). ``OpenAISDK.generate`` sends each prompt through
    ``self._generate(input, max_out_len, temperature)``, the one request our ``ResilientOpenAISDK``
    overrides to turn exhausted retries into a marked prediction.
    """
    import inspect

    from opencompass.datasets.base import BaseDataset
    from opencompass.models import OpenAISDK

    from needlebench.opencompass.api import ResilientOpenAISDK

    assert "self._init_reader(" in inspect.getsource(BaseDataset.__init__)
    assert "self.reader = DatasetReader(self.dataset" in inspect.getsource(BaseDataset._init_reader)
    ds = _build(NeedleBenchDataset, CONFIGS[0])
    assert list(ds.reader.dataset["test"]["id"]) == list(ds.dataset["id"])  # the reader serves our rows
    assert "self._generate" in inspect.getsource(OpenAISDK.generate)
    params = list(inspect.signature(OpenAISDK._generate).parameters)
    assert params[:4] == ["self", "input", "max_out_len", "temperature"], params
    assert ResilientOpenAISDK._generate is not OpenAISDK._generate


def test_an_adaptive_runs_rows_are_what_opencompass_reader_selects() -> None:
    """The eval stage's ``test_range`` for an adaptive run's rows: OpenCompass's own reader selects exactly them,
    in the order their prediction files hold them."""
    from datasets import Dataset
    from opencompass.openicl.icl_dataset_reader import load_partial_dataset

    from needlebench.planning.run import row_selection

    rows = [5, 6, 7, 1, 2, 9, 0]
    selection = row_selection(rows)
    assert selection == "[5:8]+index_list[1:3]+index_list[9:10]+index_list[0:1]"
    data = Dataset.from_dict({"i": list(range(12))})
    assert load_partial_dataset(data, selection)["i"] == rows
    assert len(load_partial_dataset(data, row_selection([]))) == 0
