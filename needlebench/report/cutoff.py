"""Cut-off marks: a score whose samples include outputs cut off at their output budget says so where it stands.

An answer cut off at ``max_out_len`` tokens is graded as written (reference protocol), so on a heatmap or a
leaderboard it reads as a wrong one: a solid 0 tells a reader the model cannot find the needle when it
never got to say. The summary table's note already counts them; the numbers a reader looks at first carry
it too. Every cell holding cut-off outputs gets a mark with their share (``✂ 3/6``) and a hover text naming
the count and the budget; a cell whose every answer was cut off stands on a hatched ground of its own and,
where its score is 0, reads "cut off", never a plain 0 (a needle found before the budget ran out still
shows its score). The budget
is each (model, dataset)'s ``Limit.out_len`` in the run's plan (``RunResults.budgets``); a run without one
says the budget was not recorded.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..record import GradedSample
from ..taskspec import TaskSpec

__all__ = ["CutOff", "Budgets", "grid_cut_offs", "LEGEND", "LEGEND_TEXT", "MARK", "STYLE", "COLOUR"]

Budgets = Mapping[tuple[str, str], int]  # (model, dataset) -> output budget in tokens (max_out_len)

MARK = "\u2702"  # ✂, the mark's sign on a page (a PNG writes "cut": its labels are ASCII)
COLOUR = "#cfc6ea"  # the ground of a cell whose every answer was cut off: off the red-green scale, hatched

LEGEND_TEXT = (
    "✂ n/m marks a number whose answers include outputs cut off at their output budget (max_out_len): n of "
    "the m answers behind it ran out of tokens, and are scored as written (or left out under "
    'truncated="unscored"); hover the mark for the budget. A number whose every answer was cut off and '
    'scored 0 reads "cut off" instead: it says nothing about finding the needle.'
)
LEGEND = (
    f"<p class='cutlegend'><span class='cutmark'>{MARK} n/m</span> marks a number whose answers include outputs "
    "cut off at their output budget (<code>max_out_len</code>): <i>n</i> of the <i>m</i> answers behind it ran "
    'out of tokens, and are scored as written (or left out under <code>truncated="unscored"</code>); hover the '
    "mark for the budget. A cell whose every answer was cut off stands on this hatched ground, and where it "
    "scored 0 reads <span class='cutall'>cut off</span> instead: that 0 says nothing about finding the needle.</p>"
)

# the mark in a cell's corner, and the hatched ground of a cell whose every answer was cut off
STYLE = (
    ".cutmark{color:#4b2a86;font-size:9px;font-weight:bold;white-space:nowrap;cursor:help}"
    "td.cut{position:relative}td.cut .cutmark{position:absolute;top:0;right:1px}"
    f".cutall{{background-color:{COLOUR};background-image:repeating-linear-gradient(45deg,rgba(60,30,120,.22) 0 2px,"
    "transparent 2px 7px);color:#2c1466;font-weight:bold;padding:0 2px}"
    ".hmgrid td.cut{padding-top:9px}"
)


@dataclass(frozen=True)
class CutOff:
    """How many of the answers behind one number were cut off at their output budget.

    Attributes:
        cut: the answers cut off (``GradedSample.truncated``).
        answered: the answers behind the number: scored, or left out only for being cut off
            (``GradedSample.answered``: the summary table's ``truncated%`` is a share of these).
        budgets: the output budgets (``max_out_len``) the answers were generated with; empty when the run did
            not record them.
    """

    cut: int
    answered: int
    budgets: tuple[int, ...] = ()

    @classmethod
    def of(cls, records: Iterable[GradedSample], budgets: Budgets) -> CutOff:
        """The cut-off count of a number's records (each counted once, whatever else is passed).

        Args:
            records: the records behind the number; those not ``answered`` are ignored.
            budgets: each (model, dataset)'s output budget.
        """
        seen = {id(r): r for r in records if r.answered}
        cut = [r for r in seen.values() if r.output.truncated]
        found = {budgets.get((str(r.model), str(r.dataset))) for r in cut}
        return cls(len(cut), len(seen), tuple(sorted(b for b in found if b)))

    @property
    def any(self) -> bool:
        """Some answer behind the number was cut off."""
        return self.cut > 0

    @property
    def every(self) -> bool:
        """Every answer behind the number was cut off: the number says nothing about the model's answers."""
        return self.answered > 0 and self.cut == self.answered

    def hides(self, value: float) -> bool:
        """Whether the number says nothing at all: every answer cut off and none scored above 0 (or none scored).

        Such a number reads "cut off" instead of its 0; a needle found before the budget ran out still shows
        its score, on the cut-off ground.

        Args:
            value: the number (NaN: no score, every answer left out).
        """
        return self.every and (math.isnan(value) or value == 0)

    @property
    def share(self) -> str:
        """``3/6``: how many of how many."""
        return f"{self.cut}/{self.answered}"

    @property
    def budget(self) -> str:
        """The budget in words: ``the 24-token output budget`` (``...budgets`` for several; unknown said so)."""
        if not self.budgets:
            return "the output budget (max_out_len; not recorded in this run)"
        if len(self.budgets) == 1:
            return f"the {self.budgets[0]}-token output budget (max_out_len)"
        return f"the {', '.join(str(b) for b in self.budgets)}-token output budgets (max_out_len)"

    @property
    def title(self) -> str:
        """The hover text: ``3 of 6 answers cut off at the 24-token output budget (max_out_len)``."""
        return f"{self.cut} of {self.answered} answers cut off at {self.budget}"


def grid_cut_offs(
    records: Sequence[GradedSample], model: str, spec: TaskSpec, lang: str, budgets: Budgets
) -> dict[tuple[float | None, int], CutOff]:
    """The cut-off count of each (depth, length) heatmap cell and, under depth None, of each length's mean.

    Placed as the heatmap places scores (the task's ``heatmap_points``), but over the answered records:
    an output left out for being cut off (``truncated="unscored"``) still lands in its cell, so a cell
    whose every answer was left out reads "cut off", not "not run". Only cells with a cut-off answer are
    returned.

    Args:
        records: graded samples (with ``model``).
        model: the heatmap's model.
        spec: its task.
        lang: its language.
        budgets: each (model, dataset)'s output budget.
    """
    points = spec.aggregation().heatmap_points
    cells: dict[tuple[float | None, int], list[GradedSample]] = defaultdict(list)
    if points is None:
        return {}
    for r in records:
        if r.model != model or r.task != spec.name or r.lang != lang or r.get("length") is None:
            continue
        if not r.answered or r.score is None:
            continue
        length = int(r.fields["length"])
        for depth, _score in points(r):
            cells[(depth, length)].append(r)
        cells[(None, length)].append(r)
    found = {key: CutOff.of(rs, budgets) for key, rs in cells.items()}
    return {key: c for key, c in found.items() if c.any}
