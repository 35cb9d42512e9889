"""The docs are part of the interface: every command is in the README and has help text."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from runner.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: str = "isocost") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, path))
    return found


COMMANDS = _commands(main)


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_is_in_the_readme_and_has_help(path, command):
    assert f"`{path}" in README or f"{path} " in README, f"{path} is not documented in README.md"
    assert command.help and command.help.strip(), f"{path} has no --help text"
    result = CliRunner().invoke(main, [*path.split()[1:], "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output
    if not isinstance(command, click.Group):
        assert "Example" in command.help, f"{path} --help has no example"


def test_readme_gives_the_two_setup_commands():
    assert "make run" in README and "make test" in README


def test_readme_has_the_study_key_table() -> None:
    from protocol.study_keys import markdown_table

    assert markdown_table() in README, "README's study key table differs from protocol/study_keys.py"


def test_main_help_lists_the_own_data_commands_with_an_example_each() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("init", "tune", "check", "rental"):
        assert f"  {command} " in result.output, command  # listed among the commands
        assert f"isocost {command} " in result.output, command  # with an example
