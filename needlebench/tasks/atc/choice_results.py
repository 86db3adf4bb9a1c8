"""How the multiple-choice ATC's results add up: circular evaluation, the weighted score, its table and board.

A question counts only when every rotation of its options is answered right (OpenCompass's circular
evaluation); the task score weighs each step count by its number of steps (the 2024 paper).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ...errors import ConfigError
from ...record import GradedSample
from ...taskspec import BoardRow, Conformance, ReportParts, Skipped, TaskResults
from .choice import DEFAULT_STEPS, ROTATIONS, STYLES, AtcMcParams

__all__ = ["RESULTS", "atc_mc_board", "atc_mc_table", "circular_outcomes", "circular_scores"]


def circular_outcomes(
    records: Iterable[GradedSample],
) -> tuple[dict[tuple[str, str, str], dict[int, dict[str, float]]], dict[tuple[str, str, str], list[str]]]:
    """Each question's circular outcome: 100 when all four rotations are present and right, else 0.

    Args:
        records: graded samples as for :func:`circular_scores`.

    Returns:
        ``({(model, lang, style): {step: {group id: 0 or 100}}}, {(model, lang, style): [incomplete group ids]})``.
    """
    groups: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for rec in records:
        step = int(rec.fields["num_needles"])
        key = (str(rec.model), rec.lang, str(rec.get("style") or ""), str(rec.fields["circular_group"]))
        g = groups.setdefault(key, {"step": step, "rotations": set(), "n": 0, "all": True})
        if step != g["step"]:
            raise ConfigError(f"circular_group {key[3]!r} mixes step counts {g['step']} and {step}")
        g["n"] += 1
        if rec.get("rotation") is not None:
            g["rotations"].add(int(rec.fields["rotation"]))
        g["all"] = g["all"] and rec.correct
    outcomes: dict[tuple[str, str, str], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    incomplete: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for (model, lang, style, gid), g in sorted(groups.items()):
        complete = g["rotations"] >= set(range(len(ROTATIONS))) if g["rotations"] else g["n"] >= len(ROTATIONS)
        if not complete:
            incomplete[(model, lang, style)].append(gid)
        outcomes[(model, lang, style)][g["step"]][gid] = 100.0 * (complete and g["all"])
    return {k: dict(v) for k, v in outcomes.items()}, dict(incomplete)


def circular_scores(records: Iterable[GradedSample]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per (model, lang, style): circular accuracy per step count and the weighted task score.

    A question is right only if all four rotations are present and right; a question with a
    missing rotation counts as wrong and is listed under ``incomplete`` (never dropped).

    Args:
        records: graded samples with a ``model`` and the fields ``circular_group`` and ``num_needles``, and
            optionally ``style`` (default "") and ``rotation`` (without it, four records make a group complete).

    Returns:
        ``{(model, lang, style): {"per_step": {step: P}, "questions": {step: n},
        "weighted": sum(P*step)/sum(step), "incomplete": [group ids], "complete": bool}}``
        with P in percent.
    """
    outcomes, incomplete = circular_outcomes(records)
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key, steps in sorted(outcomes.items()):
        per_step = {s: sum(v.values()) / len(v) for s, v in sorted(steps.items())}
        weighted = sum(p * s for s, p in per_step.items()) / sum(per_step)
        out[key] = {
            "per_step": per_step,
            "questions": {s: len(v) for s, v in sorted(steps.items())},
            "weighted": weighted,
            "incomplete": incomplete.get(key, []),
            "complete": not incomplete.get(key),
        }
    return out


def atc_mc_table(records: Iterable[GradedSample], models: Sequence[str] | None = None) -> Any:
    """One row per (model, lang, style): P per step count, the weighted score and a complete flag.

    Args:
        records: graded samples as for ``circular_scores``.
        models: row order (and filter); all models in ``records`` when None.
    """
    import pandas as pd

    scores = circular_scores(records)
    order = list(models) if models is not None else sorted({k[0] for k in scores})
    steps = sorted({s for v in scores.values() for s in v["per_step"]})
    rows = []
    for model in order:
        for (m, lang, style), v in scores.items():
            if m != model:
                continue
            row: dict[str, Any] = {"model": model, "lang": lang, "style": style}
            row.update({s: v["per_step"].get(s) for s in steps})
            row.update(weighted=round(v["weighted"], 2), complete=v["complete"])
            rows.append(row)
    return pd.DataFrame(rows, columns=["model", "lang", "style", *steps, "weighted", "complete"])


def _report(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> ReportParts:
    """The circular-evaluation table (shortened and unanswered samples are not scored), with the share of
    answered samples whose output was cut off at its budget."""
    from ...aggregate.cells import truncated_rate  # results only: generating samples never imports them

    scored = [r for r in records if r.counts]
    if not scored:
        return ReportParts()
    table = atc_mc_table(scored, models)
    by_row: dict[tuple[str, str, str], list[GradedSample]] = defaultdict(list)
    for r in records:
        if r.answered:
            by_row[(str(r.model), r.lang, str(r.get("style") or ""))].append(r)
    keys = list(zip(table["model"], table["lang"], table["style"]))
    table["truncated%"] = [truncated_rate(by_row[key]) for key in keys]
    table["truncated"] = [sum(r.output.truncated for r in by_row[key]) for key in keys]
    table["truncated_excluded"] = [sum(r.unscored == "truncated" for r in by_row[key]) for key in keys]
    return ReportParts(tables={"needlebench_atc_v1": table})


BOARD = "ATC (NeedleBench v1, multiple choice)"


def atc_mc_board(records: Sequence[GradedSample], models: Sequence[str], skipped: Skipped) -> list[BoardRow]:
    """One leaderboard row per model in the 2024 paper's Table 5 shape: the task score per language and
    style, and their mean (the paper's overall).

    A task score's interval resamples its questions (circular groups) within each step count. A row without
    all four (language, style) parts has its overall over the parts it has, marked incomplete.

    Args:
        records: the multiple-choice ATC records of every model.
        models: the models, in order.
        skipped: unused (these prompts are short).
    """
    from ...aggregate.cells import Estimate
    from ...aggregate.uncertainty import resample_means

    scored = [r for r in records if r.counts]
    if not scored:
        return []
    outcomes, incomplete = circular_outcomes(scored)
    parts = [(lang, style) for style in STYLES for lang in ("zh", "en")]
    columns = tuple((f"{lang.upper()}/{style}", f"{lang.upper()} {style}") for lang, style in parts) + (
        ("overall", "overall"),
    )
    rows = []
    for model in models:
        cells: dict[str, Estimate] = {}
        values, draws, basis = [], [], {}
        for lang, style in parts:
            steps = outcomes.get((model, lang, style))
            key = f"{lang.upper()}/{style}"
            if not steps:
                cells[key] = Estimate(float("nan"), complete=False, note="not run")
                continue
            total = float(sum(steps))
            value = sum(step * sum(v.values()) / len(v) for step, v in steps.items()) / total
            d = sum(
                step / total * resample_means(list(v.values()), "atc_mc", model, lang, style, step)
                for step, v in steps.items()
            )
            gaps = incomplete.get((model, lang, style), [])
            note = f"{len(gaps)} question(s) without all four rotations (counted wrong)" if gaps else ""
            cells[key] = Estimate.of(value, d, not gaps, note)
            values.append(value)
            draws.append(d)
            for step, v in steps.items():
                basis[(lang, style, step)] = (step / total, {("", gid): score for gid, score in v.items()})
        if not values:
            continue
        missing = [k for k, c in cells.items() if not c.complete]
        share = 1.0 / len(values)
        cells["overall"] = Estimate.of(
            sum(values) * share,
            sum(draws) * share,
            not missing,
            f"without {', '.join(missing)}" if missing else "",
        )
        mine = [r for r in records if r.model == model]
        rows.append(
            BoardRow(
                board=BOARD,
                model=model,
                columns=columns,
                cells=cells,
                rank_by="overall",
                layouts=("atc-2024",),
                planned=len(mine),
                scored=sum(r.counts for r in mine),
                basis={leaf: (w * share, scores) for leaf, (w, scores) in basis.items()},
            )
        )
    return rows


def atc_mc_conformance(records: Sequence[GradedSample], suite: str | None) -> Conformance:
    """One model's records against the 2024 paper's ATC: steps 2..19, both styles, 10 repeats.

    Args:
        records: one model's multiple-choice ATC records.
        suite: unused (the task has no suites).
    """
    from ..conformance import conformance, count_coverage, coverage

    if not records:
        return Conformance()
    parts = [
        coverage("step counts", {r.fields["num_needles"] for r in records}, DEFAULT_STEPS),
        coverage("prompt styles", {r.get("style") for r in records}, STYLES),
    ]
    for lang in sorted({r.lang for r in records}):
        repeats = {r.get("repeat") for r in records if r.lang == lang}
        parts.append(count_coverage("repeats", len(repeats), AtcMcParams.repeats))
    merged = conformance(parts)
    return Conformance(tuple(dict.fromkeys(merged.short)), merged.differs)


RESULTS = TaskResults(report=_report, board=atc_mc_board, conformance=atc_mc_conformance)
