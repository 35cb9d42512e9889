"""The docs are part of the interface.

Every command has a row in the README's commands table, `--help` text with an example, and an
example of it being run in the README or a page under docs/. The README stays short, and every
relative link, anchor and module path in the README, CONTRIBUTING.md and docs/ resolves.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from runner.cli import main

ROOT = Path(__file__).resolve().parents[2]
README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
# Where a command's example may be: the README and the pages under docs/.
EXAMPLE_SOURCES = {path: path.read_text(encoding="utf-8") for path in [README_PATH, *DOC_PAGES]}
# Whose links and module paths must resolve.
LINKED_PAGES = [README_PATH, ROOT / "CONTRIBUTING.md", *DOC_PAGES]
README_MAX_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _commands(group: click.Group, prefix: str = "isocost") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, path))
    return found


COMMANDS = _commands(main)


def split_fenced(text: str) -> tuple[list[str], list[str]]:
    """The lines outside fenced code blocks, and the lines inside them."""
    prose: list[str] = []
    code: list[str] = []
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        (code if inside else prose).append(line)
    return prose, code


def readme_command_rows(readme: str) -> list[str]:
    """The first cell of every row of the table under the README's `## Commands` heading."""
    prose, _ = split_fenced(readme)
    rows: list[str] = []
    in_section = False
    for line in prose:
        if line.startswith("## "):
            in_section = line.strip() == "## Commands"
            continue
        if in_section and line.startswith("| `"):
            rows.append(line.split("|")[1].strip().strip("`"))
    return rows


def runs_in_an_example(path: str, text: str) -> bool:
    """True when a fenced code line of `text` runs `path` (`$ isocost …`, `.venv/bin/isocost …`)."""
    pattern = re.compile(r"^\s*(?:\$\s+)?(?:\S*/)?" + re.escape(path) + r"(?:\s|$)")
    _, code = split_fenced(text)
    return any(pattern.match(line) for line in code)


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page (headings in code blocks excluded)."""
    prose, _ = split_fenced(text)
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose:
        match = HEADING.match(line)
        if not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2))  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def relative_links(text: str) -> list[str]:
    """Link targets outside code (fenced blocks and inline code spans), other than URLs."""
    prose, _ = split_fenced(text)
    targets = []
    for line in prose:
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                targets.append(target)
    return targets


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def broken_links(page: Path) -> list[str]:
    """Relative links of `page` whose file, or whose anchor in a Markdown file, does not exist."""
    problems = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            problems.append(f"{target}: {_shown(resolved)} does not exist")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in github_anchors(resolved.read_text(encoding="utf-8")):
            problems.append(f"{target}: no heading with the anchor #{anchor} in {_shown(resolved)}")
    return problems


MODULE_PATH = re.compile(r"(?<![\w./-])((?:runner|protocol|benchmarks|tests)/[\w./-]*?(?:\.py\b|/)|\.ci/[\w.-]*\w)")
DOTTED = re.compile(r"`(?:python3? -m )?((?:runner|protocol|benchmarks)(?:\.\w+)+)`")


def _module_file(parts: list[str]) -> Path | None:
    """The source file of the dotted module `parts` (a module or a package), or None."""
    base = ROOT.joinpath(*parts)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _dotted_name_exists(dotted: str) -> bool:
    """`runner.trial` (a module) or `protocol.stats.VariantSummary` (a module and a name defined in it)."""
    parts = dotted.split(".")
    for depth in range(len(parts), 1, -1):
        source = _module_file(parts[:depth])
        if source is None:
            continue
        if depth == len(parts):
            return True
        name = re.escape(parts[depth])
        defined = rf"^(?:def|class|async def)\s+{name}\b|^{name}\s*[:=]"
        return re.search(defined, source.read_text(encoding="utf-8"), re.MULTILINE) is not None
    return False


def missing_module_paths(text: str) -> list[str]:
    """Repository paths (`runner/…py`, `protocol/…/`, `.ci/run`) and dotted names that do not exist."""
    missing = [found for found in MODULE_PATH.findall(text) if not (ROOT / found).exists()]
    missing.extend(dotted for dotted in DOTTED.findall(text) if not _dotted_name_exists(dotted))
    return missing


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_is_in_the_readme_and_has_help(path, command):
    assert f"`{path}" in README or f"{path} " in README, f"{path} is not documented in README.md"
    rows = readme_command_rows(README)
    assert any(row == path or row.startswith(path + " ") for row in rows), (
        f"{path} has no row in README.md's commands table"
    )
    assert command.help and command.help.strip(), f"{path} has no --help text"
    result = CliRunner().invoke(main, [*path.split()[1:], "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output
    if not isinstance(command, click.Group):
        assert "Example" in command.help, f"{path} --help has no example"
        assert any(runs_in_an_example(path, text) for text in EXAMPLE_SOURCES.values()), (
            f"{path} is never shown run in a code block of README.md or docs/*.md"
        )


def test_readme_gives_the_two_setup_commands():
    assert "make run" in README and "make test" in README


def test_readme_is_at_most_300_lines() -> None:
    lines = len(README.splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, more than {README_MAX_LINES}: move a section to docs/"
    )


def test_the_docs_have_an_index_linked_from_the_readme() -> None:
    assert (ROOT / "docs" / "README.md").is_file()
    assert "docs/README.md" in relative_links(README)
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in relative_links(index)}
    for page in DOC_PAGES:
        if page.name != "README.md":
            assert page.name in linked, f"docs/{page.name} is not listed in docs/README.md"


def test_every_doc_page_is_one_click_from_the_readme() -> None:
    linked = {(README_PATH.parent / target.partition("#")[0]).resolve() for target in relative_links(README)}
    for page in DOC_PAGES:
        assert page.resolve() in linked, f"docs/{page.name} has no link in README.md"


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[str(p.relative_to(ROOT)) for p in LINKED_PAGES])
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[str(p.relative_to(ROOT)) for p in LINKED_PAGES])
def test_module_paths_named_in_the_docs_exist(page: Path) -> None:
    assert missing_module_paths(page.read_text(encoding="utf-8")) == []


def test_the_docs_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    # a command named only in prose is not an example; one run in a code block is
    assert not runs_in_an_example("isocost verify", "Use `isocost verify FILE` to check.\n")
    assert runs_in_an_example("isocost verify", "```\n$ isocost verify b.tar.gz\nOK\n```\n")
    assert runs_in_an_example("isocost images build", "```\n.venv/bin/isocost images build --stack cpu\n```\n")
    assert not runs_in_an_example("isocost images", "```\n$ isocost imagesx\n```\n")
    # anchors as GitHub makes them, headings in code blocks excluded, duplicates numbered
    page = "# Containers: every `trial`\n## Air-gapped hosts and CI: `--base`\n## A\n## A\n```\n## Not a heading\n```\n"
    assert github_anchors(page) == {"containers-every-trial", "air-gapped-hosts-and-ci---base", "a", "a-1"}
    # a broken file link and a broken anchor are both reported; URLs and code are not links
    (tmp_path / "other.md").write_text("# Real heading\n", encoding="utf-8")
    doc = tmp_path / "page.md"
    doc.write_text(
        "[ok](other.md#real-heading) [gone](missing.md) [bad](other.md#nope) [web](https://x.example/a)\n"
        "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert [problem.split(":")[0] for problem in broken_links(doc)] == ["missing.md", "other.md#nope"]
    # module paths and dotted names that are not in the tree are reported
    assert missing_module_paths("`runner/no_such_module.py` and `protocol/stats.py`") == ["runner/no_such_module.py"]
    assert missing_module_paths("`protocol.stats.no_such_function` `protocol.stats` `protocol.stats.VariantSummary`") == [
        "protocol.stats.no_such_function"
    ]
    assert missing_module_paths("`runner.no_such_package.thing`") == ["runner.no_such_package.thing"]


def test_readme_rows_are_read_from_the_commands_table_only() -> None:
    text = (
        "## Commands\n\n| command | does |\n|---|---|\n| `isocost run STUDY` | runs |\n\n"
        "## Other\n\n| `isocost x` | no |\n"
    )
    assert readme_command_rows(text) == ["isocost run STUDY"]


def test_study_key_table_is_in_the_docs() -> None:
    from protocol.study_keys import markdown_table

    study_page = (ROOT / "docs" / "study.md").read_text(encoding="utf-8")
    assert markdown_table() in study_page, "docs/study.md's study key table differs from protocol/study_keys.py"


def test_main_help_lists_the_own_data_commands_with_an_example_each() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("init", "tune", "check", "rental"):
        assert f"  {command} " in result.output, command  # listed among the commands
        assert f"isocost {command} " in result.output, command  # with an example
