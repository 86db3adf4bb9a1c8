"""The papers' published rows (``needlebench/data/published/``): loaded, added up with the papers' formulas, read
against the paper texts.

Why: users put their model's row next to these rows; a transcription typo would read as a finding about a model.
So every printed overall, task mean, weighted score and ENL-50 is recomputed from its printed parts with the
paper's own formula, and the rows where the paper's numbers do not add up are listed in the data (the test asserts
that list exactly, so a typo cannot hide as a "discrepancy").

Tolerance. A number printed with d decimals stands for anything within half a unit of its last digit,
h = 0.5 * 10^-d. A printed result r of a linear formula sum(c_i * p_i) over printed parts p_i is accepted when
|sum(c_i * p_i) - r| <= h(r) + sum(|c_i| * h(p_i)): the result's own rounding plus the most the parts' rounding
can move the sum (the paper summed unrounded parts). Arithmetic is exact (fractions of the printed decimals).
Where the parts are exact, only h(r) is allowed: the 2025 ATC accuracies all lie on the 2.5 grid (40 samples per
needle count) and NeedleChain's on the 0.5 grid (200 instances), both asserted here, so a 1-decimal print of them
is the value itself.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from importlib import resources
from pathlib import Path
from types import MappingProxyType

import pytest

from needlebench.errors import ConfigError
from needlebench.report.published import PublishedRow, PublishedTable, _parse_paper, load_published, papers

PAPERS = ("needlebench-2024", "needlebench-2025", "needlechain")
TASKS = ("S-RT", "M-RT", "M-RS")
LANGS = ("ZH", "EN")
ATC_NEEDLES = tuple(2**i for i in range(1, 10))
SHORT_NEEDLES = tuple(n for n in ATC_NEEDLES if n <= 64)  # the "<= 2K" column
V1_WEIGHTS = (Fraction(2, 5), Fraction(3, 10), Fraction(3, 10))  # 2024, Appendix A
V2_WEIGHTS = (Fraction(1, 3),) * 3  # 2025, Eq. 3

# (paper, table) -> rows, as counted in the paper texts
EXPECTED_ROWS = {
    ("needlebench-2024", 2): 14,
    ("needlebench-2024", 3): 3,
    ("needlebench-2024", 4): 2,
    ("needlebench-2024", 5): 34,
    ("needlebench-2024", 6): 18,
    ("needlebench-2024", 8): 31,
    ("needlebench-2024", 9): 21,
    ("needlebench-2025", 1): 14,
    ("needlebench-2025", 2): 12,
    ("needlebench-2025", 3): 29,
    ("needlebench-2025", 6): 19,
    ("needlebench-2025", 7): 16,
    ("needlebench-2025", 8): 19,
    ("needlechain", 1): 5,
    ("needlechain", 2): 10,
    ("needlechain", 5): 3,
}


@dataclasses.dataclass(frozen=True)
class Check:
    """One recomputation on one row: the column it checks, how, what it gives, and the cells it reads."""

    column: str
    formula: str
    computed: Fraction
    ok: bool
    cells: tuple[str, ...]


def _half(value: Decimal) -> Fraction:
    """Half a unit of the last printed digit."""
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return Fraction(1, 2) * Fraction(10) ** exponent


def _value(row: PublishedRow, key: str) -> Decimal:
    found = row.value(key)
    assert found is not None, (row.model, key)
    return found


def _linear(row: PublishedRow, key: str, parts: list[tuple[Fraction, str]], formula: str, exact: bool = False) -> Check:
    """``key`` = sum(c * part), within the printed rounding (see the module docstring)."""
    printed = _value(row, key)
    computed = sum((c * Fraction(_value(row, k)) for c, k in parts), Fraction(0))
    slack = Fraction(0) if exact else sum((abs(c) * _half(_value(row, k)) for c, k in parts), Fraction(0))
    ok = abs(computed - Fraction(printed)) <= _half(printed) + slack
    return Check(key, formula, computed, ok, (key, *(k for _, k in parts)))


def _grid(row: PublishedRow, key: str, step: Fraction, formula: str) -> Check:
    """``key`` is a multiple of ``step``; computed is the nearest multiple."""
    value = Fraction(_value(row, key))
    return Check(key, formula, round(value / step) * step, value % step == 0, (key,))


def _checks(table: PublishedTable, row: PublishedRow) -> Iterator[Check]:
    """The paper's own formulas, applied to one printed row."""
    if table.layout in ("sparse-2025", "sparse-2024"):
        for task in TASKS:
            parts = [(Fraction(1, 2), f"{task}/{lang}") for lang in LANGS]
            yield _linear(row, f"{task}/mean", parts, "mean(Chinese, English)")
        weights = V2_WEIGHTS if table.layout == "sparse-2025" else V1_WEIGHTS
        formula = "mean(S-RT, M-RT, M-RS)" if table.layout == "sparse-2025" else "0.4 S-RT + 0.3 M-RT + 0.3 M-RS"
        yield _linear(row, "overall", [(w, f"{t}/mean") for w, t in zip(weights, TASKS)], formula)
    elif table.layout == "mrs-needles":
        parts = [(Fraction(1, 8), f"M-RS/{n}/{lang}") for n in (2, 3, 4, 5) for lang in LANGS]
        yield _linear(row, "M-RS/mean", parts, "mean over 2-5 needles and both languages")
    elif table.layout == "atc-2025":
        for n in ATC_NEEDLES:
            yield _grid(row, f"P/{n}", Fraction(5, 2), "an accuracy over 40 samples is a multiple of 2.5")
        for key, counts in (("weighted_score", ATC_NEEDLES), ("weighted_score_short", SHORT_NEEDLES)):
            parts = [(Fraction(n, sum(counts)), f"P/{n}") for n in counts]
            yield _linear(row, key, parts, "sum(P_N * N) / sum(N)", exact=True)
        enl = max((n for n in ATC_NEEDLES if _value(row, f"P/{n}") >= 50), default=0)
        cells = ("enl50", *(f"P/{n}" for n in ATC_NEEDLES))
        yield Check("enl50", "largest N with P_N >= 50", Fraction(enl), _value(row, "enl50") == enl, cells)
    elif table.layout == "atc-2024":
        keys = ("ZH/direct", "EN/direct", "ZH/reasoning", "EN/reasoning")
        yield _linear(row, "overall", [(Fraction(1, 4), k) for k in keys], "mean of the four task scores")
    elif table.layout in ("chain-accuracy", "chain-reasoning", "chain-tool"):
        for col in table.columns:
            if col.metric == "accuracy":
                yield _grid(row, col.key, Fraction(1, 2), "an accuracy over 200 instances is a multiple of 0.5")
        if table.layout == "chain-tool":
            parts = [(Fraction(1), "with_code"), (Fraction(-1), "without_code")]
            yield _linear(row, "change", parts, "with code - without code", exact=True)
    else:
        assert table.layout == "model-size-2024", f"{table.label}: no checks for layout {table.layout!r}"


def _identity(table: PublishedTable, model: str, labels: Mapping[str, str], column: str) -> tuple[str, ...]:
    """A checked cell: table, model, the row's labels, column."""
    return table.label, model, *(f"{k}={v}" for k, v in sorted(labels.items())), column


@pytest.fixture(scope="module")
def tables() -> dict[tuple[str, int], PublishedTable]:
    return {(t.paper, t.table): t for t in load_published()}


def _rows(table: PublishedTable) -> dict[str, PublishedRow]:
    return {r.model: r for r in table.rows}


def test_every_paper_table_and_row_is_there(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """The transcribed tables and their row counts; every row has a number for every column."""
    assert {k: len(t.rows) for k, t in tables.items()} == EXPECTED_ROWS
    assert [t.paper for t in load_published()] == sorted((t.paper for t in load_published()), key=PAPERS.index)
    numbers = sum(1 for t in tables.values() for r in t.rows for v in r.values.values() if v is not None)
    assert numbers == 2233
    assert papers() == PAPERS


def test_the_specs_check_values(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """The spec's sanity rows: 99.38, 97.45, 29.64 -> 75.49 (2025) and 100, 96.95, 84.73 -> 94.50 (2024, 0.4/0.3/0.3)."""
    for key, model, parts, overall, weights in [
        (("needlebench-2025", 2), "InternLM3-8B", ("99.38", "97.45", "29.64"), "75.49", V2_WEIGHTS),
        (("needlebench-2024", 8), "InternLM2-7B-200K", ("100.00", "96.95", "84.73"), "94.50", V1_WEIGHTS),
    ]:
        row = tables[key].row(model)
        assert tuple(row.printed(f"{t}/mean") for t in TASKS) == parts
        assert row.printed("overall") == overall
        computed = sum(w * Fraction(Decimal(p)) for w, p in zip(weights, parts))
        assert abs(computed - Fraction(Decimal(overall))) <= Fraction(1, 200)
    # the same rows in the 2024 check's own words: 40 + 29.085 + 25.419 = 94.504
    assert sum(w * Fraction(Decimal(p)) for w, p in zip(V1_WEIGHTS, ("100", "96.95", "84.73"))) == Fraction(94504, 1000)


def test_printed_overalls_add_up_except_the_recorded_discrepancies(
    tables: dict[tuple[str, int], PublishedTable],
) -> None:
    """Every table's overalls from its parts; what fails is exactly the data's discrepancy list, computed alike."""
    found: dict[tuple[str, ...], Fraction] = {}
    checked = 0
    for table in tables.values():
        for row in table.rows:
            for check in _checks(table, row):
                checked += 1
                if not check.ok:
                    found[_identity(table, row.model, row.labels, check.column)] = check.computed
    recorded = {_identity(t, d.model, d.labels, d.column): d.computed for t in tables.values() for d in t.discrepancies}
    assert set(found) == set(recorded), (
        f"not recorded: {set(found) - set(recorded)}; not found: {set(recorded) - set(found)}"
    )
    for key, computed in found.items():
        assert abs(computed - Fraction(recorded[key])) <= _half(recorded[key]), (key, float(computed))
    assert checked == 1067
    assert len(recorded) == 1


def test_a_typo_in_a_checked_cell_is_caught(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """A typo of one in the units digit of any cell a formula reads makes some check of its row fail.

    NeedleChain's accuracies are guarded by the 0.5 grid only against typos off that grid, its generated-length
    columns and the 2024 model-size table by the paper texts (the test below) and the cross-table checks.
    """
    covered = 0
    for table in tables.values():
        for row in table.rows:
            before = {c.column: c.ok for c in _checks(table, row)}
            cells = {cell for c in _checks(table, row) if "200 instances" not in c.formula for cell in c.cells}
            for cell in sorted(cells):
                values = dict(row.values)
                values[cell] = _value(row, cell) + 1
                typo = dataclasses.replace(row, values=MappingProxyType(values))
                after = {c.column: c.ok for c in _checks(table, typo)}
                assert any(before[k] and not after[k] for k in after), (table.label, row.model, cell)
                covered += 1
    assert covered == 2023


def test_2025_tables_agree_with_each_other(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Table 2's rows are Table 6's; Tables 7/8 (M-RS per needle count) add up to Tables 1/6's M-RS columns."""
    t2, t6 = _rows(tables["needlebench-2025", 2]), _rows(tables["needlebench-2025", 6])
    assert set(t2) <= set(t6)
    for model, row in t2.items():
        assert {k: row.printed(k) for k in row.values} == {k: t6[model].printed(k) for k in row.values}, model
    for detail, main in ((7, 1), (8, 6)):
        by_needles, summary = _rows(tables["needlebench-2025", detail]), _rows(tables["needlebench-2025", main])
        assert set(summary) <= set(by_needles)
        extra = set(by_needles) - set(summary)
        assert extra == ({"LLaMA-3.1-8B", "LLaMA-3.1-70B"} if detail == 7 else set())
        for model, row in summary.items():
            assert by_needles[model].printed("M-RS/mean") == row.printed("M-RS/mean"), (detail, model)
            for lang in LANGS:
                mean = sum(Fraction(_value(by_needles[model], f"M-RS/{n}/{lang}")) for n in (2, 3, 4, 5)) / 4
                printed = _value(row, f"M-RS/{lang}")
                assert abs(mean - Fraction(printed)) <= _half(printed) * 2, (detail, model, lang, float(mean))


def test_2025_long_cot_rows_repeat_their_retrieval_cells(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Table 6 prints M-RT = S-RT digit for digit for exactly its 7 long-CoT rows (kept as printed, noted per row)."""
    table = tables["needlebench-2025", 6]
    same = {
        r.model
        for r in table.rows
        if all(r.printed(f"M-RT/{k}") == r.printed(f"S-RT/{k}") for k in ("ZH", "EN", "mean"))
    }
    assert same == {
        "DeepSeek-R1-Distill-Qwen-7B",
        "DeepSeek-R1-Distill-Qwen-14B",
        "DeepSeek-R1-Distill-Qwen-32B",
        "OREAL-32B",
        "QwQ-32B",
        "o4-mini",
        "DeepSeek-R1",
    }
    assert all(any("copy error" in n for n in table.row(m).notes) for m in same)


def test_2024_model_size_rows_repeat_the_4k_table(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Table 6's scores are Table 8's (4K) cells for the models named alike; the others are named nowhere else."""
    sizes, main = tables["needlebench-2024", 6], _rows(tables["needlebench-2024", 8])
    column = {"Overall": "overall", "S-RT": "S-RT/mean", "M-RS": "M-RS/mean"}
    unmatched = set()
    for row in sizes.rows:
        if row.model not in main:
            unmatched.add(row.model)
            continue
        assert _value(row, "score") == _value(main[row.model], column[row.labels["task"]]), row.model
    assert unmatched == {"Qwen-1.5-14B", "Qwen-1.5-72B", "Qwen-72B"}


def test_needlechain_tool_rows_start_from_table_1(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Table 2's q_single rows without code are GPT-4o's Table 1 cells."""
    gpt = tables["needlechain", 1].row("GPT-4o")
    single = [r for r in tables["needlechain", 2].rows if r.labels["question"] == "q_single"]
    assert len(single) == 6
    for row in single:
        key = f"k{row.labels['k']}/{row.labels['type'].lower()}"
        assert row.printed("without_code") == gpt.printed(key), key


def test_printed_precision_is_kept(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Each column keeps its printed decimals (100.00 stays 100.00); the cells printed otherwise are exactly these."""
    usual = {"score": 2, "task_mean": 2, "overall": 2, "weighted_score": 2, "weighted_score_short": 2, "enl50": 0}
    usual |= {"accuracy": 1, "difference": 1, "output_tokens": 2}
    odd = {
        (t.label, r.model, c.key, r.printed(c.key))
        for t in tables.values()
        for r in t.rows
        for c in t.columns
        if r.decimals(c.key) != usual[c.metric]
    }
    assert odd == {
        ("needlebench-2024 Table 4", "GLM4-9B-Chat-1M", "S-RT/EN", "11.6"),
        ("needlebench-2024 Table 4", "GLM4-9B-Chat-1M", "S-RT/mean", "50.8"),
        ("needlebench-2024 Table 4", "GLM4-9B-Chat-1M", "M-RT/EN", "24"),
        ("needlebench-2024 Table 6", "Qwen-7B", "score", "74.7"),
        ("needlechain Table 5", "Qwen2.5-32B", "k10/stack", "100"),
        ("needlechain Table 5", "Qwen2.5-32B", "k10/forward", "100"),
        ("needlechain Table 5", "Qwen2.5-32B", "k20/stack", "100"),
        ("needlechain Table 5", "QwQ-32B", "k10/stack", "100"),
        ("needlechain Table 5", "QwQ-32B", "k10/forward", "100"),
        ("needlechain Table 5", "QwQ-32B", "k50/stack", "100"),
        ("needlechain Table 5", "Qwen3-32B", "k10/stack", "100"),
        ("needlechain Table 5", "Qwen3-32B", "k10/forward", "100"),
        ("needlechain Table 5", "Qwen3-32B", "k10/mixed", "100"),
        ("needlechain Table 5", "Qwen3-32B", "k20/stack", "100"),
        ("needlechain Table 5", "Qwen3-32B", "k20/stack/output_tokens", "339.8"),
    }


def test_each_table_says_what_makes_a_row_comparable(tables: dict[tuple[str, int], PublishedTable]) -> None:
    """Every table answers the comparability questions (stated or explicitly not stated), each with the paper's words."""
    for table in tables.values():
        keys = {"decoding", "tokenizer", "dataset_version"} | (
            {"repeats", "scoring", "haystack", "aggregation"} if "sparse" in table.layout else set()
        )
        for key in keys:
            fact = table.fact(key)
            assert fact is not None, (table.label, key)
            assert fact.quote if fact.stated else fact.note, (table.label, key)
    assert tables["needlebench-2025", 1].fact("decoding").value.startswith("greedy, temperature 0")
    assert tables["needlechain", 1].fact("decoding").value == {"temperature": Decimal("0.6"), "top_p": Decimal("0.95")}
    settings = tables["needlebench-2024", 8].fact("parameter_settings")
    assert settings.value["Multi-Needle-Retrieval-EN-4K"] == {
        "repeats": 25,
        "buffer_size": 1000,
        "depth_intervals": 20,
        "length_intervals": 4,
    }
    assert tables["needlebench-2024", 4].fact("parameter_settings").stated is False


def test_the_packages_own_aggregation_reproduces_the_published_rows(
    tables: dict[tuple[str, int], PublishedTable],
) -> None:
    """The suite weights the tasks declare are the papers' (v1 0.4/0.3/0.3, v2 thirds), and the ATC weighted score
    and ENL-50 of ``needlebench.tasks.atc.open_answer_results`` give every row of the 2025 ATC table."""
    from needlebench.report.tables import suite_weights
    from needlebench.tasks.atc.open_answer_results import SHORT_CONTEXT_NEEDLES, atc_weighted_score, enl

    for profile, weights in (("v1", V1_WEIGHTS), ("v2", V2_WEIGHTS)):
        declared = suite_weights(profile)
        assert [Fraction(declared[t]).limit_denominator(100) for t in ("srt", "mrt", "mrs")] == list(weights)
    for row in tables["needlebench-2025", 3].rows:
        acc = {n: float(_value(row, f"P/{n}")) for n in ATC_NEEDLES}
        for key, got in (
            ("weighted_score", atc_weighted_score(acc)),
            ("weighted_score_short", atc_weighted_score(acc, max_needles=SHORT_CONTEXT_NEEDLES)),
        ):
            assert abs(Fraction(got) - Fraction(_value(row, key))) <= Fraction(1, 200) + Fraction(1, 10**9), (
                row.model,
                key,
            )
        assert enl(acc) == _value(row, "enl50"), row.model


def test_a_malformed_file_is_named_with_its_table_and_row() -> None:
    """A bad row or cell gives one ConfigError that names file, table, row and column; nothing is half loaded."""
    doc = (
        '{"schema": 1, "paper": {"id": "p", "title": "t", "source": "s"}, "tables": [{"table": 3, "caption": "c",'
        ' "where": "w", "layout": "l", "columns": [{"key": "a", "header": "A", "metric": "score"}],'
        ' "rows": [{"model": "m", "values": [%s]}]}]}'
    )
    assert _parse_paper("p", doc % "1.50", "p.json")[0].rows[0].printed("a") == "1.50"
    with pytest.raises(ConfigError, match=r"p\.json: Table 3, row 'm': 2 values for 1 columns"):
        _parse_paper("p", doc % "1.5, 2", "p.json")
    with pytest.raises(ConfigError, match=r"p\.json: Table 3, row 'm', column 'a': '1.5' is not a number"):
        _parse_paper("p", doc % '"1.5"', "p.json")
    with pytest.raises(ConfigError, match=r"p\.json: paper id 'p', expected 'q'"):
        _parse_paper("q", doc % "1", "p.json")
    with pytest.raises(ConfigError, match=r"p\.json: not JSON"):
        _parse_paper("p", "{", "p.json")


# ---------------------------------------------------------------- against the paper texts

NUMBER = re.compile(r"(?<![\w.\-])[-+]?\d+(?:\.\d+)?(?![\w.])")  # a number standing alone (not 7B, not Qwen2.5)


def _norm(text: str) -> str:
    """Whitespace (tabs, line breaks, no-break spaces) as one space; markdown bold marks dropped."""
    return re.sub(r"\s+", " ", text.replace("\u00a0", " ").replace("**", "")).strip()


def _row_texts(table: PublishedTable, row: PublishedRow) -> tuple[str, ...]:
    return row.text or (f"{row.model} " + " ".join(row.printed(c.key) for c in table.columns),)


def test_every_row_caption_and_quote_is_in_the_paper_text(paper_texts: Path) -> None:
    """Second reading, by machine: each row as printed lies inside its table's stretch of the paper text, its numbers
    are the row's values, no other number of that stretch is left over (no row missed), and every caption and quoted
    protocol fact is the paper's wording."""
    for paper in PAPERS:
        text = _norm((paper_texts / f"{paper}.txt").read_text(encoding="utf-8"))
        spans = {
            t["table"]: t["text_span"]
            for t in json.loads(
                resources.files("needlebench").joinpath("data", "published", f"{paper}.json").read_text()
            )["tables"]
        }
        for table in (t for t in load_published() if t.paper == paper):
            span = spans[table.table]
            start = text.index(span["from"])
            stretch = text[start : text.index(span["to"], start)]
            numbers = 0
            for row in table.rows:
                texts = tuple(_norm(t) for t in _row_texts(table, row))
                for piece in texts:
                    assert piece in stretch, (table.label, piece)
                found = [n.lstrip("+") for n in NUMBER.findall(" ".join(texts))]
                numbers += len(found)
                if row.text:
                    assert found[-len(table.columns) :] == [row.printed(c.key) for c in table.columns], row.model
            assert len(NUMBER.findall(stretch)) - numbers == span["other_numbers"], table.label
            assert _norm(table.caption) in text, table.label
            for fact in table.protocol:
                for piece in fact.quote:
                    assert _norm(piece) in text, (table.label, fact.key, piece)
            settings = table.fact("parameter_settings")
            if settings is not None and settings.stated:
                for task, s in settings.value.items():
                    line = f"{task} {s['repeats']} {s['buffer_size']} {s['depth_intervals']} {s['length_intervals']}"
                    assert line in text, line
