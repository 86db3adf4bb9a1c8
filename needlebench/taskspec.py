"""What a task is: its parameters, generator, grader and oracle, in one typed record.

Task modules build their ``TaskSpec`` here and do not register it themselves:
``needlebench.tasks`` lists them explicitly (and reads third-party tasks from
the ``needlebench.tasks`` entry-point group), so importing a task module has
no side effect and no module imports the registry back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .grading.graders import SampleScore, ScoreOptions
from .sample import Sample

__all__ = ["TaskSpec"]


@dataclass(frozen=True)
class TaskSpec:
    """A task: its parameters, generator and grader.

    Attributes:
        name: the registry name (``task=`` in a dataset config); unique.
        family: ``"sparse"`` (a haystack that can be shortened to fit a model) or ``"dense"``.
        params: the parameter dataclass; ``make_params`` builds it from a config.
        generate: ``params -> samples``, pure and deterministic.
        grade: ``(prediction, gold, options) -> SampleScore``.
        title: the task's name in tables and reports.
        oracle: maps a sample's structured gold to a perfect answer in the task's answer format
            (the scripted oracle model answers with it, so a run can be checked to score 100).
    """

    name: str
    family: str
    params: type
    generate: Callable[[Any], Iterator[Sample]]
    grade: Callable[[object, dict, ScoreOptions], SampleScore]
    title: str
    oracle: Callable[[dict], str] | None = None
