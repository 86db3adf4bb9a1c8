"""The package's layers, as docs/reference/layout.md draws them: every import points downwards.

Each top-level module or folder of ``needlebench`` sits on one layer; a module may import from its own
unit (its folder) and from units on lower layers, never from a unit on its own layer or above. Imports
inside functions and under ``TYPE_CHECKING`` count too, since they are what a reader follows.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "needlebench"

# docs/reference/layout.md's layer table, bottom (1) to top (11)
LAYERS: dict[str, int] = {
    "request_cost": 0,
    "record": 1,
    "errors": 1,
    "seeding": 1,
    "terminal": 1,
    "cgroups": 1,
    "jsonl": 2,
    "aggregate": 2,
    "sample": 2,
    "protocol": 2,
    "scoring": 2,
    "files": 2,
    "flow": 3,
    "taskspec": 3,
    "context": 3,
    "methods": 3,
    "adaptive": 3,
    "grading": 4,
    "tasks": 5,
    "cache": 6,
    "placement": 6,
    "planning": 7,
    "runfolder": 8,
    "report": 9,
    "preflight": 9,
    "launch": 10,
    "parity": 10,
    "opencompass": 11,
    "commands": 12,
}


def _unit(module: str) -> str:
    """``needlebench.grading.evaluation`` -> ``grading``; the package face itself is ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every needlebench module this file imports, with its line: relative imports resolved.

    Args:
        path: a module of the package.
        root: the package folder ``path`` lies in.
    """
    module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("needlebench"):
                if target in ("needlebench", package) and not node.module:  # from . import x
                    found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
                else:
                    found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("needlebench")]
    return found


def test_every_unit_has_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    units -= {"__init__", "__pycache__", "data"}
    assert units == set(LAYERS), f"add new modules to LAYERS and docs/reference/layout.md: {units ^ set(LAYERS)}"


def test_no_import_points_upwards_or_sideways() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _unit(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if source in ("", "__init__"):
            continue
        for line, target in _imports(path):
            unit = _unit(target)
            if unit in ("", source):
                continue
            if LAYERS[unit] >= LAYERS[source]:
                wrong.append(
                    f"{path.relative_to(PACKAGE)}:{line} imports {target} (layer {LAYERS[unit]} >= {LAYERS[source]})"
                )
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan resolves relative imports: a planted upward one is reported with its target."""
    assert all(t.startswith("needlebench.") for _, t in _imports(PACKAGE / "grading" / "evaluation.py"))
    fake = tmp_path / "needlebench" / "grading" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..tasks import get_task\nfrom . import matching\n", encoding="utf-8")
    assert _imports(fake, tmp_path / "needlebench") == [(1, "needlebench.tasks"), (2, "needlebench.grading.matching")]


def test_no_code_reads_a_models_name_to_learn_what_it_is() -> None:
    """A model's variant (what it varies, which model it varies) is a record in the plan (``planning.variants``):
    no module splits an abbr at ``@`` or matches a sweep's name part (``@think-``, ``@rope-``, a press's name)."""
    import re

    reading = re.compile(r"""split\(\s*["']@|partition\(\s*["']@|["']@(think|rope|yarn|snapkv)|SWEPT\b""")
    found = [
        f"{p.relative_to(PACKAGE)}:{n}"
        for p in PACKAGE.rglob("*.py")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if reading.search(line)
    ]
    assert found == [], found
