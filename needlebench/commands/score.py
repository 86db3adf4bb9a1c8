"""Score predictions made elsewhere against a Parquet export: the same records and tables as an OpenCompass run.

Input is one JSON line per prediction, ``{"id": ..., "prediction": ...}`` (optionally
``"dataset"``, ``"version"`` and ``"finish_reason"``: ``"length"`` marks an answer the model's server cut
off at its budget, recorded ``truncated``; outputs are counted in cl100k tokens). Lines that cannot be used are reported, by kind and
count, and the rest are scored: unknown ids, ids given more than once (all their lines
are left out, since which one is meant cannot be told), and predictions made for another
dataset version. A sample of the export without a usable prediction is recorded unscored as
``no_prediction``: counted in its cell (with failed requests), never scored, and flagged in the tables.
Results go to a new ``<out>/<timestamp>/`` folder laid out like an OpenCompass run
(``results/<model>/<dataset>.samples.jsonl``, ``summary/``), so nothing earlier is overwritten.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..files import atomic_write
from ..grading.evaluation import grade_rows, metric_names, write_results
from ..jsonl import iter_jsonl
from ..record import Unanswered, cut_prediction
from ..runfolder.score_record import write_score_record
from ..scoring import ScoreOptions
from ..tasks import get_task
from ..terminal import Counting
from .export import ExportedDataset, read_parquet_export

__all__ = ["ScoreRun", "score_predictions", "read_predictions"]

_SHOWN = 5  # example ids per problem in a message


@dataclass
class ScoreRun:
    """What a ``needlebench score`` call did.

    Attributes:
        run_dir: the new run folder.
        scored: predictions graded.
        missing: export samples without a usable prediction (recorded unscored as ``no_prediction``).
        problems: one line per kind of unusable prediction line, with its count and examples.
    """

    run_dir: Path
    scored: int = 0
    missing: int = 0
    problems: list[str] = field(default_factory=list)


def _examples(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return f"{shown}, ..." if len(items) > _SHOWN else shown


def read_predictions(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The prediction lines of a JSON-lines file and the problems of the lines that are not usable.

    Args:
        path: the predictions file.

    Raises:
        ConfigError: the file does not exist.
    """
    if not path.is_file():
        raise ConfigError(f"predictions: {path} does not exist")
    lines, bad, not_json = [], [], []
    for number, row in iter_jsonl(path, not_json):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or "prediction" not in row:
            bad.append(number)
            continue
        lines.append(row)
    bad = [str(n) for n in sorted(bad + [line.number for line in not_json])]
    problems = (
        [f"{len(bad)} line(s) are not {{'id', 'prediction'}} JSON objects (lines {_examples(bad)})"] if bad else []
    )
    return lines, problems


def _new_run_dir(out: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    for n in range(1000):
        run = out / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            run.mkdir(parents=True)
            return run
        except FileExistsError:
            continue
    raise ConfigError(f"output: cannot make a new run folder under {out}")


def score_predictions(
    predictions: Path, export: Path, out: Path, model: str = "external", quiet: bool = False
) -> ScoreRun:
    """Grade predictions against an export and write a run folder with results and tables.

    Args:
        predictions: JSON lines of ``{"id", "prediction"}`` (optionally ``dataset``, ``version``,
            ``finish_reason``).
        export: a folder written by ``needlebench export --format parquet``.
        out: where the new timestamped run folder goes.
        model: the model's name in the results and tables.
        quiet: no progress display.

    Raises:
        ConfigError: a missing file or folder, or no prediction that matches the export.
    """
    datasets = read_parquet_export(export)
    lines, problems = read_predictions(predictions)
    where: dict[str, list[str]] = {}
    for d in datasets:
        for row in d.rows:
            where.setdefault(row["id"], []).append(d.abbr)
    counts = Counter(line["id"] for line in lines)
    versions = {d.info.get("version") for d in datasets}
    unknown, twice, other_version = [], sorted(i for i, n in counts.items() if n > 1), []
    usable: dict[tuple[str, str], Any] = {}
    for line in lines:
        pid = line["id"]
        if pid not in where:
            unknown.append(pid)
        elif counts[pid] == 1:
            if line.get("version") is not None and str(line["version"]) not in versions:
                other_version.append(pid)
                continue
            abbr = line.get("dataset") or where[pid][0]
            cut = line.get("finish_reason") == "length" and isinstance(line["prediction"], str)
            usable[(abbr, pid)] = cut_prediction(line["prediction"]) if cut else line["prediction"]
    if unknown:
        problems.append(f"{len(unknown)} prediction(s) name ids that are not in the export: {_examples(unknown)}")
    if twice:
        problems.append(f"{len(twice)} id(s) appear more than once; all their lines are left out: {_examples(twice)}")
    if other_version:
        problems.append(
            f"{len(other_version)} prediction(s) were made for another dataset version than the export's "
            f"({', '.join(sorted(map(str, versions)))}): {_examples(other_version)}"
        )
    if not usable:
        raise ConfigError(
            f"predictions: none of {len(lines)} line(s) of {predictions} matches {export}; " + "; ".join(problems)
        )
    run = ScoreRun(_new_run_dir(out), problems=problems)
    total = sum(len(d.rows) for d in datasets)
    with Counting("samples scored", total=total, quiet=quiet) as bar:
        for d in datasets:
            scored, missing = _score_dataset(run, d, usable, model, predictions, bar)
            run.scored, run.missing = run.scored + scored, run.missing + missing
    _write_record(run, predictions, export, model, datasets)
    from ..report import build_report

    build_report([run.run_dir], run.run_dir / "summary")
    return run


def _score_dataset(
    run: ScoreRun, d: ExportedDataset, usable: dict[tuple[str, str], Any], model: str, source: Path, bar: Counting
) -> tuple[int, int]:
    """Grade one dataset's rows (a row without a prediction is unscored, ``no_prediction``); its (scored, missing)."""
    absent = Unanswered("no_prediction", f"no prediction for this id in {source.name}")
    preds = [usable.get((d.abbr, r["id"]), absent) for r in d.rows]
    settings = dict(d.info.get("score_options", {}))
    strip = None
    if settings.get("strip_think"):  # on reference samples: OpenCompass's own strip (imports OpenCompass)
        from ..opencompass.outputs import reference_strip as strip
    try:
        options = ScoreOptions.of(settings, reference_strip=strip)
    except ValueError as exc:
        raise ConfigError(f"{d.abbr}: the export's {exc}") from None
    tasks = sorted({r["task"] for r in d.rows})
    if len(tasks) != 1:
        raise ConfigError(f"{d.abbr}: an exported dataset holds one task's samples; found tasks {tasks}")
    task = get_task(tasks[0])
    records = grade_rows(preds, [r["gold"] for r in d.rows], d.rows, task, options)
    folder = run.run_dir / "results" / model
    folder.mkdir(parents=True, exist_ok=True)
    names = metric_names(task, [json.loads(r["meta"]) for r in d.rows])
    metrics = write_results(folder / d.abbr, records, task, names)
    with atomic_write(folder / f"{d.abbr}.json") as tmp:
        tmp.write_text(json.dumps(metrics, indent=1, default=str), encoding="utf-8")
    bar.update(len(d.rows))
    missing = sum(p is absent for p in preds)
    return len(preds) - missing, missing


def _write_record(run: ScoreRun, predictions: Path, export: Path, model: str, datasets: list[ExportedDataset]) -> None:
    """``needlebench_score.json``: what was graded against what, with each dataset's config as the export
    recorded it (the run's config: its results bundle digests this file)."""
    record = {
        "predictions": str(predictions),
        "export": str(export),
        "model": model,
        "scored": run.scored,
        "missing": run.missing,
        "problems": run.problems,
        "datasets": [d.info for d in datasets],
    }
    write_score_record(run.run_dir, record)
