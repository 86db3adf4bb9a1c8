"""Tables, figures and one self-contained ``report.html`` from OpenCompass work dirs.

Used by the summarizer at the end of a run and by ``needlebench report`` to
rebuild or compare runs later. Missing cells stay missing; bad inputs
become warnings in the report, never a traceback.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.effective_length import EffectiveRule, length_text
from ..files import atomic_write
from ..planning.costs import Prices
from ..record import GradedSample
from ..tasks import all_tasks
from ..terminal import Counting
from . import figures, tables
from .axes import VIEWS, axis_curve_png, axis_table, variants_of
from .csp import page_head
from .cutoff import LEGEND, CutOff, grid_cut_offs
from .drilldown import SCRIPT, STYLE, Heatmap, SampleIndex, cell_key, drilldown_script, grid_html
from .forecast import FORECAST_TABLE, cost_forecast
from .ladder import ADAPTIVE_TABLE, ladder_decisions, ladder_table, ladder_views
from .ledger import LEDGER_TABLE, cost_grid, cost_ledger
from .results import RunResults, check_comparable, load_results

__all__ = ["build", "build_report", "write_report", "significance_lines", "how_to_read", "Report"]

_HOW_TO_READ = """
<p><b>How to read this.</b> Scores are percentages (0-100). {tasks}
Heatmaps show depth of the needle (rows; 0 = start of the document) against context length (columns);
the bottom row is the mean of each length; click a cell to list its samples (answer, gold, verdict, and the
haystack around each needle). Grey cells marked "-" were not run: they are missing, not zero.
<i>fmt_fail%</i> is the share of answers with no parsable final answer (for example no <code>\\boxed{{}}</code>).
<i>truncated%</i> is the share of answered samples whose output was cut off at its budget (a reasoning model that
spent it thinking) and <i>truncated</i> their count: scored as written under the reference protocol, as OpenCompass
scores them, or left out and also counted under <i>truncated_excluded</i> with <code>truncated="unscored"</code>; the note says how many, and how many outputs
left a <code>&lt;think&gt;</code> block open.
{overall}</p>
<p><b>Intervals and completeness.</b> The bracket under a score is its 95% bootstrap interval (1000 resamples of
the samples, seeded, so a rebuilt report shows the same). <span class='flag'>&dagger;</span> marks an incomplete
score; hover it or read the <i>note</i>. A prompt shortened to fit a model is never counted as its nominal length:
it is left out of that cell and of every total above it, and counted under <i>shortened</i>. Prompts skipped as
over length are counted under <i>skipped</i>; <i>planned</i> = scored + shortened + skipped. Comparisons
(<i>a - b</i>) pair the samples both runs scored with the same id; <i>significant</i> means the paired 95%
interval excludes 0.</p>
"""


def how_to_read(task_names: Sequence[str]) -> str:
    """The report's "How to read" part: the common rules, each shown task's own text, how the overall adds up.

    Every task sentence comes from its ``TaskSpec.report_text`` and the overall from the tasks' suite
    weights, so a new task explains itself and this text never names one.

    Args:
        task_names: the tasks the report shows (their texts appear in registry order).
    """
    specs = all_tasks()
    shown = " ".join(spec.report_text for spec in specs if spec.name in task_names and spec.report_text)
    weighted = [spec for spec in specs if spec.suite_weights]
    profiles = list(dict.fromkeys(p for spec in weighted for p in spec.suite_weights))
    parts = []
    for profile in profiles:
        members = [spec for spec in weighted if profile in spec.suite_weights]
        weights = " / ".join(f"{spec.suite_weights[profile]:.2g}" for spec in members)
        parts.append(f"overall ({profile}) weights {', '.join(spec.short for spec in members)} by {weights}")
    overall = f"The suite {'; the suite '.join(parts)}; each is shown for runs of its profile." if parts else ""
    return _HOW_TO_READ.format(tasks=shown, overall=overall)


@dataclass
class Report:
    """What a report holds, before it is written."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    provenance: str = ""  # which protocols, profiles and dataset versions made the samples
    heatmaps: list[Heatmap] = field(default_factory=list)  # shown as clickable grids (their PNGs in figures/)
    samples: SampleIndex = field(default_factory=SampleIndex)  # what the grids' cells list
    tasks: list[str] = field(default_factory=list)  # the tasks with records (their texts explain the page)


def provenance(records: Sequence[GradedSample]) -> str:
    """ "Protocol: reference (2,400 samples); ...; haystack corpus: ...": what made these scores.

    Haystack samples built from anything but OpenCompass's own files get a plain sentence saying their
    prompts are not OpenCompass's (same algorithm, different text), so nobody sets them beside a
    leaderboard number by mistake.
    """
    parts = []
    haystack = {spec.name for spec in all_tasks() if spec.family == "sparse"}  # the tasks with a corpus
    fields = (
        ("protocol", "Protocol"),
        ("profile", "profile"),
        ("version", "dataset version"),
        ("corpus", "haystack corpus"),
    )
    for key, label in fields:
        counts: dict[str, int] = {}
        for r in records:
            if key == "corpus" and r.task not in haystack:
                continue
            value = str(r.get(key) or "not recorded")
            counts[value] = counts.get(value, 0) + 1
        if counts:
            parts.append(f"{label}: " + ", ".join(f"{v} ({n:,} samples)" for v, n in sorted(counts.items())))
    text = "; ".join(parts) if records else ""
    other = sorted(
        {str(r.get("corpus")) for r in records if r.task in haystack}
        - {c for c in (str(r.get("corpus")) for r in records) if c.startswith("opencompass:")}
    )
    if other:
        text += (
            f". The haystack of {', '.join(other)} is not OpenCompass's (PaulGrahamEssays.jsonl, zh_finance.jsonl):"
            " these prompts are not OpenCompass's bytes; use corpus='opencompass' with its files for that"
        )
    return text


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def assemble(results: RunResults, progress: Counting | None = None) -> Report:
    """Compute every table and figure the records allow.

    Args:
        results: the records read back from one or more runs.
        progress: counts the heatmaps drawn (the slow part of a large report); none by default.
    """
    bar = progress or Counting("heatmaps", quiet=True)
    rep = Report(warnings=list(results.warnings), models=results.models, provenance=provenance(results.records))
    rep.tasks = sorted({r.task for r in results.records})
    models = rep.models
    if not results.records:
        return rep
    check_comparable(results.records)
    records = [r for r in results.records if r.counts]  # never at a nominal length, never unanswered
    skipped = results.skipped()
    if results.overlength:
        rep.tables["overlength"] = pd.DataFrame([o.table_row() for o in results.overlength])
    summary = tables.summary_table(results.records, models, skipped, results.planned(), results.beyond)
    views = ladder_views(results)
    if not summary.empty:
        rep.tables["needlebench_summary"] = summary
        rep.tables["needlebench_effective_length"] = tables.effective_length_table(
            results.records,
            models,
            skipped,
            results.planned(),
            results.effective_rule,
            results.claimed,
            results.beyond,
            ladder_decisions(views),
        )
    if views:
        rep.tables[ADAPTIVE_TABLE] = ladder_table(views)
    specs = all_tasks()
    for spec in specs:  # each task's own tables and figures, from all its records (it decides what counts)
        report = spec.aggregation().report
        mine = [r for r in results.records if r.task == spec.name]
        if report and mine:
            parts = report(mine, models, skipped)
            rep.tables.update(parts.tables)
            rep.figures.update(parts.figures)
    pairs = _axis_views(rep, results, specs, skipped)
    ledger = cost_ledger(results.records, results.models, results.model_plans, results.prices)
    if not ledger.empty:
        rep.tables[LEDGER_TABLE] = ledger
        forecast = cost_forecast(results)
        if not forecast.empty:  # an estimate beside the measured ledger, never in results.json
            rep.tables[FORECAST_TABLE] = forecast
    for spec in specs:
        answered = [r for r in results.records if r.task == spec.name and r.answered]  # cut off and left out too
        for lang in sorted({r.lang for r in answered}):
            for m in models:
                members = tables.grid_members(records, m, spec, lang)
                cut = grid_cut_offs(answered, m, spec, lang, results.budgets)
                if not members and not cut:
                    continue
                g = _with_cells(tables.grid_frame(members), cut)
                label, key = f"{spec.short} {lang.upper()} - {m}", f"heatmap_{spec.name}_{lang}_{_safe(m)}"
                blank = "not\nsampled" if m in results.adaptive else "-"  # an adaptive run's cell no round asked
                rep.figures[key] = figures.heatmap_png(g, label, cut_off=cut, blank=blank)
                spent = cost_grid(members)
                if not spent.empty:  # beside it, what its cells cost (report/ledger.py)
                    title = f"{label}: wall seconds per request"
                    rep.figures[_cost_key(key)] = figures.heatmap_png(spent, title, unit="s")
                bar.update()
                cells = {cell_key(d, L): sorted({rep.samples.add(r) for r, _ in rs}) for (d, L), rs in members.items()}
                rep.heatmaps.append(Heatmap(key, label, g, cells, cut))
    if len(models) >= 2 and "needlebench_summary" in rep.tables:
        for base, other in pairs:
            diff = tables.difference_table(results.records, base, other, skipped)
            rep.tables[f"diff_{_safe(other)}_vs_{_safe(base)}"] = diff
            for spec in specs:
                for lang in sorted({r.lang for r in records if r.task == spec.name}):
                    a, b = tables.grid(records, base, spec, lang), tables.grid(records, other, spec, lang)
                    if a.empty or b.empty:
                        continue
                    rep.figures[f"diffmap_{spec.name}_{lang}_{_safe(other)}_vs_{_safe(base)}"] = figures.heatmap_png(
                        b.sub(a), f"{spec.short} {lang.upper()}: {other} - {base}", diverging=True
                    )
    return rep


def _axis_views(rep: Report, results: RunResults, specs: Sequence[Any], skipped: Any) -> list[tuple[str, str]]:
    """The view of every axis the run's models vary along (``report.axes``): its table, the score by value per
    task and language, and each task's own figures per series (M-RT's recall by needle position per ratio, the
    varied model beside). Returns the pairs the difference maps compare: each variant with the model it varies
    where that ran, the other models with the first of them in the configs' order."""
    variants = variants_of(results.variants, results.records)
    for axis, view in VIEWS.items():
        table = axis_table(results.records, variants, axis)
        if table.empty:
            continue
        rep.tables[view.table] = table
        for (base, task, lang), _ in table.groupby(["baseline", "task", "lang"]):
            curve = axis_curve_png(table, axis, base, task, lang) if base else None
            if curve is not None:
                rep.figures[f"{view.figure}_{_safe(task)}_{lang.lower()}_{_safe(base)}"] = curve
    groups: dict[tuple[str, str], list[str]] = {}
    for model, v in variants.items():
        groups.setdefault((v.of or "", v.series), []).append(model)
    for (base, series), members in sorted(groups.items()):
        shown = ([base] if base in rep.models else []) + sorted(members, key=lambda m: variants[m].value or 0.0)
        for spec in specs:
            report = spec.aggregation().report
            mine = [r for r in results.records if r.task == spec.name and r.model in shown]
            if report is None or not mine or len(shown) < 2:
                continue
            for name, figure in report(mine, shown, skipped).figures.items():
                rep.figures[f"{name}_{_safe(series.replace(' ', '_'))}_{_safe(base)}"] = figure
    order = results.in_order
    paired = [(v.of, m) for m in order if (v := variants.get(m)) is not None and v.of in order]
    rest = [m for m in order if m not in {other for _, other in paired}]
    return paired + [(rest[0], m) for m in rest[1:]]


def _with_cells(grid: pd.DataFrame, cut: Mapping[tuple[float | None, int], CutOff]) -> pd.DataFrame:
    """A heatmap's grid with a (NaN) cell for every cell whose answers were all cut off and left out
    (``truncated="unscored"``): such a cell reads "cut off", not "not run"."""
    depths = sorted({*map(float, grid.index), *(d for d, _ in cut if d is not None)})
    lengths = sorted({*map(int, grid.columns), *(L for _, L in cut)})
    if grid.empty:
        return pd.DataFrame(np.nan, index=depths, columns=lengths)
    return grid.reindex(index=depths, columns=lengths)


def _fmt(value: Any) -> str:
    """A table cell's text: two decimals for a number, yes/no for a flag, nothing where the value is absent."""
    if _missing(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return f"{value:.2f}"
    return html.escape(str(value))


def _missing(value: Any) -> bool:
    """An absent value as a table holds it: None, NaN, or pandas' NA (a whole-number column with holes)."""
    return pd.api.types.is_scalar(value) and bool(pd.isna(value))


def _is(value: Any, flag: bool) -> bool:
    """A real boolean equal to ``flag`` (not a missing value)."""
    return isinstance(value, (bool, np.bool_)) and bool(value) is flag


def _cell(row: dict[str, Any], column: str, marks: dict[str, tuple[str, str]]) -> str:
    """One table cell: the value, its interval beneath, a dagger if incomplete, a badge on notes."""
    text = _fmt(row[column])
    lo, hi = row.get(f"{column} ci_low"), row.get(f"{column} ci_high")
    if not (_missing(lo) or _missing(hi) or _missing(row[column])):
        bounds = ", ".join(str(v) if isinstance(v, (int, np.integer)) else f"{float(v):.1f}" for v in (lo, hi))
        text += f"<br><span class='ci' title='95% bootstrap interval'>[{bounds}]</span>"
    if column in marks and _is(row.get(marks[column][0]), False) and not _missing(row[column]):
        note = html.escape(str(row.get(marks[column][1]) or "incomplete"), quote=True)
        text += f"<span class='flag' title='{note}'>&dagger;</span>"
    if column == "significant" and _is(row[column], True):
        text = "<b>yes</b>"
    flagged = [c for c, (done, note) in marks.items() if note == column and _is(row.get(done), False)]
    if flagged and row[column] and not str(row[column]).startswith("incomplete"):
        text = f"<span class='badge'>incomplete</span> {text}"
    return f"<td>{text}</td>"


def _header(column: Any, models: Sequence[str]) -> str:
    """A column's heading: with one model, its name once (on the value column), not before every count."""
    text = str(column)
    if len(models) == 1 and text.startswith(f"{models[0]} "):
        text = text[len(models[0]) + 1 :]
    return html.escape(text)


def _html_table(df: pd.DataFrame, models: Sequence[str] = ()) -> str:
    """An HTML table; interval and ``complete`` columns fold into the value cells they belong to.

    Args:
        df: the table (its ``attrs["marks"]`` name each value's ``complete`` and note columns).
        models: the report's models; with one, its name is not repeated before every column.
    """
    marks: dict[str, tuple[str, str]] = df.attrs.get("marks", {})
    folded = {c for c in df.columns if str(c).endswith((" ci_low", " ci_high"))} | {d for d, _ in marks.values()}
    shown = [c for c in df.columns if c not in folded]
    head = "".join(f"<th>{_header(c, models)}</th>" for c in shown)
    body = "".join(
        "<tr>" + "".join(_cell(row, c, marks) for c in shown) + "</tr>" for row in df.to_dict(orient="records")
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def effective_headline(df: pd.DataFrame) -> str:
    """The report's first answer: per model, up to what length it keeps its score, per task and language.

    One line per model, each task and language's effective length with its interval beside the claimed
    length; hovering a value shows the curve it comes from (each tested length's mean score).

    Args:
        df: the ``needlebench_effective_length`` table.
    """
    if df.empty:
        return ""
    lines = []
    for model, rows in df.groupby("model", sort=False):
        items = []
        for r in rows.to_dict(orient="records"):
            ratio = r.get("effective/claimed")
            share = "" if ratio is None or pd.isna(ratio) else f" ({ratio:.0%} of claimed)"
            title = html.escape(
                f"{r['rule']} rule, bar {r['bar']:.1f}: {r['curve']}" if not pd.isna(r["bar"]) else r["curve"]
            )
            where = html.escape(f"{r['task']} {r['lang']}")
            value = html.escape(str(r["effective"]))
            items.append(f"<span title='{title}'>{where}: <b>{value}</b>{html.escape(share)}</span>")
        claimed = rows["claimed"].dropna()
        said = f" (claims {length_text(int(claimed.iloc[0]))})" if len(claimed) else ""
        lines.append(f"<li>{html.escape(str(model))}{html.escape(said)}: " + "; ".join(items) + "</li>")
    return (
        "<h2>Effective context length</h2><p>The largest tested length up to which the model keeps its score "
        f"({html.escape(str(df['rule'].iloc[0]))} rule; hover a value for its curve; "
        "<code>needlebench_effective_length.csv</code> has the intervals' ends and the edges).</p><ul>"
        + "".join(lines)
        + "</ul>"
    )


def _cost_key(heatmap: str) -> str:
    """The figure of what a heatmap's cells cost (``cost_<task>_<lang>_<model>``), named after the heatmap."""
    return f"cost_{heatmap.removeprefix('heatmap_')}"


def _image(name: str, png: bytes, cls: str = "") -> str:
    """A figure embedded in the page (the page holds everything it shows)."""
    data = base64.b64encode(png).decode("ascii")
    css = f" class='{cls}'" if cls else ""
    return f"<img{css} alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"


def _html(rep: Report, sources: list[str]) -> str:
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
        "font-size:12px;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
        "th{background:#eee}img{max-width:100%;border:1px solid #ddd;margin:.5em 0}"
        ".warn{color:#a40}.ci{color:#666;font-size:10px;white-space:nowrap}.flag{color:#b00;font-weight:bold;cursor:help}"
        ".badge{background:#fdd;color:#900;border-radius:3px;padding:0 3px;font-size:10px}"
        ".hmpair{display:flex;flex-wrap:wrap;align-items:flex-start;gap:1em}.hmcost{max-width:420px}" + STYLE
    )
    parts = [
        "<h1>NeedleBench report</h1>",
        f"<p>Models: {html.escape(', '.join(rep.models) or 'none')}. Sources: "
        f"{html.escape('; '.join(sources) or 'none')}</p>",
        f"<p class='provenance'>{html.escape(rep.provenance)}</p>",
        effective_headline(rep.tables.get("needlebench_effective_length", pd.DataFrame())),
        how_to_read(rep.tasks),
    ]
    if rep.warnings:
        parts.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li class='warn'>{html.escape(w)}</li>" for w in rep.warnings) + "</ul>"
        )
    for name, df in rep.tables.items():
        parts.append(f"<h2>{html.escape(name)}</h2>{_html_table(df, rep.models)}")
    if rep.heatmaps:
        parts.append("<h2>Heatmaps</h2>")
        if any(hm.cut_off for hm in rep.heatmaps):
            parts.append(LEGEND)
        for hm in rep.heatmaps:  # each with what its cells cost beside it, where the run kept costs
            spent = _cost_key(hm.key)
            beside = _image(spent, rep.figures[spent], "hmcost") if spent in rep.figures else ""
            parts.append(f"<div class='hmpair'>{grid_html(hm)}{beside}</div>")
        parts.append(drilldown_script(rep.heatmaps, rep.samples))
    shown = {hm.key for hm in rep.heatmaps} | {_cost_key(hm.key) for hm in rep.heatmaps}
    for name, png in rep.figures.items():
        if name in shown:
            continue
        parts.append(f"<h3>{html.escape(name)}</h3>{_image(name, png)}")
    body = "\n".join(parts)
    # the policy allows the drill-down script and these styles by hash, and nothing else (csp.py)
    head = page_head("NeedleBench report", body, [style], [SCRIPT] if rep.heatmaps else [])
    return f"{head}\n{body}\n</body></html>"


def write_report(rep: Report, out: Path, sources: list[str]) -> Path:
    """Write the report's tables as CSV, its figures as PNG and ``report.html`` into ``out``, each atomically.

    Args:
        rep: the assembled report.
        out: the output folder (created if missing); figures go to ``out/figures``.
        sources: the run folders the records came from, listed on the page.

    Returns:
        The path of ``report.html``.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, df in rep.tables.items():
        with atomic_write(out / f"{name}.csv") as tmp:
            df.to_csv(tmp, index=False, float_format="%.2f", na_rep="")
    for name, png in rep.figures.items():
        with atomic_write(out / "figures" / f"{name}.png") as tmp:
            tmp.write_bytes(png)
    path = out / "report.html"
    with atomic_write(path) as tmp:
        tmp.write_text(_html(rep, sources), encoding="utf-8")
    return path


def build(
    paths: list[Path],
    out: Path | None = None,
    quiet: bool = True,
    rule: EffectiveRule | None = None,
    claimed: Mapping[str, int] | None = None,
    prices: Prices | None = None,
) -> tuple[Path, Report]:
    """Rebuild everything from work dirs; the page written and what it holds (and, for one run, ``results.json``).

    Args:
        paths: work dirs; two or more are compared model by model (paired over matching sample ids).
        out: output folder (default: the first dir's ``needlebench_report``).
        quiet: no progress display (it shows only on a terminal anyway).
        rule: how effective lengths are read (default: ``EffectiveRule()``, the relative rule).
        claimed: model -> the length it claims, over its ``max_seq_len`` in the run's plan.
        prices: the prices the ledger's money is counted at (``planning.costs.load_prices``); None: none.

    Raises:
        ConfigError: the dirs mix dataset versions or their prompts differ.
    """
    results = load_results(paths, label_by_dir=len(paths) > 1)
    results.effective_rule = rule or EffectiveRule()
    results.claim(claimed)
    results.prices = prices
    with Counting("heatmaps", quiet=quiet) as bar:
        rep = assemble(results, bar)
    target = out or (paths[0] / "needlebench_report")
    page = write_report(rep, target, results.sources)
    if len(paths) == 1 and results.records:  # one run: its result bundle beside its tables (not for comparisons)
        from .bundle import write_bundle

        write_bundle(paths[0], target, results.effective_rule, results.claimed_given, prices)
    return page, rep


def build_report(
    paths: list[Path],
    out: Path | None = None,
    rule: EffectiveRule | None = None,
    claimed: Mapping[str, int] | None = None,
    prices: Prices | None = None,
) -> Path:
    """Rebuild everything from work dirs; two or more dirs are compared model by model.

    Args:
        paths: the work dirs (see :func:`build`).
        out: output folder (default: the first dir's ``needlebench_report``).
        rule: how effective lengths are read (see :func:`build`).
        claimed: claimed lengths given explicitly (see :func:`build`).
        prices: the prices the ledger's money is counted at (see :func:`build`).

    Returns:
        The path of ``report.html``.
    """
    return build(paths, out, rule=rule, claimed=claimed, prices=prices)[0]


def significance_lines(rep: Report) -> list[str]:
    """One line per comparison: how many summary rows differ significantly (for the terminal)."""
    lines = []
    for name, df in rep.tables.items():
        if name.startswith("diff_") and "significant" in df:
            rows = df[df["significant"]]
            shown = ", ".join(f"{r.task} {r.lang} {r.length}" for r in rows.head(5).itertuples())
            more = f" (e.g. {shown})" if shown else ""
            lines.append(f"{name}: {len(rows)} of {len(df)} rows differ significantly (paired 95% bootstrap){more}")
    return lines
