"""The leaderboard: many models over many runs in the papers' table shapes, the papers' own rows beside them.

A *board* is one table shape: a suite of the sparse tasks under one profile (the 2025 paper's Tables 1/2/6
for ``v2``, the 2024 paper's Tables 2-4, 8, 9 for ``v1``: per task ZH, EN and their mean, then the overall),
or a task's own table (ATC, NeedleChain, the 2024 multiple-choice ATC), which the task declares
(``TaskResults.board``). Each run gives one row per (model, profile, protocol) on each board its records
reach, read through :mod:`needlebench.report.results` as ``needlebench report`` reads them, so OpenCompass
work dirs and ``needlebench score`` outputs both work. The sparse rows are the summary table's own numbers
(:func:`~needlebench.report.tables.summary_table`), so a row equals the run's ``needlebench_summary.csv``.

Every measured number carries its 95% bootstrap interval and its completeness; a row also says whether it
may sit beside a paper's row (:mod:`needlebench.report.comparability`). The papers' rows
(:mod:`needlebench.report.published`) join the boards of their shape as ``published`` rows, as printed.

Ranking: measured rows are ranked only among rows measured alike (the same differences from the reference,
the same completeness), never with published rows. A row's rank is 1 + the number of rows of its class
whose whole interval lies above its own, so rows whose intervals overlap share a rank and are listed as
tied; an incomplete class is marked. Each row is also compared with the row just above it in its class: where
the two share sample ids, the paired difference with its 95% interval and whether it excludes 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.cells import NAN, Estimate
from ..aggregate.effective_length import EffectiveRule, length_text
from ..aggregate.uncertainty import resample_means
from ..errors import ConfigError
from ..record import GradedSample
from ..tasks import all_tasks, get_task
from ..tasks.profiles import get_profile
from ..taskspec import Basis
from .axes import board_labels, variants_of
from .comparability import Comparability, row_comparability
from .cutoff import Budgets, CutOff
from .ladder import ladder_decisions, ladder_views
from .ledger import cost_ledger
from .parity_link import find_parity_link
from .published import PublishedTable, load_published
from .results import RunResults, load_results, recorded_prices, run_dirs
from .tables import effective_length_table, suite_weights, summary_table, summary_tasks

__all__ = [
    "Row",
    "Board",
    "Leaderboard",
    "build_leaderboard",
    "build_boards",
    "boards_from_rows",
    "measured_rows",
    "published_rows",
    "paired_difference",
    "rank_board",
    "infer_suite",
    "LANG_COLUMNS",
]

LANG_COLUMNS = ("zh", "en")  # the papers' order: ZH before EN
MEASURED, PUBLISHED = "measured", "published"
NOT_RUN = "not run"  # the note of a board column a row never ran


@dataclass(frozen=True)
class Row:
    """One row of a board: a model measured in a run, or a paper's printed row.

    Attributes:
        board: the board's title.
        kind: ``measured`` or ``published``.
        model: the model's name (as the run or the paper names it).
        source: the run it was read from (as given), or the paper's table (``needlebench-2025 Table 1``).
        labels: what else tells rows apart (``suite``, ``protocol``, ``lang``; a published row's ``group``).
        cells: the numbers by column key (a published row's as printed, without intervals).
        rank_by: the column the board ranks by.
        columns: the row's own ``(key, header)`` columns, in order.
        printed: a published row's cells as printed (``"100.00"``).
        planned: the samples a measured row's numbers were meant to rest on.
        scored: the samples they rest on.
        comparability: whether a measured row may sit beside a paper's row (None for a published row).
        basis: the rank column's number as weighted sample scores, for paired differences.
        layouts: the published tables' layouts this row's board sits beside.
        rank: the row's rank in its class (``"1"``, ``"2"``; ``""`` when unranked).
        rank_class: the class it is ranked in (a letter; rows of one class were measured alike).
        tied_with: the rows of its class whose intervals overlap its own.
        versus: the paired difference with the row just above it in its class (this - above), if they share ids.
        versus_row: that row's name.
        pairs: how many sample pairs the paired difference rests on.
        cut_off: per column key, how many of the answers behind the cell were cut off at their output budget,
            for the cells with any (the suite board's cells; :mod:`needlebench.report.cutoff`).
        texts: per column key, a measured cell shown as text rather than as a score (a length: ``2k [2k, 4k]``);
            its value is still the cell's, which the page sorts by.
        spent: what the model's run cost, from its ledger (:data:`SPENT`: device-hours, dollars), where known.
    """

    board: str
    kind: str
    model: str
    source: str
    labels: Mapping[str, str]
    cells: Mapping[str, Estimate]
    rank_by: str
    columns: tuple[tuple[str, str], ...] = ()
    printed: Mapping[str, str] = field(default_factory=dict)
    planned: int = 0
    scored: int = 0
    comparability: Comparability | None = None
    basis: Basis = field(default_factory=dict)
    layouts: tuple[str, ...] = ()
    rank: str = ""
    rank_class: str = ""
    tied_with: tuple[str, ...] = ()
    versus: Estimate | None = None
    versus_row: str = ""
    pairs: int = 0
    cut_off: Mapping[str, CutOff] = field(default_factory=dict)
    texts: Mapping[str, str] = field(default_factory=dict)
    spent: Mapping[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """How other rows refer to this one: the model and, for a measured row, its source and labels."""
        extra = [v for k, v in self.labels.items() if k not in ("protocol", "group") and v]
        tail = f", {', '.join(extra)}" if extra else ""
        return f"{self.model} ({self.source}{tail})"

    @property
    def value(self) -> Estimate:
        """The number the row ranks by."""
        return self.cells.get(self.rank_by, Estimate(NAN, complete=False))

    @property
    def complete(self) -> bool:
        """Every cell complete and nothing short of the label (a published row counts as printed)."""
        if self.kind == PUBLISHED:
            return True
        short = self.comparability.short if self.comparability else ()
        return not short and all(c.complete for c in self.cells.values())

    @property
    def cell_notes(self) -> str:
        """What the row's incomplete numbers lack (and what qualifies its marked ones), by column: ``not run: P/8,
        P/16; overall: 1 of 3 shortened``."""
        by_note: dict[str, list[str]] = {}
        for k, c in self.cells.items():
            if (not c.complete or c.marked) and c.note:
                by_note.setdefault(c.note, []).append(k)
        return "; ".join(
            f"{note}: {', '.join(keys)}" if note == NOT_RUN else f"{', '.join(keys)}: {note}"
            for note, keys in by_note.items()
        )

    @property
    def note(self) -> str:
        """Why the row is incomplete: the cells' own notes and what it lacks of its suite."""
        short = list(self.comparability.short if self.comparability else ())
        return "; ".join(filter(None, [self.cell_notes, *short]))


@dataclass
class Board:
    """One table shape: its columns, its rows and the published tables beside them.

    Attributes:
        title: the board's title.
        columns: ``(key, header)`` per number column, in order.
        rows: measured and published rows, the best first by the rank column.
        rank_by: the column the board ranks by.
        published: the labels of the published tables whose rows it holds.
        classes: per rank class letter, what its rows share (their differences from the reference).
    """

    title: str
    columns: list[tuple[str, str]]
    rows: list[Row]
    rank_by: str
    published: list[str] = field(default_factory=list)
    classes: dict[str, str] = field(default_factory=dict)


@dataclass
class Leaderboard:
    """Every board built from a set of runs, with what went wrong reading them."""

    boards: list[Board] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def infer_suite(lengths: Sequence[Any], profile: str) -> str | None:
    """The suite a set of nominal lengths belongs to: the smallest of the profile's suites that reaches the longest.

    Args:
        lengths: the records' nominal lengths.
        profile: ``v2`` or ``v1``.
    """
    known = [int(x) for x in lengths if x is not None]
    if not known:
        return None
    fits = [s for s in get_profile(profile).suites.values() if max(s.lengths) >= max(known)]
    return min(fits, key=lambda s: max(s.lengths)).name if fits else None


def _summary_columns(profile: str) -> tuple[tuple[str, str], ...]:
    """The sparse board's columns: per summary task its languages (ZH, EN) and mean, then the overall."""
    out = []
    for name in summary_tasks():
        short = get_task(name).short
        out += [(f"{short}/{lang.upper()}", f"{short} {lang.upper()}") for lang in LANG_COLUMNS]
        out.append((f"{short}/mean", f"{short} mean"))
    return (*out, ("overall", f"overall ({profile})"))


def _cell(row: Mapping[str, Any], model: str) -> Estimate:
    value = float(row[model])
    complete = bool(row[f"{model} complete"]) and not math.isnan(value)
    note = str(row.get(f"{model} note") or "")
    marked = bool(row.get(f"{model} beyond_window"))
    return Estimate(value, float(row[f"{model} ci_low"]), float(row[f"{model} ci_high"]), complete, note, marked)


def _summary_basis(records: Sequence[GradedSample], profile: str) -> dict[Any, tuple[float, dict]]:
    """The suite overall as weighted sample scores: per (task, language) its pooled samples, weighted by the
    profile's task weight over the task's languages (the summary table's own weighting)."""
    weights = suite_weights(profile)
    pooled: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    for r in records:
        if r.counts:
            pooled[(r.task, r.lang)][(r.dataset or "", r.id)] = float(r.score)
    langs: dict[str, int] = defaultdict(int)
    for task, _lang in pooled:
        langs[task] += 1
    if set(langs) != set(weights):
        return {}
    return {leaf: (weights[leaf[0]] / langs[leaf[0]], scores) for leaf, scores in pooled.items()}


def _suite_row(
    records: Sequence[GradedSample],
    model: str,
    profile: str,
    protocol: str,
    skipped: Any,
    source: str,
    planned: Any = None,
    budgets: Budgets | None = None,
    rule: EffectiveRule | None = None,
    claimed: int | None = None,
    beyond: Any = None,
    ladders: Any = None,
) -> Row:
    """The sparse-suite row of one model's records (one profile and protocol), on its suite's board, with its
    effective context length (the smallest over the board's tasks and languages; an adaptive run's ladders'
    decisions, ``report.ladder.ladder_decisions``) and its claimed length."""
    suite = infer_suite([r.get("length") for r in records], profile) or "?"
    table = summary_table(records, [model], skipped, planned, beyond)
    index = {(str(r["task"]), str(r["lang"]), str(r["length"])): r for r in table.to_dict(orient="records")}
    columns = _summary_columns(profile)
    cells: dict[str, Estimate] = {}
    absent = []
    for key, _header in columns[:-1]:
        short, part = key.split("/")
        found = index.get((short, "OVERALL" if part == "mean" else part, "all"))
        if found is None:
            cells[key] = Estimate(NAN, complete=False, note=NOT_RUN)
            absent.append(f"{short} {part}")
        else:
            cells[key] = _cell(found, model)
    overall = index.get((f"OVERALL ({profile})", "OVERALL", "all"))
    if overall is None:
        cells["overall"] = Estimate(NAN, complete=False, note="not every task ran")
    else:
        cell = _cell(overall, model)
        if absent:
            why = "; ".join(filter(None, [cell.note, f"{', '.join(absent)} not run"]))
            cell = dataclasses.replace(cell, complete=False, note=why)
        cells["overall"] = cell
    by_task: dict[str, list[GradedSample]] = defaultdict(list)
    for r in records:
        by_task[r.task].append(r)
    cut_off = _suite_cut_offs(records, [k for k, _ in columns], budgets or {})
    texts: dict[str, str] = {}
    effective = _effective_cell(records, model, skipped, planned, rule, claimed, beyond, ladders)
    if effective is not None:
        cells["effective"], texts["effective"] = effective
        columns = (*columns, ("effective", "effective length"))
    if claimed:
        cells["claimed"], texts["claimed"] = Estimate(float(claimed)), length_text(claimed)
        columns = (*columns, ("claimed", "claimed"))
    title = f"NeedleBench {profile}, {suite} suite ({', '.join(get_task(t).short for t in summary_tasks())})"
    return Row(
        board=title,
        kind=MEASURED,
        model=model,
        source=source,
        labels={"suite": suite, "protocol": protocol},
        cells=cells,
        rank_by="overall",
        columns=columns,
        planned=int(overall[f"{model} planned"]) if overall else sum(1 for _ in records),
        scored=int(overall[f"{model} scored"]) if overall else sum(r.counts for r in records),
        comparability=row_comparability(by_task, suite),
        basis=_summary_basis(records, profile),
        layouts=(f"suite:{profile}:{suite}",),
        cut_off=cut_off,
        texts=texts,
    )


def _effective_cell(
    records: Sequence[GradedSample],
    model: str,
    skipped: Any,
    planned: Any,
    rule: EffectiveRule | None,
    claimed: int | None,
    beyond: Any = None,
    ladders: Any = None,
) -> tuple[Estimate, str] | None:
    """A suite row's effective length: the smallest over its tasks and languages (the length up to which every
    one of them holds), as a sortable value (0 below the shortest length) and its text, naming where it is, and
    where lengths past the model's context window were run (marked), from which length."""
    claims = {model: claimed} if claimed else None
    table = effective_length_table(records, [model], skipped, planned, rule, claims, beyond, ladders)
    if table.empty:
        return None
    found = []
    for r in table.to_dict(orient="records"):
        value = 0.0 if r["edge"] == "below" or pd.isna(r["effective_length"]) else float(r["effective_length"])
        found.append((value, r["edge"] == "undetermined", f"{r['effective']} ({r['task']} {r['lang']})"))
    value, _, text = min(found, key=lambda f: (f[0], not f[1]))
    open_ = [f[2] for f in found if f[1]]
    notes = [f"undetermined: {'; '.join(open_)}"] if open_ else []
    past = [
        int(r["beyond_window_from"]) for r in table.to_dict(orient="records") if not pd.isna(r["beyond_window_from"])
    ]
    if past:
        notes.append(f"beyond the model's context window from {length_text(min(past))}")
    return Estimate(value, complete=not open_, note="; ".join(notes), marked=bool(past)), text


def _suite_cut_offs(records: Sequence[GradedSample], keys: Sequence[str], budgets: Budgets) -> dict[str, CutOff]:
    """The cut-off count behind each suite board cell with any: a task's language (``S-RT/ZH``), its mean
    (both languages) and the overall (every task), over the records the summary table counts as answered."""
    shorts = {get_task(name).short: name for name in summary_tasks()}
    out = {}
    for key in keys:
        short, _, part = key.partition("/")
        task = shorts.get(short)
        mine = [
            r for r in records if key == "overall" or (r.task == task and (part == "mean" or r.lang.upper() == part))
        ]
        cut = CutOff.of(mine, budgets)
        if cut.any:
            out[key] = cut
    return out


def measured_rows(results: RunResults, source: str) -> list[Row]:
    """Every board row one run gives: per (model, profile, protocol) its sparse-suite row and the task boards' rows.

    Args:
        results: the run's records (:func:`~needlebench.report.results.load_results` of one path).
        source: how the rows name the run.
    """
    skipped = results.skipped()
    groups: dict[tuple[str, str, str], list[GradedSample]] = defaultdict(list)
    for r in results.records:
        groups[(str(r.model), str(r.get("profile") or "v2"), str(r.get("protocol") or "not recorded"))].append(r)
    summary = set(summary_tasks())
    variants = variants_of(results.variants, results.records)
    spent = _spent(results)
    ladders = ladder_decisions(ladder_views(results))  # an adaptive run's effective lengths
    rows: list[Row] = []
    for (model, profile, protocol), records in sorted(groups.items()):
        method = board_labels(model, variants, results.models)  # a variant's setting (press, ratio...), a column each
        sparse = [r for r in records if r.task in summary]
        if sparse:
            suite_row = _suite_row(
                sparse,
                model,
                profile,
                protocol,
                skipped,
                source,
                results.planned(),
                results.budgets,
                results.effective_rule,
                results.claimed.get(model),
                results.beyond,
                ladders,
            )
            labels = {**suite_row.labels, **method}
            rows.append(dataclasses.replace(suite_row, labels=labels, spent=spent.get(model, {})))
        for spec in all_tasks():
            board = spec.aggregation().board
            mine = [r for r in records if r.task == spec.name]
            if board is None or not mine:
                continue
            comparability = row_comparability({spec.name: mine}, None)
            for b in board(mine, [model], skipped):
                rows.append(
                    Row(
                        board=b.board,
                        kind=MEASURED,
                        model=model,
                        source=source,
                        labels={"protocol": protocol, **b.labels, **method},
                        cells=dict(b.cells),
                        rank_by=b.rank_by,
                        columns=b.columns,
                        planned=b.planned,
                        scored=b.scored,
                        comparability=comparability,
                        basis=b.basis,
                        layouts=b.layouts,
                        spent=spent.get(model, {}),
                    )
                )
    return rows


# what a measured row shows of its run's cost (the ledger's model row): key, column heading
SPENT = (("device_h", "device-h (run)"), ("money", "$ (run)"))


def _spent(results: RunResults) -> dict[str, dict[str, float]]:
    """Each model's device-hours and dollars over the whole run, from its ledger; a number it lacks is absent."""
    ledger = cost_ledger(results.records, results.models, results.model_plans, results.prices)
    out: dict[str, dict[str, float]] = {}
    for row in ledger.to_dict(orient="records") if not ledger.empty else []:
        if row["task"] != "all":
            continue
        found = {"device_h": row.get("device_s"), "money": row.get("money")}
        found["device_h"] = found["device_h"] / 3600 if found["device_h"] is not None else None
        out[str(row["model"])] = {k: float(v) for k, v in found.items() if v is not None and not pd.isna(v)}
    return out


def _attaches(table: PublishedTable, row: Row) -> bool:
    """Whether a paper's table has the shape of a measured row's board."""
    for layout in row.layouts:
        if layout.startswith("suite:"):
            _, profile, suite = layout.split(":")
            keys = {c.key for c in table.columns}
            if table.profile == profile and table.suite == suite and keys <= {k for k, _ in row.columns}:
                return True
        elif table.layout == layout:
            return True
    return False


def published_rows(table: PublishedTable, board: str, rank_by: str) -> list[Row]:
    """A paper's table as ``published`` rows of a board, every number as printed.

    Args:
        table: the published table.
        board: the board's title.
        rank_by: the board's rank column.
    """
    out = []
    for r in table.rows:
        cells = {k: Estimate(float(v)) for k, v in r.values.items() if v is not None}
        printed = {k: r.printed(k) for k in r.values}
        labels = {"group": r.group, **dict(r.labels)}
        out.append(
            Row(
                board=board,
                kind=PUBLISHED,
                model=r.model,
                source=table.label,
                labels=labels,
                cells=cells,
                rank_by=rank_by,
                columns=tuple((c.key, c.header) for c in table.columns),
                printed=printed,
            )
        )
    return out


def paired_difference(upper: Basis, lower: Basis, *identity: object) -> tuple[Estimate, int] | None:
    """``lower - upper`` over the samples both rows scored with the same (dataset, id), with its 95% interval.

    Each leaf's mean difference is weighted as the upper row weighs the leaf; the bootstrap resamples the
    differences within each leaf (seeded by ``identity`` and the leaf). None unless both rows are made of the
    same leaves and every leaf shares at least one sample.

    Args:
        upper: the row above.
        lower: the row compared with it.
        identity: names the comparison, for the seed.

    Returns:
        The difference and how many sample pairs it rests on.
    """
    if not upper or set(upper) != set(lower):
        return None
    value, draws, pairs = 0.0, np.zeros(1), 0
    for leaf in sorted(upper, key=repr):
        weight, a = upper[leaf]
        b = lower[leaf][1]
        keys = sorted(set(a) & set(b))
        if not keys:
            return None
        diff = np.array([b[k] - a[k] for k in keys], dtype=float)
        value += weight * float(diff.mean())
        draws = draws + weight * resample_means(diff, "leaderboard", *identity, repr(leaf))
        pairs += len(keys)
    return Estimate.of(value, draws), pairs


def _bounds(e: Estimate) -> tuple[float, float]:
    """An estimate's interval for ranking; one without an interval overlaps every other."""
    return (e.low, e.high) if e.has_interval else (-math.inf, math.inf)


def _class_key(row: Row) -> tuple:
    c = row.comparability or Comparability()
    return (row.complete, c.differs, c.short)


def rank_board(rows: Sequence[Row], board: str) -> tuple[list[Row], dict[str, str]]:
    """Rank a board's measured rows within their classes; published rows keep no rank.

    Args:
        rows: the board's rows.
        board: its title (part of the paired differences' seeds).

    Returns:
        The rows, best first by the rank column (published and measured interleaved, rows without a value
        last), and what each rank class's rows share.
    """
    classes: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        if r.kind == MEASURED and r.value.known:
            classes[_class_key(r)].append(r)
    ordered = sorted(classes, key=lambda k: (not k[0], len(k[1]) + len(k[2]), k))
    letters = {key: chr(ord("a") + i) if i < 26 else f"c{i}" for i, key in enumerate(ordered)}
    described = {}
    updated: dict[int, Row] = {}
    for key, members in classes.items():
        complete, differs, short = key
        what = "; ".join(differs + short) or "comparable with the papers' rows"
        described[letters[key]] = ("" if complete else "incomplete rows: ") + what
        members = sorted(members, key=lambda r: -r.value.value)
        for i, r in enumerate(members):
            lo, hi = _bounds(r.value)
            above = sum(1 for o in members if o is not r and _bounds(o.value)[0] > hi)
            ties = tuple(
                o.name for o in members if o is not r and _bounds(o.value)[0] <= hi and _bounds(o.value)[1] >= lo
            )
            versus, versus_row, pairs = None, "", 0
            if i > 0:
                found = paired_difference(members[i - 1].basis, r.basis, board, members[i - 1].name, r.name)
                if found is not None:
                    versus, pairs = found
                    versus_row = members[i - 1].name
            updated[id(r)] = dataclasses.replace(
                r,
                rank=str(1 + above),
                rank_class=letters[key],
                tied_with=ties,
                versus=versus,
                versus_row=versus_row,
                pairs=pairs,
            )
    out = [updated.get(id(r), r) for r in rows]
    out.sort(key=lambda r: (not r.value.known, -r.value.value if r.value.known else 0.0, r.kind != MEASURED))
    return out, {letters[k]: described[letters[k]] for k in ordered}


def _source_names(paths: Sequence[Path]) -> list[str]:
    """How rows name each run: its folder's name, or more of its path where two names clash."""
    names = [p.name or str(p) for p in paths]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(paths, names)]


def build_leaderboard(paths: Sequence[Path], published: bool = True) -> Leaderboard:
    """Read every run and lay its rows and the papers' rows out on boards.

    Args:
        paths: OpenCompass work dirs or run folders, or ``needlebench score`` outputs; each is read alone
            (a work dir holding several timestamped runs is one source, its latest result per dataset).
        published: put the papers' rows beside the measured ones.

    Raises:
        ConfigError: no path given, or a path that does not exist.
    """
    if not paths:
        raise ConfigError(
            "leaderboard: give at least one run (an OpenCompass work dir or a `needlebench score` output)"
        )
    lb = Leaderboard()
    rows: list[Row] = []
    for path, source in zip(paths, _source_names(paths)):
        results = load_results([path])
        results.prices = recorded_prices(run_dirs(path) or [path])  # what its report priced it at, if anything
        lb.sources.extend(results.sources)
        lb.warnings.extend(f"{source}: {w}" for w in results.warnings)
        link = find_parity_link(run_dirs(path) or [path], results.records)
        for row in measured_rows(results, source):
            if link is not None and link.checked and row.comparability is not None:
                row = dataclasses.replace(row, comparability=dataclasses.replace(row.comparability, checked=link.text))
            rows.append(row)
    lb.boards = boards_from_rows(rows, published)
    return lb


def build_boards(results: RunResults, source: str, published: bool = True) -> list[Board]:
    """The boards of one run's records.

    Args:
        results: the run's records.
        source: how rows name the run.
        published: put the papers' rows beside the measured ones.
    """
    return boards_from_rows(measured_rows(results, source), published)


def boards_from_rows(rows: Sequence[Row], published: bool = True) -> list[Board]:
    """Lay measured rows out on their boards, add the papers' rows of each board's shape, rank.

    Args:
        rows: measured rows of any boards.
        published: put the papers' rows beside them.
    """
    by_board: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_board[r.board].append(r)
    tables = load_published() if published else ()
    boards = []
    for title, members in by_board.items():
        first = members[0]
        columns = list(dict.fromkeys(c for r in members for c in r.columns))
        attached = [t for t in tables if any(_attaches(t, r) for r in members)]
        if attached:  # the paper's column order, then the columns only measured rows have
            headers = dict(columns)
            paper = dict.fromkeys(c.key for t in attached for c in t.columns)
            order = list(paper) + [k for k, _ in columns if k not in paper]
            columns = [(k, headers.get(k) or k.replace("/", " ")) for k in order]  # "P 8", in the measured style
        seen: dict[tuple, int] = {}
        board_rows = list(members)
        labels = []
        for table in attached:
            labels.append(table.label)
            for p in published_rows(table, title, first.rank_by):
                key = (p.model, tuple(sorted(p.printed.items())))
                if key in seen:  # a table that repeats another's rows (2025 Table 6 repeats Table 2)
                    i = seen[key]
                    board_rows[i] = dataclasses.replace(board_rows[i], source=f"{board_rows[i].source}, {table.label}")
                    continue
                seen[key] = len(board_rows)
                board_rows.append(p)
        board_rows = [_fill(r, [k for k, _ in columns]) for r in board_rows]
        ranked, classes = rank_board(board_rows, title)
        boards.append(Board(title, columns, ranked, first.rank_by, labels, classes))
    return sorted(boards, key=lambda b: b.title)


def _fill(row: Row, keys: Sequence[str]) -> Row:
    """A measured row with a cell for every board column, in the board's order: one it never ran is missing,
    and incomplete."""
    if row.kind == PUBLISHED:
        return row
    cells = {k: row.cells.get(k, Estimate(NAN, complete=False, note=NOT_RUN)) for k in keys}
    cells.update({k: c for k, c in row.cells.items() if k not in cells})
    return dataclasses.replace(row, cells=cells)
