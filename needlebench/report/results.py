"""Read per-sample results back from OpenCompass work dirs.

Our evaluator writes ``results/<model>/<dataset>.samples.jsonl`` beside
OpenCompass's own result file. Reports are built from those lines alone, so
they can be rebuilt from any finished or partial run: each line is read back
as a :class:`~needlebench.record.GradedSample` tagged with its model and
dataset, and every table computes over those records. Bad or half-written
files are reported as warnings; they never stop a report.

What a dataset was planned to hold comes from the run's plan (``needlebench_plan.json``, each model's
``planned``), never from the records that could be read: a planned sample whose line cannot be read
back (not JSON, not a record, or missing from its dataset's file) becomes a record of its own, unscored
as ``unreadable`` and placed in its cell by the plan, so its cell is counted whole and marked incomplete.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..aggregate.effective_length import EffectiveRule
from ..errors import ConfigError
from ..jsonl import BadLine, iter_jsonl
from ..planning.costs import Prices
from ..planning.run import ModelRun
from ..planning.variants import Variant
from ..record import GradedSample
from ..runfolder.plan_file import PLAN_FILE, StoredPlan
from ..runfolder.retries import retry_totals
from ..tasks import get_task, task_names

__all__ = ["RunResults", "Overlength", "Planned", "load_results", "run_dirs", "check_comparable"]


@dataclass(frozen=True)
class Overlength:
    """One (model, dataset) over-length entry of a run's plan (``ModelRun.overlength``): the prompts cut or skipped.

    Attributes:
        model: the model (labelled like its records: with its work dir's name when comparing dirs).
        dataset: the dataset's abbr.
        task: the dataset's task, where the entry records it.
        lang: the dataset's language, where the entry records it.
        policy: ``shorten`` or ``skip``.
        max_prompt_tokens: the model's room in cl100k tokens.
        shortened: how many prompts were shortened.
        skipped: how many were skipped.
        shortened_cells: ``(coarse coordinate, depth, count)`` per shortened cell (length, N or k first).
        skipped_cells: the same for the skipped cells.
    """

    model: str
    dataset: str
    task: str | None = None
    lang: str | None = None
    policy: str | None = None
    max_prompt_tokens: int | None = None
    shortened: int = 0
    skipped: int = 0
    shortened_cells: tuple[tuple[Any, Any, int], ...] = ()
    skipped_cells: tuple[tuple[Any, Any, int], ...] = ()

    def table_row(self) -> dict[str, Any]:
        """The entry as the report's over-length table shows it (its cells as ``length/depth``)."""
        cells = [
            f"{c[0]}/{c[1]}" if c[1] is not None else str(c[0]) for c in self.shortened_cells or self.skipped_cells
        ]
        return {
            "model": self.model,
            "dataset": self.dataset,
            "policy": self.policy,
            "max_prompt_tokens": self.max_prompt_tokens,
            "shortened": self.shortened,
            "skipped": self.skipped,
            "cells (length/depth)": ", ".join(cells),
        }


@dataclass(frozen=True)
class Planned:
    """One (model, dataset) of a run's plan: the samples it was planned to hold, before any limit.

    Attributes:
        model: the model (labelled like its records).
        dataset: the dataset's abbr.
        task: the dataset's task.
        lang: its language.
        cells: ``(coarse coordinate, depth, count)`` per cell (length, N or k first).
        fields: the record keys every one of its samples holds with one value (profile, protocol, ...).
    """

    model: str
    dataset: str
    task: str
    lang: str
    cells: tuple[tuple[Any, Any, int], ...]
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunResults:
    """Every graded sample found, tagged with its model and dataset, and the runs they came from."""

    records: list[GradedSample] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    overlength: list[Overlength] = field(default_factory=list)
    plan: list[Planned] = field(default_factory=list)
    budgets: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, dataset) -> max_out_len, from the plan
    claimed: dict[str, int] = field(default_factory=dict)  # model -> the largest max_seq_len its plan holds
    effective_rule: EffectiveRule = field(default_factory=EffectiveRule)  # how effective lengths are read
    claimed_given: dict[str, int] = field(default_factory=dict)  # claimed lengths given explicitly (over the plan's)
    # (model, task, lang, cell) -> (samples past the model's context window, the window said), from the plan
    beyond: dict[tuple[str, str, str, Any], tuple[int, str]] = field(default_factory=dict)
    variants: dict[str, Variant] = field(default_factory=dict)  # model -> what it varies, from the plan
    model_plans: dict[str, ModelRun] = field(default_factory=dict)  # model -> its plan (devices, planned tokens)
    prices: Prices | None = None  # the prices the ledger's money is counted at, where given (report --prices)
    order: list[str] = field(default_factory=list)  # the models in their configs' order, from the plans
    adaptive: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # model -> its run's ladder settings

    def plan_entry(self, model: str, dataset: str) -> Planned | None:
        """One (model, dataset)'s planned cells, where the plan holds them.

        Args:
            model: the model (labelled like its records).
            dataset: the dataset's abbr.
        """
        return next((p for p in self.plan if p.model == model and p.dataset == dataset), None)

    def claim(self, given: Mapping[str, Any] | None) -> None:
        """Take the lengths models claim where given explicitly (a summarizer's ``claimed``, ``needlebench report
        --claimed``), over the plan's ``max_seq_len``.

        Args:
            given: model abbr -> claimed length in tokens.

        Raises:
            ConfigError: not a mapping of model names to positive whole numbers.
        """
        if not given:
            return
        if not isinstance(given, Mapping):
            raise ConfigError(f"claimed: {given!r}; a dict of model abbr -> claimed length in tokens")
        for model, n in given.items():
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise ConfigError(f"claimed {model!r}: {n!r}; a claimed length is a positive whole number of tokens")
            self.claimed_given[str(model)] = n
        self.claimed.update(self.claimed_given)

    def planned(self) -> dict[tuple[str, str, str, Any], int]:
        """Samples planned per (model, task, lang, cell), from the runs' plans (depths summed); the cell as in
        :meth:`skipped`. Empty for runs whose plan predates it: the tables then count what they find."""
        out: dict[tuple[str, str, str, Any], int] = defaultdict(int)
        for entry in self.plan:
            for coord, _depth, n in entry.cells:
                out[(entry.model, entry.task, entry.lang, coord)] += int(n)
        return dict(out)

    @property
    def models(self) -> list[str]:
        """The models with records, sorted."""
        return sorted({str(r.model) for r in self.records})

    @property
    def in_order(self) -> list[str]:
        """The models with records in their configs' order (as the plans list them), then any others, sorted."""
        found = set(self.models)
        return [m for m in dict.fromkeys(self.order) if m in found] + [m for m in self.models if m not in self.order]

    def skipped(self) -> dict[tuple[str, str, str, Any], int]:
        """Samples skipped as over length, per (model, task, lang, cell).

        The cell is the length for S-RT / M-RT / M-RS, the needle count N for
        ATC and k for NeedleChain (the partitioner's first coordinate); depths
        are summed. Datasets are matched to their task and language by their
        records, or by their abbr when every sample was skipped.
        """
        where: dict[tuple[str, str], tuple[str, str]] = {}
        for r in self.records:
            where.setdefault((str(r.model), str(r.dataset)), (r.task, r.lang))
        out: dict[tuple[str, str, str, Any], int] = defaultdict(int)
        for entry in self.overlength:
            found = (
                where.get((entry.model, entry.dataset))
                or ((entry.task, entry.lang or "en") if entry.task else None)
                or _task_lang_from_abbr(entry.dataset)
            )
            if found is None:
                continue
            for coord, _depth, n in entry.skipped_cells:
                out[(entry.model, found[0], found[1], coord)] += int(n)
        return dict(out)


def _task_lang_from_abbr(abbr: str) -> tuple[str, str] | None:
    """Task and language of an over-length entry written before entries recorded them (``needlebench_srt_en_4k``)."""
    names = "|".join(sorted(map(re.escape, task_names()), key=len, reverse=True))
    m = re.search(rf"(?:^|_)({names})_(en|zh)(?:_|$)", abbr)
    return (m.group(1), m.group(2)) if m else None


def run_dirs(path: Path) -> list[Path]:
    """A run folder (has results/) or a work dir holding timestamped runs, oldest first."""
    if (path / "results").is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and (p / "results").is_dir())


def load_results(paths: list[Path], label_by_dir: bool = False) -> RunResults:
    """Collect records; a later run of the same (model, dataset) replaces an earlier one.

    Args:
        paths: work dirs, or run folders holding ``results/``; each is searched for per-sample files.
        label_by_dir: prefix each model name with its work dir's name, so the same model from two
            work dirs can be compared.

    Raises:
        ConfigError: a path does not exist.
    """
    out = RunResults()
    latest: dict[tuple[str, str], list[GradedSample]] = {}
    overlength: dict[tuple[str, str], Overlength] = {}
    plans: dict[tuple[str, str], Planned] = {}
    for root in paths:
        if not root.exists():
            raise ConfigError(f"work dir {root} does not exist")
        runs = run_dirs(root)
        if not runs:
            out.warnings.append(f"{root}: no OpenCompass results folder found")
            continue
        for run in runs:
            out.sources.append(str(run))
            prefix = f"{root.name}/" if label_by_dir else ""
            entries, budgets, cut, claimed = _read_plan(
                run / PLAN_FILE,
                out.warnings,
                prefix,
                out.beyond,
                out.variants,
                out.order,
                out.model_plans,
                out.adaptive,
            )
            out.claimed.update(claimed)
            for entry in cut:
                overlength[(entry.model, entry.dataset)] = entry
            planned = {(p.model, p.dataset): p for p in entries}
            plans.update(planned)
            out.budgets.update(budgets)
            for model_dir in sorted(p for p in (run / "results").iterdir() if p.is_dir()):
                files = sorted(model_dir.glob("*.samples.jsonl"))
                ours = {p.name.removesuffix(".samples.jsonl") for p in files}
                # a dataset's result file is <abbr>.json; a task's extra outputs are <abbr>.<name>.json
                foreign = [p.stem for p in model_dir.glob("*.json") if p.stem.split(".")[0] not in ours]
                if foreign:
                    out.warnings.append(f"{model_dir}: skipped {len(foreign)} non-needlebench result(s)")
                model = f"{root.name}/{model_dir.name}" if label_by_dir else model_dir.name
                for f in files:
                    dataset = f.name.removesuffix(".samples.jsonl")
                    bad: list[BadLine] = []
                    rows = _read_lines(f, model, dataset, bad)
                    rows += _unreadable(rows, planned.get((model, dataset)), overlength.get((model, dataset)), bad, f)
                    if bad:
                        out.warnings.append(_bad_lines_note(f, bad, (model, dataset) in planned))
                    if rows:
                        latest[(model, dataset)] = rows
            out.warnings.extend(_retry_notes(run, f"{root.name}/" if label_by_dir else ""))
    for rows in latest.values():
        out.records.extend(rows)
    out.overlength = list(overlength.values())
    out.plan = list(plans.values())
    if not out.records:
        out.warnings.append("no needlebench per-sample results found (results/<model>/<dataset>.samples.jsonl)")
    return out


def _retry_notes(run: Path, prefix: str) -> list[str]:
    """One line per model of a run whose failed requests were asked again (``retries.retry_totals``)."""
    notes = []
    folder = run / "predictions"
    for model_dir in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else ():
        totals = retry_totals(model_dir)
        if totals["asked_again"]:
            notes.append(
                f"{prefix}{model_dir.name}: {totals['asked_again']} failed requests asked again (in up to "
                f"{totals['passes']} passes after the first); {totals['still_failed']} still failed"
            )
    return notes


def _read_lines(path: Path, model: str, dataset: str, bad: list[BadLine]) -> list[GradedSample]:
    """The graded samples of one ``samples.jsonl``, tagged with their model and dataset.

    Lines are split at ``"\\n"`` alone (:mod:`needlebench.jsonl`): a record whose text holds U+2028 or
    another separator is one record. A line that is not a graded sample (not JSON, no ``task`` or
    ``score``, a record that does not hold together) goes to ``bad``; an unreadable file is one bad line 0.
    """
    rows = []
    try:
        for number, row in iter_jsonl(path, bad):
            try:
                if not (isinstance(row, dict) and "task" in row and "score" in row):
                    raise ValueError("not a graded sample")
                rows.append(GradedSample.from_json({**row, "model": model, "dataset": dataset}))
            except (ValueError, TypeError) as exc:
                bad.append(BadLine(path, number, str(exc)))
    except OSError as exc:
        bad.append(BadLine(path, 0, f"unreadable file: {exc}"))
    return rows


def _unreadable(
    rows: list[GradedSample], plan: Planned | None, over: Overlength | None, bad: list[BadLine], path: Path
) -> list[GradedSample]:
    """A record for each planned sample of a dataset that its file does not give back, in its planned cell.

    Per cell: planned - skipped as over length - records read. The file is written whole by the eval task,
    so what it lacks was lost (a line that is not JSON, or one removed), not still to come.

    Args:
        rows: the records read from the dataset's file.
        plan: the dataset's planned cells (None: a run whose plan predates them; nothing can be placed).
        over: the dataset's over-length entry (its skipped cells were never sent, so have no record).
        bad: the file's lines that could not be read, named in each record's detail.
        path: the file.
    """
    if plan is None:
        return []
    spec = get_task(plan.task)
    found: dict[tuple[Any, Any], int] = defaultdict(int)
    for r in rows:
        found[spec.cell_of(r.fields)] += 1
    for coord, depth, n in over.skipped_cells if over else ():
        found[(coord, depth)] += int(n)
    detail = "; ".join(str(b) for b in bad[:3]) or f"{path}: no record for this planned sample"
    out = []
    for coord, depth, n in plan.cells:
        cell = {k: v for k, v in zip(spec.cell, (coord, depth))}
        for i in range(int(n) - found.get((coord, depth), 0)):
            out.append(
                GradedSample(
                    id=f"unreadable:{plan.dataset}:{coord}:{depth}:{i}",
                    task=plan.task,
                    lang=plan.lang,
                    fields={**plan.fields, **cell},
                    unscored="unreadable",
                    error="unreadable",
                    error_detail=detail[:500],
                    model=rows[0].model if rows else plan.model,
                    dataset=plan.dataset,
                )
            )
    return out


def _bad_lines_note(path: Path, bad: list[BadLine], placed: bool) -> str:
    """The report's warning for a file with lines that could not be read: how many, and the first few."""
    where = ", ".join(str(b.number) for b in bad[:5]) + (", ..." if len(bad) > 5 else "")
    then = (
        "their samples are counted as unreadable in their cells"
        if placed
        else "the run has no plan to place them, so the tables count fewer samples than were planned"
    )
    return f"{path}: {len(bad)} line(s) could not be read (line {where}; first: {bad[0].reason[:120]}); {then}"


def _read_plan(
    path: Path,
    warnings: list[str],
    prefix: str = "",
    beyond: dict[tuple[str, str, str, Any], tuple[int, str]] | None = None,
    variants: dict[str, Variant] | None = None,
    order: list[str] | None = None,
    model_plans: dict[str, ModelRun] | None = None,
    adaptive: dict[str, Mapping[str, Any]] | None = None,
) -> tuple[list[Planned], dict[tuple[str, str], int], list[Overlength], dict[str, int]]:
    """What the reports take from a run's plan (``runfolder.plan_file``): each (model, dataset)'s planned cells
    (none where the plan predates them), its output budget (``max_out_len``: its limit's ``out_len``, where
    set), which the reports name where answers were cut off at it (:mod:`needlebench.report.cutoff`), and the
    cells its limit shortened or skipped, and each model's claimed length (the largest ``max_seq_len`` of its
    limits). A plan that cannot be read gives none, with a warning.

    Each over-length entry keeps the per-cell lists ([length or N or k, depth, count]) so each summary cell
    gets its own skipped count; ``prefix`` labels the model like its records (work dir name when comparing dirs).
    ``beyond`` collects the cells whose prompts went past a model's context window (a run under
    ``runtime(beyond_window="mark")``), per (model, task, lang, cell): their count and the window. ``adaptive``
    collects each model's ladder settings, where its run is adaptive.
    """
    if not path.is_file():
        return [], {}, [], {}
    try:
        plan = StoredPlan.from_json(path.read_text(encoding="utf-8")).plan
        planned = [
            Planned(
                model=f"{prefix}{m.abbr}",
                dataset=abbr,
                task=info["task"],
                lang=info.get("lang", "en"),
                cells=tuple((c[0], c[1], int(c[2])) for c in info["cells"]),
                fields=dict(info.get("fields") or {}),
            )
            for m in plan.models
            for abbr, info in m.planned.items()
            if info
        ]
        budgets = {
            (f"{prefix}{m.abbr}", str(abbr)): int(limit.out_len)
            for m in plan.models
            for abbr, limit in m.limits.items()
            if limit.out_len
        }
        overlength = [
            Overlength(
                model=f"{prefix}{m.abbr}",
                dataset=dataset,
                task=info.get("task"),
                lang=info.get("lang"),
                policy=info.get("policy"),
                max_prompt_tokens=info.get("max_prompt_tokens"),
                shortened=info.get("num_shortened", 0),
                skipped=info.get("num_skipped", 0),
                shortened_cells=tuple(tuple(c) for c in info.get("shortened", [])),
                skipped_cells=tuple(tuple(c) for c in info.get("skipped", [])),
            )
            for m in plan.models
            for dataset, info in m.overlength.items()
        ]
        claimed = {f"{prefix}{m.abbr}": max(x.max_seq_len for x in m.limits.values()) for m in plan.models if m.limits}
        for m in plan.models:
            for entry in m.beyond_window.values():
                for coord, n, _most in entry["cells"]:
                    key = (f"{prefix}{m.abbr}", entry["task"], entry.get("lang", "en"), coord)
                    if beyond is not None:
                        beyond[key] = (beyond.get(key, (0, ""))[0] + int(n), str(entry["window"]))
        for m in plan.models:
            if order is not None:
                order.append(f"{prefix}{m.abbr}")
            if model_plans is not None:
                model_plans[f"{prefix}{m.abbr}"] = m
            if adaptive is not None and plan.settings.adaptive is not None:
                adaptive[f"{prefix}{m.abbr}"] = dict(plan.settings.adaptive)
            if m.model_variant and variants is not None:
                v = Variant.from_dict(m.model_variant)
                variants[f"{prefix}{m.abbr}"] = dataclasses.replace(v, of=f"{prefix}{v.of}" if v.of else None)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        warnings.append(f"{path}: unreadable plan ({type(exc).__name__}: {exc}); planned counts are what was read")
        return [], {}, [], {}
    return planned, budgets, overlength, claimed


def check_comparable(records: Sequence[GradedSample]) -> None:
    """Refuse a results set that mixes dataset versions or models whose prompts differ.

    Why: a score difference between two prompt sets says nothing about the
    models. Records carry the dataset ``version``; ids carry a hash of the
    prompt, so the same config gives the same ids. For every dataset two
    models share, ids that only one has are fine (a partial run, a skipped
    sample) but ids on both sides that the other lacks mean different prompts.
    Shortened samples are left out: their prompt (and id) depends on the model; so are records that could
    not be read (their id is a stand-in).

    Raises:
        ConfigError: naming the versions, or the dataset, the counts and example ids.
    """
    versions: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.get("version") is not None:
            versions[str(r.fields["version"])].add(f"{r.model}:{r.dataset}")
    if len(versions) > 1:
        detail = "; ".join(f"version {v}: {', '.join(sorted(w)[:3])}" for v, w in sorted(versions.items()))
        raise ConfigError(f"results mix dataset versions {sorted(versions)} ({detail}); compare runs of one version")
    ids: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    version_of: dict[str, str] = {}
    for r in records:
        if not r.shortened and r.unscored != "unreadable":  # an unreadable record's id is not the sample's
            ids[str(r.dataset)][str(r.model)].add(r.id)
            version_of.setdefault(str(r.model), str(r.get("version", "unknown")))
    for dataset, per_model in sorted(ids.items()):
        models = sorted(per_model)
        for i, a in enumerate(models):
            for b in models[i + 1 :]:
                only_a, only_b = per_model[a] - per_model[b], per_model[b] - per_model[a]
                if only_a and only_b:
                    raise ConfigError(
                        f"{dataset}: {a} and {b} were given different prompts: {len(only_a)} ids only in {a} "
                        f"(e.g. {sorted(only_a)[0]}), {len(only_b)} only in {b} (e.g. {sorted(only_b)[0]}); "
                        f"versions {version_of[a]} and {version_of[b]}. Compare runs of the same config and version."
                    )


def recorded_prices(runs: Sequence[Path]) -> Prices | None:
    """The prices a run's own report counted its ledger's money at (``summary/results.json``), for a reader that
    shows its cost again (the leaderboard); None where its report had none.

    Args:
        runs: the run folders (:func:`run_dirs`); the first with recorded prices is read.
    """
    for run in runs:
        try:
            data = json.loads((run / "summary" / "results.json").read_text(encoding="utf-8")).get("prices")
            if isinstance(data, dict):
                return Prices.from_dict(data)
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            continue
    return None
