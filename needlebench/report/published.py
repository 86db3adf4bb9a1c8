"""The papers' published rows, shipped as data: what a measured row is read beside.

``needlebench/data/published/<paper>.json`` holds, per paper, the result tables as printed (the 2024 and
2025 NeedleBench papers and the NeedleChain paper), transcribed from the paper texts: every number as
printed (a JSON number literal with the printed decimals, so ``100.00`` stays ``100.00``), each table's
caption, where the paper gives it, its column definitions, the protocol facts it states (with the
paper's words) and the rows where the paper's own numbers do not add up (``discrepancies``, each with the
value its formula gives). ``tests/test_published.py`` recomputes every printed overall from its printed
parts and checks the rows against the paper texts.

A file: ``paper`` (id, title, source, and the ``profile`` whose suites its tables measured: ``v2`` for the 2025
paper, ``v1`` for the 2024 one, none for NeedleChain), ``protocol`` (named sets of facts, e.g. ``all`` and ``sparse``),
``tables`` and ``not_transcribed`` (the paper's tables with no numbers in its text, and why). A table:
``table`` (its number), ``where`` (table and section: the texts give no pages), ``caption``, ``layout``
(which formulas add it up), ``suite``, ``protocol_sets`` plus its own ``protocol`` facts, ``notes``,
``columns`` (key, header, metric and coordinates), ``rows`` (model, group, ``values`` in column order,
optional labels, notes, ``text`` and ``as_printed``), ``discrepancies`` and ``text_span`` (where the test
finds the table in the paper text).

Numbers load as ``Decimal``: exact, and carrying the printed precision a comparison needs (a printed
``75.49`` stands for anything in [75.485, 75.495]). This module reads the files only; it knows no task
and imports no OpenCompass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; the annotation is never evaluated
    from importlib.resources.abc import Traversable

__all__ = [
    "papers",
    "ProtocolFact",
    "PublishedColumn",
    "PublishedRow",
    "Discrepancy",
    "PublishedTable",
    "load_published",
]

SCHEMA = 1
NOT_STATED = "not stated"


def _empty() -> Mapping[str, str]:
    """A read-only empty mapping (the default of a frozen record's mapping field)."""
    return MappingProxyType({})


@dataclass(frozen=True)
class ProtocolFact:
    """One thing a paper states (or leaves unstated) about how a table was measured.

    ``key`` names the fact (``repeats``, ``decoding``, ``tokenizer``, ``scoring``, ...), ``value`` is it
    as data (``None`` where the paper does not state it), ``where`` is the section or table that says
    it, ``quote`` the paper's own words (verbatim pieces) and ``note`` what an unstated fact means.
    """

    key: str
    value: Any
    where: str
    quote: tuple[str, ...] = ()
    note: str = ""

    @property
    def stated(self) -> bool:
        """Whether the paper states this fact (a comparability check cannot rely on one it does not)."""
        return self.where != NOT_STATED


@dataclass(frozen=True)
class PublishedColumn:
    """A column of a published table.

    ``key`` is unique in its table (``S-RT/ZH``, ``M-RS/mean``, ``overall``, ``P/64``, ``k50/backward``),
    ``header`` is the paper's header, ``metric`` what the number is (``score``, ``task_mean``,
    ``overall``, ``accuracy``, ``weighted_score``, ``weighted_score_short``, ``enl50``, ...) and
    ``attrs`` the coordinates the file gives (task, lang, length, needle count, chain length, variant, ...).
    """

    key: str
    header: str
    metric: str
    attrs: Mapping[str, Any]


@dataclass(frozen=True)
class PublishedRow:
    """One printed row: a model's numbers, each exactly as printed (``None`` for a cell the paper leaves empty).

    ``labels`` tell apart rows of one model (a table with one row per setting); ``text`` is the row as
    the paper text prints it where that is not the model name followed by its numbers; ``as_printed``
    keeps a cell's printed text where it is not a plain number (read as ``values`` says, with a note).
    """

    model: str
    values: Mapping[str, Decimal | None]
    group: str = ""
    labels: Mapping[str, str] = field(default_factory=_empty)
    notes: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    as_printed: Mapping[str, str] = field(default_factory=_empty)

    def value(self, key: str) -> Decimal | None:
        """The printed number of a column (``None`` if the cell is empty).

        Args:
            key: the column's key.
        """
        if key not in self.values:
            raise KeyError(f"{self.model}: no column {key!r}")
        return self.values[key]

    def printed(self, key: str) -> str:
        """A cell as printed: ``"100.00"`` for 100.00, ``""`` for an empty cell.

        Args:
            key: the column's key.
        """
        found = self.value(key)
        return self.as_printed.get(key, "" if found is None else str(found))

    def decimals(self, key: str) -> int:
        """How many decimals the cell is printed with (its rounding is half a unit of the last one).

        Args:
            key: the column's key.
        """
        found = self.value(key)
        if found is None:
            raise ValueError(f"{self.model}: column {key!r} is empty")
        exponent = found.as_tuple().exponent
        return max(0, -exponent) if isinstance(exponent, int) else 0


@dataclass(frozen=True)
class Discrepancy:
    """A printed number that the paper's own formula, applied to the paper's printed parts, does not give.

    The printed value is kept in the row; ``computed`` is what ``formula`` gives from the printed parts.
    """

    model: str
    column: str
    printed: Decimal
    computed: Decimal
    formula: str
    labels: Mapping[str, str] = field(default_factory=_empty)
    note: str = ""


@dataclass(frozen=True)
class PublishedTable:
    """One published table: where it is, what its columns are, its rows, and what the paper says about it."""

    paper: str
    title: str
    source: str
    table: int
    caption: str
    where: str
    layout: str
    suite: str | None
    columns: tuple[PublishedColumn, ...]
    rows: tuple[PublishedRow, ...]
    protocol: tuple[ProtocolFact, ...]
    notes: tuple[str, ...]
    discrepancies: tuple[Discrepancy, ...]
    profile: str | None = None  # the suites' profile (``v2``, ``v1``) the paper's tables measured; None: no suites

    @property
    def label(self) -> str:
        """``needlebench-2025 Table 1``: how messages and footnotes name the table."""
        return f"{self.paper} Table {self.table}"

    def column(self, key: str) -> PublishedColumn:
        """The column with this key.

        Args:
            key: the column's key.
        """
        for col in self.columns:
            if col.key == key:
                return col
        raise KeyError(f"{self.label}: no column {key!r}")

    def row(self, model: str, **labels: str) -> PublishedRow:
        """The one row of a model (and labels, where a model has several rows).

        Args:
            model: the model's name as printed.
            labels: the row's labels, to pick one of a model's rows.
        """
        found = [r for r in self.rows if r.model == model and all(r.labels.get(k) == v for k, v in labels.items())]
        if len(found) != 1:
            raise KeyError(f"{self.label}: {len(found)} rows for {model!r} {labels or ''}".rstrip())
        return found[0]

    def fact(self, key: str) -> ProtocolFact | None:
        """The protocol fact with this key (the table's own before the paper's), or ``None``.

        Args:
            key: the fact's key (``repeats``, ``decoding``, ...).
        """
        return next((f for f in self.protocol if f.key == key), None)


def _folder() -> Traversable:
    """The package's folder of published tables (found the same from a wheel)."""
    return resources.files("needlebench").joinpath("data", "published")


def papers() -> tuple[str, ...]:
    """The papers with a data file (``<paper>.json``), sorted: the ids ``PublishedTable.paper`` takes."""
    return tuple(sorted(p.name.removesuffix(".json") for p in _folder().iterdir() if p.name.endswith(".json")))


def load_published() -> tuple[PublishedTable, ...]:
    """Every published table of every paper, in ``papers()`` order, then in the file's order.

    Raises:
        ConfigError: a data file is missing or malformed; the message names the file, table and row.
    """
    return tuple(table for paper in papers() for table in _load_paper(paper))


def _load_paper(paper: str) -> tuple[PublishedTable, ...]:
    name = f"{paper}.json"
    path = _folder().joinpath(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"published data {name}: cannot read it ({exc})") from exc
    return _parse_paper(paper, text, name)


def _parse_paper(paper: str, text: str, name: str) -> tuple[PublishedTable, ...]:
    """A paper's tables from its file's text.

    Args:
        paper: the paper's id (the file must say the same).
        text: the JSON text.
        name: the file's name, for messages.
    """
    try:
        doc = json.loads(text, parse_float=Decimal)
    except ValueError as exc:
        raise ConfigError(f"published data {name}: not JSON ({exc})") from exc
    try:
        if doc.get("schema") != SCHEMA:
            raise ConfigError(f"schema {doc.get('schema')!r}, expected {SCHEMA}")
        info = doc["paper"]
        if info["id"] != paper:
            raise ConfigError(f"paper id {info['id']!r}, expected {paper!r}")
        sets = {k: tuple(_fact(f) for f in v) for k, v in doc.get("protocol", {}).items()}
        return tuple(_table(t, info, sets) for t in doc["tables"])
    except ConfigError as exc:
        raise ConfigError(f"published data {name}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"published data {name}: malformed ({type(exc).__name__}: {exc})") from None


def _fact(raw: Mapping[str, Any]) -> ProtocolFact:
    return ProtocolFact(
        key=raw["key"],
        value=raw.get("value"),
        where=raw["where"],
        quote=tuple(raw.get("quote", ())),
        note=raw.get("note", ""),
    )


def _number(value: Any, where: str) -> Decimal | None:
    """A cell: a JSON number (kept with its printed decimals) or null."""
    if value is None or isinstance(value, Decimal):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise ConfigError(f"{where}: {value!r} is not a number or null")


def _table(
    raw: Mapping[str, Any], info: Mapping[str, Any], sets: Mapping[str, tuple[ProtocolFact, ...]]
) -> PublishedTable:
    label = f"Table {raw['table']}"
    generic = ("key", "header", "metric")
    columns = tuple(
        PublishedColumn(
            c["key"], c["header"], c["metric"], MappingProxyType({k: v for k, v in c.items() if k not in generic})
        )
        for c in raw["columns"]
    )
    keys = [c.key for c in columns]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{label}: repeated column keys {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    rows = []
    for r in raw["rows"]:
        where = f"{label}, row {r['model']!r}"
        if len(r["values"]) != len(keys):
            raise ConfigError(f"{where}: {len(r['values'])} values for {len(keys)} columns")
        extra = set(r.get("as_printed", {})) - set(keys)
        if extra:
            raise ConfigError(f"{where}: as_printed names unknown columns {sorted(extra)}")
        rows.append(
            PublishedRow(
                model=r["model"],
                values=MappingProxyType({k: _number(v, f"{where}, column {k!r}") for k, v in zip(keys, r["values"])}),
                group=r.get("group") or "",
                labels=MappingProxyType(dict(r.get("labels", {}))),
                notes=tuple(r.get("notes", ())),
                text=tuple(r.get("text", ())),
                as_printed=MappingProxyType(dict(r.get("as_printed", {}))),
            )
        )
    identities = [(r.model, tuple(sorted(r.labels.items()))) for r in rows]
    if len(set(identities)) != len(identities):
        raise ConfigError(f"{label}: a model and labels name more than one row")
    unknown = [s for s in raw.get("protocol_sets", ()) if s not in sets]
    if unknown:
        raise ConfigError(f"{label}: unknown protocol sets {unknown}")
    own = tuple(_fact(f) for f in raw.get("protocol", ()))
    inherited = tuple(f for s in raw.get("protocol_sets", ()) for f in sets[s] if f.key not in {o.key for o in own})
    discrepancies = tuple(_discrepancy(d, label, rows, keys) for d in raw.get("discrepancies", ()))
    return PublishedTable(
        paper=info["id"],
        title=info["title"],
        source=info["source"],
        table=int(raw["table"]),
        caption=raw["caption"],
        where=raw["where"],
        layout=raw["layout"],
        suite=raw.get("suite"),
        columns=columns,
        rows=tuple(rows),
        protocol=own + inherited,
        notes=tuple(raw.get("notes", ())),
        discrepancies=discrepancies,
        profile=info.get("profile"),
    )


def _discrepancy(raw: Mapping[str, Any], label: str, rows: list[PublishedRow], keys: list[str]) -> Discrepancy:
    labels = dict(raw.get("labels", {}))
    where = f"{label}, discrepancy {raw['model']!r} {raw['column']!r}"
    found = [r for r in rows if r.model == raw["model"] and all(r.labels.get(k) == v for k, v in labels.items())]
    if len(found) != 1 or raw["column"] not in keys:
        raise ConfigError(f"{where}: names no single row and column of the table")
    printed = _number(raw["printed"], where)
    if printed is None or printed != found[0].values[raw["column"]]:
        raise ConfigError(f"{where}: printed {raw['printed']} is not the row's value {found[0].values[raw['column']]}")
    computed = _number(raw["computed"], where)
    if computed is None:
        raise ConfigError(f"{where}: no computed value")
    return Discrepancy(
        model=raw["model"],
        column=raw["column"],
        printed=printed,
        computed=computed,
        formula=raw["formula"],
        labels=MappingProxyType(labels),
        note=raw.get("note", ""),
    )
