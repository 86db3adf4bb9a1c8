"""The documentation tells the truth about the code: every command's help, the generated pages, the README."""

from __future__ import annotations

import re

import pytest

from needlebench.commands.cli import main


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
    assert commands == ["plan", "export", "score", "report"]
    for command in commands:
        text = _help([command], capsys)
        usage = text.split("\n\n", 1)[0].split(f"needlebench {command}", 1)[1]
        usage = re.sub(r"\[-[^\]]*\]|--?[a-z-]+ [A-Z_]+", " ", usage)  # options, optional or not
        named = {w for w in re.findall(r"[a-z_]+", usage)}
        described = _positionals(text)
        assert named and named == set(described), (command, named, described)
        assert text.split("\n\n")[1].strip(), f"needlebench {command} --help: no description"
        for arg, description in described.items():
            assert len(description.split()) >= 4, f"needlebench {command} --help: {arg!r} has no description"
