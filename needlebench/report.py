"""Tables, figures and one self-contained ``report.html`` from OpenCompass work dirs.

Used by the summarizer at the end of a run and by ``needlebench report`` to
rebuild or compare runs later. Missing cells stay missing; bad inputs
become warnings in the report, never a traceback.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import figures, tables
from .results import RunResults, load_results

__all__ = ["build_report", "write_report", "Report"]

_HOW_TO_READ = """
<p><b>How to read this.</b> Scores are percentages (0-100). S-RT asks for one hidden fact, M-RT for
several at once (score = share recalled), M-RS needs several facts combined (answer in <code>\\boxed{}</code>).
Heatmaps show depth of the needle (rows; 0 = start of the document) against context length (columns);
the bottom row is the mean of each length. Grey cells marked "-" were not run: they are missing, not zero.
<i>fmt_fail%</i> is the share of answers with no parsable final answer (for example no <code>\\boxed{}</code>).
ATC: accuracy per needle count N; <i>weighted</i> = sum(P_N * N) / sum(N); <i>weighted_short</i> uses N &lt;= 64;
ENL-50 is the largest N with accuracy of at least 50. NeedleChain: accuracy per chain variant, k and question,
with each wrong answer classified as instruction not followed, needle omission or calculation error.
Overall (v2) is the mean of S-RT, M-RT and M-RS; overall (v1) weights them 0.4 / 0.3 / 0.3.</p>
"""


@dataclass
class Report:
    """What a report holds, before it is written."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def assemble(results: RunResults) -> Report:
    """Compute every table and figure the records allow."""
    rep = Report(warnings=list(results.warnings), models=results.models)
    records = results.records
    models = rep.models
    if not records:
        return rep
    if results.overlength:
        rep.tables["overlength"] = pd.DataFrame(results.overlength)
    summary = tables.summary_table(records, models)
    if not summary.empty:
        rep.tables["needlebench_summary"] = summary
    atc = results.for_task("atc")
    if atc:
        rep.tables["needlebench_atc"] = tables.atc_table(atc, models)
        rep.figures["atc_accuracy_vs_needles"] = figures.atc_curve_png(atc, "ATC accuracy vs needle count")
    chain = results.for_task("needlechain")
    if chain:
        rep.tables["needlechain_summary"] = tables.chain_table(chain, models)
        for m in sorted({r["model"] for r in chain}):
            rep.figures[f"needlechain_accuracy_vs_k_{_safe(m)}"] = figures.chain_k_png(chain, m)
            rep.figures[f"needlechain_positions_{_safe(m)}"] = figures.chain_positions_png(chain, m)
    for task in tables.SPARSE_ORDER:
        for lang in sorted({r["lang"] for r in records if r["task"] == task}):
            for m in models:
                g = tables.grid(records, m, task, lang)
                if g.empty:
                    continue
                label = f"{tables.TASK_LABELS[task]} {lang.upper()} - {m}"
                rep.figures[f"heatmap_{task}_{lang}_{_safe(m)}"] = figures.heatmap_png(g, label)
    mrt = [r for r in records if r["task"] == "mrt"]
    if mrt:
        rep.figures["mrt_recall_by_position"] = figures.mrt_position_png(mrt, "M-RT recall by needle position")
    if len(models) >= 2 and "needlebench_summary" in rep.tables:
        base = models[0]
        for other in models[1:]:
            rep.tables[f"diff_{_safe(other)}_vs_{_safe(base)}"] = tables.difference_table(summary, base, other)
            for task in tables.SPARSE_ORDER:
                for lang in ("en", "zh"):
                    a, b = tables.grid(records, base, task, lang), tables.grid(records, other, task, lang)
                    if a.empty or b.empty:
                        continue
                    diff = b.sub(a)
                    rep.figures[f"diffmap_{task}_{lang}_{_safe(other)}_vs_{_safe(base)}"] = figures.heatmap_png(
                        diff, f"{tables.TASK_LABELS[task]} {lang.upper()}: {other} - {base}", diverging=True
                    )
    return rep


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.2f}"
    return html.escape(str(value))


def _html_table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html(rep: Report, sources: list[str]) -> str:
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>NeedleBench report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
        "font-size:12px;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}"
        "th{background:#eee}img{max-width:100%;border:1px solid #ddd;margin:.5em 0}"
        ".warn{color:#a40}</style></head><body>",
        "<h1>NeedleBench report</h1>",
        f"<p>Models: {html.escape(', '.join(rep.models) or 'none')}. Sources: "
        f"{html.escape('; '.join(sources) or 'none')}</p>",
        _HOW_TO_READ,
    ]
    if rep.warnings:
        parts.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li class='warn'>{html.escape(w)}</li>" for w in rep.warnings) + "</ul>"
        )
    for name, df in rep.tables.items():
        parts.append(f"<h2>{html.escape(name)}</h2>{_html_table(df)}")
    for name, png in rep.figures.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<h3>{html.escape(name)}</h3><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(rep: Report, out: Path, sources: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name, df in rep.tables.items():
        df.to_csv(out / f"{name}.csv", index=False, float_format="%.2f", na_rep="")
    fig_dir = out / "figures"
    if rep.figures:
        fig_dir.mkdir(exist_ok=True)
    for name, png in rep.figures.items():
        (fig_dir / f"{name}.png").write_bytes(png)
    path = out / "report.html"
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(_html(rep, sources), encoding="utf-8")
    tmp.replace(path)
    return path


def build_report(paths: list[Path], out: Path | None = None) -> Path:
    """Rebuild everything from work dirs; two or more dirs are compared model by model."""
    results = load_results(paths, label_by_dir=len(paths) > 1)
    rep = assemble(results)
    target = out or (paths[0] / "needlebench_report")
    return write_report(rep, target, results.sources)
