"""Result tables as pandas DataFrames: the summary, ATC and NeedleChain tables.

Every score comes with a 95% percentile-bootstrap interval (``X ci_low``,
``X ci_high``; see :mod:`needlebench.aggregate.uncertainty`) and with how complete it
is. Cells with no samples are NaN (shown as missing), never 0. The
completeness rule (:func:`summary_table`) decides what a number may contain.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.metrics import PROFILES, SHORT_CONTEXT_NEEDLES, atc_weighted_score, enl, mean
from ..aggregate.uncertainty import interval, resample_means, significant
from ..tasks.atc import DEFAULT_COUNTS
from .results import is_excluded, is_failed, is_shortened

__all__ = ["summary_table", "atc_table", "chain_table", "grid", "difference_table", "SPARSE_ORDER", "TASK_LABELS"]

SPARSE_ORDER = ("srt", "mrt", "mrs")
TASK_LABELS = {"srt": "S-RT", "mrt": "M-RT", "mrs": "M-RS", "atc": "ATC", "needlechain": "NeedleChain"}
CHAIN_VARIANTS = ("forward", "backward", "mixed", "stack")
_NAN = float("nan")

Leaf = tuple[str, str, Any]  # (task, lang, length)
Skipped = Mapping[tuple[str, str, str, Any], int]  # (model, task, lang, cell) -> samples skipped


def _rate(rows: Sequence[dict[str, Any]]) -> float:
    return 100.0 * sum(bool(r.get("format_failure")) for r in rows) / len(rows) if rows else _NAN


def _ci(row: dict[str, Any], column: str, draws: np.ndarray | None) -> None:
    """Put the 95% interval of ``column`` beside it."""
    lo, hi = interval(draws) if draws is not None else (_NAN, _NAN)
    row[f"{column} ci_low"], row[f"{column} ci_high"] = lo, hi


def _counts_note(planned: int, shortened: int, skipped: int, failed: int = 0) -> list[str]:
    parts = []
    if shortened:
        parts.append(f"{shortened} of {planned} shortened (excluded)")
    if skipped:
        parts.append(f"{skipped} of {planned} skipped (over length)")
    if failed:
        parts.append(f"{failed} of {planned} request failed (excluded)")
    return parts


# -- summary ----------------------------------------------------------------------------------------


@dataclass
class _Cell:
    """One (task, lang, length) cell of one model: the samples that count, and those that do not."""

    rows: list[dict[str, Any]] = field(default_factory=list)  # scored: not shortened, request answered
    shortened: int = 0
    skipped: int = 0
    failed: int = 0  # requests the server never answered

    @property
    def planned(self) -> int:
        return len(self.rows) + self.shortened + self.skipped + self.failed


@dataclass(frozen=True)
class _Spec:
    """A summary row: a leaf cell, a language ("all"), a task overall or a suite overall."""

    level: str  # "cell", "lang", "task" or "suite"
    key: tuple

    def labels(self) -> dict[str, Any]:
        if self.level == "cell":
            task, lang, length = self.key
            return {"task": TASK_LABELS[task], "lang": lang.upper(), "length": length}
        if self.level == "lang":
            return {"task": TASK_LABELS[self.key[0]], "lang": self.key[1].upper(), "length": "all"}
        if self.level == "task":
            return {"task": TASK_LABELS[self.key[0]], "lang": "OVERALL", "length": "all"}
        return {"task": f"OVERALL ({self.key[0]})", "lang": "OVERALL", "length": "all"}

    def name(self) -> str:
        """How a part is named in a note ("length 4000", "ZH", "M-RS")."""
        if self.level == "cell":
            return f"length {self.key[2]}"
        return self.key[1].upper() if self.level == "lang" else TASK_LABELS.get(self.key[0], self.key[0])


class _Summary:
    """The summary's layout, cells per model, and how each row combines its leaf cells.

    Every row is a weighted mean of leaf-cell means (pooled over lengths for a
    language, equal over languages for a task, profile weights over tasks), so
    the same weights give its bootstrap draws and its paired difference.
    """

    def __init__(self, records: Sequence[dict[str, Any]], skipped: Skipped | None = None) -> None:
        self.cells: dict[str, dict[Leaf, _Cell]] = defaultdict(lambda: defaultdict(_Cell))  # plain dicts after init
        self.profiles: dict[str, set[str]] = defaultdict(set)
        for r in records:
            if r.get("task") not in SPARSE_ORDER:
                continue
            cell = self.cells[r["model"]][(r["task"], r["lang"], r.get("length"))]
            if is_shortened(r):
                cell.shortened += 1
            elif is_failed(r):
                cell.failed += 1
            else:
                cell.rows.append(r)
            self.profiles[r["model"]].add(str(r.get("profile") or "v2"))
        for (model, task, lang, length), n in (skipped or {}).items():
            if task in SPARSE_ORDER and n:
                self.cells[model][(task, lang, int(length))].skipped += int(n)
        self.cells = {m: dict(per_model) for m, per_model in self.cells.items()}
        self.layout: dict[str, dict[str, list[Any]]] = {}
        for task in SPARSE_ORDER:
            leaves = {leaf for per_model in self.cells.values() for leaf in per_model if leaf[0] == task}
            langs = sorted({leaf[1] for leaf in leaves})
            if langs:
                self.layout[task] = {
                    lang: sorted({lf[2] for lf in leaves if lf[1] == lang}, key=lambda x: (x is None, x or 0))
                    for lang in langs
                }
        self._draws: dict[tuple[str, Leaf], np.ndarray] = {}

    def specs(self) -> list[_Spec]:
        out = []
        for task, langs in self.layout.items():
            for lang, lengths in langs.items():
                out.extend(_Spec("cell", (task, lang, length)) for length in lengths)
                out.append(_Spec("lang", (task, lang)))
            out.append(_Spec("task", (task,)))
        if all(t in self.layout for t in SPARSE_ORDER):
            present = set().union(*self.profiles.values())
            out.extend(_Spec("suite", (p,)) for p in ("v2", "v1") if p in present)
        return out

    def parts(self, spec: _Spec) -> list[_Spec]:
        """The rows one level down (lengths of a language, languages of a task, tasks of the suite)."""
        if spec.level == "lang":
            task, lang = spec.key
            return [_Spec("cell", (task, lang, length)) for length in self.layout[task][lang]]
        if spec.level == "task":
            return [_Spec("lang", (spec.key[0], lang)) for lang in self.layout[spec.key[0]]]
        if spec.level == "suite":
            return [_Spec("task", (t,)) for t in SPARSE_ORDER]
        return []

    def leaves(self, spec: _Spec) -> list[Leaf]:
        return [spec.key] if spec.level == "cell" else [leaf for part in self.parts(spec) for leaf in self.leaves(part)]

    def weights(self, spec: _Spec, n: Mapping[Leaf, int]) -> dict[Leaf, float] | None:
        """Leaf weights of a row given each leaf's sample count; None when a part has no samples.

        A cell or language pools its samples; a task weighs its languages
        equally; the suite uses the profile's task weights.
        """
        if spec.level in ("cell", "lang"):
            parts = {leaf: n[leaf] for leaf in self.leaves(spec) if n.get(leaf)}
            total = sum(parts.values())
            return {leaf: k / total for leaf, k in parts.items()} if total else None
        parts = self.parts(spec)
        share = PROFILES[spec.key[0]] if spec.level == "suite" else [1.0 / len(parts)] * len(parts)
        out: dict[Leaf, float] = defaultdict(float)
        for w, part in zip(share, parts):
            sub = self.weights(part, n)
            if sub is None:
                return None
            for leaf, v in sub.items():
                out[leaf] += w * v
        return dict(out)

    def planned(self, model: str, spec: _Spec) -> int:
        mine = self.cells.get(model, {})
        return sum(mine[leaf].planned for leaf in self.leaves(spec) if leaf in mine)

    def missing(self, model: str, spec: _Spec) -> list[str]:
        """Labels of the parts of a row with no results at all for this model."""
        out = []
        for part in self.parts(spec):
            if not self.planned(model, part):
                out.append(part.name())
            else:
                out.extend(f"{part.name()} {m}" for m in self.missing(model, part))
        return out

    def complete(self, model: str, spec: _Spec) -> bool:
        """Every leaf of the row has results, none shortened or skipped."""
        mine = self.cells.get(model, {})
        return all(
            leaf in mine and mine[leaf].rows and not (mine[leaf].shortened or mine[leaf].skipped or mine[leaf].failed)
            for leaf in self.leaves(spec)
        )

    def profile_mismatch(self, model: str, spec: _Spec) -> str:
        """Why a suite row does not apply to this model's run ("" when it does)."""
        if spec.level != "suite" or self.profiles.get(model) == {spec.key[0]}:
            return ""
        found = "+".join(sorted(self.profiles.get(model, set()))) or "no"
        return f"{found} run, not {spec.key[0]}"

    def draws(self, model: str, leaf: Leaf) -> np.ndarray:
        key = (model, leaf)
        if key not in self._draws:
            scores = [float(r["score"]) for r in self.cells[model][leaf].rows]
            self._draws[key] = resample_means(scores, "summary", model, *leaf)
        return self._draws[key]

    def row(self, model: str, spec: _Spec) -> dict[str, Any]:
        """One model's value, interval, format-failure rate and completeness for a row."""
        mine = self.cells.get(model, {})
        mismatch = self.profile_mismatch(model, spec)
        w = None if mismatch else self.weights(spec, {leaf: len(cell.rows) for leaf, cell in mine.items()})
        out: dict[str, Any] = {model: _NAN}
        _ci(out, model, None)
        if w is not None:
            out[model] = sum(v * float(np.mean([float(r["score"]) for r in mine[leaf].rows])) for leaf, v in w.items())
            _ci(out, model, sum(v * self.draws(model, leaf) for leaf, v in w.items()))
        cells = [mine[leaf] for leaf in self.leaves(spec) if leaf in mine]
        planned = sum(c.planned for c in cells)
        shortened = sum(c.shortened for c in cells)
        skipped = sum(c.skipped for c in cells)
        failed = sum(c.failed for c in cells)
        notes = _counts_note(planned, shortened, skipped, failed)
        missing = self.missing(model, spec)
        if missing:
            notes.append(f"no results for {', '.join(missing)}")
        if not planned:
            notes = ["no results"]
        out.update(
            {
                f"{model} fmt_fail%": _rate([r for c in cells for r in c.rows]),
                f"{model} planned": planned,
                f"{model} scored": sum(len(c.rows) for c in cells),
                f"{model} shortened": shortened,
                f"{model} skipped": skipped,
                f"{model} failed": failed,
                f"{model} complete": bool(w is not None and self.complete(model, spec)),
                f"{model} note": mismatch or "; ".join(notes),
            }
        )
        return out


def summary_table(
    records: Sequence[dict[str, Any]], models: Sequence[str], skipped: Skipped | None = None
) -> pd.DataFrame:
    """Rows per (task, lang, length), per-task EN / ZH / overall, and the suite overall.

    Completeness rule: a prompt shortened to fit the model (``shortened_from``
    in its record) is never reported as its nominal length. It is left out of
    that cell's score and of every aggregate above it (language, task, suite),
    counted in ``shortened``, and the cell is marked incomplete with a note
    such as "3 of 110 shortened (excluded)". Samples skipped as over length
    (from ``needlebench_overlength.json``) are counted in ``skipped``; planned
    = scored + shortened + skipped. A language, task or suite row whose parts
    are incomplete or missing is flagged too (``complete`` False, with a
    note); it is never silently renormalised into a complete-looking number.
    ``OVERALL (v2)`` appears for v2 runs and ``OVERALL (v1)`` only for v1 runs
    (the records' ``profile``; records without one are v2).

    Args:
        records: per-sample records (with ``model``), any tasks; only S-RT, M-RT and M-RS are used.
        models: the model columns, in order.
        skipped: over-length skips per (model, task, lang, length), from ``RunResults.skipped()``.
    """
    summary = _Summary(records, skipped)
    rows = []
    for spec in summary.specs():
        row = spec.labels()
        for m in models:
            row.update(summary.row(m, spec))
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {m: (f"{m} complete", f"{m} note") for m in models}
    return df


def difference_table(
    records: Sequence[dict[str, Any]], base: str, other: str, skipped: Skipped | None = None
) -> pd.DataFrame:
    """``other - base`` per summary row, with a paired bootstrap and a ``significant`` flag.

    Pairs are the samples both models scored with identical (dataset, id),
    taken in (dataset, id) order; the difference of a row is its weighted
    mean of per-sample differences over those pairs, resampled within each
    leaf cell (seed identity ``("paired", base, other, task, lang, length)``). Significant = the 95%
    interval excludes 0. Check the prompts match first (``check_comparable``).

    Args:
        records: per-sample records of both models.
        base: the model subtracted.
        other: the model compared with it.
        skipped: as for :func:`summary_table`.
    """
    summary = _Summary(records, skipped)
    diffs: dict[Leaf, np.ndarray] = {}
    mine, theirs = summary.cells.get(base, {}), summary.cells.get(other, {})
    for leaf in set(mine) & set(theirs):
        a = {(r["dataset"], r["id"]): float(r["score"]) for r in mine[leaf].rows if "id" in r}
        b = {(r["dataset"], r["id"]): float(r["score"]) for r in theirs[leaf].rows if "id" in r}
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


# -- ATC --------------------------------------------------------------------------------------------


def _atc_note(missing_skipped: list[int], missing_other: list[int], partial: dict[int, tuple[int, int]]) -> str:
    parts = []
    if missing_skipped:
        parts.append(f"N={', '.join(map(str, missing_skipped))} not run: over length")
    if missing_other:
        parts.append(f"N={', '.join(map(str, missing_other))} not run")
    parts.extend(f"N={n}: {k} of {p} skipped" for n, (k, p) in sorted(partial.items()))
    return f"incomplete ({'; '.join(parts)}); counted as 0" if parts else ""


def atc_table(
    records: Sequence[dict[str, Any]],
    models: Sequence[str],
    skipped: Skipped | None = None,
    planned: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Per-N accuracy per model and language, then weighted score, short-context weighted score, ENL-50.

    The weighted scores and ENL-50 cover every planned N (the config's, as its samples record it in
    ``needle_counts``; else 2, 4, ..., 512; plus any N found): an N that was not run (skipped
    as over length, or absent) counts as 0 and the row is flagged in ``note``,
    never renormalised over the N that remain. A skipped sample of a partly run
    N counts as 0 too. The ``N=`` columns are accuracies over the samples run.

    Args:
        records: ATC records (with ``model``).
        models: the models, in order.
        skipped: over-length skips per (model, "atc", lang, N), from ``RunResults.skipped()``.
        planned: the needle counts the config planned.
    """
    skipped = skipped or {}
    if planned is None:
        recorded = {int(n) for r in records if r.get("task") == "atc" for n in r.get("needle_counts") or ()}
        planned = recorded or DEFAULT_COUNTS
    groups: dict[tuple[str, str], dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.get("task") == "atc" and not is_excluded(r):
            groups[(r["model"], r["lang"])][int(r["num_needles"])].append(r)
    for (m, task, lang, n), k in skipped.items():
        if task == "atc" and k:
            groups[(m, lang)].setdefault(int(n), [])
    all_n = sorted({int(n) for n in planned} | {n for g in groups.values() for n in g})
    rows = []
    for m in models:
        for lang in sorted(lang for model, lang in groups if model == m):
            rows.append(_atc_row(m, lang, groups[(m, lang)], skipped, all_n))
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {
        "weighted": ("complete", "note"),
        "ENL-50": ("complete", "note"),
        "weighted_short": ("complete_short", "note"),
    }
    return df


def _atc_row(
    model: str, lang: str, by_n: Mapping[int, list[dict[str, Any]]], skipped: Skipped, all_n: list[int]
) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "lang": lang.upper()}
    counted, draws = [], []  # P_N with skipped samples as 0, and its draws, per planned N
    missing_skipped, missing_other, partial = [], [], {}
    for n in all_n:
        scores = [float(r["score"]) for r in by_n.get(n, [])]
        skip = int(skipped.get((model, "atc", lang, n), 0))
        d = resample_means(scores, "atc", model, lang, n)
        row[f"N={n}"] = float(np.mean(scores)) if scores else _NAN
        _ci(row, f"N={n}", d if scores else None)
        share = len(scores) / (len(scores) + skip) if scores else 0.0
        counted.append(row[f"N={n}"] * share if scores else 0.0)
        draws.append(d * share if scores else np.zeros_like(d))
        if not scores:
            (missing_skipped if skip else missing_other).append(n)
        elif skip:
            partial[n] = (skip, skip + len(scores))
    ns = np.array(all_n, dtype=float)
    matrix = np.vstack(draws).T  # (resamples, N)
    acc = dict(zip(all_n, counted))
    short = ns <= SHORT_CONTEXT_NEEDLES
    row["weighted"] = atc_weighted_score(acc, planned=all_n)
    _ci(row, "weighted", matrix @ ns / ns.sum())
    row["weighted_short"] = atc_weighted_score(acc, max_needles=SHORT_CONTEXT_NEEDLES, planned=all_n)
    _ci(row, "weighted_short", matrix[:, short] @ ns[short] / ns[short].sum() if short.any() else None)
    row["ENL-50"] = enl(acc)
    passing = np.where(matrix >= 50.0, ns, 0.0).max(axis=1)
    lo, hi = interval(passing, method="inverted_cdf")
    row["ENL-50 ci_low"], row["ENL-50 ci_high"] = int(lo), int(hi)
    mine = [r for rs in by_n.values() for r in rs]
    row["fmt_fail%"] = _rate(mine)
    n_skipped = sum(int(skipped.get((model, "atc", lang, n), 0)) for n in all_n)
    row.update(planned=len(mine) + n_skipped, scored=len(mine), skipped=n_skipped)
    gaps = {n for n in missing_skipped + missing_other + list(partial)}
    row["complete"] = not gaps
    row["complete_short"] = not any(n <= SHORT_CONTEXT_NEEDLES for n in gaps)
    row["note"] = _atc_note(missing_skipped, missing_other, partial)
    return row


# -- NeedleChain ------------------------------------------------------------------------------------


def chain_table(
    records: Sequence[dict[str, Any]], models: Sequence[str], skipped: Skipped | None = None
) -> pd.DataFrame:
    """Strict and plain accuracy per (variant, k, question) per model, with error-type shares.

    Strict is the graded score; plain is the share of answers whose value alone
    matched (``plain_correct``, where the grader reports it), so lucky guesses
    show as plain-but-not-strict. A k with skipped (over-length) samples is flagged.

    Args:
        records: NeedleChain records (with ``model``).
        models: the models, in order.
        skipped: over-length skips per (model, "needlechain", lang, k), from ``RunResults.skipped()``.
    """
    skipped = skipped or {}
    cells: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    failed: dict[tuple, int] = defaultdict(int)
    for r in records:
        if r.get("task") == "needlechain":
            key = (r["variant"], int(r["k"]), r["question"], r["model"])
            if is_excluded(r):
                failed[key] += 1
            else:
                cells[key].append(r)
    keys = sorted(
        {k[:3] for k in cells},
        key=lambda k: (CHAIN_VARIANTS.index(k[0]) if k[0] in CHAIN_VARIANTS else 9, k[1], k[2]),
    )
    skipped_k: dict[tuple[str, int], int] = defaultdict(int)
    for (m, task, _lang, k), n in skipped.items():
        if task == "needlechain":
            skipped_k[(m, int(k))] += int(n)
    rows = []
    for variant, k, question in keys:
        row: dict[str, Any] = {"variant": variant, "k": k, "question": question}
        for m in models:
            cell = cells.get((variant, k, question, m), [])
            strict = [float(c["score"]) for c in cell]
            plain = [100.0 * bool(c["plain_correct"]) for c in cell if c.get("plain_correct") is not None]
            for column, values, name in ((m, strict, "strict"), (f"{m} plain", plain, "plain")):
                row[column] = float(np.mean(values)) if values else _NAN
                _ci(row, column, resample_means(values, "chain", name, m, variant, k, question) if values else None)
            for kind in ("instruction_not_followed", "needle_omission", "calculation_error"):
                row[f"{m} {kind}%"] = (100.0 * sum(c.get("error") == kind for c in cell) / len(cell)) if cell else _NAN
            row[f"{m} scored"] = len(cell)
            nfail = row[f"{m} failed"] = failed.get((variant, k, question, m), 0)
            skip = skipped_k.get((m, k), 0)
            row[f"{m} complete"] = bool(cell) and not skip and not nfail
            notes = [f"k={k}: {skip} samples skipped (over length)"] if skip else []
            notes += [f"{nfail} of {len(cell) + nfail} excluded (request failed or shortened)"] if nfail else []
            row[f"{m} note"] = "; ".join(notes)
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {col: (f"{m} complete", f"{m} note") for m in models for col in (m, f"{m} plain")}
    return df


def grid(records: Sequence[dict[str, Any]], model: str, task: str, lang: str) -> pd.DataFrame:
    """Mean score over depth (rows) x length (columns); M-RT uses each needle's own depth and recall.

    Shortened prompts are left out: they are not their nominal length.
    """
    cells: dict[tuple[float, int], list[float]] = defaultdict(list)
    for r in records:
        if r["model"] != model or r["task"] != task or r["lang"] != lang or r.get("length") is None:
            continue
        if is_excluded(r):
            continue
        if task == "mrt" and "recalled" in r and r.get("depths"):
            for depth, hit in zip(r["depths"], r["recalled"]):
                cells[(float(depth), int(r["length"]))].append(100.0 * bool(hit))
        elif r.get("depth") is not None:
            cells[(float(r["depth"]), int(r["length"]))].append(float(r["score"]))
    if not cells:
        return pd.DataFrame()
    depths = sorted({d for d, _ in cells})
    lengths = sorted({L for _, L in cells})
    data = [[mean(cells[(d, L)]) if cells.get((d, L)) else _NAN for L in lengths] for d in depths]
    return pd.DataFrame(data, index=depths, columns=lengths)
