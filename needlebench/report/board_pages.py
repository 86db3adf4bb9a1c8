"""The leaderboard's files: ``leaderboard.csv``, ``leaderboard.md`` (paste-ready) and ``leaderboard.html``.

The CSV is for scripts: one line per row of every board, every number with its interval and completeness
in columns of their own, published numbers as printed. The Markdown is for pasting: one table per board,
each number with its interval, ``†`` on an incomplete number, and numbered footnotes that say why a row is
not comparable with the papers' rows or incomplete. The HTML page is self-contained (inline style and
script, no network) and every column sorts on a click.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

from ..aggregate.cells import Estimate
from ..files import atomic_write
from .csp import page_head
from .cutoff import LEGEND, LEGEND_TEXT, MARK
from .cutoff import STYLE as CUT_STYLE
from .leaderboard import PUBLISHED, SPENT, Board, Leaderboard, Row

__all__ = ["write_leaderboard", "leaderboard_csv", "leaderboard_markdown", "leaderboard_html", "number"]

_LABELS = ("suite", "lang", "protocol", "group")


def number(value: float) -> str:
    """A measured number as the tables print it (two decimals; empty when missing)."""
    return "" if math.isnan(value) else f"{value:.2f}"


def _shown(row: Row, key: str) -> str:
    """A cell's number: a published one as printed, a measured one with two decimals."""
    if row.kind == PUBLISHED:
        return row.printed.get(key, "")
    if key in row.texts:  # a length, shown as the papers write it
        return row.texts[key]
    cell = row.cells.get(key)
    return number(cell.value) if cell is not None else ""


def _interval(cell: Estimate | None) -> str:
    return f"[{cell.low:.2f}, {cell.high:.2f}]" if cell is not None and cell.has_interval else ""


def _comparable(row: Row) -> str:
    if row.kind == PUBLISHED:
        return "published"
    return row.comparability.text if row.comparability else "not comparable: not checked"


def _labels(boards: Sequence[Board]) -> list[str]:
    found = {k for b in boards for r in b.rows for k in r.labels}
    return [k for k in _LABELS if k in found] + sorted(found - set(_LABELS))


def _versus(row: Row) -> tuple[str, str, str, str]:
    """The paired difference with the row above: value, interval ends and whether it is significant."""
    v = row.versus
    if v is None:
        return "", "", "", ""
    significant = v.has_interval and (v.low > 0 or v.high < 0)
    return number(v.value), number(v.low), number(v.high), "yes" if significant else "no"


def leaderboard_csv(lb: Leaderboard) -> str:
    """Every row of every board as CSV text (see the module doc)."""
    import csv
    import io

    labels = _labels(lb.boards)
    keys = list(dict.fromkeys(k for b in lb.boards for k, _ in b.columns))
    head = ["board", "kind", "rank", "class", "model", "source", *labels, "comparable", "complete", "note"]
    head += ["planned", "scored"]
    for k in keys:
        head += [k, f"{k} ci_low", f"{k} ci_high", f"{k} complete"]
    head += ["vs above", "vs above ci_low", "vs above ci_high", "significant", "pairs", "vs row", "tied with"]
    head += [k for k, _ in SPENT]
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(head)
    for b in lb.boards:
        for r in b.rows:
            line = [b.title, r.kind, r.rank, r.rank_class, r.model, r.source]
            line += [r.labels.get(k, "") for k in labels]
            measured = r.kind != PUBLISHED
            line += [_comparable(r), str(r.complete) if measured else "", r.note]
            line += [str(r.planned) if measured else "", str(r.scored) if measured else ""]
            for k in keys:
                cell = r.cells.get(k)
                has = measured and cell is not None and cell.has_interval
                shown = _shown(r, k)
                if k in r.texts and cell is not None and cell.known:  # a length: the number, for a spreadsheet
                    shown = str(int(cell.value))
                line += [shown, number(cell.low) if has else "", number(cell.high) if has else ""]
                line += [str(cell.complete) if measured and cell is not None else ""]
            line += [*_versus(r), str(r.pairs) if r.versus is not None else "", r.versus_row, "; ".join(r.tied_with)]
            line += [number(r.spent[k]) if k in r.spent else "" for k, _ in SPENT]
            out.writerow(line)
    return buf.getvalue()


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def leaderboard_markdown(lb: Leaderboard) -> str:
    """One Markdown table per board with numbered footnotes on comparability and completeness."""
    parts = ["# NeedleBench leaderboard", ""]
    parts.append(
        "Scores in percent (ENL-50: a needle count) with their 95% bootstrap interval; † marks a number over "
        "fewer samples, cells or lengths than its label. Ranks compare measured rows of one class only (the "
        "letter; rows measured alike); rows whose intervals overlap share a rank. Published rows are the "
        "papers' numbers as printed and are never ranked."
    )
    parts.append("")
    if any(r.cut_off for b in lb.boards for r in b.rows):
        parts += [LEGEND_TEXT, ""]
    notes: dict[str, int] = {}

    def footnote(text: str) -> str:
        if not text:
            return ""
        notes.setdefault(text, len(notes) + 1)
        return f" [{notes[text]}]"

    labels = _labels(lb.boards)
    for b in lb.boards:
        parts += [f"## {b.title}", ""]
        if b.published:
            parts += [f"Published rows beside the measured ones: {', '.join(b.published)}.", ""]
        shown = [k for k in labels if any(r.labels.get(k) for r in b.rows)]
        spent = _spent_columns(b)
        head = ["rank", "model", "source", *shown, *(h for _, h in b.columns), "comparable", "vs above"]
        head += [h for _, h in spent]
        parts.append("| " + " | ".join(_md(h) for h in head) + " |")
        parts.append("|" + "---|" * len(head))
        for r in b.rows:
            rank = f"{r.rank}{r.rank_class}" if r.rank else ("published" if r.kind == PUBLISHED else "-")
            cells = []
            for k, _ in b.columns:
                text = _shown(r, k)
                cell = r.cells.get(k)
                if r.kind != PUBLISHED and cell is not None:  # an absent number: an empty cell, as everywhere
                    text = f"{text} {_interval(cell)}".strip() if text else ""
                    text += "†" if not cell.complete or (k == r.rank_by and not r.complete) else ""
                    cut = r.cut_off.get(k)
                    if cut is not None:
                        said = f"cut off ({text})" if text else "cut off"
                        text = f"{said if cut.hides(cell.value) else text} {MARK} {cut.share}".strip()
                cells.append(text)
            if r.kind == PUBLISHED:
                comparable = "published"
            else:
                said = _comparable(r) if r.comparability is None or not r.comparability.comparable else ""
                why = "; ".join(filter(None, [said, f"incomplete: {r.cell_notes}" if r.cell_notes else ""]))
                checked = r.comparability.checked if r.comparability and r.comparability.comparable else ""
                why = "; ".join(filter(None, [why, checked]))
                comparable = ("yes" if r.comparability and r.comparability.comparable else "no") + footnote(why)
            value, lo, hi, sig = _versus(r)
            bounds = f" [{lo}, {hi}]" if lo else ""
            versus = f"{value}{bounds}{' significant' if sig == 'yes' else ''}" if value else ""
            model = r.model + (footnote(f"tied with {', '.join(r.tied_with)}") if r.tied_with else "")
            line = [rank, model, r.source, *(r.labels.get(k, "") for k in shown), *cells, comparable, versus]
            line += [_spent_text(r, k) for k, _ in spent]
            parts.append("| " + " | ".join(_md(x) for x in line) + " |")
        parts.append("")
        if b.classes:
            parts += ["Rank classes: " + "; ".join(f"{k}: {v}" for k, v in b.classes.items()) + ".", ""]
    if notes:
        parts += ["## Notes", ""]
        parts += [f"[{n}] {_md(text)}  " for text, n in notes.items()]
        parts.append("")
    if lb.warnings:
        parts += ["## Warnings", ""] + [f"- {_md(w)}" for w in lb.warnings] + [""]
    parts += ["Sources: " + "; ".join(lb.sources), ""]
    return "\n".join(parts)


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1600px}table{border-collapse:collapse;font-size:12px;"
    "margin:1em 0}td,th{border:1px solid #bbb;padding:2px 6px;text-align:right;vertical-align:top}"
    "th{background:#eee;cursor:pointer;user-select:none}th[aria-sort=ascending]::after{content:' \\25B2'}"
    "th[aria-sort=descending]::after{content:' \\25BC'}td.text{text-align:left}tr.published td{background:#f6f6fb;"
    "color:#333;font-style:italic}.ci{color:#666;font-size:10px;white-space:nowrap}.flag{color:#b00;"
    "font-weight:bold;cursor:help}.badge{border-radius:3px;padding:0 3px;font-size:10px}.no{background:#fdd;"
    "color:#900}.yes{background:#dfd;color:#060}.pub{background:#dde;color:#335}.warn{color:#a40}"
    ".why{color:#555;font-size:10px}" + CUT_STYLE
)

# sorts a table by the clicked column: numbers as numbers (empty cells last), text as text; again reverses
_SCRIPT = """
document.querySelectorAll('table.board').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var down = th.getAttribute('aria-sort') !== 'descending';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-sort'), y = b.cells[col].getAttribute('data-sort');
        if (x === '' && y === '') return 0;
        if (x === '') return 1;
        if (y === '') return -1;
        var nx = Number(x), ny = Number(y), cmp;
        if (!isNaN(nx) && !isNaN(ny)) { cmp = nx - ny; } else { cmp = x < y ? -1 : (x > y ? 1 : 0); }
        return down ? -cmp : cmp;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _td(text: str, sort: str, numeric: bool = True, title: str = "") -> str:
    tip = f" title='{html.escape(title, quote=True)}'" if title else ""
    cls = "" if numeric else " class='text'"
    return f"<td{cls} data-sort='{html.escape(sort, quote=True)}'{tip}>{text}</td>"


def _html_cell(r: Row, key: str) -> str:
    cell = r.cells.get(key)
    cut = r.cut_off.get(key)
    if cell is None or not cell.known:
        if cut is not None and cut.every:  # every answer cut off and left out: cut off, not a missing number
            mark = f"<span class='cutmark' title='{html.escape(cut.title, quote=True)}'>{MARK} {cut.share}</span>"
            return _td(f"<span class='cutall'>cut off</span><br>{mark}", "", title=cut.title)
        return _td("", "")  # an absent number: an empty cell
    text = html.escape(_shown(r, key))
    if cut is not None and cut.hides(cell.value):  # a score that says nothing about the answers: it reads so
        text = f"<span class='cutall'>cut off</span> <span class='ci'>({text})</span>"
    if r.kind != PUBLISHED:
        if cell.has_interval:
            text += f"<br><span class='ci' title='95% bootstrap interval'>{_interval(cell)}</span>"
        if not cell.complete or (key == r.rank_by and not r.complete):  # a row short of its suite: its rank number
            note = html.escape(cell.note if not cell.complete else r.note, quote=True)
            text += f"<span class='flag' title='{note or 'incomplete'}'>&dagger;</span>"
    if cut is not None:
        text += f"<br><span class='cutmark' title='{html.escape(cut.title, quote=True)}'>{MARK} {cut.share}</span>"
        return _td(text, repr(cell.value), title=cut.title)
    return _td(text, repr(cell.value))


def _spent_columns(b: Board) -> list[tuple[str, str]]:
    """The run-cost columns a board shows: those any of its rows has a number for (``leaderboard.SPENT``)."""
    return [(k, h) for k, h in SPENT if any(k in r.spent for r in b.rows)]


def _spent_text(r: Row, key: str) -> str:
    return f"{r.spent[key]:.4g}" if key in r.spent else ""


def _html_row(b: Board, r: Row, labels: list[str], spent: Sequence[str] = ()) -> str:
    published = r.kind == PUBLISHED
    rank = "" if published else (f"{r.rank}<sup>{r.rank_class}</sup>" if r.rank else "-")
    tip = b.classes.get(r.rank_class, "") if r.rank else ""
    cells = [_td(rank, r.rank, title=tip)]
    badge = "<span class='badge pub'>published</span> " if published else ""
    tied = f"<br><span class='why'>tied with {html.escape(', '.join(r.tied_with))}</span>" if r.tied_with else ""
    cells.append(_td(badge + html.escape(r.model) + tied, r.model, numeric=False))
    cells.append(_td(html.escape(r.source), r.source, numeric=False))
    cells += [_td(html.escape(r.labels.get(k, "")), r.labels.get(k, ""), numeric=False) for k in labels]
    cells += [_html_cell(r, k) for k, _ in b.columns]
    if published:
        cells.append(_td("<span class='badge pub'>published</span>", "published", numeric=False))
    else:
        ok = r.comparability is not None and r.comparability.comparable
        reasons = "; ".join(r.comparability.reasons) if r.comparability else "not checked"
        text = f"<span class='badge {'yes' if ok else 'no'}'>{'comparable' if ok else 'not comparable'}</span>"
        text += "" if ok else f"<br><span class='why'>{html.escape(reasons)}</span>"
        if r.cell_notes:
            text += f"<br><span class='why'>incomplete: {html.escape(r.cell_notes)}</span>"
        cells.append(_td(text, "comparable" if ok else "not comparable", numeric=False))
    value, lo, hi, sig = _versus(r)
    if value:
        bounds = f"<br><span class='ci'>[{lo}, {hi}]</span>" if lo else ""
        text = value + bounds + (" <b>significant</b>" if sig == "yes" else "")
        cells.append(_td(text, value, title=f"paired over {r.pairs} samples with {r.versus_row}"))
    else:
        cells.append(_td("", ""))
    cells += [_td(_spent_text(r, k), repr(r.spent[k]) if k in r.spent else "") for k in spent]
    return f"<tr class='{'published' if published else 'measured'}'>" + "".join(cells) + "</tr>"


def leaderboard_html(lb: Leaderboard) -> str:
    """The self-contained page: one sortable table per board."""
    labels = _labels(lb.boards)
    parts = [
        "<h1>NeedleBench leaderboard</h1>",
        "<p>Scores in percent (ENL-50: a needle count). Under each number its 95% bootstrap interval; "
        "<span class='flag'>&dagger;</span> marks a number over fewer samples, cells or lengths than its label "
        "(hover it for why). Ranks compare measured rows of one class (the letter: rows measured alike) and "
        "never published rows; rows whose intervals overlap share a rank. <i>vs above</i> is the paired "
        "difference with the row ranked just above, over the samples both scored. Click a column to sort.</p>",
    ]
    if any(r.cut_off for b in lb.boards for r in b.rows):
        parts.append(LEGEND)
    if lb.warnings:
        parts.append("<ul>" + "".join(f"<li class='warn'>{html.escape(w)}</li>" for w in lb.warnings) + "</ul>")
    for b in lb.boards:
        shown = [k for k in labels if any(r.labels.get(k) for r in b.rows)]
        parts.append(f"<h2>{html.escape(b.title)}</h2>")
        if b.published:
            parts.append(f"<p>Published rows: {html.escape(', '.join(b.published))}.</p>")
        spent = _spent_columns(b)
        head = ["rank", "model", "source", *shown, *(h for _, h in b.columns), "comparable", "vs above"]
        head += [h for _, h in spent]
        parts.append("<table class='board'><thead><tr>")
        parts.append("".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>")
        parts.extend(_html_row(b, r, shown, [k for k, _ in spent]) for r in b.rows)
        parts.append("</tbody></table>")
        if b.classes:
            items = "".join(f"<li><b>{k}</b>: {html.escape(v)}</li>" for k, v in b.classes.items())
            parts.append(f"<p>Rank classes:</p><ul>{items}</ul>")
    parts.append(f"<p>Sources: {html.escape('; '.join(lb.sources))}</p>")
    parts.append(f"<script>{_SCRIPT}</script>")
    body = "\n".join(parts)
    # the policy allows the sorting script and the style by hash, and nothing else (csp.py)
    return f"{page_head('NeedleBench leaderboard', body, [_STYLE], [_SCRIPT])}\n{body}\n</body></html>"


def write_leaderboard(lb: Leaderboard, out: Path) -> dict[str, Path]:
    """Write ``leaderboard.csv``, ``leaderboard.md`` and ``leaderboard.html`` into ``out``, each atomically.

    Args:
        lb: the leaderboard.
        out: the folder (created if missing).

    Returns:
        The paths written, by format.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for suffix, text in (
        ("csv", leaderboard_csv(lb)),
        ("md", leaderboard_markdown(lb)),
        ("html", leaderboard_html(lb)),
    ):
        path = out / f"leaderboard.{suffix}"
        with atomic_write(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        written[suffix] = path
    return written
