"""The summary table, paired differences and heatmap grids, for every task that declares them.

Tasks join the summary through ``TaskSpec.suite_weights`` (S-RT, M-RT and
M-RS), in registry order, and the heatmaps through their results'
``heatmap_points``; their own tables (ATC, NeedleChain, ...) live with them.

Every score comes with a 95% percentile-bootstrap interval (``X ci_low``,
``X ci_high``; see :mod:`needlebench.aggregate.uncertainty`) and with how complete it
is. Cells with no samples are NaN (shown as missing), never 0. The
completeness rule (:func:`summary_table`) decides what a number may contain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.cells import NAN as _NAN
from ..aggregate.cells import format_failure_rate as _rate
from ..aggregate.cells import output_notes, truncated_rate
from ..aggregate.cells import put_interval as _ci
from ..aggregate.effective_length import (
    EffectiveRule,
    effective_length,
    length_cell,
    length_text,
    sampled_effective_length,
)
from ..aggregate.metrics import mean
from ..aggregate.uncertainty import resample_means, significant
from ..record import GradedSample
from ..tasks import all_tasks, get_task
from ..tasks.profiles import OPENCOMPASS_LONGEST
from ..taskspec import Skipped, TaskSpec

__all__ = [
    "effective_length_table",
    "summary_table",
    "grid",
    "grid_frame",
    "grid_members",
    "difference_table",
    "summary_tasks",
    "suite_weights",
]


def summary_tasks() -> tuple[str, ...]:
    """The tasks of the summary table (those with suite weights), in registry order."""
    return tuple(spec.name for spec in all_tasks() if spec.suite_weights)


def suite_weights(profile: str) -> dict[str, float]:
    """Each summary task's weight in the suite overall under ``profile`` (``v2`` or ``v1``)."""
    return {spec.name: spec.suite_weights[profile] for spec in all_tasks() if profile in spec.suite_weights}


def _profiles() -> list[str]:
    """The profiles every summary task weighs, in the order the first task declares them."""
    specs = [spec for spec in all_tasks() if spec.suite_weights]
    return [p for p in specs[0].suite_weights if all(p in s.suite_weights for s in specs)] if specs else []


Leaf = tuple[str, str, Any]  # (task, lang, length)


def _counts_note(
    planned: int, shortened: int, skipped: int, failed: int = 0, unreadable: int = 0, not_sampled: int = 0
) -> list[str]:
    parts = []
    if not_sampled:
        parts.append(f"{not_sampled} of {planned} not sampled (adaptive run)")
    if shortened:
        parts.append(f"{shortened} of {planned} shortened (excluded)")
    if skipped:
        parts.append(f"{skipped} of {planned} skipped (over length)")
    if failed:
        parts.append(f"{failed} of {planned} request failed (excluded)")
    if unreadable:
        parts.append(f"{unreadable} of {planned} record(s) unreadable (excluded)")
    return parts


# -- summary ----------------------------------------------------------------------------------------


@dataclass
class _Cell:
    """One (task, lang, length) cell of one model: the samples that count, and those that do not."""

    rows: list[GradedSample] = field(default_factory=list)  # scored: not shortened, request answered
    shortened: int = 0
    skipped: int = 0
    failed: int = 0  # requests the server never answered
    unreadable: int = 0  # records that could not be read back (placed here by the run's plan)
    not_sampled: int = 0  # samples an adaptive run's ladder never asked (placed here by the run's plan)
    truncated: list[GradedSample] = field(default_factory=list)  # cut off and left out (truncated="unscored")
    plan: int | None = None  # the samples the run's plan gives the cell (None: a plan that predates it)
    beyond: tuple[int, str] = (0, "")  # samples past the model's context window, and the window (plan)

    @property
    def found(self) -> int:
        """The samples accounted for: scored, shortened, skipped, failed, unreadable, not sampled, left out as
        truncated."""
        return (
            len(self.rows)
            + self.shortened
            + self.skipped
            + self.failed
            + self.unreadable
            + self.not_sampled
            + len(self.truncated)
        )

    @property
    def planned(self) -> int:
        """Every sample the cell was meant to have: the plan's count (what was found where the plan has none,
        or where more was found than planned)."""
        return max(self.plan or 0, self.found)

    @property
    def whole(self) -> bool:
        """Every planned sample was scored: none shortened, skipped, failed, unreadable, excluded or missing."""
        return bool(self.rows) and len(self.rows) == self.planned

    @property
    def answered(self) -> list[GradedSample]:
        """The records with an output of the nominal prompt: scored, or left out for being cut off."""
        return [*self.rows, *self.truncated]


def _label(task: str) -> str:
    return get_task(task).short


@dataclass(frozen=True)
class _Spec:
    """A summary row: a leaf cell, a language ("all"), a task overall or a suite overall."""

    level: str  # "cell", "lang", "task" or "suite"
    key: tuple

    def labels(self) -> dict[str, Any]:
        """The row's ``task`` / ``lang`` / ``length`` columns as the table shows them."""
        if self.level == "cell":
            task, lang, length = self.key
            return {"task": _label(task), "lang": lang.upper(), "length": length}
        if self.level == "lang":
            return {"task": _label(self.key[0]), "lang": self.key[1].upper(), "length": "all"}
        if self.level == "task":
            return {"task": _label(self.key[0]), "lang": "OVERALL", "length": "all"}
        return {"task": f"OVERALL ({self.key[0]})", "lang": "OVERALL", "length": "all"}

    def name(self) -> str:
        """How a part is named in a note ("length 4000", "ZH", "M-RS")."""
        if self.level == "cell":
            return f"length {self.key[2]}"
        return self.key[1].upper() if self.level == "lang" else _label(self.key[0])


class _Summary:
    """The summary's layout, cells per model, and how each row combines its leaf cells.

    Every row is a weighted mean of leaf-cell means (pooled over lengths for a
    language, equal over languages for a task, profile weights over tasks), so
    the same weights give its paired difference. Its bootstrap resamples what it
    pools: a cell or a language row resamples its samples together (a language
    row over three single-sample lengths still gets an interval), a task or the
    suite combines its languages' draws with its weights.
    """

    def __init__(
        self,
        records: Sequence[GradedSample],
        skipped: Skipped | None = None,
        planned: Skipped | None = None,
        beyond: Mapping[tuple[str, str, str, Any], tuple[int, str]] | None = None,
    ) -> None:
        self.cells: dict[str, dict[Leaf, _Cell]] = defaultdict(lambda: defaultdict(_Cell))  # plain dicts after init
        self.profiles: dict[str, set[str]] = defaultdict(set)
        self.order = summary_tasks()
        for r in records:
            if r.task not in self.order:
                continue
            cell = self.cells[str(r.model)][(r.task, r.lang, r.get("length"))]
            if r.shortened:
                cell.shortened += 1
            elif r.failed:
                cell.failed += 1
            elif r.unscored == "unreadable":
                cell.unreadable += 1
            elif r.unscored == "not_sampled":
                cell.not_sampled += 1
            elif r.unscored == "truncated":  # cut off at its budget, left out (truncated="unscored")
                cell.truncated.append(r)
            elif not r.counts:  # any other unscored reason (a record of a skipped sample)
                cell.skipped += 1
            else:
                cell.rows.append(r)
            self.profiles[str(r.model)].add(str(r.get("profile") or "v2"))
        for (model, task, lang, length), n in (skipped or {}).items():
            if task in self.order and n:
                self.cells[model][(task, lang, int(length))].skipped += int(n)
        for (model, task, lang, length), n in (planned or {}).items():
            if task in self.order:
                self.cells[model][(task, lang, int(length))].plan = int(n)
        for (model, task, lang, length), past in (beyond or {}).items():
            if task in self.order:
                self.cells[model][(task, lang, int(length))].beyond = past
        self.cells = {m: dict(per_model) for m, per_model in self.cells.items()}
        self.layout: dict[str, dict[str, list[Any]]] = {}
        for task in self.order:
            leaves = {leaf for per_model in self.cells.values() for leaf in per_model if leaf[0] == task}
            langs = sorted({leaf[1] for leaf in leaves})
            if langs:
                self.layout[task] = {
                    lang: sorted({lf[2] for lf in leaves if lf[1] == lang}, key=lambda x: (x is None, x or 0))
                    for lang in langs
                }
        self._draws: dict[tuple[str, Leaf], np.ndarray] = {}

    def specs(self) -> list[_Spec]:
        """Every row of the summary in display order: per language its lengths then its total, per task its
        total, then a suite overall for each profile the runs used (only when every summary task has results).
        """
        out = []
        for task, langs in self.layout.items():
            for lang, lengths in langs.items():
                out.extend(_Spec("cell", (task, lang, length)) for length in lengths)
                out.append(_Spec("lang", (task, lang)))
            out.append(_Spec("task", (task,)))
        if self.order and all(t in self.layout for t in self.order):
            present = set().union(*self.profiles.values())
            out.extend(_Spec("suite", (p,)) for p in _profiles() if p in present)
        return out

    def parts(self, spec: _Spec) -> list[_Spec]:
        """The rows one level down (lengths of a language, languages of a task, tasks of the suite)."""
        if spec.level == "lang":
            task, lang = spec.key
            return [_Spec("cell", (task, lang, length)) for length in self.layout[task][lang]]
        if spec.level == "task":
            return [_Spec("lang", (spec.key[0], lang)) for lang in self.layout[spec.key[0]]]
        if spec.level == "suite":
            return [_Spec("task", (t,)) for t in self.order]
        return []

    def leaves(self, spec: _Spec) -> list[Leaf]:
        """The leaf cells a row combines (itself for a cell).

        Args:
            spec: the row.
        """
        return [spec.key] if spec.level == "cell" else [leaf for part in self.parts(spec) for leaf in self.leaves(part)]

    def weights(self, spec: _Spec, n: Mapping[Leaf, int]) -> dict[Leaf, float] | None:
        """Leaf weights of a row given each leaf's sample count; None when a part has no samples.

        A cell or language pools its samples; a task weighs its languages
        equally; the suite uses the profile's task weights.

        Args:
            spec: the row.
            n: the number of scored samples (or pairs) in each leaf cell.
        """
        if spec.level in ("cell", "lang"):
            parts = {leaf: n[leaf] for leaf in self.leaves(spec) if n.get(leaf)}
            total = sum(parts.values())
            return {leaf: k / total for leaf, k in parts.items()} if total else None
        parts = self.parts(spec)
        if spec.level == "suite":
            weights = suite_weights(spec.key[0])
            share = [weights[part.key[0]] for part in parts]
        else:
            share = [1.0 / len(parts)] * len(parts)
        out: dict[Leaf, float] = defaultdict(float)
        for w, part in zip(share, parts):
            sub = self.weights(part, n)
            if sub is None:
                return None
            for leaf, v in sub.items():
                out[leaf] += w * v
        return dict(out)

    def planned(self, model: str, spec: _Spec) -> int:
        """Samples planned for a row of one model, summed over its leaf cells.

        Args:
            model: the model.
            spec: the row.
        """
        mine = self.cells.get(model, {})
        return sum(mine[leaf].planned for leaf in self.leaves(spec) if leaf in mine)

    def missing(self, model: str, spec: _Spec) -> list[str]:
        """Labels of the parts of a row with no results at all for this model, down to single lengths.

        Args:
            model: the model.
            spec: the row.
        """
        out = []
        for part in self.parts(spec):
            mine = self.cells.get(model, {})
            if not any(mine[leaf].found for leaf in self.leaves(part) if leaf in mine):
                out.append(part.name())
            else:
                out.extend(f"{part.name()} {m}" for m in self.missing(model, part))
        return out

    def complete(self, model: str, spec: _Spec) -> bool:
        """Every leaf of the row has scored results, none shortened, skipped, failed or left out as truncated.

        Args:
            model: the model.
            spec: the row.
        """
        mine = self.cells.get(model, {})
        return all(leaf in mine and mine[leaf].whole for leaf in self.leaves(spec))

    def profile_mismatch(self, model: str, spec: _Spec) -> str:
        """Why a suite row does not apply to this model's run ("" when it does).

        Args:
            model: the model.
            spec: the row; only suite rows can mismatch (the run's profiles must be exactly the row's).
        """
        if spec.level != "suite" or self.profiles.get(model) == {spec.key[0]}:
            return ""
        found = "+".join(sorted(self.profiles.get(model, set()))) or "no"
        return f"{found} run, not {spec.key[0]}"

    def _pooled_draws(self, model: str, leaves: Sequence[Leaf], identity: tuple) -> np.ndarray:
        """Bootstrap means of the samples of ``leaves`` taken together, computed once per identity."""
        key = (model, identity)
        if key not in self._draws:
            scores = [float(r.score) for leaf in leaves for r in self.cells[model][leaf].rows]
            self._draws[key] = resample_means(scores, "summary", model, *identity)
        return self._draws[key]

    def draws(self, model: str, spec: _Spec, w: Mapping[Leaf, float]) -> np.ndarray:
        """Bootstrap means of a row: its pooled samples resampled within each language, then weighted.

        Args:
            model: the model.
            spec: the row.
            w: the row's leaf weights (:meth:`weights`).
        """
        if spec.level == "cell":
            return self._pooled_draws(model, [spec.key], spec.key)
        leaves: dict[tuple, list[Leaf]] = defaultdict(list)
        share: dict[tuple, float] = defaultdict(float)
        for leaf, v in w.items():
            leaves[leaf[:2]].append(leaf)
            share[leaf[:2]] += v
        return sum(share[lang] * self._pooled_draws(model, found, lang) for lang, found in leaves.items())

    def row(self, model: str, spec: _Spec) -> dict[str, Any]:
        """One model's value, interval, format-failure rate and completeness for a row.

        Args:
            model: the model (its name prefixes every column but the value's own).
            spec: the row.
        """
        mine = self.cells.get(model, {})
        mismatch = self.profile_mismatch(model, spec)
        w = None if mismatch else self.weights(spec, {leaf: len(cell.rows) for leaf, cell in mine.items()})
        out: dict[str, Any] = {model: _NAN}
        _ci(out, model, None)
        if w is not None:
            out[model] = sum(v * float(np.mean([float(r.score) for r in mine[leaf].rows])) for leaf, v in w.items())
            _ci(out, model, self.draws(model, spec, w))
        cells = [mine[leaf] for leaf in self.leaves(spec) if leaf in mine]
        planned = sum(c.planned for c in cells)
        shortened = sum(c.shortened for c in cells)
        skipped = sum(c.skipped for c in cells)
        failed = sum(c.failed for c in cells)
        unreadable = sum(c.unreadable for c in cells)
        not_sampled = sum(c.not_sampled for c in cells)
        answered = [r for c in cells for r in c.answered]
        notes = _counts_note(planned, shortened, skipped, failed, unreadable, not_sampled)
        notes += output_notes(answered, planned)
        past = [c.beyond for c in cells if c.beyond[0]]
        if past:
            windows = "; ".join(dict.fromkeys(w for _, w in past))
            notes.append(f"{sum(n for n, _ in past)} of {planned} beyond window ({windows}; scored)")
        if any((r.get("length") or 0) > OPENCOMPASS_LONGEST for c in cells for r in c.rows):
            notes.append(f"beyond OpenCompass's protocol (its configs stop at {length_text(OPENCOMPASS_LONGEST)})")
        missing = self.missing(model, spec)
        if missing:
            notes.append(f"no results for {', '.join(missing)}")
        if not any(c.found for c in cells):
            notes = ["no results"]
        out.update(
            {
                f"{model} fmt_fail%": _rate([r for c in cells for r in c.rows]),
                f"{model} truncated%": truncated_rate(answered),
                f"{model} truncated": sum(r.output.truncated for r in answered),
                f"{model} planned": planned,
                f"{model} scored": sum(len(c.rows) for c in cells),
                f"{model} shortened": shortened,
                f"{model} skipped": skipped,
                f"{model} failed": failed,
                f"{model} unreadable": unreadable,
                f"{model} not_sampled": not_sampled,
                f"{model} truncated_excluded": sum(len(c.truncated) for c in cells),
                f"{model} beyond_window": sum(c.beyond[0] for c in cells),
                f"{model} complete": bool(w is not None and self.complete(model, spec)),
                f"{model} note": mismatch or "; ".join(notes),
            }
        )
        return out


def summary_table(
    records: Sequence[GradedSample],
    models: Sequence[str],
    skipped: Skipped | None = None,
    planned: Skipped | None = None,
    beyond: Mapping[tuple[str, str, str, Any], tuple[int, str]] | None = None,
) -> pd.DataFrame:
    """Rows per (task, lang, length), per-task EN / ZH / overall, and the suite overall.

    Completeness rule: a prompt shortened to fit the model (``shortened_from``
    in its record) is never reported as its nominal length. It is left out of
    that cell's score and of every aggregate above it (language, task, suite),
    counted in ``shortened``, and the cell is marked incomplete with a note
    such as "3 of 110 shortened (excluded)". Samples skipped as over length
    (each model's ``overlength`` in the run's plan) are counted in ``skipped``. ``planned`` is the run's plan's
    count (``RunResults.planned()``), never what could be read: it is scored + shortened + skipped + failed
    + unreadable + not_sampled + truncated_excluded (``not_sampled``: an adaptive run's samples no round asked),
    and anything short of it is missing (the cell incomplete, "no
    results for ..."); a record that could not be read back is counted in ``unreadable``. ``truncated%`` is the
    share of the answered samples whose output was cut off at its budget, and ``truncated`` their
    count (its numerator); a cell with any says how many in its note, scored as written (reference) or
    left out (``truncated="unscored"``: also counted in ``truncated_excluded``, the cell
    incomplete), and so does one whose outputs left a think block open. A language, task or suite row whose parts
    are incomplete or missing is flagged too (``complete`` False, with a
    note); it is never silently renormalised into a complete-looking number.
    ``OVERALL (v2)`` appears for v2 runs and ``OVERALL (v1)`` only for v1 runs
    (the records' ``profile``; records without one are v2).

    Args:
        records: graded samples (with ``model``), any tasks; only S-RT, M-RT and M-RS are used.
        models: the model columns, in order.
        skipped: over-length skips per (model, task, lang, length), from ``RunResults.skipped()``.
        planned: samples planned per (model, task, lang, length), from ``RunResults.planned()``; None (or a
            cell it lacks): the samples found.
        beyond: samples whose prompts went past the model's context window and the window, per (model, task,
            lang, length), from ``RunResults.beyond`` (a run with ``runtime(beyond_window="mark")``): scored,
            and each row holding any says so in its note ("2 of 10 beyond window (native window 8,192 ...)").
    """
    summary = _Summary(records, skipped, planned, beyond)
    corpora = _corpora(records)
    rows = []
    for spec in summary.specs():
        row = spec.labels()
        for m in models:
            row.update(summary.row(m, spec))
        row["corpus"] = _row_corpus(corpora, spec)
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {m: (f"{m} complete", f"{m} note") for m in models}
    return df


def effective_length_table(
    records: Sequence[GradedSample],
    models: Sequence[str],
    skipped: Skipped | None = None,
    planned: Skipped | None = None,
    rule: EffectiveRule | None = None,
    claimed: Mapping[str, int] | None = None,
    beyond: Mapping[tuple[str, str, str, Any], tuple[int, str]] | None = None,
    ladders: Mapping[tuple[str, str, str], tuple[int | None, str, int | None]] | None = None,
) -> pd.DataFrame:
    """Each model's effective context length per summary task and language (``aggregate.effective_length``).

    The lengths and their completeness are the summary table's cells (:func:`summary_table`): a cell with any
    sample shortened, skipped, failed, unreadable, left out or missing is incomplete, and the number is
    undetermined above it. ``claimed`` is the model's ``max_seq_len`` as the run's plan holds it (the largest
    over its datasets, in the model's tokens; the suite's lengths are cl100k tokens).

    Args:
        records: graded samples (with ``model``).
        models: the models, in order.
        skipped: over-length skips, as for :func:`summary_table`.
        planned: the plan's samples per cell, as for :func:`summary_table`.
        rule: which scores pass (default: ``relative``, 85% of the model's own shortest-length score).
        claimed: per model, the length its config claims.
        beyond: samples past the model's context window per cell (as for :func:`summary_table`): the
            ``beyond_window_from`` column names the first tested length with any, where its window lies.
        ladders: an adaptive run's decisions per (model, task, lang): (the effective length, its edge, the
            first open length), as its ladder decided them from the records (``report.ladder``). The number and
            its edge are the ladder's; the interval is the same bootstrap over the lengths' sampled prompts.
    """
    rule = rule or EffectiveRule()
    summary = _Summary(records, skipped, planned, beyond)
    rows = []
    for m in models:
        mine = summary.cells.get(m, {})
        for task, langs in summary.layout.items():
            for lang, lengths in langs.items():
                cells = [
                    length_cell(n, [r.score for r in mine[(task, lang, n)].rows], mine[(task, lang, n)].planned)
                    for n in lengths
                    if n is not None and (task, lang, n) in mine
                ]
                if not cells:
                    continue
                decided = (ladders or {}).get((m, task, lang))
                if decided is not None:  # sampled, not whole: each length's prompts are the ladder's sample
                    found = sampled_effective_length(cells, rule, decided, m, task, lang)
                else:
                    found = effective_length(cells, rule, m, task, lang)
                limit = (claimed or {}).get(m)
                rows.append(
                    {
                        "model": m,
                        "task": _label(task),
                        "lang": lang.upper(),
                        "rule": rule.rule,
                        "bar": found.bar,
                        "effective": found.text + (" (adaptive)" if decided is not None else ""),
                        "effective_length": found.value,
                        "edge": found.edge,
                        "ci_low": found.ci_low,
                        "ci_high": found.ci_high,
                        "undetermined_above": found.undetermined_above,
                        "non_monotone_at": found.non_monotone_at,
                        "claimed": limit,
                        "beyond_window_from": min(
                            (c.length for c in cells if mine[(task, lang, c.length)].beyond[0]), default=None
                        ),
                        "effective/claimed": found.value / limit if found.value and limit else None,
                        "curve": " ".join(
                            f"{length_text(c.length)}:{np.mean(c.scores):.1f}"
                            if c.scores
                            else f"{length_text(c.length)}:-"
                            for c in sorted(cells, key=lambda c: c.length)
                        ),
                    }
                )
    df = pd.DataFrame(rows)
    lengths = ("effective_length", "ci_low", "ci_high", "undetermined_above", "non_monotone_at", "claimed")
    for column in (*lengths, "beyond_window_from"):
        if column in df:  # tested lengths, whole numbers even where some are missing
            df[column] = df[column].astype("Int64")
    return df


def _corpora(records: Sequence[GradedSample]) -> dict[tuple[str, str], set[str]]:
    """The haystack corpora each (task, language) was built from (``corpus`` in the sample metadata)."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in records:
        out.setdefault((r.task, r.lang), set()).add(str(r.get("corpus") or "not recorded"))
    return out


def _row_corpus(corpora: dict[tuple[str, str], set[str]], spec: Any) -> str:
    """A summary row's corpora: its cell's or language's, else every corpus under the task or the suite."""
    if spec.level in ("cell", "lang"):
        names = corpora.get((spec.key[0], spec.key[1]), set())
    elif spec.level == "task":
        names = set().union(*(v for (t, _), v in corpora.items() if t == spec.key[0]))
    else:
        names = set().union(*corpora.values())
    return " + ".join(sorted(names))


def difference_table(
    records: Sequence[GradedSample], base: str, other: str, skipped: Skipped | None = None
) -> pd.DataFrame:
    """``other - base`` per summary row, with a paired bootstrap and a ``significant`` flag.

    Pairs are the samples both models scored with identical (dataset, id),
    taken in (dataset, id) order; the difference of a row is its weighted
    mean of per-sample differences over those pairs, resampled within each
    leaf cell (seed identity ``("paired", base, other, task, lang, length)``). Significant = the 95%
    interval excludes 0. Check the prompts match first (``check_comparable``).

    Args:
        records: graded samples of both models.
        base: the model subtracted.
        other: the model compared with it.
        skipped: as for :func:`summary_table`.
    """
    summary = _Summary(records, skipped)
    diffs: dict[Leaf, np.ndarray] = {}
    mine, theirs = summary.cells.get(base, {}), summary.cells.get(other, {})
    for leaf in set(mine) & set(theirs):
        a = {(r.dataset, r.id): float(r.score) for r in mine[leaf].rows}
        b = {(r.dataset, r.id): float(r.score) for r in theirs[leaf].rows}
        common = sorted(set(a) & set(b), key=lambda key: (str(key[0]), str(key[1])))
        diffs[leaf] = np.array([b[k] - a[k] for k in common], dtype=float)
    label = f"{other} - {base}"
    n = {leaf: len(d) for leaf, d in diffs.items()}
    rows = []
    for spec in summary.specs():
        row: dict[str, Any] = spec.labels()
        row[base] = summary.row(base, spec)[base]
        row[other] = summary.row(other, spec)[other]
        applies = not (summary.profile_mismatch(base, spec) or summary.profile_mismatch(other, spec))
        w = summary.weights(spec, n) if applies else None
        row[label] = _NAN if w is None else sum(v * float(diffs[leaf].mean()) for leaf, v in w.items())
        draws = None
        if w is not None:
            draws = sum(v * resample_means(diffs[leaf], "paired", base, other, *leaf) for leaf, v in w.items())
        _ci(row, label, draws)
        row["paired n"] = sum(n.get(leaf, 0) for leaf in summary.leaves(spec))
        row["significant"] = significant(row[f"{label} ci_low"], row[f"{label} ci_high"])
        rows.append(row)
    return pd.DataFrame(rows)


def grid_members(
    records: Sequence[GradedSample], model: str, task: str | TaskSpec, lang: str
) -> dict[tuple[float, int], list[tuple[GradedSample, float]]]:
    """The records of each (depth, length) heatmap cell, with the score each contributes there.

    Shortened and unanswered prompts are left out: they are not their nominal length. Empty when the
    task has no heatmap.

    Args:
        records: graded samples (with ``model``).
        model: the model whose cells are wanted.
        task: the task (name or spec).
        lang: the language.
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    points = spec.aggregation().heatmap_points
    cells: dict[tuple[float, int], list[tuple[GradedSample, float]]] = defaultdict(list)
    if points is None:
        return cells
    for r in records:
        if r.model != model or r.task != spec.name or r.lang != lang or r.get("length") is None:
            continue
        if not r.counts:
            continue
        for depth, score in points(r):
            cells[(depth, int(r.fields["length"]))].append((r, score))
    return cells


def grid(records: Sequence[GradedSample], model: str, task: str | TaskSpec, lang: str) -> pd.DataFrame:
    """Mean score over depth (rows) x length (columns), placed by the task's ``heatmap_points``.

    Args:
        records: graded samples (with ``model``).
        model: the model whose cells are shown.
        task: the task (name or spec).
        lang: the language.
    """
    return grid_frame(grid_members(records, model, task, lang))


def grid_frame(cells: Mapping[tuple[float, int], list[tuple[GradedSample, float]]]) -> pd.DataFrame:
    """The depth x length table of means of :func:`grid_members`' cells (empty for no cells).

    Args:
        cells: (depth, length) -> (record, score) pairs.
    """
    if not cells:
        return pd.DataFrame()
    depths = sorted({d for d, _ in cells})
    lengths = sorted({L for _, L in cells})
    data = [[mean(s for _, s in cells[(d, L)]) if cells.get((d, L)) else _NAN for L in lengths] for d in depths]
    return pd.DataFrame(data, index=depths, columns=lengths)
