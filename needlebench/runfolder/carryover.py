"""Answers carried from a run's stored plan into a new one (``needlebench run --replan``), never asked twice.

A resumed run whose config now gives another plan than the one it stored (shards, limits, tokenizer,
output budget, policy, datasets, models) stops before any model call (``lifecycle.py``). Asked to
re-plan, the infer stage first gathers every answer the old plan's prediction files hold (finished files
and the ``tmp_`` files of tasks that died) into one file per model, :data:`POOL_FILE`, keyed by sample
id, with the digest of the prompt it was asked with and its output budget. An answer whose budget
differs from the new plan's, that a request never gave (``request_failed``), or whose gold does not
match its row (the dataset changed under the same name) is dropped, and so is every answer of a model whose
window, RoPE scaling or KV-cache press changed (``plan_diff.model_changes``: the answers are another model's). It then removes the old prediction
and result files of the re-planned models and stores the new plan. The inferencer (``inferencer.py``)
takes an answer from the pool only where the prompt it renders now has the pooled digest, so an answer
is reused exactly when its prompt id, prompt bytes, model and budget match; every other prompt is asked.
"""

from __future__ import annotations

import json
import logging
import os.path as osp
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..files import atomic_write
from ..jsonl import iter_jsonl
from ..planning.limits import Limit, model_rows
from ..planning.run import ModelRun, Part
from ..record import unanswered
from .plan_diff import model_changes
from .predictions import PredictionLog, entry_digest, iter_prediction_file
from .retries import read_retries

__all__ = [
    "POOL_FILE",
    "CarriedAnswer",
    "carry_over",
    "read_pool",
    "requeue_failed",
]

log = logging.getLogger(__name__)

POOL_FILE = "needlebench_reuse.jsonl"  # in predictions/<model>/: the answers a re-plan carried over


CarriedAnswer = tuple[str, dict[str, Any]]  # (prompt digest, {"prediction": the answer as OpenCompass saved it})


def read_pool(folder: Path | str) -> dict[str, CarriedAnswer]:
    """A model's carried answers by sample id; empty where the run was never re-planned.

    Args:
        folder: ``<work_dir>/predictions/<model>``.
    """
    return {item["id"]: (item["digest"], item["entry"]) for item in _pooled(Path(folder))}


def _pooled(folder: Path) -> Iterator[dict[str, Any]]:
    """The lines of a model's :data:`POOL_FILE` (id, dataset, output budget, prompt digest, entry); none if absent."""
    path = folder / POOL_FILE
    if not path.exists():
        return
    for _, item in iter_jsonl(path):
        yield item


def _saved(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A part's saved entries: its finished prediction file, else the ``tmp_`` file of its task."""
    if osp.exists(path):
        yield from iter_prediction_file(path)
        return
    log_file = PredictionLog.of(path)
    if log_file.restore():
        yield from log_file.samples()


def _pool_part(
    model: Mapping[str, Any], d: dict, limit: Limit, part: Part, out_dir: str, budget: int | None, pool: dict
) -> tuple[int, list[Path]]:
    """Pool one piece's saved answers made under ``limit`` that a plan with output budget ``budget`` can reuse.

    Returns:
        (answers dropped, the piece's files read).
    """
    path, files = _part_files(model, part, out_dir)
    rows = model_rows(d, limit)
    dropped = 0
    for key, entry in _saved(path):
        index = int(key)  # a part's keys count its own rows from 0
        if index >= part.size or part.row(index) >= len(rows):
            dropped += 1
            continue
        row = rows[part.row(index)]
        usable = (
            budget == limit.out_len
            and isinstance(entry, dict)
            and unanswered(entry.get("prediction")) is None
            and entry.get("gold") == row["answer"]
        )
        if usable:
            pool[row["id"]] = {
                "id": row["id"],
                "dataset": part.dataset,
                "max_out_len": limit.out_len,
                "digest": entry_digest(entry),
                # the answer alone: the inferencer renders the prompt anew (its digest is checked), and a pool of
                # whole entries would hold every prompt again (gigabytes at 1000k), read by every infer task
                "entry": {"prediction": entry["prediction"]},
            }
        else:
            dropped += 1
    return dropped, files


def _part_files(model: Mapping[str, Any], part: Part, out_dir: str) -> tuple[str, list[Path]]:
    """A piece's prediction file, and the files its answers may be in (that file, its task's ``tmp_`` log)."""
    path = str(Path(out_dir) / str(model.get("abbr", "model")) / f"{part.abbr}.json")
    return path, [Path(path), PredictionLog.of(path).path]


def _write_pool(folder: Path, pool: Mapping[str, dict[str, Any]], files: Sequence[Path], results: Path, abbrs) -> None:
    """Store the pool whole, then remove the files it was read from and the results they made."""
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / POOL_FILE) as tmp:
        tmp.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in pool.values()), encoding="utf-8")
    for path in files:
        path.unlink(missing_ok=True)
    for abbr in abbrs:
        for path in results.glob(f"{abbr}.*"):
            path.unlink(missing_ok=True)


def _kept_pool(folder: Path, run: ModelRun) -> tuple[dict[str, dict[str, Any]], int]:
    """The answers an earlier re-plan carried, kept while their budget is still the plan's; (pool, dropped)."""
    pool: dict[str, dict[str, Any]] = {}
    dropped = 0
    for item in _pooled(folder):
        wanted = run.limits.get(item["dataset"])
        if wanted is not None and wanted.out_len == item["max_out_len"]:
            pool[item["id"]] = item
        else:
            dropped += 1
    return pool, dropped


def carry_over(
    model: Mapping[str, Any],
    datasets: Sequence[dict],
    old: ModelRun,
    new: ModelRun,
    out_dir: str,
    results_dir: str,
) -> tuple[int, int]:
    """Pool one model's answers under the old plan that the new plan can reuse, then remove the old files.

    Args:
        model: the model config.
        datasets: the run's needlebench dataset configs (as the config writes them).
        old: the model's plan as the run stored it.
        new: its plan as the config gives it now.
        out_dir: the infer stage's output folder (``<work_dir>/predictions``).
        results_dir: the eval stage's output folder (``<work_dir>/results``): the model's results of these
            datasets are removed, as their predictions change.

    Returns:
        (answers pooled, answers dropped).
    """
    by_abbr = {d["abbr"]: d for d in datasets}
    folder = Path(out_dir) / str(model.get("abbr", "model"))
    pool, dropped = _kept_pool(folder, new)
    files: list[Path] = []
    parts = [part for shard in old.shards for part in shard.parts]
    if model_changes(old, new):  # another window, scaling or press: no answer of the old model is the new one's
        for part in parts:
            path, read = _part_files(model, part, out_dir)
            dropped, files = dropped + sum(1 for _ in _saved(path)), files + read
        dropped, pool = dropped + len(pool), {}
    else:
        for part in parts:
            d, limit = by_abbr.get(part.dataset), old.limits.get(part.dataset)
            if d is None or limit is None:
                continue
            wanted = new.limits.get(part.dataset)
            lost, read = _pool_part(model, d, limit, part, out_dir, wanted.out_len if wanted else None, pool)
            dropped, files = dropped + lost, files + read
    _write_pool(folder, pool, files, Path(results_dir) / str(model.get("abbr", "model")), by_abbr)
    return len(pool), dropped


def requeue_failed(
    model: Mapping[str, Any], datasets: Sequence[dict], run: ModelRun, out_dir: str, results_dir: str
) -> dict[str, int]:
    """Take apart the prediction files whose requests still failed, so a resume asks only those again.

    Which files: the last record of each in ``needlebench_retries.jsonl`` (``retries.py``) says requests
    failed. Their answered samples are pooled (the inferencer reuses them for the very same prompt), the files
    and their datasets' results removed; every other prediction file is left as it is.

    Args:
        model: the model config.
        datasets: the run's needlebench dataset configs.
        run: the model's plan (the run's stored plan: the resume runs under it).
        out_dir: ``<work_dir>/predictions``.
        results_dir: ``<work_dir>/results``.

    Returns:
        Per prediction file taken apart, its failed requests.
    """
    folder = Path(out_dir) / str(model.get("abbr", "model"))
    failing = {abbr: rs[-1]["still_failed"] for abbr, rs in read_retries(folder).items() if rs[-1]["still_failed"]}
    if not failing:
        return {}
    by_abbr = {d["abbr"]: d for d in datasets}
    pool, _ = _kept_pool(folder, run)
    files: list[Path] = []
    touched, found = set(), {}
    for shard in run.shards:
        for part in shard.parts:
            d, limit = by_abbr.get(part.dataset), run.limits.get(part.dataset)
            if part.abbr not in failing or d is None or limit is None:
                continue
            if not (folder / f"{part.abbr}.json").exists():
                continue  # not finished: its task runs anyway and asks its failed requests again
            _, read = _pool_part(model, d, limit, part, out_dir, limit.out_len, pool)
            files += read
            touched.add(part.dataset)
            found[part.abbr] = failing[part.abbr]
    if found:
        _write_pool(folder, pool, files, Path(results_dir) / str(model.get("abbr", "model")), touched)
    return found
