"""Whether a measured leaderboard row may be read beside a paper's row, and if not, what differs.

A paper's number was measured under the reference protocol, on OpenCompass's own haystack files, over the
whole suite (every length, depth and repeat its configs plan), with the dataset version this package
makes. A row is *comparable* only when its records show all of that; otherwise it names each difference in
a few words ("packaged corpus", "clarified protocol", "3 of 10 repeats"). Nothing is assumed: a fact the
records do not carry (an old run without ``options``) is a difference too ("... not recorded").

The facts come from what every graded record carries (``protocol``, ``corpus``, ``version``, ``options``, ``length``)
and from each task's own ``conformance`` (its suite's cells and repeats, its option values), so this module
never names a task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..aggregate.effective_length import length_text
from ..record import GradedSample
from ..sample import DATASET_VERSION
from ..tasks import get_task
from ..tasks.profiles import OPENCOMPASS_LONGEST

__all__ = ["Comparability", "record_differences", "corpus_kind", "row_comparability", "REFERENCE_CORPUS"]

REFERENCE_CORPUS = "opencompass:"  # how the names of OpenCompass's own haystack files begin in a record


@dataclass(frozen=True)
class Comparability:
    """What keeps a row from sitting beside a paper's row.

    Attributes:
        short: where the row holds less than its label (suite) plans: it is incomplete too.
        differs: every other difference (protocol, corpus, options, dataset version, extra cells).
        checked: the run's parity proof, where one holds (``parity_link.ParityLink.text``): not a difference,
            a fact a reader of the row is told.
    """

    short: tuple[str, ...] = ()
    differs: tuple[str, ...] = ()
    checked: str = ""

    @property
    def comparable(self) -> bool:
        """Nothing differs: the row may be read beside the paper's rows."""
        return not (self.short or self.differs)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every difference, the protocol and corpus first, then what the row lacks."""
        return self.differs + self.short

    @property
    def text(self) -> str:
        """``comparable``, or ``not comparable: packaged corpus; 1 of 10 repeats``; the parity proof after it."""
        said = "comparable" if self.comparable else "not comparable: " + "; ".join(self.reasons)
        return f"{said}; {self.checked}" if self.checked else said


def corpus_kind(name: str) -> str | None:
    """What a recorded haystack corpus is, in a note's words; None for OpenCompass's own files.

    Args:
        name: the ``corpus`` of a record (``opencompass:PaulGrahamEssays.jsonl``, ``pg_essays@...``, ``file:x``).
    """
    if name.startswith(REFERENCE_CORPUS):
        return None
    if name.startswith("file:"):
        return f"corpus file {name.removeprefix('file:')}"
    if "@" in name:
        return "packaged corpus"
    return f"corpus {name}"


def _distinct(records: Sequence[GradedSample], key: str) -> list[str]:
    return sorted({str(r.fields[key]) for r in records if r.get(key) is not None})


def record_differences(records: Sequence[GradedSample]) -> list[str]:
    """The differences every record shows by itself: protocol, haystack corpus, dataset version, lengths past the
    longest OpenCompass's configs have, an adaptive run's prompts not sampled.

    Args:
        records: the row's records (any tasks); only tasks with a haystack record a corpus.
    """
    out = []
    protocols = _distinct(records, "protocol")
    other = [p for p in protocols if p != "reference"]
    if other:
        out.append(" + ".join(f"{p} protocol" for p in other))
    if any(r.get("protocol") is None for r in records):
        out.append("protocol not recorded")
    kinds = sorted({kind for name in _distinct(records, "corpus") if (kind := corpus_kind(name))})
    out.extend(kinds)
    versions = _distinct(records, "version")
    if any(v != DATASET_VERSION for v in versions):
        out.append(f"dataset version {', '.join(versions)} (this package makes {DATASET_VERSION})")
    if any(r.get("version") is None for r in records):
        out.append("dataset version not recorded")
    if any((r.get("length") or 0) > OPENCOMPASS_LONGEST for r in records):  # the rungs past 1M: no paper measured them
        out.append(f"beyond OpenCompass's protocol (past {length_text(OPENCOMPASS_LONGEST)})")
    unsampled = sum(r.unscored == "not_sampled" for r in records)
    if unsampled:  # an adaptive run: its scores are over the prompts its ladder asked, not the suite's grid
        out.append(f"adaptive run ({unsampled} of {len(records)} prompts not sampled)")
    return out


def row_comparability(by_task: Mapping[str, Sequence[GradedSample]], suite: str | None) -> Comparability:
    """A row's comparability from its records, task by task.

    Args:
        by_task: the row's records per task name.
        suite: the suite the row is labelled with (``32k``), for the tasks that have suites; else None.
    """
    short: dict[str, list[str]] = {}
    differs: dict[str, list[str]] = {}
    labels = []
    for task, rows in by_task.items():
        check = get_task(task).aggregation().conformance
        if not rows:
            continue
        label = get_task(task).short
        labels.append(label)
        if check is None:
            continue
        found = check(rows, suite)
        for phrase in found.short:
            short.setdefault(phrase, []).append(label)
        for phrase in found.differs:
            differs.setdefault(phrase, []).append(label)

    def said(found: dict[str, list[str]]) -> tuple[str, ...]:
        """Each phrase once, prefixed with the tasks it holds for unless it holds for all of them."""
        return tuple(p if len(t) == len(labels) else f"{', '.join(t)}: {p}" for p, t in found.items())

    return Comparability(
        said(short), tuple(record_differences([r for v in by_task.values() for r in v])) + said(differs)
    )
