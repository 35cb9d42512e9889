"""docs/launchers.md's tables are generated from the launcher kinds found (runner/launch/kind_docs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.launch.kind_docs import kinds_table, options_table
from runner.launch.launcher import LAUNCHERS_ENV

PAGE = Path(__file__).resolve().parents[2] / "docs" / "launchers.md"


def test_the_launcher_tables_are_the_kinds_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LAUNCHERS_ENV, raising=False)  # the built-in kinds only
    page = PAGE.read_text(encoding="utf-8")
    assert kinds_table() in page, "docs/launchers.md's kinds table differs: python -m runner.launch.kind_docs"
    assert options_table() in page, "docs/launchers.md's options table differs: python -m runner.launch.kind_docs"


def test_a_new_kind_changes_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LAUNCHERS_ENV, str(PAGE.parents[1] / "tests" / "fixtures" / "launchers"))
    assert "`cwd-process`" in kinds_table() and "`cwd-process`" not in PAGE.read_text(encoding="utf-8")
