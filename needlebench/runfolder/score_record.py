"""``needlebench_score.json``: what ``needlebench score`` graded against what, in the run folder it made.

Written once per scoring run (the predictions and export it read, the model, the counts, each dataset's config as
the export recorded it); it stands in for OpenCompass's ``configs/*.py`` as the run's config, which the results
bundle digests (:func:`config_files`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..files import atomic_write

__all__ = ["SCORE_FILE", "config_files", "write_score_record"]

SCORE_FILE = "needlebench_score.json"


def write_score_record(run: Path, record: Mapping[str, Any]) -> Path:
    """Write ``needlebench_score.json`` into the run folder ``run``, whole or not at all.

    Args:
        run: the scoring run's folder.
        record: what was graded against what (JSON data).
    """
    path = run / SCORE_FILE
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(dict(record), indent=1), encoding="utf-8")
    return path


def config_files(run: Path) -> list[Path]:
    """The files that configured a run: OpenCompass's dumps of its config (``configs/*.py``), or the record
    ``needlebench score`` keeps of the export it graded; those present.

    Args:
        run: a run folder.
    """
    return [p for p in [*sorted(run.glob("configs/*.py")), run / SCORE_FILE] if p.is_file()]
