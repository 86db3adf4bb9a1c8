"""How ATC results add up: the weighted score (Eq. 4), ENL-50, the ATC table and its curve, and the error
analysis per needle count (the paper's under-thinking, told apart from outputs that ran out of budget).

The weighted score sums over every planned needle count N, so a planned N
without a result counts as 0 there (and the table flags it) instead of
renormalising over the N that remain.

The error classes (:func:`error_class`), mapped to the 2025 paper's annotation (section 4.2, Table 4 and
Appendix H, which annotated errors of "eldest ancestor" questions by hand):

* ``truncated``: the output was cut off at its budget (ran out of thinking room); not in the paper's
  table, where such an output would have been read as one of the others;
* ``budget_reached``: an answer whose reasoning the server stopped at the thinking budget the run asked
  for (``GradedSample.budget_reached``): cut by the budget, which in a score looks like under-thinking;
* ``under_thinking``: an answer, not cut off, that names a person of the chain between the one asked
  about and the answer (for an "eldest ancestor" question: an ancestor who is not the eldest): the model
  stopped inferring while clues remained (H.1);
* ``no_boxed_answer`` (instruction following, H.2), ``repetition`` (repetitive output, H.4),
  ``hallucination`` (a name not in the context, H.5), ``wrong_chain_name`` and ``wrong_distance`` (the
  paper's partial understanding and other errors, H.3, which no rule can tell apart).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...aggregate.cells import NAN, Estimate, format_failure_rate, output_notes, percent, put_interval, truncated_rate
from ...aggregate.metrics import mean
from ...aggregate.plots import percent_axes, png, pyplot
from ...aggregate.uncertainty import interval, resample_means
from ...protocol import reference_values
from ...record import GradedSample
from ...taskspec import BoardRow, Conformance, ReportParts, Skipped, TaskResults
from ..conformance import conformance, count_coverage, coverage, option_differences
from ..kinship import QUESTION_TYPES
from .open_answer import ATC_OPTIONS, DEFAULT_COUNTS

__all__ = [
    "RESULTS",
    "SHORT_CONTEXT_NEEDLES",
    "atc_weighted_score",
    "enl",
    "dataset_metrics",
    "atc_table",
    "atc_curve_png",
    "ERROR_CLASSES",
    "error_class",
    "atc_error_table",
    "atc_board",
    "atc_conformance",
]

SHORT_CONTEXT_NEEDLES = 64  # ATC prompts up to ~2K tokens


def atc_weighted_score(
    acc_by_needles: Mapping[int, float], max_needles: int | None = None, planned: Iterable[int] | None = None
) -> float:
    """sum(P_N * N) / sum(N) over the planned needle counts (up to ``max_needles``).

    Args:
        acc_by_needles: accuracy P_N per needle count N.
        max_needles: only N up to this (64 for the <=2K sub-score).
        planned: the N the config planned; a planned N with no (or a NaN)
            accuracy counts as 0, never renormalised away. Defaults to the N present.
    """
    acc = {int(n): float(p) for n, p in acc_by_needles.items()}
    counts = sorted({int(n) for n in (acc if planned is None else planned)})
    counts = [n for n in counts if max_needles is None or n <= max_needles]
    total = sum(counts)
    if total == 0:
        return float("nan")
    return sum(_or_zero(acc.get(n)) * n for n in counts) / total


def _or_zero(value: float | None) -> float:
    return 0.0 if value is None or math.isnan(value) else value


def enl(acc_by_needles: Mapping[int, float], tau: float = 50.0) -> int:
    """Effective needle length: the largest N with accuracy >= tau, 0 if none (a missing N cannot pass).

    Args:
        acc_by_needles: accuracy P_N (percent) per needle count N.
        tau: the accuracy threshold in percent (50 for ENL-50).
    """
    passing = [int(n) for n, p in acc_by_needles.items() if float(p) >= tau]
    return max(passing) if passing else 0


def dataset_metrics(details: Sequence[GradedSample]) -> dict[str, float]:
    """Weighted score, its short-context part and ENL-50 of one ATC dataset.

    Over every planned N (a skipped N counts as 0, never renormalised); ``planned_n_missing`` says how many.
    A failed request or a shortened prompt is left out of its N's accuracy, as in the ATC table.
    """
    by_needles: dict[int, list[float]] = defaultdict(list)
    for d in details:
        if d.get("num_needles") is not None and d.counts:
            by_needles[int(d.fields["num_needles"])].append(float(d.score))
    if not by_needles:
        return {}
    acc = {n: mean(v) for n, v in sorted(by_needles.items())}
    planned = sorted({int(n) for d in details for n in d.get("needle_counts") or ()} | set(acc))
    return {
        "weighted_score": atc_weighted_score(acc, planned=planned),
        "weighted_score_short": atc_weighted_score(acc, max_needles=SHORT_CONTEXT_NEEDLES, planned=planned),
        "enl50": float(enl(acc)),
        "planned_n_missing": len(set(planned) - set(acc)),
    }


ATC_METRICS = ("weighted_score", "weighted_score_short", "enl50", "planned_n_missing")


def metric_names(metas: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names :func:`dataset_metrics` reports for a dataset with these planned samples (its metadata)."""
    return ATC_METRICS if any(m.get("num_needles") is not None for m in metas) else ()


def _atc_note(missing_skipped: list[int], missing_other: list[int], partial: dict[int, tuple[int, int]]) -> str:
    parts = []
    if missing_skipped:
        parts.append(f"N={', '.join(map(str, missing_skipped))} not run: over length")
    if missing_other:
        parts.append(f"N={', '.join(map(str, missing_other))} not run")
    parts.extend(f"N={n}: {k} of {p} skipped" for n, (k, p) in sorted(partial.items()))
    return f"incomplete ({'; '.join(parts)}); counted as 0" if parts else ""


def atc_table(
    records: Sequence[GradedSample],
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
        recorded = {int(n) for r in records if r.task == "atc" for n in r.get("needle_counts") or ()}
        planned = recorded or DEFAULT_COUNTS
    groups: dict[tuple[str, str], dict[int, list[GradedSample]]] = defaultdict(lambda: defaultdict(list))
    cut: dict[tuple[str, str], list[GradedSample]] = defaultdict(list)  # cut off and left out
    for r in records:
        if r.task == "atc" and r.counts:
            groups[(r.model, r.lang)][int(r.fields["num_needles"])].append(r)
        elif r.task == "atc" and r.answered:
            cut[(r.model, r.lang)].append(r)
            groups[(r.model, r.lang)].setdefault(int(r.fields["num_needles"]), [])
    for (m, task, lang, n), k in skipped.items():
        if task == "atc" and k:
            groups[(m, lang)].setdefault(int(n), [])
    all_n = sorted({int(n) for n in planned} | {n for g in groups.values() for n in g})
    rows = []
    for m in models:
        for lang in sorted(lang for model, lang in groups if model == m):
            rows.append(_atc_row(m, lang, groups[(m, lang)], skipped, all_n, cut[(m, lang)]))
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {
        "weighted": ("complete", "note"),
        "ENL-50": ("complete", "note"),
        "weighted_short": ("complete_short", "note"),
    }
    return df


def _atc_row(
    model: str,
    lang: str,
    by_n: Mapping[int, list[GradedSample]],
    skipped: Skipped,
    all_n: list[int],
    cut: Sequence[GradedSample] = (),
) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "lang": lang.upper()}
    counted, draws = [], []  # P_N with skipped samples as 0, and its draws, per planned N
    missing_skipped, missing_other, partial = [], [], {}
    cut_n = {int(r.fields["num_needles"]) for r in cut}
    for n in all_n:
        scores = [float(r.score) for r in by_n.get(n, [])]
        skip = int(skipped.get((model, "atc", lang, n), 0))
        d = resample_means(scores, "atc", model, lang, n)
        row[f"N={n}"] = float(np.mean(scores)) if scores else NAN
        put_interval(row, f"N={n}", d if scores else None)
        share = len(scores) / (len(scores) + skip) if scores else 0.0
        counted.append(row[f"N={n}"] * share if scores else 0.0)
        draws.append(d * share if scores else np.zeros_like(d))
        if not scores and n not in cut_n:  # an N whose samples were all cut off and left out was run
            (missing_skipped if skip else missing_other).append(n)
        elif skip:
            partial[n] = (skip, skip + len(scores))
    ns = np.array(all_n, dtype=float)
    matrix = np.vstack(draws).T  # (resamples, N)
    acc = dict(zip(all_n, counted))
    short = ns <= SHORT_CONTEXT_NEEDLES
    row["weighted"] = atc_weighted_score(acc, planned=all_n)
    put_interval(row, "weighted", matrix @ ns / ns.sum())
    row["weighted_short"] = atc_weighted_score(acc, max_needles=SHORT_CONTEXT_NEEDLES, planned=all_n)
    put_interval(row, "weighted_short", matrix[:, short] @ ns[short] / ns[short].sum() if short.any() else None)
    row["ENL-50"] = enl(acc)
    passing = np.where(matrix >= 50.0, ns, 0.0).max(axis=1)
    lo, hi = interval(passing, method="inverted_cdf")
    row["ENL-50 ci_low"], row["ENL-50 ci_high"] = int(lo), int(hi)
    mine = [r for rs in by_n.values() for r in rs]
    row["fmt_fail%"] = format_failure_rate(mine)
    row["truncated%"] = truncated_rate([*mine, *cut])
    row["truncated"] = sum(r.output.truncated for r in (*mine, *cut))
    n_skipped = sum(int(skipped.get((model, "atc", lang, n), 0)) for n in all_n)
    planned = len(mine) + n_skipped + len(cut)
    row.update(planned=planned, scored=len(mine), skipped=n_skipped, truncated_excluded=len(cut))
    gaps = {n for n in missing_skipped + missing_other + list(partial)} | cut_n
    row["complete"] = not gaps
    row["complete_short"] = not any(n <= SHORT_CONTEXT_NEEDLES for n in gaps)
    row["note"] = "; ".join(
        x for x in (_atc_note(missing_skipped, missing_other, partial), *output_notes([*mine, *cut], planned)) if x
    )
    return row


def atc_curve_png(records: Sequence[GradedSample], title: str) -> bytes:
    """ATC accuracy vs needle count (log-2 axis), one line per model and language, ENL-50 marked.

    Args:
        records: scored ATC records (with ``model``); excluded ones should be left out by the caller.
        title: the figure's title.

    Returns:
        The figure as PNG bytes.
    """
    fig, ax = pyplot().subplots(figsize=(6.5, 3.6))
    by_model: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_model[f"{r.model} ({r.lang.upper()})"][int(r.fields["num_needles"])].append(float(r.score))
    for label, by_n in sorted(by_model.items()):
        xs = sorted(by_n)
        acc = {n: mean(by_n[n]) for n in xs}
        line = ax.plot(xs, [acc[n] for n in xs], marker="o", label=f"{label}, ENL-50={enl(acc)}")[0]
        e = enl(acc)
        if e:
            ax.axvline(e, color=line.get_color(), linestyle="--", alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.axhline(50, color="grey", linewidth=0.8, linestyle=":")
    percent_axes(ax, "needles (log2)", "accuracy (%)", title)
    return png(fig)


# the error classes in the table's order; a grader's other kinds (``grader_error``) follow them
ERROR_CLASSES = (
    "truncated",
    "budget_reached",
    "under_thinking",
    "no_boxed_answer",
    "repetition",
    "hallucination",
    "wrong_chain_name",
    "wrong_distance",
)


def error_class(record: GradedSample) -> str | None:
    """A wrong ATC answer's class (see the module doc); None for a right one.

    Args:
        record: a graded ATC record.
    """
    if record.correct:
        return None
    if record.output.truncated:
        return "truncated"
    if (
        record.output.budget_reached
    ):  # its reasoning was stopped at the thinking budget asked for: not the model's choice
        return "budget_reached"
    error = (record.error or "wrong").split(":")[0]
    return "under_thinking" if error == "stopped_early" else error


def _percentile(values: Sequence[int], q: float) -> float:
    return float(np.percentile(values, q)) if values else NAN


def atc_error_table(records: Sequence[GradedSample], models: Sequence[str]) -> pd.DataFrame:
    """Per model, language and needle count: output tokens, and the wrong answers by class.

    Over the answered samples (those that count, and those left out for being cut off): their output
    tokens (median and 90th percentile), how many were wrong, how many of the wrong ones were cut off
    (``wrong: truncated``) and their share vs answered, and each class's share of the wrong ones (``truncated`` + ``under_thinking`` + the rest =
    100). Under-thinking and running out of budget look alike in a score; here they are apart.

    Args:
        records: ATC records (with ``model``).
        models: the models, in order.
    """
    groups: dict[tuple[str, str, int], list[GradedSample]] = defaultdict(list)
    for r in records:
        if r.task == "atc" and r.answered:
            groups[(r.model, r.lang, int(r.fields["num_needles"]))].append(r)
    found = {error_class(r) for rows in groups.values() for r in rows} - {None}
    classes = [*ERROR_CLASSES, *sorted(found - set(ERROR_CLASSES))]
    rows = []
    for m in models:
        for (model, lang, n), mine in sorted(groups.items()):
            if model != m:
                continue
            tokens = [r.output.output_tokens for r in mine if r.output.output_tokens is not None]
            wrong = [error_class(r) for r in mine if not r.correct]
            row: dict[str, Any] = {"model": m, "lang": lang.upper(), "N": n, "answered": len(mine)}
            row["output tokens p50"] = _percentile(tokens, 50)
            row["output tokens p90"] = _percentile(tokens, 90)
            row["wrong"] = len(wrong)
            row["wrong: truncated"] = wrong.count("truncated")
            row["wrong: truncated%"] = percent(wrong.count("truncated"), len(wrong))
            row["wrong: answered%"] = percent(len(wrong) - wrong.count("truncated"), len(wrong))
            for kind in classes:
                row[f"{kind}%"] = percent(wrong.count(kind), len(wrong))
            rows.append(row)
    return pd.DataFrame(rows)


def report(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> ReportParts:
    """The ATC table, its error analysis per needle count and the accuracy-vs-N curve.

    Args:
        records: the ATC records of every model, shortened and failed ones included (the table counts them).
        models: the models, in order.
        skipped: over-length skips per (model, task, lang, N).
    """
    scored = [r for r in records if r.counts]
    return ReportParts(
        tables={
            "needlebench_atc": atc_table(records, models, skipped),
            "needlebench_atc_errors": atc_error_table(records, models),
        },
        figures={"atc_accuracy_vs_needles": atc_curve_png(scored, "ATC accuracy vs needle count")} if scored else {},
    )


BOARD = "ATC (NeedleBench v2)"
REPEATS = 10  # the 2025 paper's R and atc_datasets' default


def _estimate(row: Mapping[str, Any], column: str, complete: bool, note: str = "") -> Estimate:
    value = row.get(column)
    value = NAN if value is None else float(value)
    low, high = row.get(f"{column} ci_low", NAN), row.get(f"{column} ci_high", NAN)
    return Estimate(value, float(low), float(high), complete and not math.isnan(value), note)


def atc_board(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> list[BoardRow]:
    """One leaderboard row per model and language in the 2025 paper's Table 3 shape.

    Columns ``P/N`` per planned needle count, the short-context weighted score (N <= 64), the weighted score
    and ENL-50, as :func:`atc_table` computes them (a planned N without results counts as 0 and is flagged).
    The weighted score's basis gives each N the weight N / sum(N), scaled by the share of its planned samples
    that were scored (skipped ones count as 0).

    Args:
        records: the ATC records of every model.
        models: the models, in order.
        skipped: over-length skips per (model, task, lang, N).
    """
    table = atc_table(records, models, skipped)
    if table.empty:
        return []
    counts = sorted({int(c.removeprefix("N=")) for c in table.columns if str(c).startswith("N=") and " " not in c})
    total = float(sum(counts))
    columns = tuple((f"P/{n}", f"P {n}") for n in counts) + (
        ("weighted_score_short", f"weighted N<={SHORT_CONTEXT_NEEDLES}"),
        ("weighted_score", "weighted"),
        ("enl50", "ENL-50"),
    )
    rows = []
    for row in table.to_dict(orient="records"):
        model, lang = row["model"], str(row["lang"]).lower()
        mine = [r for r in records if r.model == model and r.lang == lang and r.counts]
        cells = {}
        basis: dict[Any, tuple[float, dict[tuple[str, str], float]]] = {}
        for n in counts:
            scores = {(r.dataset or "", r.id): float(r.score) for r in mine if r.fields["num_needles"] == n}
            skip = int(skipped.get((model, "atc", lang, n), 0))
            note = f"{skip} of {skip + len(scores)} skipped (over length)" if skip else ("" if scores else "not run")
            cells[f"P/{n}"] = _estimate(row, f"N={n}", bool(scores) and not skip, note)
            share = len(scores) / (len(scores) + skip) if scores else 0.0
            basis[n] = (n / total * share, scores)
        cells["weighted_score_short"] = _estimate(row, "weighted_short", bool(row["complete_short"]), row["note"])
        cells["weighted_score"] = _estimate(row, "weighted", bool(row["complete"]), row["note"])
        cells["enl50"] = _estimate(row, "ENL-50", bool(row["complete"]), row["note"])
        rows.append(
            BoardRow(
                board=BOARD,
                model=model,
                columns=columns,
                cells=cells,
                rank_by="weighted_score",
                layouts=("atc-2025",),
                labels={"lang": lang.upper()},
                planned=int(row["planned"]),
                scored=int(row["scored"]),
                basis=basis,
            )
        )
    return rows


def atc_conformance(records: Sequence[GradedSample], suite: str | None) -> Conformance:
    """One model's ATC records against the paper's: N = 2..512, four question types, 10 repeats, reference options.

    Args:
        records: one model's ATC records.
        suite: unused (ATC has no suites).
    """
    if not records:
        return Conformance()
    parts = [
        coverage("needle counts", {r.fields["num_needles"] for r in records}, DEFAULT_COUNTS),
        coverage("question types", {r.get("question_type") for r in records}, QUESTION_TYPES),
    ]
    for lang in sorted({r.lang for r in records}):
        parts.append(count_coverage("repeats", len({r.get("repeat") for r in records if r.lang == lang}), REPEATS))
    reference = reference_values(ATC_OPTIONS)
    merged = conformance(parts, option_differences(records, reference))
    return Conformance(tuple(dict.fromkeys(merged.short)), tuple(dict.fromkeys(merged.differs)))


RESULTS = TaskResults(
    dataset_metrics=dataset_metrics,
    metric_names=metric_names,
    report=report,
    board=atc_board,
    conformance=atc_conformance,
)
