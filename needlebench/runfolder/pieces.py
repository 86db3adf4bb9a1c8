"""Whether a piece of a run is done, and prediction files that a full disk or a kill cut short, made safe.

One rule says whether a planned piece has its predictions (:func:`piece_done`): its dataset's whole
prediction file or the piece's own is there and whole (``predictions.looks_whole``). The infer stage renders
only the pieces that are not done; the stage check names the ones still missing by the same rule.

OpenCompass's inferencer appends finished predictions to ``tmp_<abbr>.jsonl`` and then writes
``<abbr>.json`` with a plain ``json.dump``. When the disk fills up (or the process dies) during
either write, a resume goes wrong in two ways:

* a final file that does not parse counts as done: its infer task is skipped (by OpenCompass and by
  our partitioner), and evaluation then fails on it;
* a ``tmp_`` file whose last line was cut off does not load, and OpenCompass moves it aside whole,
  so every prediction in it is computed again.

Before the infer stage hands out its shards, :func:`repair_predictions` removes the first and cuts
the second back to its last complete line, so a resume redoes only what was lost. It also removes the
``.<abbr>.json.part`` file our inferencer was writing when its task died (``predictions.py``): the task
writes it again, from its ``tmp_`` file, when it runs again.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .predictions import looks_whole

__all__ = ["piece_done", "repair_predictions"]

log = logging.getLogger(__name__)


def piece_done(folder: Path | str, dataset: str, piece: str | None = None) -> bool:
    """Whether a planned piece has its predictions: the dataset's whole file or the piece's own, and whole.

    Args:
        folder: the model's predictions folder (``<run>/predictions/<model>``).
        dataset: the dataset's abbr (its prediction file ``<abbr>.json`` holds every piece).
        piece: the piece's abbr (``abbr_<number>``); None or the dataset's: the dataset is one piece.
    """
    names = dict.fromkeys((dataset, piece or dataset))
    return any((path := Path(folder) / f"{name}.json").is_file() and looks_whole(path) for name in names)


def _complete_prefix(path: Path) -> tuple[int, int]:
    """(bytes, lines) of the file up to the end of its last line that is whole JSON (a line after a bad one
    is dropped).

    Read a line at a time: a killed task's ``tmp_`` file holds every prompt it answered (gigabytes in a
    1000k shard), and this runs in the ``opencompass`` process itself.
    """
    end = lines = 0
    with path.open("rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            try:
                json.loads(line)
            except ValueError:
                break
            end += len(line)
            lines += 1
    return end, lines


def repair_predictions(folder: Path | str) -> list[str]:
    """Make one model's prediction folder safe to resume from; say what was changed.

    Args:
        folder: ``<work_dir>/predictions/<model>``; a missing folder is left alone.

    Returns:
        One line per file removed or cut, for the run's log.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    notes = []
    for path in sorted(folder.glob("*.json")):
        if not looks_whole(path):  # judged from its last bytes (the summary asks this of every file)
            path.unlink()
            notes.append(f"{path}: not whole JSON (cut short by a full disk or a kill); removed, its task runs again")
    for path in sorted(folder.glob(".*.json.part")):  # a killed task's prediction file (inferencer.py)
        path.unlink()
        notes.append(f"{path}: a prediction file its task did not finish; removed, its task writes it again")
    for path in sorted(folder.glob("tmp_*.jsonl")):
        size = path.stat().st_size
        keep, kept = _complete_prefix(path)
        if keep < size:
            # cut in place: a copy would need room on the very disk that may be full (truncating to a
            # prefix frees space and leaves the old length or the new one, never a mix)
            os.truncate(path, keep)
            notes.append(f"{path}: cut back to its {kept} complete predictions ({size - keep:,} bytes dropped)")
    for note in notes:
        log.warning(note)
    return notes
