"""Task knowledge lives in ``needlebench/tasks/`` only: the rest of the package reads a task's declaration.

Why: the evaluator, ``needlebench score``, the partitioner's over-length cells, the summary tables and the
report must compute from the one ``TaskSpec`` declaration (its metadata keys, cell, breakdowns and report
text). A task name or a task's own metadata key written elsewhere is a second declaration that drifts.

What is checked, in code outside ``needlebench/tasks/`` (docstrings and comments are prose and may name
tasks): no string literal and no identifier names a registered task (its name or table label), and no
string literal is one of a task's own metadata keys. The generic keys every layer may use are
``needlebench.sample.RECORD_KEYS`` plus the sample's own fields. Parts still waiting to move are listed in
``ALLOWED`` with the reason; the list may only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from needlebench.sample import RECORD_KEYS
from needlebench.tasks import all_tasks

PACKAGE = Path(__file__).resolve().parents[1] / "needlebench"

# (file, word): why it is still there
ALLOWED = {
    ("opencompass/configs.py", "atc"): "atc_datasets / atc_mc_datasets: the per-task config functions",
    ("opencompass/configs.py", "atc_mc"): "atc_mc_datasets: a per-task config function",
    ("opencompass/configs.py", "needlechain"): "needlechain_datasets: a per-task config function",
}


def _forbidden() -> tuple[re.Pattern[str], set[str]]:
    specs = all_tasks()
    names = {spec.name for spec in specs} | {spec.short for spec in specs}
    words = re.compile(
        r"(?<![A-Za-z0-9])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(?![A-Za-z0-9])",
        re.I,
    )
    keys = {k for spec in specs for k in (*spec.meta_keys, *spec.cell, *spec.breakdowns)} - set(RECORD_KEYS)
    return words, keys


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
        if isinstance(node.body[0].value, ast.Constant)
    }


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, (ast.keyword, ast.arg)):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name
    return None


def task_knowledge(path: Path) -> list[tuple[int, str, str]]:
    """``(line, word, where)`` for each task name or task-specific metadata key in a module's code."""
    words, keys = _forbidden()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    in_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in keys and id(node) not in in_fstring:
                found.append((line, node.value, "metadata key"))
            found += [(line, m.group(1).lower(), f"in {node.value[:60]!r}") for m in words.finditer(node.value)]
        ident = _identifier(node)
        if ident:
            found += [(line, m.group(1).lower(), f"identifier {ident}") for m in words.finditer(ident)]
    return found


def test_no_task_knowledge_outside_tasks() -> None:
    """Every hit outside tasks/ is listed in ALLOWED; every ALLOWED entry is still needed."""
    hits: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("tasks/"):
            continue
        for line, word, where in task_knowledge(path):
            hits.setdefault((rel, word), []).append(f"{rel}:{line}: {word!r} ({where})")
    unexpected = [text for key, texts in sorted(hits.items()) if key not in ALLOWED for text in texts]
    assert not unexpected, "task knowledge outside needlebench/tasks/:\n" + "\n".join(unexpected)
    stale = sorted(set(ALLOWED) - set(hits))
    assert not stale, f"ALLOWED entries no longer needed (remove them): {stale}"


def test_scanner_finds_what_it_forbids(tmp_path: Path) -> None:
    """The check is not vacuous: a task name in a literal or an identifier, and a task's key, are found."""
    spec = next(s for s in all_tasks() if s.meta_keys)
    src = tmp_path / "m.py"
    src.write_text(
        f'"""Docstrings may say {spec.name}."""\n'
        f"def f(r):\n    # comments may say {spec.name}\n    return r.get({spec.meta_keys[0]!r})\n"
        f"{spec.name}_table = {spec.short!r}\n",
        encoding="utf-8",
    )
    found = {(line, word) for line, word, _ in task_knowledge(src)}
    assert found == {(4, spec.meta_keys[0]), (5, spec.name.lower()), (5, spec.short.lower())}


def test_declarations_are_recorded() -> None:
    """A task's cell and breakdown keys are among the metadata its graded records keep (the report regroups by them)."""
    for spec in all_tasks():
        kept = set(spec.record_keys)
        assert set(spec.cell) <= kept, (spec.name, sorted(set(spec.cell) - kept))
        assert set(spec.breakdowns) <= kept, (spec.name, sorted(set(spec.breakdowns) - kept))
        assert len(spec.record_keys) == len(set(spec.record_keys))


def _task_file_names() -> set[str]:
    """Data file names written in ``tasks/`` (``names.json``; an f-string's fixed part, ``multi_needle_reasoning_``)."""
    found: set[str] = set()
    for path in (PACKAGE / "tasks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.fullmatch(r"[\w\-]+\.jsonl?", node.value):
                    found.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
                if parts and re.fullmatch(r"\.jsonl?", parts[-1]) and len(parts[0]) >= 6:
                    found.add(parts[0])
    return found


def test_no_task_input_file_names_outside_tasks() -> None:
    """The files a task reads are named by the task (``TaskSpec.inputs``): no code outside tasks/ names them."""
    names = _task_file_names()
    assert {"names.json", "multi_needle_reasoning_"} <= names  # the scan sees what it guards
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("tasks/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                hits += [f"{rel}:{node.lineno}: {name!r}" for name in names if name in node.value]
    assert not hits, "task input files named outside needlebench/tasks/:\n" + "\n".join(hits)


def test_every_task_declares_its_options_once_and_resolves_them_one_way() -> None:
    """Each task with protocol options declares them once (``TaskSpec.options``, its parameters' ``OPTIONS``):
    one ``""`` field per option, resolved by ``ProtocolParams.options`` to the protocol's values or the one
    given; no task module resolves options by hand (only ``protocol.py`` calls ``resolve_options``)."""
    import dataclasses

    from needlebench.errors import ConfigError
    from needlebench.protocol import PROTOCOLS, ProtocolParams
    from needlebench.tasks import make_params

    declaring = [spec for spec in all_tasks() if spec.options]
    assert {spec.name for spec in declaring} >= {"srt", "mrt", "mrs", "atc", "atc_mc", "needlechain"}
    for spec in declaring:
        assert issubclass(spec.params, ProtocolParams), spec.name
        fields = {f.name: f.default for f in dataclasses.fields(spec.params)}
        assert all(fields.get(name) == "" for name in spec.options), (spec.name, fields)
        required = {"lang": "en"} if fields.get("lang") is dataclasses.MISSING else {}
        required |= {"lengths": [1000], "depths": [50]} if fields.get("lengths") is dataclasses.MISSING else {}
        for protocol in PROTOCOLS:
            resolved = make_params(spec.name, protocol=protocol, **required).options()
            assert resolved == {name: getattr(option, protocol) for name, option in spec.options.items()}
        name, option = next(iter(spec.options.items()))
        given = make_params(spec.name, **required, **{name: option.choices[-1]}).options()
        assert given[name] == option.choices[-1]
        try:
            make_params(spec.name, **required, **{name: "no-such-value"}).options()
            raise AssertionError(f"{spec.name}: an unknown {name} value was accepted")
        except ConfigError as exc:
            assert name in str(exc) and all(choice in str(exc) for choice in option.choices)
    hand_made = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "protocol.py" and "resolve_options(" in path.read_text(encoding="utf-8")
    ]
    assert not hand_made, hand_made


def test_every_tasks_results_compute_over_graded_samples() -> None:
    """Typed to the end: each hook a task's results declare takes graded samples (:class:`GradedSample`), never
    the dicts of a JSON line (the gold, which ``needle_texts`` reads, is the one mapping)."""
    import inspect
    import typing

    checked = 0
    for spec in all_tasks():
        results = spec.aggregation()
        for name in (
            "dataset_metrics",
            "sidecars",
            "report",
            "heatmap_points",
            "needle_depths",
            "board",
            "conformance",
        ):
            hook = getattr(results, name)
            if hook is None:
                continue
            first = next(iter(inspect.signature(hook).parameters))
            assert "GradedSample" in str(typing.get_type_hints(hook)[first]), (spec.name, name)
            checked += 1
    assert checked >= 20
