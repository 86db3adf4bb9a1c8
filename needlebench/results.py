"""Read per-sample results back from OpenCompass work dirs.

Our evaluator writes ``results/<model>/<dataset>.samples.jsonl`` beside
OpenCompass's own result file. Reports are built from those lines alone, so
they can be rebuilt from any finished or partial run. Bad or half-written
files are reported as warnings and skipped; they never stop a report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["RunResults", "load_results", "run_dirs"]


@dataclass
class RunResults:
    """Every sample record found, tagged with model, dataset and source run."""

    records: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    overlength: list[dict[str, Any]] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({r["model"] for r in self.records})

    def for_task(self, task: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("task") == task]


def run_dirs(path: Path) -> list[Path]:
    """A run folder (has results/) or a work dir holding timestamped runs, oldest first."""
    if (path / "results").is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / "results").is_dir())


def load_results(paths: list[Path], label_by_dir: bool = False) -> RunResults:
    """Collect records; a later run of the same (model, dataset) replaces an earlier one.

    With ``label_by_dir`` the model name is prefixed with its work dir's name,
    so the same model from two work dirs can be compared.
    """
    out = RunResults()
    latest: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for root in paths:
        if not root.exists():
            raise ConfigError(f"work dir {root} does not exist")
        runs = run_dirs(root)
        if not runs:
            out.warnings.append(f"{root}: no OpenCompass results folder found")
            continue
        for run in runs:
            out.sources.append(str(run))
            out.overlength.extend(_read_overlength(run / "needlebench_overlength.json", out.warnings))
            for model_dir in sorted(p for p in (run / "results").iterdir() if p.is_dir()):
                files = sorted(model_dir.glob("*.samples.jsonl"))
                others = [p for p in model_dir.glob("*.json") if not p.name.endswith((".positions.json",))]
                ours = {p.name.removesuffix(".samples.jsonl") for p in files}
                foreign = [p.stem for p in others if p.stem not in ours]
                if foreign:
                    out.warnings.append(f"{model_dir}: skipped {len(foreign)} non-needlebench result(s)")
                model = f"{root.name}/{model_dir.name}" if label_by_dir else model_dir.name
                for f in files:
                    dataset = f.name.removesuffix(".samples.jsonl")
                    rows = _read_lines(f, out.warnings)
                    for r in rows:
                        r["model"] = model
                        r["dataset"] = dataset
                    if rows:
                        latest[(model, dataset)] = rows
    for rows in latest.values():
        out.records.extend(rows)
    if not out.records:
        out.warnings.append("no needlebench per-sample results found (results/<model>/<dataset>.samples.jsonl)")
    return out


def _read_lines(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    rows = []
    bad = 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        warnings.append(f"{path}: unreadable ({exc})")
        return []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(row, dict) and "task" in row and "score" in row:
            rows.append(row)
        else:
            bad += 1
    if bad:
        warnings.append(f"{path}: skipped {bad} malformed line(s)")
    return rows


def _read_overlength(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    """The partitioner's record of prompts shortened or skipped to fit each model."""
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        warnings.append(f"{path}: unreadable over-length record")
        return []
    rows = []
    for model, per_dataset in data.items():
        for dataset, info in per_dataset.items():
            cells = [f"{c[0]}/{c[1]}" if c[1] is not None else str(c[0]) for c in info.get("skipped", [])]
            short = [f"{c[0]}/{c[1]}" if c[1] is not None else str(c[0]) for c in info.get("shortened", [])]
            rows.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "policy": info.get("policy"),
                    "max_prompt_tokens": info.get("max_prompt_tokens"),
                    "shortened": info.get("num_shortened", 0),
                    "skipped": info.get("num_skipped", 0),
                    "cells (length/depth)": ", ".join(short or cells),
                }
            )
    return rows
