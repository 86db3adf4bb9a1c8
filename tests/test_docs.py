"""The documentation tells the truth about the code: every command's help, the generated pages, the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from needlebench.commands.cli import main

README = ROOT / "README.md"


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def _positionals(text: str) -> dict[str, str]:
    """The ``positional arguments:`` section of a help text: each argument's name and its description."""
    section = text.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
    entries: dict[str, str] = {}
    name = ""
    for line in section.splitlines():
        if re.match(r"^  \S", line):  # a new entry: two spaces, the name, then (maybe) its help
            name, _, rest = line.strip().partition(" ")
            entries[name] = rest.strip()
        elif name:
            entries[name] = f"{entries[name]} {line.strip()}".strip()
    return entries


def test_every_command_describes_each_positional_argument(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``needlebench <command> --help`` says what each positional argument is, for every command."""
    monkeypatch.setenv("COLUMNS", "120")
    commands = re.search(r"\{([a-z,]+)\}", _help([], capsys)).group(1).split(",")
    assert commands == [
        "run",
        "plan",
        "export",
        "score",
        "report",
        "leaderboard",
        "verify",
        "retry",
        "status",
        "prompt",
        "batch",
        "parity",
    ]
    for command in commands:
        text = _help([command], capsys)
        usage = text.split("\n\n", 1)[0].split(f"needlebench {command}", 1)[1]
        usage = re.sub(r"\[-[^\]]*\]|--?[a-z-]+ [A-Z_]+", " ", usage)  # options, optional or not
        named = {w for w in re.findall(r"[A-Za-z_]+", usage)}
        described = _positionals(text)
        assert named and named == set(described), (command, named, described)
        assert text.split("\n\n")[1].strip(), f"needlebench {command} --help: no description"
        for arg, description in described.items():
            assert len(description.split()) >= 4, f"needlebench {command} --help: {arg!r} has no description"


def test_generated_pages_are_current() -> None:
    """The performance tables are what ``bench/*.json`` hold and the CLI page is what ``--help`` prints."""
    from tools.docs_pages import stale_pages

    stale = stale_pages(check=True)
    assert not stale, f"run python -m tools.docs_pages: {[str(p.relative_to(ROOT)) for p in stale]} differ"


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (and GitHub) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_readme_is_short_and_every_link_lands() -> None:
    """The README stays a first page (under 8 KB) whose links reach existing pages and headings."""
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 8 * 1024
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text
    links = [link for link in re.findall(r"\]\(([^)]+)\)", text) if not link.startswith("http")]
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            assert anchor in _anchors(target), link
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")}
    linked = {link.partition("#")[0] for link in links}
    assert not {p for p in pages if p.count("/") == 2} - linked, "a section page the README does not link"


def test_readme_and_first_run_page_show_the_same_excerpt() -> None:
    """Both pages carry the main job's excerpt; ``tests/test_e2e_opencompass.py`` compares it with a run."""
    from tools.readme_excerpt import PAGES, page_excerpt

    first, *others = [page_excerpt(p) for p in PAGES]
    assert first.startswith("```\ntask,lang,length,") and all(o == first for o in others)
