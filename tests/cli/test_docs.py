"""The docs are part of the interface.

Every command has a row in the README's commands table, `--help` text with an example, and an
example of it being run in the README or a page under docs/. The README stays short, and every
relative link, anchor and module path in the README, CONTRIBUTING.md and docs/ resolves.

ARCHITECTURE.md and the file tables are checked against the code: every module file they list exists,
every record they name is found by import, the layer picture is the one tests/unit/test_import_boundaries.py
enforces, every file a table lists is named in protocol/ or runner/, and every field cited for a file is a
field of its record (or a raw.csv column, or a key of the line the trial writes).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from markdown_sections import bullets, sections

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
    """`runner.trial` (a module) or `protocol.records.summary.Summary` (a module and a name defined in it)."""
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


#: A module path followed by a name of it: "`protocol/study/reader.py` `BOUNDS`".
PATH_AND_NAME = re.compile(r"`((?:runner|protocol|benchmarks)/[\w/]+)\.py` `([A-Za-z_]\w*)`")


def missing_module_paths(text: str) -> list[str]:
    """Repository paths (`runner/…py`, `protocol/…/`, `.ci/run`) and dotted names that do not exist, and
    names cited right after their module's path that it does not define."""
    missing = [found for found in MODULE_PATH.findall(text) if not (ROOT / found).exists()]
    missing.extend(dotted for dotted in DOTTED.findall(text) if not _dotted_name_exists(dotted))
    for path, name in PATH_AND_NAME.findall(text):
        dotted = f"{path.replace('/', '.')}.{name}"
        if (ROOT / f"{path}.py").exists() and not _dotted_name_exists(dotted):
            missing.append(f"{path}.py {name}")
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
    assert missing_module_paths("`runner/no_such_module.py` and `protocol/records/summary.py`") == [
        "runner/no_such_module.py"]
    assert missing_module_paths("`protocol.records.summary.no_such_function` `protocol.records.summary` "
                                "`protocol.records.summary.Summary`") == [
        "protocol.records.summary.no_such_function"
    ]
    assert missing_module_paths("`runner.no_such_package.thing`") == ["runner.no_such_package.thing"]
    assert missing_module_paths("(`protocol/study/load.py` `BOUNDS`, `protocol/study/reader.py` `BOUNDS`)") == [
        "protocol/study/load.py BOUNDS"]


def test_readme_rows_are_read_from_the_commands_table_only() -> None:
    text = (
        "## Commands\n\n| command | does |\n|---|---|\n| `isocost run STUDY` | runs |\n\n"
        "## Other\n\n| `isocost x` | no |\n"
    )
    assert readme_command_rows(text) == ["isocost run STUDY"]


def test_study_key_table_is_in_the_docs() -> None:
    from protocol.study.schema import markdown_table

    study_page = (ROOT / "docs" / "study.md").read_text(encoding="utf-8")
    assert markdown_table() in study_page, "docs/study.md's study key table differs from protocol/study/schema.py"


def test_main_help_lists_the_own_data_commands_with_an_example_each() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("init", "tune", "check", "rental"):
        assert f"  {command} " in result.output, command  # listed among the commands
        assert f"isocost {command} " in result.output, command  # with an example


# --- ARCHITECTURE.md and the file-format tables: every module, name, file and field they cite exists ---------

ARCHITECTURE_PATH = ROOT / "ARCHITECTURE.md"
CAMPAIGN_DIR_PAGE = ROOT / "docs" / "campaign-directory.md"
CODE = re.compile(r"`([^`]+)`")
SOURCE_NAME = re.compile(r"^[\w./]+(?:\.py|/)$")  # `stats.py`, `campaign_dir/`, `trial/run.py`
CLASS_NAME = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+$|^[A-Z][a-z]+[A-Z]?$")  # `TrialSpec`, `Study`, `Check`
FIELD_NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def _module_of(source: Path) -> str:
    return ".".join(source.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _resolve(base: Path, token: str) -> Path | None:
    """``token`` (``layout.py``, ``slurm/``, ``trial/run.py``) as a path under ``base``, at any depth."""
    name = token.rstrip("/")
    direct = base / name
    if direct.exists():
        return direct
    matches = sorted(p for p in base.rglob(Path(name).name) if p.as_posix().endswith("/" + name))
    return matches[0] if matches else None


def _names_defined(module: str) -> set[str]:
    import importlib

    return set(dir(importlib.import_module(module)))


def item_problems(item: str, base: Path) -> list[str]:
    """The source files and class names of one bullet or table cell that do not exist: files under ``base``
    (the bullet's leading ``dir/`` narrows it), a class name found by import in a module the item names
    (or in protocol.records.stages when it names none)."""
    tokens = [t.split("(")[0].rstrip("…").strip() for t in CODE.findall(item)]
    first = tokens[0] if tokens else ""
    narrowed = base / first.rstrip("/") if first.endswith("/") and (base / first.rstrip("/")).is_dir() else base
    problems: list[str] = []
    modules: list[str] = []
    for token in tokens:
        if SOURCE_NAME.match(token) and not token.startswith(("runner/", "protocol/", "tests/", "benchmarks/")):
            found = _resolve(narrowed, token) or _resolve(base, token)
            if found is None:
                problems.append(f"{token}: no such file under {_shown(narrowed)}")
            elif found.suffix == ".py":
                modules.append(_module_of(found))
    searched = modules or ["protocol.records.stages"]
    for token in tokens:
        if CLASS_NAME.match(token) and not any(token in _names_defined(m) for m in searched):
            problems.append(f"{token}: not defined in {', '.join(searched)}")
    return problems


def architecture_problems(text: str) -> list[str]:
    """ARCHITECTURE.md: the package lists of protocol/ and runner/, and the stage table, against the tree."""
    parts = sections(text)
    problems: list[str] = []
    for heading, base in (("protocol/", ROOT / "protocol"), ("runner/", ROOT / "runner")):
        for item in bullets(parts.get(heading, [])):
            problems += [f"### {heading}: {p}" for p in item_problems(item, base)]
    for line in parts.get("Layers", []):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("stage", "---"):
            problems += [f"stage {cells[0]}: {p}" for p in item_problems(cells[1], ROOT / "runner")]
            problems += [f"stage {cells[0]}: {p}" for p in item_problems(cells[2], ROOT / "protocol")]
    for item in bullets(parts.get("Files between host and trial", [])):
        problems += [f"host and trial: {p}" for p in item_problems(item, ROOT / "protocol")]
    return problems


def _records_in(hint: Any) -> list[type]:
    """The record classes a type hint holds (``InputFacts | None``, ``tuple[Variant, ...]``)."""
    import dataclasses
    import typing

    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [record for arg in typing.get_args(hint) for record in _records_in(arg)]


def _dataclass_fields(record: type, prefix: str = "") -> set[str]:
    """The fields of a record and of the records nested in it, each by name and by dotted path."""
    import dataclasses
    import typing

    names: set[str] = set()
    hints = typing.get_type_hints(record)
    for item in dataclasses.fields(record):
        names |= {item.name, prefix + item.name}
        for nested in _records_in(hints.get(item.name)):
            names |= _dataclass_fields(nested) | _dataclass_fields(nested, f"{prefix}{item.name}.")
    if hasattr(record, "CODEC"):  # the codec writes the version of a record that declares one
        names.add("schema_version")
    return names


def file_fields() -> dict[str, set[str]]:
    """Each file's fields, from the code that writes it (records, RAW_COLUMNS, the batch line)."""
    from protocol.records.manifest import Manifest
    from protocol.records.raw_columns import RAW_COLUMNS
    from protocol.records.stages import CampaignEvent, CampaignRecord, TrialSpec, TrialStatus
    from protocol.tasks.classification.predictions import Prediction
    from protocol.tasks.generation.outputs import KEYS as GENERATION_KEYS
    from runner.campaign_dir.appendlog import CHAIN_KEY
    from runner.campaign_dir.rentals import RentalRecord
    from runner.launch.launcher import launcher_kinds
    from runner.trial.batches import batch_record

    return {
        "predictions.jsonl": _dataclass_fields(Prediction),
        "status.json": _dataclass_fields(TrialStatus),
        "spec.json": _dataclass_fields(TrialSpec),
        "campaign.json": _dataclass_fields(CampaignRecord),
        "rentals.jsonl": _dataclass_fields(RentalRecord) | {CHAIN_KEY},
        "events.jsonl": _dataclass_fields(CampaignEvent) | {CHAIN_KEY},
        "manifest.json": _dataclass_fields(Manifest),
        "launcher.json": set().union(*(_dataclass_fields(k.record) for k in launcher_kinds().values())),
        "batches.jsonl": set(batch_record(0, [0], [{"input_ids": [1]}], ["all"], 0.1, None)),
        "raw.csv": set(RAW_COLUMNS),
        "generations.jsonl": set(GENERATION_KEYS),
    }


@functools.cache
def _code_strings() -> frozenset[str]:
    """Every string constant in protocol/ and runner/ (file names are named there)."""
    import ast

    strings: set[str] = set()
    for source in [*(ROOT / "protocol").rglob("*.py"), *(ROOT / "runner").rglob("*.py")]:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
    return frozenset(strings)


def file_names(cell: str) -> list[str]:
    """``trials/<id>/spec.json``, ``summary.{md,json}`` and ``raw.csv.partial-N`` as the names the code uses."""
    names: list[str] = []
    for token in CODE.findall(cell) or [cell]:
        for path in re.split(r",(?![^{]*\})", token.replace("DIR/", "")):
            leaf = path.strip().rstrip("/").split("/")[-1].removesuffix(".partial-N")
            brace = re.fullmatch(r"(.*)\{(.*)\}", leaf)
            names += [brace.group(1) + ext for ext in brace.group(2).split(",")] if brace else [leaf]
    return [name for name in names if name and "*" not in name and name not in ("<id>", "NAME")]


def cited_fields(cell: str) -> list[str]:
    """The field names a table cell cites: in backticks or as the keys of an inline JSON object."""
    found = [t for t in CODE.findall(cell) if FIELD_NAME.match(t)]
    for braces in re.findall(r"\{([^{}]*)\}", cell):
        found += re.findall(r'"(\w+)"', braces)
    return found


def campaign_file_problems(rows: list[tuple[str, str]]) -> list[str]:
    """Rows (files, content): each file named in the code, each field it cites found in that file's record."""
    strings = _code_strings()
    fields = file_fields()
    problems: list[str] = []
    for files, content in rows:
        names = file_names(files)
        problems += [f"{name}: named nowhere in protocol/ or runner/" for name in names if name not in strings]
        if any(name in fields for name in names):  # a file with a record: every field it cites is in it
            known = set().union(*(fields[name] for name in names if name in fields))
            problems += [f"{files}: field {name!r} is not in its record" for name in cited_fields(content)
                         if name not in known]
    return problems


def table_rows(lines: list[str]) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    return [row for row in rows[2:]]


def architecture_campaign_rows(text: str) -> list[tuple[str, str]]:
    """ARCHITECTURE.md's campaign directory block and its host-and-trial files, as (file, content)."""
    rows: list[tuple[str, str]] = []
    for line in sections(text).get("Campaign directory", []):
        match = re.match(r"^(DIR/\S+)\s+(.*)$", line)
        if match:
            rows.append((match.group(1), match.group(2)))
    for item in bullets(sections(text).get("Files between host and trial", [])):
        files = re.match(r"^(?:`[^`\s]+\.[^`\s]+`,?\s*)+", item)  # the leading file names
        if files:
            rows.append((files.group(0).strip(), item[files.end():]))
    return rows


def raw_column_problems(text: str) -> list[str]:
    """docs/campaign-directory.md's raw.csv paragraph against RAW_COLUMNS, its statuses against STATUSES."""
    from protocol.records.raw_columns import RAW_COLUMNS
    from protocol.records.stages import STATUSES

    section = sections(text)["`raw.csv`: columns and statuses"]
    paragraphs = "\n".join(section).split("\n\n")
    columns = next(p for p in paragraphs if "`raw.csv` columns:" in p)
    problems = [f"raw.csv column {name!r} is not in RAW_COLUMNS" for name in CODE.findall(columns)
                if FIELD_NAME.match(name) and name not in RAW_COLUMNS]
    statuses = next(p for p in paragraphs if p.startswith("Statuses:"))
    named = re.findall(r"(?:^Statuses: |, |\) )`(\w+)`", statuses)
    if sorted(named) != sorted(STATUSES):
        problems.append(f"statuses {named} are not STATUSES {list(STATUSES)}")
    return problems


def test_architecture_names_only_modules_and_records_that_exist() -> None:
    assert architecture_problems(ARCHITECTURE_PATH.read_text(encoding="utf-8")) == []


def test_architecture_links_and_module_paths_resolve() -> None:
    assert broken_links(ARCHITECTURE_PATH) == []
    assert missing_module_paths(ARCHITECTURE_PATH.read_text(encoding="utf-8")) == []


def test_architecture_files_and_fields_exist() -> None:
    text = ARCHITECTURE_PATH.read_text(encoding="utf-8")
    assert campaign_file_problems(architecture_campaign_rows(text)) == []
    statuses = re.search(r"^Statuses: (.*)$", text, re.MULTILINE)
    from protocol.records.stages import STATUSES

    assert statuses and re.findall(r"`(\w+)`", statuses.group(1)) == list(STATUSES)


@pytest.mark.parametrize("page", [CAMPAIGN_DIR_PAGE, README_PATH], ids=["docs/campaign-directory.md", "README.md"])
def test_the_campaign_directory_tables_name_real_files_and_fields(page: Path) -> None:
    rows = table_rows(sections(page.read_text(encoding="utf-8"))["What a campaign writes"])
    assert rows and campaign_file_problems([(row[0], row[2]) for row in rows]) == []


FILE_TABLE_PAGES = [README_PATH, *DOC_PAGES]
DOTTED_FIELD = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")


def file_tables(text: str) -> list[list[list[str]]]:
    """Every table of a page whose first column is headed ``file``, as rows of cells."""
    tables: list[list[list[str]]] = []
    prose, _ = split_fenced(text)
    current: list[str] = []
    for line in [*prose, ""]:
        if line.startswith("|"):
            current.append(line)
            continue
        if current and current[0].strip("| ").split("|")[0].strip() == "file":
            tables.append(table_rows(current))
        current = []
    return tables


@pytest.mark.parametrize("page", FILE_TABLE_PAGES, ids=[str(p.relative_to(ROOT)) for p in FILE_TABLE_PAGES])
def test_every_file_table_names_files_the_code_writes(page: Path) -> None:
    strings = _code_strings()
    for table in file_tables(page.read_text(encoding="utf-8")):
        missing = [name for row in table for name in file_names(row[0]) if name not in strings]
        assert missing == [], f"{page.name}: files named nowhere in protocol/ or runner/"


def test_the_seals_of_the_evidence_table_are_real_fields() -> None:
    """docs/faults.md's "sealed by" column names raw.csv columns and campaign.json fields."""
    from protocol.records.raw_columns import RAW_COLUMNS
    from protocol.records.stages import CampaignRecord

    known = set(RAW_COLUMNS) | _dataclass_fields(CampaignRecord)
    (table,) = [t for t in file_tables((ROOT / "docs" / "faults.md").read_text(encoding="utf-8")) if len(t[0]) == 4]
    cited = [token for row in table for token in CODE.findall(row[2])
             if FIELD_NAME.match(token) or DOTTED_FIELD.match(token)]
    assert cited and [token for token in cited if token not in known] == []


def test_the_raw_columns_and_statuses_are_the_codes() -> None:
    assert raw_column_problems(CAMPAIGN_DIR_PAGE.read_text(encoding="utf-8")) == []


def test_the_format_checks_catch_what_they_are_for() -> None:
    # a module file, a package and a record that do not exist are named; real ones are not
    assert item_problems("`records/stages.py` records: `TrialSpec`, `NoSuchRecord`", ROOT / "protocol") == [
        "NoSuchRecord: not defined in protocol.records.stages"]
    assert item_problems("`launch/` `launcher.py` `nosuch.py`, `slurm/` `watch.py`", ROOT / "runner") == [
        "nosuch.py: no such file under runner/launch"]
    # a file the code never names, and a field its record lacks
    assert campaign_file_problems([("`trials/<id>/predictions.jsonl`", '`{"id", "label", "n_tokens"}`'),
                                   ("`status.json`", "`gpu_energy_j`, `no_such_field`"), ("`nosuch.csv`", "")]) == [
        "`trials/<id>/predictions.jsonl`: field 'n_tokens' is not in its record",
        "`status.json`: field 'no_such_field' is not in its record",
        "nosuch.csv: named nowhere in protocol/ or runner/"]
    # statuses and raw columns against the code
    page = "## `raw.csv`: columns and statuses\n\n`raw.csv` columns: `trial_id`, `no_column`\n\nStatuses: `ok`, `oom`\n"
    assert raw_column_problems(page) == ["raw.csv column 'no_column' is not in RAW_COLUMNS",
                                         "statuses ['ok', 'oom'] are not STATUSES ['ok', 'oom', 'error', "
                                         "'interrupted', 'timeout', 'refused']"]
    assert file_names("`summary.{md,json}` `raw.csv.partial-N`") == ["summary.md", "summary.json", "raw.csv"]


def architecture_layers(text: str) -> dict[str, int]:
    """The layer of each package in ARCHITECTURE.md's layer picture (``runner.cli`` → 8, ``protocol`` → 0)."""
    block = sections(text)["Layers"]
    start = next(i for i, line in enumerate(block) if FENCE.match(line))
    end = next(i for i, line in enumerate(block) if i > start and FENCE.match(line))
    layers: dict[str, int] = {}
    current: int | None = None
    for line in block[start + 1:end]:
        number = re.match(r"^\s*(\d+)\s", line)
        if number:
            current = int(number.group(1))
        for package in re.findall(r"(?<![\w/])(runner/\w+|protocol)(?=/|\W|$)", line):
            if current is not None:
                layers[package.replace("/", ".")] = current
    return layers


def test_the_architecture_layer_picture_is_the_tested_one() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_boundaries", ROOT / "tests/unit/test_import_boundaries.py")
    assert spec and spec.loader
    boundaries = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boundaries)
    tested = {package: index for index, layer in enumerate(boundaries.LAYERS) for package in layer
              if package != "runner"}
    assert architecture_layers(ARCHITECTURE_PATH.read_text(encoding="utf-8")) == tested


def test_the_engine_table_is_generated_from_the_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/engines.md's engine table is each shipped engine's ``Engine.docs`` (no ISOCOST_ENGINES_PATH)."""
    from protocol.engines.docs import engine_table

    monkeypatch.delenv("ISOCOST_ENGINES_PATH", raising=False)
    page = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    assert engine_table() in page, "docs/engines.md's engine table differs from `python -m protocol.engines.docs`"
    assert engine_table().count("\n| `") == 3 and "| `vllm` | text-generation;" in engine_table()


def test_the_task_tables_are_generated_from_the_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/tasks.md's task table and each task's key table are what the tasks say of themselves (the tasks
    shipped with isocost: no ISOCOST_TASKS_PATH)."""
    from protocol.tasks.docs import key_tables, task_table

    monkeypatch.delenv("ISOCOST_TASKS_PATH", raising=False)
    page = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    assert task_table() in page, "docs/tasks.md's task table differs from `python -m protocol.tasks.docs`"
    for name, table in key_tables().items():
        assert f"`{name}`:\n\n{table}\n" in page, f"docs/tasks.md's key table of {name} differs from its keys"
    assert set(key_tables()) == {"sentence-embedding", "text-generation"}


def bundle_campaign_files(text: str) -> list[str]:
    """The campaign files docs/bundle.md's listing names (``campaign/…`` lines, trials and comments left out)."""
    names: list[str] = []
    for line in sections(text)["What a bundle holds"]:
        if line.startswith("campaign/") and not line.startswith("campaign/trials/"):
            listed = re.split(r"\s{2,}|\(", line.removeprefix("campaign/"))[0]
            names += [name.replace("-N", "-*") for name in listed.split()]
    return names


def test_the_bundle_listing_is_what_a_bundle_packs() -> None:
    from runner.bundle.pack import CAMPAIGN_FILES, OPTIONAL_PATTERNS

    listed = bundle_campaign_files((ROOT / "docs" / "bundle.md").read_text(encoding="utf-8"))
    packed = [*CAMPAIGN_FILES, *OPTIONAL_PATTERNS]
    assert [name for name in listed if not any(fnmatch.fnmatchcase(name, pattern) for pattern in packed)] == []
    exact = [name for name in packed if "*" not in name or name.endswith(".partial-*")]
    assert [name for name in exact if name not in listed] == [], "docs/bundle.md leaves out files a bundle packs"


#: Class names the docs cite from other projects (transformers, the Docker SDK), not from isocost.
EXTERNAL_CLASSES = {"AutoModel", "AutoModelForCausalLM", "AutoModelForSequenceClassification",
                    "BertForSequenceClassification", "LlamaForCausalLM", "DeviceRequest", "HostConfig",
                    "InferenceSession", "TensorrtExecutionProvider"}  # the last two: onnxruntime's
CAMEL = re.compile(r"`([A-Z][a-z]+(?:[A-Z][a-z0-9]*)+)`")


@functools.cache
def _defined_names() -> frozenset[str]:
    """Every class, function and module-level name defined in protocol/ and runner/."""
    pattern = re.compile(r"^\s*(?:class|def|async def)\s+(\w+)|^(\w+)\s*[:=]", re.MULTILINE)
    names: set[str] = set()
    for source in [*(ROOT / "protocol").rglob("*.py"), *(ROOT / "runner").rglob("*.py")]:
        names.update(a or b for a, b in pattern.findall(source.read_text(encoding="utf-8")))
    return frozenset(names)


@pytest.mark.parametrize("page", [ARCHITECTURE_PATH, *LINKED_PAGES],
                         ids=[str(p.relative_to(ROOT)) for p in [ARCHITECTURE_PATH, *LINKED_PAGES]])
def test_every_class_name_the_docs_cite_is_defined(page: Path) -> None:
    cited = set(CAMEL.findall(page.read_text(encoding="utf-8")))
    assert sorted(cited - _defined_names() - EXTERNAL_CLASSES) == []
