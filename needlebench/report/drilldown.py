"""From a heatmap cell to its samples: clickable grids in ``report.html`` and the compact sample list behind them.

A heatmap in the page is an HTML grid coloured like the PNG one; clicking a cell lists
its samples: id, depth(s), realised length, the model's answer (cut short; reasoning a server returned
apart folded under it), the gold,
the verdict and error class, and the haystack around each needle with the needle
marked. The page stays self-contained (plain JavaScript inline, no network) and small:
no prompt is embedded, only the few hundred characters around each needle, and the
sample list is gzip-compressed JSON that the browser unpacks on the first click.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..aggregate.effective_length import length_text
from ..aggregate.plots import pyplot
from ..grading.evaluation import CONTEXT_CHARS, GOLD_CHARS
from ..record import GradedSample
from ..tasks import get_task, task_names
from .cutoff import COLOUR, MARK, CutOff
from .cutoff import STYLE as CUT_STYLE

__all__ = ["Heatmap", "SampleIndex", "grid_html", "drilldown_script", "ANSWER_CHARS", "SCRIPT"]

ANSWER_CHARS = 240  # of the model's answer shown (the samples.jsonl keeps 4000)
REASONING_CHARS = 1200  # of reasoning a server returned apart, shown folded under the answer


def _cut(text: Any, limit: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit:,} more characters]"


@dataclass
class SampleIndex:
    """The samples the page can list, each once, in the order first met."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    _at: dict[int, int] = field(default_factory=dict)

    def add(self, record: GradedSample) -> int:
        """The index of ``record`` in the list, adding its compact form the first time.

        Args:
            record: a graded sample read back from ``<dataset>.samples.jsonl``.
        """
        key = id(record)
        if key not in self._at:
            self._at[key] = len(self.rows)
            self.rows.append(_compact(record))
        return self._at[key]

    def payload(self) -> str:
        """The list as base64 of gzip-compressed JSON (what the page embeds)."""
        raw = json.dumps(self.rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _compact(r: GradedSample) -> dict[str, Any]:
    where = get_task(r.task).aggregation().needle_depths if r.task in task_names() else None
    depths = where(r) if where else []
    context = [
        [str(before)[-CONTEXT_CHARS:], str(needle), str(after)[:CONTEXT_CHARS]]
        for before, needle, after in r.context or ()
    ]
    out = {
        "id": r.id,
        "dataset": r.dataset or "",
        "length": r.get("length"),
        "tokens": r.get("prompt_tokens"),
        "needle_depths": depths,
        "score": r.score,
        "correct": r.correct,
        "error": "; ".join(filter(None, (r.error, _ending(r)))),
        "answer": _cut(r.prediction, ANSWER_CHARS),
        "gold": _cut(r.gold, GOLD_CHARS),
        "context": context,
    }
    if r.output.reasoning is not None:  # only where a server returned reasoning apart: the page stays as small
        out["reasoning"] = _cut(r.output.reasoning, REASONING_CHARS)
    return out


def _ending(r: GradedSample) -> str:
    """How the output ended, where it matters: cut off at its budget, or a think block left open."""
    parts = [f"cut off at {r.output.output_tokens} tokens"] if r.output.truncated else []
    parts += ["no answer: budget ran out while reasoning"] if r.output.ran_out_reasoning else []
    return ", ".join(parts + (["think block open"] if r.output.think_unclosed else []))


@dataclass
class Heatmap:
    """One clickable heatmap: its grid of means and the samples of each cell.

    Attributes:
        key: the figure's name (its PNG is ``figures/<key>.png``).
        title: what it shows (task, language, model).
        grid: mean score, depth (rows) x length (columns).
        cells: ``"depth|length"`` -> indices into the page's :class:`SampleIndex`.
        cut_off: (depth, length) -> how many of the cell's answers were cut off at their budget, for the
            cells with any (depth None: a length's mean); such a cell carries a mark
            (:mod:`needlebench.report.cutoff`).
    """

    key: str
    title: str
    grid: pd.DataFrame
    cells: dict[str, list[int]]
    cut_off: dict[tuple[float | None, int], CutOff] = field(default_factory=dict)


def cell_key(depth: float, length: int) -> str:
    """How a cell is named in the page (``"50|4000"``).

    Args:
        depth: the needle depth.
        length: the context length.
    """
    return f"{depth:g}|{int(length)}"


def _colour(value: float) -> str:
    if value is None or math.isnan(value):
        return "#dddddd"
    r, g, b, _ = pyplot().get_cmap("RdYlGn")(max(0.0, min(1.0, value / 100.0)))
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _grid_cell(value: float, cut: CutOff | None, classes: str = "", attrs: str = "", tip: str = "") -> str:
    """One heatmap cell: its score on its colour; with cut-off answers, their share in the corner and the count
    and budget in the hover text; with every answer cut off, a hatched ground of its own, and "cut off" instead of
    a score that says nothing (:meth:`CutOff.hides`)."""
    text = "-" if math.isnan(value) else f"{value:.0f}"
    colour = _colour(value)
    if cut is not None and cut.any:
        classes += " cut cutall" if cut.every else " cut"
        colour = COLOUR if cut.every else colour
        text = "cut off" if cut.hides(value) else text
        tip = f"{cut.title}; {tip}" if tip else cut.title
        text += f"<span class='cutmark'>{MARK} {cut.share}</span>"
    cls = f" class='{classes.strip()}'" if classes.strip() else ""
    title = f" title='{html.escape(tip, quote=True)}'" if tip else ""
    return f"<td{cls}{attrs}{title} style='background-color:{colour}'>{text}</td>"


def grid_html(hm: Heatmap) -> str:
    """The heatmap as an HTML grid; every cell with samples can be clicked.

    Args:
        hm: the heatmap.
    """
    head = "".join(f"<th>{length_text(int(c))}</th>" for c in hm.grid.columns)
    rows = []
    for depth, values in hm.grid.iterrows():
        cells = []
        for length, value in values.items():
            key = cell_key(float(depth), int(length))
            n = len(hm.cells.get(key, []))
            attrs = f" data-hm='{html.escape(hm.key, quote=True)}' data-cell='{key}'" if n else ""
            cut = hm.cut_off.get((float(depth), int(length)))
            cells.append(_grid_cell(value, cut, "hmc", attrs, f"{n} samples: click" if n else ""))
        rows.append(f"<tr><th>{float(depth):g}</th>{''.join(cells)}</tr>")
    means = hm.grid.mean(axis=0, skipna=True)
    rows.append(
        "<tr class='hmmean'><th>mean</th>"
        + "".join(_grid_cell(v, hm.cut_off.get((None, int(length)))) for length, v in means.items())
        + "</tr>"
    )
    return (
        f"<figure class='hm'><figcaption>{html.escape(hm.title)} (depth % by context length; "
        f"click a cell for its samples)</figcaption><table class='hmgrid'><thead><tr><th>depth</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></figure>"
    )


# the page's one script: its exact text is hashed into the page's Content-Security-Policy (csp.page_head)
SCRIPT = r"""
(function () {
  const meta = JSON.parse(document.getElementById('nb-cells').textContent);
  let samples = null;
  async function load() {
    if (samples) return samples;
    const bytes = Uint8Array.from(atob(document.getElementById('nb-samples').textContent.trim()), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    samples = JSON.parse(await new Response(stream).text());
    return samples;
  }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  async function show(hm, cell, td) {
    const all = await load();
    const rows = (meta[hm] || {})[cell] || [];
    const panel = document.getElementById('nb-drill');
    panel.replaceChildren();
    document.querySelectorAll('td.hmc.sel').forEach(x => x.classList.remove('sel'));
    td.classList.add('sel');
    const [depth, length] = cell.split('|');
    panel.appendChild(el('h3', meta._titles[hm] + ': length ' + length + ', depth ' + depth + ' (' + rows.length + ' samples)'));
    const table = el('table', null, 'drill');
    const head = el('tr');
    ['id', 'depth(s)', 'tokens', 'verdict', 'error', 'answer', 'gold', 'haystack around each needle'].forEach(h => head.appendChild(el('th', h)));
    table.appendChild(head);
    rows.forEach(i => {
      const s = all[i];
      const tr = el('tr', null, s.correct ? 'ok' : 'bad');
      tr.dataset.id = s.id;
      tr.appendChild(el('td', s.id, 'sid'));
      tr.appendChild(el('td', s.needle_depths.join(', ')));
      tr.appendChild(el('td', s.tokens));
      tr.appendChild(el('td', (s.correct ? 'correct' : 'wrong') + ' (' + Number(s.score).toFixed(0) + ')', 'verdict'));
      tr.appendChild(el('td', s.error));
      const answer = el('td', s.answer, 'text');
      if (s.reasoning !== null && s.reasoning !== undefined) {
        const fold = el('details', null, 'reasoning');
        fold.appendChild(el('summary', 'reasoning (returned apart)'));
        fold.appendChild(el('div', s.reasoning));
        answer.appendChild(fold);
      }
      tr.appendChild(answer);
      tr.appendChild(el('td', s.gold, 'text'));
      const ctx = el('td', null, 'text');
      s.context.forEach(([before, needle, after]) => {
        const p = el('p');
        p.appendChild(el('span', '...' + before));
        p.appendChild(el('mark', needle));
        p.appendChild(el('span', after + '...'));
        ctx.appendChild(p);
      });
      tr.appendChild(ctx);
      table.appendChild(tr);
    });
    panel.appendChild(table);
    panel.scrollIntoView({block: 'nearest'});
  }
  document.querySelectorAll('td.hmc[data-cell]').forEach(td => {
    td.addEventListener('click', () => show(td.dataset.hm, td.dataset.cell, td));
  });
})();
"""

STYLE = (
    ".hmgrid td,.hmgrid th{min-width:2.6em;text-align:center}.hmgrid td[data-cell]{cursor:pointer}"
    ".hmgrid td.sel{outline:3px solid #000}.hmmean td{font-weight:bold}figure.hm{display:inline-block;"
    "margin:0 1em 1em 0;vertical-align:top}#nb-drill table.drill td.text{text-align:left;max-width:28em;"
    "white-space:pre-wrap;word-break:break-word}#nb-drill tr.ok td.verdict{color:#060}#nb-drill tr.bad "
    "td.verdict{color:#a00}#nb-drill mark{background:#ff0;font-weight:bold}#nb-drill p{margin:.2em 0}" + CUT_STYLE
)


def drilldown_script(heatmaps: Sequence[Heatmap], index: SampleIndex) -> str:
    """The panel the samples are listed in, the embedded data and the inline script.

    Args:
        heatmaps: the clickable heatmaps of the page.
        index: every sample they refer to.
    """
    cells: dict[str, Any] = {hm.key: hm.cells for hm in heatmaps}
    cells["_titles"] = {hm.key: hm.title for hm in heatmaps}
    # no "<" at all inside the data block ("</script" and "<!--" could otherwise end or bend it): JSON's \u003c
    data = json.dumps(cells, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return (
        "<div id='nb-drill'><p><i>Click a heatmap cell to list its samples here.</i></p></div>"
        f"<script type='application/json' id='nb-cells'>{data}</script>"
        f"<script type='application/octet-stream' id='nb-samples'>{index.payload()}</script>"
        f"<script>{SCRIPT}</script>"
    )
