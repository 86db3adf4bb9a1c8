"""OpenCompass's summary as a headline, ``all_metrics=True`` for every number, the summarizer's options checked
when the config is read, and absent values blank in our pages (issue 70, items 1, 2 and 5).

Each test calls OpenCompass's real ``DefaultSummarizer`` (through ours) on a folder of result files written as
the evaluator writes them: no ``opencompass`` run. The main job's own files are checked in
``tests/test_e2e_opencompass.py``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mmengine.config import ConfigDict

from needlebench.aggregate.effective_length import METRICS as EFFECTIVE_METRICS
from needlebench.aggregate.metrics import COMMON_METRICS
from needlebench.errors import ConfigError
from needlebench.grading.evaluation import metric_names
from needlebench.opencompass.configs import (
    SUMMARIZER,
    atc_datasets,
    check_summarizer,
    needlebench_datasets,
    summarizer_options,
)
from needlebench.opencompass.evaluator import SUMMARY_HEADLINE
from needlebench.opencompass.partitioner import NeedleBenchPartitioner
from needlebench.opencompass.summarizer import NeedleBenchSummarizer
from needlebench.tasks import get_task

TIME = "20260101_000000"
LABELS = dict(SUMMARY_HEADLINE)
MODELS = ("a", "b")


def _model(abbr: str) -> dict:
    return dict(type="opencompass.models.HuggingFacewithChatTemplate", abbr=abbr, path="/none", max_seq_len=8192)


def _datasets() -> list[dict]:
    """S-RT and M-RT at two lengths (they report an effective length) and ATC at two needle counts (it does not)."""
    sparse = needlebench_datasets(suite="4k", tasks=["srt", "mrt"], langs=["en"], lengths=[1000, 2000], depths=[0])
    return [*sparse, *atc_datasets(langs=["en"], needle_counts=[2, 4], repeats=1)]


def _names(dataset: dict) -> tuple[str, ...]:
    """The numbers a dataset's result file names, as the eval stage names them from its planned samples."""
    metas = [{"length": 1000}, {"length": 2000}] if dataset["task"] != "atc" else [{"num_needles": n} for n in (2, 4)]
    return metric_names(get_task(dataset["task"]), metas)


def _run(tmp_path: Path, missing: tuple[tuple[str, str], ...] = ()) -> tuple[Path, list[dict]]:
    """A run folder whose result files hold every number (NaN for the effective length's interval ends and the
    2000-token cell: nothing scored there), but for the (model, dataset) pairs in ``missing``."""
    run = tmp_path / TIME
    datasets = _datasets()
    for model in MODELS:
        (run / "results" / model).mkdir(parents=True)
        for d in datasets:
            if (model, d["abbr"]) in missing:
                continue
            values = {"score": 50.0, "num_samples": 4, "num_scored": 2, "num_shortened": 2, "effective_length": 1000}
            result = {n: values.get(n, 0.0 if n.startswith(("error_", "num_")) else math.nan) for n in _names(d)}
            (run / "results" / model / f"{d['abbr']}.json").write_text(json.dumps(result), encoding="utf-8")
    return run, datasets


def _summarize(run: Path, datasets: list[dict], **options: object) -> list[dict[str, str]]:
    """OpenCompass's summary of the run as our summarizer writes it (its own part: no report); its CSV rows."""
    cfg = ConfigDict(models=[_model(m) for m in MODELS], datasets=datasets, work_dir=str(run))
    NeedleBenchSummarizer(cfg, **options).default.summarize(time_str=TIME)
    return list(csv.DictReader((run / "summary" / f"summary_{TIME}.csv").open(encoding="utf-8")))


def _files(run: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted((run / "summary").glob(f"summary_{TIME}.*")))


def test_the_headline_names_are_numbers_a_result_file_reports() -> None:
    assert set(LABELS) <= {*COMMON_METRICS, *EFFECTIVE_METRICS}
    assert len(SUMMARY_HEADLINE) == 6 and len(set(LABELS.values())) == 6


def test_the_default_summary_is_each_datasets_headline_with_dashes_for_missing(tmp_path: Path) -> None:
    run, datasets = _run(tmp_path, missing=(("b", "needlebench_mrt_en_4k"),))
    rows = _summarize(run, datasets)
    shown = [(r["dataset"], r["metric"]) for r in rows]
    sparse = [LABELS[n] for n, _ in SUMMARY_HEADLINE]
    atc = [LABELS[n] for n, _ in SUMMARY_HEADLINE if n != "effective_length"]  # ATC reports no effective length
    assert shown == [
        *(("needlebench_srt_en_4k", m) for m in sparse),
        *(("needlebench_mrt_en_4k", m) for m in sparse),
        *(("needlebench_atc_en", m) for m in atc),
    ]
    srt = {r["metric"]: (r["a"], r["b"]) for r in rows if r["dataset"] == "needlebench_srt_en_4k"}
    assert srt == {
        "score": ("50.00", "50.00"),
        "samples planned": ("4", "4"),
        "samples scored": ("2", "2"),
        "answers cut off (truncated)": ("0", "0"),
        "samples failed (no answer)": ("0", "0"),
        "effective length (tokens)": ("1000", "1000"),
    }
    # model b has no result for M-RT: OpenCompass's "-" in its column
    assert {r["b"] for r in rows if r["dataset"] == "needlebench_mrt_en_4k"} == {"-"}
    assert "nan" not in _files(run).lower()


def test_all_metrics_gives_every_number_as_opencompass_lists_it(tmp_path: Path) -> None:
    """``all_metrics=True``: OpenCompass's own ``DefaultSummarizer`` rows, cell for cell, with ``-`` for ``nan``."""
    from opencompass.summarizers import DefaultSummarizer

    run, datasets = _run(tmp_path)
    rows = _summarize(run, datasets, all_metrics=True)
    assert [(r["dataset"], r["metric"]) for r in rows] == [(d["abbr"], n) for d in datasets for n in _names(d)]
    cfg = ConfigDict(models=[_model(m) for m in MODELS], datasets=datasets, work_dir=str(run))
    DefaultSummarizer(cfg).summarize(output_path=str(tmp_path / "plain" / "summary.txt"), time_str=TIME)
    plain = list(csv.DictReader((tmp_path / "plain" / "summary.csv").open(encoding="utf-8")))
    dashed = [{k: "-" if v == "nan" else v for k, v in r.items()} for r in plain]
    assert rows == dashed and any(r["a"] == "nan" for r in plain)  # the missing numbers were there
    assert "nan" not in _files(run).lower()


def test_a_configs_own_rows_and_groups_are_kept(tmp_path: Path) -> None:
    run, datasets = _run(tmp_path)
    listed = [("needlebench_srt_en_4k", "length_1000"), "needlebench_atc_en"]
    rows = _summarize(run, datasets, dataset_abbrs=listed)
    assert [(r["dataset"], r["metric"], r["a"]) for r in rows] == [
        ("needlebench_srt_en_4k", "length_1000", "-"),
        ("needlebench_atc_en", "score", "50.00"),
    ]
    group = {"name": "sparse", "subsets": [["needlebench_srt_en_4k", "score"], ["needlebench_mrt_en_4k", "score"]]}
    rows = _summarize(run, datasets, summary_groups=[group])
    assert len(rows) == 6 + 6 + 5 + 1 and (rows[-1]["dataset"], rows[-1]["metric"], rows[-1]["a"]) == (
        "sparse",
        "naive_average",
        "50.00",
    )


def test_a_typo_in_the_summarizers_options_names_the_nearest_one(tmp_path: Path) -> None:
    assert summarizer_options() == {
        "effective_length",
        "claimed",
        "all_metrics",
        "prices",
        "dataset_abbrs",
        "summary_groups",
        "prompt_db",
    }
    cfg = ConfigDict(models=[], datasets=[], work_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"^summarizer: unknown option 'efective_length'; did you mean 'effective_l"):
        NeedleBenchSummarizer(cfg, efective_length=dict(rule="absolute"))
    with pytest.raises(ConfigError, match=r"^summarizer: unknown option 'all_metric'; did you mean 'all_metrics'\?"):
        check_summarizer(dict(type=SUMMARIZER, all_metric=True))
    with pytest.raises(ConfigError, match=r"^summarizer all_metrics: 'yes'; choose from \(True, False\)$"):
        check_summarizer(dict(type=SUMMARIZER, all_metrics="yes"))
    check_summarizer(dict(type=NeedleBenchSummarizer, all_metrics=True, effective_length=dict(rule="relative")))
    check_summarizer(dict(type="opencompass.summarizers.DefaultSummarizer", whatever=1))  # not ours to check


def test_the_partitioner_refuses_a_summarizer_typo_before_it_plans(tmp_path: Path) -> None:
    """The infer stage's partitioner runs before any model loads: the typo stops the run there, in one line."""
    cfg = ConfigDict(
        models=[_model("a")],
        datasets=_datasets()[:1],
        work_dir=str(tmp_path),
        summarizer=dict(type=SUMMARIZER, efective_length=dict(rule="absolute")),
    )
    with pytest.raises(SystemExit) as stop:
        NeedleBenchPartitioner(out_dir=str(tmp_path / "predictions"))(cfg)
    message = str(stop.value)
    assert message.startswith("needlebench: summarizer: unknown option 'efective_length'; did you mean ")
    assert "\n" not in message and not (tmp_path / "needlebench_plan.json").exists()


def test_an_absent_value_is_an_empty_cell_in_the_reports_tables() -> None:
    """report.html's one cell formatter: None, NaN and pandas' NA (whole-number columns with holes) read as
    nothing; numbers and flags as before. The CSVs are written by pandas with ``na_rep=""``."""
    from needlebench.report.html import _html_table

    df = pd.DataFrame(
        {
            "task": ["S-RT", "M-RT"],
            "claimed": pd.array([8192, None], dtype="Int64"),
            "effective/claimed": [0.5, None],
            "bar": [85.0, np.nan],
            "edge": ["exact", None],
        }
    )
    page = _html_table(df)
    assert "None" not in page and "nan" not in page and "NA" not in page
    cells = page.split("<tbody>")[1].split("</tbody>")[0].replace("</tr>", "").split("<tr>")[1:]
    assert cells == [
        "<td>S-RT</td><td>8192</td><td>0.50</td><td>85.00</td><td>exact</td>",
        "<td>M-RT</td><td></td><td></td><td></td><td></td>",
    ]
