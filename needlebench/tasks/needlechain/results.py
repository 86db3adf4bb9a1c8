"""How NeedleChain results add up: cells per (variant, k, question), the position profile, table and figures."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...aggregate.cells import NAN, Estimate, output_notes, percent, put_interval, truncated_rate
from ...aggregate.metrics import GRADER_ERROR, error_shares, mean
from ...aggregate.plots import percent_axes, png, pyplot
from ...aggregate.uncertainty import resample_means
from ...protocol import reference_values
from ...record import GradedSample
from ...taskspec import BoardRow, Conformance, ReportParts, Skipped, TaskResults
from ..conformance import conformance, count_coverage, coverage, option_differences
from .task import CHAIN_OPTIONS, ERROR_KINDS, QUESTIONS, VARIANTS, ChainParams

__all__ = [
    "RESULTS",
    "chain_cells",
    "position_profile",
    "chain_table",
    "chain_k_png",
    "chain_positions_png",
    "chain_board",
    "chain_conformance",
]


def chain_cells(details: Sequence[GradedSample]) -> dict[str, float]:
    """NeedleChain graded, plain and strict accuracy per (variant, k, question); error shares per (variant, k).

    ``acc_*`` is the graded score (the sample's ``scoring`` rule); ``plain_*`` counts the value alone and
    ``strict_*`` the value with every needed name mentioned, where the grader reports them. A failed request
    is left out of every number, as in the NeedleChain table (``summarise_details`` counts it).
    """
    out: dict[str, float] = {}
    cells: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    shown: dict[str, dict[tuple[str, int, str], list[float]]] = {
        "plain": defaultdict(list),
        "strict": defaultdict(list),
    }
    groups: dict[tuple[str, int], list[GradedSample]] = defaultdict(list)
    for d in details:
        if not d.counts:
            continue
        cell = (d.fields["variant"], d.fields["k"], d.fields["question"])
        cells[cell].append(float(d.score))
        for name, values in shown.items():
            if d.get(f"{name}_correct") is not None:
                values[cell].append(100.0 * bool(d.fields[f"{name}_correct"]))
        groups[(d.fields["variant"], d.fields["k"])].append(d)
    for (variant, k, question), vals in sorted(cells.items()):
        out[f"acc_{variant}_k{k}_{question}"] = mean(vals)
    for name, values in shown.items():
        for (variant, k, question), vals in sorted(values.items()):
            out[f"{name}_{variant}_k{k}_{question}"] = mean(vals)
    for (variant, k), rows in sorted(groups.items()):
        for kind, share in error_shares(rows, (*ERROR_KINDS, GRADER_ERROR)).items():
            out[f"err_{variant}_k{k}_{kind}"] = share
    return out


def chain_names(metas: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names :func:`chain_cells` reports for a dataset with these planned samples (its metadata), in its order."""
    cells = sorted({(m["variant"], m["k"], m["question"]) for m in metas})
    names = [f"{name}_{v}_k{k}_{q}" for name in ("acc", "plain", "strict") for v, k, q in cells]
    kinds = sorted((*ERROR_KINDS, GRADER_ERROR))
    names += [f"err_{v}_k{k}_{kind}" for v, k in sorted({c[:2] for c in cells}) for kind in kinds]
    return tuple(names)


def position_profile(
    details: Sequence[GradedSample], bins: int = 10, min_k: int = 0
) -> dict[str, dict[str, list[float]]]:
    """Mention rate of chain names by position, per variant, in reasoning and in presented order.

    Positions are binned into ``bins`` equal shares of the chain so different k can be pooled.

    Args:
        details: per-sample records; only NeedleChain ones with ``mentioned`` count.
        bins: how many position bins.
        min_k: only samples with k >= this count (the paper used k=200).

    Returns:
        ``{variant: {"reasoning": [percent per bin], "presented": [...]}}``; NaN for an empty bin.
    """
    sums: dict[str, dict[str, list[float]]] = {}
    counts: dict[str, dict[str, list[int]]] = {}
    for d in details:
        if d.task != "needlechain" or "mentioned" not in d.fields or d.get("k", 0) < min_k:
            continue
        mentioned = d.fields["mentioned"]
        k = len(mentioned)
        presented = d.get("presented_positions") or list(range(k))
        variant = d.fields["variant"]
        s = sums.setdefault(variant, {"reasoning": [0.0] * bins, "presented": [0.0] * bins})
        c = counts.setdefault(variant, {"reasoning": [0] * bins, "presented": [0] * bins})
        for pos, hit in enumerate(mentioned):
            b = min(bins - 1, pos * bins // k)
            s["reasoning"][b] += hit
            c["reasoning"][b] += 1
        for shown_at, pos in enumerate(presented):
            b = min(bins - 1, shown_at * bins // k)
            s["presented"][b] += mentioned[pos]
            c["presented"][b] += 1
    return {
        v: {
            axis: [100.0 * x / n if n else float("nan") for x, n in zip(sums[v][axis], counts[v][axis])]
            for axis in ("reasoning", "presented")
        }
        for v in sums
    }


def sidecars(details: Sequence[GradedSample]) -> dict[str, str]:
    """``positions.json``: the mention profile over every k and over k >= 200 (the paper's)."""
    profile = {"all_k": position_profile(details), "k200": position_profile(details, min_k=200)}
    return {"positions.json": json.dumps(profile, indent=1)}


def chain_table(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped | None = None) -> pd.DataFrame:
    """Graded, plain and strict accuracy per (variant, k, question) per model, with error-type shares.

    The model's column is the graded score (the samples' ``scoring`` rule: the paper's value match
    under reference); plain is the share of answers whose value alone matched (``plain_correct``) and
    strict the share whose value matched with every needed name mentioned (``strict_correct``), where
    the grader reports them, so lucky guesses show as plain-but-not-strict. A k with skipped
    (over-length) samples is flagged. ``truncated%`` is the share of answered samples whose output was cut
    off at its budget and ``truncated`` their count; those left out (``truncated="unscored"``) are also
    counted in ``truncated_excluded`` (the note says how many, scored as written or left out).

    Args:
        records: NeedleChain records (with ``model``).
        models: the models, in order.
        skipped: over-length skips per (model, "needlechain", lang, k), from ``RunResults.skipped()``.
    """
    skipped = skipped or {}
    cells: dict[tuple, list[GradedSample]] = defaultdict(list)
    failed: dict[tuple, int] = defaultdict(int)
    cut: dict[tuple, list[GradedSample]] = defaultdict(list)  # cut off at the budget and left out
    for r in records:
        if r.task == "needlechain":
            key = (r.fields["variant"], int(r.fields["k"]), r.fields["question"], r.model)
            if not r.counts and r.answered:
                cut[key].append(r)
            elif not r.counts:
                failed[key] += 1
            else:
                cells[key].append(r)
    keys = sorted(
        {k[:3] for k in (*cells, *cut)},
        key=lambda k: (VARIANTS.index(k[0]) if k[0] in VARIANTS else 9, k[1], k[2]),
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
            graded = [float(c.score) for c in cell]
            plain = [100.0 * bool(c.fields["plain_correct"]) for c in cell if c.get("plain_correct") is not None]
            strict = [100.0 * bool(c.fields["strict_correct"]) for c in cell if c.get("strict_correct") is not None]
            columns = ((m, graded, "graded"), (f"{m} plain", plain, "plain"), (f"{m} strict", strict, "strict"))
            for column, values, name in columns:
                row[column] = float(np.mean(values)) if values else NAN
                put_interval(
                    row, column, resample_means(values, "chain", name, m, variant, k, question) if values else None
                )
            for kind in ERROR_KINDS:
                row[f"{m} {kind}%"] = percent(sum(c.error == kind for c in cell), len(cell))
            answered = [*cell, *cut.get((variant, k, question, m), [])]
            row[f"{m} truncated%"] = truncated_rate(answered)
            row[f"{m} truncated"] = sum(r.output.truncated for r in answered)
            row[f"{m} scored"] = len(cell)
            nfail = row[f"{m} failed"] = failed.get((variant, k, question, m), 0)
            ncut = row[f"{m} truncated_excluded"] = len(answered) - len(cell)
            skip = skipped_k.get((m, k), 0)
            row[f"{m} complete"] = bool(cell) and not skip and not nfail and not ncut
            notes = [f"k={k}: {skip} samples skipped (over length)"] if skip else []
            notes += [f"{nfail} of {len(answered) + nfail} excluded (request failed or shortened)"] if nfail else []
            notes += output_notes(answered, len(answered) + nfail)
            row[f"{m} note"] = "; ".join(notes)
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["marks"] = {
        col: (f"{m} complete", f"{m} note") for m in models for col in (m, f"{m} plain", f"{m} strict")
    }
    return df


def chain_k_png(records: Sequence[GradedSample], model: str) -> bytes:
    """NeedleChain accuracy vs k per variant, one panel per question.

    Args:
        records: scored NeedleChain records (with ``model``).
        model: the model shown.

    Returns:
        The figure as PNG bytes.
    """
    questions = sorted({r.fields["question"] for r in records if r.model == model})
    fig, axes = pyplot().subplots(1, max(1, len(questions)), figsize=(5.2 * max(1, len(questions)), 3.4), squeeze=False)
    for ax, question in zip(axes[0], questions):
        by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in records:
            if r.model == model and r.fields["question"] == question:
                by[r.fields["variant"]][int(r.fields["k"])].append(float(r.score))
        for variant in VARIANTS:
            if variant in by:
                xs = sorted(by[variant])
                ax.plot(xs, [mean(by[variant][x]) for x in xs], marker="o", label=variant)
        ax.set_xscale("log")
        ks = sorted({k for by_k in by.values() for k in by_k})
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        percent_axes(ax, "k (needles)", "accuracy (%)", f"{model}: {question} question")
    return png(fig)


def chain_positions_png(records: Sequence[GradedSample], model: str, bins: int = 10) -> bytes:
    """Mention rate by position bin (x) and variant (y), by presented and by reasoning order, at the largest k.

    Args:
        records: scored NeedleChain records (with ``model``).
        model: the model shown.
        bins: how many position bins.

    Returns:
        The figure as PNG bytes.
    """
    mine = [r for r in records if r.model == model]
    k_max = max((int(r.fields["k"]) for r in mine), default=0)
    profile = position_profile(mine, bins=bins, min_k=k_max)
    variants = [v for v in VARIANTS if v in profile]
    fig, axes = pyplot().subplots(
        1, 2, figsize=(11, 1.6 + 0.5 * max(1, len(variants))), squeeze=False, constrained_layout=True
    )
    for ax, axis in zip(axes[0], ("presented", "reasoning")):
        data = np.array([profile[v][axis] for v in variants], dtype=float) if variants else np.full((1, bins), np.nan)
        im = ax.imshow(np.ma.masked_invalid(data), cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_yticks(range(len(variants)), variants)
        ax.set_xticks(
            range(bins), [f"{100 * i // bins}-{100 * (i + 1) // bins}%" for i in range(bins)], rotation=45, fontsize=7
        )
        ax.set_title(f"{model}, k={k_max}: names mentioned by {axis} order", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.04)
    return png(fig)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def report(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> ReportParts:
    """The NeedleChain table, and per model accuracy vs k and the position profile.

    Args:
        records: the NeedleChain records of every model, shortened and failed ones included (the table counts them).
        models: the models, in order.
        skipped: over-length skips per (model, task, lang, k).
    """
    parts = ReportParts(tables={"needlechain_summary": chain_table(records, models, skipped)})
    scored = [r for r in records if r.counts]
    for m in sorted({r.model for r in scored if r.model is not None}):
        parts.figures[f"needlechain_accuracy_vs_k_{_safe(m)}"] = chain_k_png(scored, m)
        parts.figures[f"needlechain_positions_{_safe(m)}"] = chain_positions_png(scored, m)
    return parts


PAPER_ORDER = ("stack", "forward", "backward", "mixed")  # the paper's NS, F, B, M
_LAYOUTS = {"single": ("chain-accuracy",)}  # the paper's Table 1 asks q_single


def chain_board(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> list[BoardRow]:
    """One leaderboard row per model and question in the paper's Table 1 shape: accuracy per k and variant.

    Columns ``k<k>/<variant>`` (the graded accuracy of :func:`chain_table`, with its interval and completeness)
    and ``mean``, the mean over the cells, which the board ranks by (the paper prints no overall; its rows
    have no mean). Table 1 asks the single question, so only that board sits beside it.

    Args:
        records: the NeedleChain records of every model.
        models: the models, in order.
        skipped: over-length skips per (model, task, lang, k).
    """
    table = chain_table(records, models, skipped)
    if table.empty:
        return []
    out = []
    for question in sorted(set(table["question"]), key=lambda q: (QUESTIONS.index(q) if q in QUESTIONS else 9, q)):
        part = table[table["question"] == question]
        ks = sorted(set(int(k) for k in part["k"]))
        variants = [v for v in PAPER_ORDER if v in set(part["variant"])] + sorted(
            set(part["variant"]) - set(PAPER_ORDER)
        )
        keys = [(k, v) for k in ks for v in variants]
        columns = tuple((f"k{k}/{v}", f"k{k} {v}") for k, v in keys) + (("mean", "mean"),)
        for m in models:
            by_cell = {(int(r["k"]), r["variant"]): r for r in part.to_dict(orient="records")}
            cells: dict[str, Estimate] = {}
            draws, values, basis = [], [], {}
            mine = [r for r in records if r.model == m and r.get("question") == question and r.counts]
            if not mine:
                continue
            for k, v in keys:
                row = by_cell.get((k, v))
                value = float(row[m]) if row is not None else NAN
                done = bool(row is not None and row[f"{m} complete"])
                note = str(row[f"{m} note"]) if row is not None else "not run"
                cells[f"k{k}/{v}"] = Estimate(
                    value,
                    float(row[f"{m} ci_low"]) if row is not None else NAN,
                    float(row[f"{m} ci_high"]) if row is not None else NAN,
                    done and not np.isnan(value),
                    note if not done else "",
                )
                scores = {
                    (r.dataset or "", r.id): float(r.score)
                    for r in mine
                    if int(r.fields["k"]) == k and r.fields["variant"] == v
                }
                if scores:
                    values.append(float(np.mean(list(scores.values()))))
                    draws.append(resample_means(list(scores.values()), "chain", "graded", m, v, k, question))
                    basis[(k, v)] = (1.0, scores)
            total = len(basis)
            basis = {leaf: (1.0 / total, scores) for leaf, (_, scores) in basis.items()}
            whole = all(c.complete for c in cells.values()) and total == len(keys)
            missing = [key for key, c in cells.items() if not c.complete]
            cells["mean"] = Estimate.of(
                float(np.mean(values)) if values else NAN,
                np.mean(draws, axis=0) if draws else None,
                whole,
                f"without {', '.join(missing)}" if missing else "",
            )
            out.append(
                BoardRow(
                    board=f"NeedleChain ({question} question)",
                    model=m,
                    columns=columns,
                    cells=cells,
                    rank_by="mean",
                    layouts=_LAYOUTS.get(question, ()),
                    planned=sum(1 for r in records if r.model == m and r.get("question") == question),
                    scored=len(mine),
                    basis=basis,
                )
            )
    return out


def chain_conformance(records: Sequence[GradedSample], suite: str | None) -> Conformance:
    """One model's NeedleChain records against the paper's: k = 5..200, 200 data points, every variant and
    question, the reference options (the paper's prompt, roster, names, values and scoring).

    Args:
        records: one model's NeedleChain records.
        suite: unused (NeedleChain has no suites).
    """
    if not records:
        return Conformance()
    paper = ChainParams()
    parts = [
        coverage("k values", {r.fields["k"] for r in records}, paper.k_values),
        coverage("variants", {r.fields["variant"] for r in records}, paper.variants),
        coverage("questions", {r.fields["question"] for r in records}, paper.questions),
        count_coverage("data points", len({r.get("point") for r in records}), paper.points),
    ]
    reference = reference_values(CHAIN_OPTIONS)
    return conformance(parts, option_differences(records, reference))


RESULTS = TaskResults(
    dataset_metrics=chain_cells,
    metric_names=chain_names,
    sidecars=sidecars,
    report=report,
    board=chain_board,
    conformance=chain_conformance,
)
