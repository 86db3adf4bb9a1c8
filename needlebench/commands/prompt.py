"""``needlebench prompt RUN SAMPLE_ID``: a sample's prompt read back from the dataset cache.

A run made with ``runtime(prompts="digest")`` keeps no prompt text in its prediction files, only each
prompt's digest and its sample's id; the text is the dataset cache's row, which the same config and the
model's limit in the run's plan (a prompt shortened to fit differs by model) give back on any machine.
This finds the row, prints its system prompt and prompt, and, for each model of the run that answered
it, the prediction entry it is kept in and that entry's digest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..planning.limits import model_rows
from ..runfolder.plan_file import read_plan
from ..tasks import is_needlebench
from .retry import run_config

__all__ = ["show_prompt"]


def _entries(run: Path, model: str, abbr: str) -> Iterator[tuple[Path, str, dict[str, Any]]]:
    """The prediction entries of one model and dataset (its parts in order): (file, key, entry)."""
    from ..runfolder.predictions import dataset_prediction_files, iter_prediction_file

    for name in dataset_prediction_files(str(run / "predictions" / model / f"{abbr}.json")):
        for key, entry in iter_prediction_file(name):
            yield Path(name), key, entry


def show_prompt(run: Path, sample_id: str, model: str | None = None) -> int:
    """Print a sample's prompt as the run's dataset cache holds it, and where each model's answer to it is kept.

    Args:
        run: the run folder (``<work_dir>/<time>``).
        sample_id: the sample's id (a record's ``id``, a digest entry's ``sample_id``).
        model: the model whose limit picks the rows (by abbr); default the first model of the run's plan.

    Returns:
        0 when the sample was found, 1 when no dataset of the run has it.

    Raises:
        ConfigError: not a run folder, or an unknown model.
    """
    from mmengine.config import Config

    cfg = Config.fromfile(str(run_config(run, "prompt")))
    plan = read_plan(run)
    runs = list(plan.models) if plan is not None else []
    if model is not None and plan is not None and plan.model(model) is None:
        raise ConfigError(f"prompt: no model {model!r} in {run}'s plan; its models: {[m.abbr for m in runs]}")
    chosen = plan.model(model) if (plan is not None and model) else (runs[0] if runs else None)
    for d in (d for d in cfg["datasets"] if is_needlebench(d)):
        limit = chosen.limits.get(d["abbr"]) if chosen is not None else None
        rows = model_rows(d, limit)
        ids = rows["id"]
        if sample_id not in ids:
            continue
        row = rows[ids.index(sample_id)]
        where = f" for {chosen.abbr}'s limit" if chosen is not None and limit is not None else ""
        print(f"{sample_id}: dataset {d['abbr']}, row {ids.index(sample_id)}{where}")
        if row.get("system"):
            print(f"--- system ---\n{row['system']}")
        print(f"--- prompt ({len(row['prompt']):,} characters) ---\n{row['prompt']}")
        for m in runs:
            for path, key, entry in _entries(run, m.abbr, d["abbr"]):
                if entry.get("sample_id") == sample_id:
                    answer = json.dumps(entry.get("prediction"), ensure_ascii=False)[:200]
                    print(
                        f"--- {m.abbr}: {path.relative_to(run)} entry {key}, digest {entry['prompt_digest']}: {answer}"
                    )
        return 0
    print(f"{sample_id}: no dataset of {run} has this sample")
    return 1
