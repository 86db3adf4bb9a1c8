"""The one JSONL reader (needlebench/jsonl.py): lines end at "\\n" alone, a bad line is named by file and line,
it streams in linear time, and no other module of the package splits JSONL another way."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import assert_linear

from needlebench.errors import ConfigError
from needlebench.jsonl import BadLine, iter_jsonl, read_jsonl

PACKAGE = Path(__file__).resolve().parents[1] / "needlebench"
# every character str.splitlines() breaks at, and the ones text-mode reading breaks at
SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def test_a_record_holding_every_line_separator_is_one_record(tmp_path: Path) -> None:
    records = [{"id": str(i), "prediction": f"gold{sep}after", "raw": sep} for i, sep in enumerate(SEPARATORS)]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")  # stored raw, as ensure_ascii=False writes it
    assert len(path.read_text(encoding="utf-8").splitlines()) > len(records)  # what the old readers split
    assert read_jsonl(path) == records


def test_crlf_blank_lines_invalid_utf8_and_lone_surrogates_are_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": "\\ud800 lone"}\r\n\n   \n{"b": "\xff\xfe bad"}\n{"c": 1}')
    assert list(iter_jsonl(path)) == [(1, {"a": "\ud800 lone"}), (4, {"b": "\ufffd\ufffd bad"}), (5, {"c": 1})]


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text('{"ok": 1}\n{"half": \n\n{"ok": 2}\n{"cut', encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{path}:2: not a JSON line"):
        read_jsonl(path)
    bad: list[BadLine] = []
    assert read_jsonl(path, bad) == [{"ok": 1}, {"ok": 2}]
    assert [b.number for b in bad] == [2, 5] and "ends inside it" in bad[1].reason
    assert str(bad[0]).startswith(f"{path}:2: not a JSON line (")


def test_reading_is_linear_in_the_file(tmp_path: Path) -> None:
    line = json.dumps({"prediction": "x\u2028" * 200, "score": 100.0}, ensure_ascii=False) + "\n"
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_text(line * 2_000, encoding="utf-8")
    large.write_text(line * 16_000, encoding="utf-8")
    assert_linear(read_jsonl, small, large, label="read_jsonl")
    # one line of 8 MB and one of 1 MB: one pass over the line, however long
    one_small, one_large = tmp_path / "one_small.jsonl", tmp_path / "one_large.jsonl"
    one_small.write_text(json.dumps({"p": "\u2028a" * 500_000}, ensure_ascii=False) + "\n", encoding="utf-8")
    one_large.write_text(json.dumps({"p": "\u2028a" * 4_000_000}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert_linear(read_jsonl, one_small, one_large, label="read_jsonl, one long line")


def _splits_json_lines(function: ast.AST) -> bool:
    """A function that parses JSON and splits text into lines with ``splitlines`` (the JSONL bug)."""
    calls = [n.func for n in ast.walk(function) if isinstance(n, ast.Call)]
    names = {c.attr for c in calls if isinstance(c, ast.Attribute)}
    return "splitlines" in names and ("loads" in names or "read_jsonl" in names)


def test_no_module_splits_jsonl_with_splitlines() -> None:
    """As tests/test_layers.py does for imports: a reader of JSON lines in the package goes through
    needlebench/jsonl.py, never ``str.splitlines()`` (which breaks inside a record at U+2028 and others)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _splits_json_lines(node):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert not found, f"read JSONL with needlebench.jsonl.iter_jsonl instead: {found}"


def test_the_guard_sees_the_old_reader() -> None:
    """The grep above would have caught the reader that lost records (report/results.py before the fix)."""
    old = ast.parse(
        "def _read_lines(path):\n    for line in path.read_text().splitlines():\n        row = json.loads(line)\n"
    )
    assert _splits_json_lines(old.body[0])


def test_a_torn_last_line_of_a_run_log_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A task killed while appending leaves half a line in the retries record or the request log: the records
    before it stand, the line is named in a warning, and a report built from the run does not stop."""
    from needlebench.runfolder.request_log import REQUESTS_FILE, read_requests
    from needlebench.runfolder.retries import RETRIES_FILE, read_retries

    whole = json.dumps({"abbr": "d", "failed": 2, "asked_again": 2, "passes": 1, "still_failed": 0})
    (tmp_path / RETRIES_FILE).write_text(whole + "\n" + whole[:20], encoding="utf-8")
    (tmp_path / REQUESTS_FILE).write_text(json.dumps({"abbr": "d", "batch_size": 4}) + '\n{"abbr": "e", "ba', "utf-8")
    with caplog.at_level("WARNING"):
        assert read_retries(tmp_path) == {"d": [json.loads(whole)]}
        assert read_requests(tmp_path) == [{"abbr": "d", "batch_size": 4}]
    assert sum("not a JSON line" in r.getMessage() for r in caplog.records) == 2
