"""ARCHITECTURE.md is a map: it names every folder, and its campaign-directory block every file a campaign writes.

Every package folder under protocol/, runner/ and benchmarks/ (a folder with an ``__init__.py``) must be named in
its package's list of ARCHITECTURE.md (``### protocol/``, ``### runner/``): a folder added without a word on what
it is for fails here; a module inside a named folder needs no line of its own (its docstring says what it is for),
nor does a plugin's own folder (an engine, a task, a launcher kind: :data:`PLUGIN_HOMES`).
A name is read as the docs test reads it (tests/cli/test_docs.py): a backticked ``dir/`` in a list item, under the
folder the item starts with. The campaign-directory block must list every file name
:mod:`runner.campaign_dir.layout` declares.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_sections import bullets, sections

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
PACKAGES = ("protocol", "runner", "benchmarks")
CODE = re.compile(r"`([^`]+)`")
SOURCE_NAME = re.compile(r"^[\w./]+(?:\.py|/)$")


def _resolve(base: Path, token: str) -> list[Path]:
    """``token`` (``layout.py``, ``slurm/``, ``trial/run.py``) as the paths under ``base`` it names."""
    name = token.rstrip("/")
    if (base / name).exists():
        return [base / name]
    return sorted(p for p in base.rglob(Path(name).name) if p.as_posix().endswith("/" + name))


def named_folders(text: str) -> set[Path]:
    """The package folders ARCHITECTURE.md's package lists name. In an item, a leading ``dir/`` names the folder the
    names after it are looked for in first (``launch/`` … ``kinds/``), then the package."""
    parts = sections(text)
    named: set[Path] = set()
    for package in PACKAGES:
        base = ROOT / package
        if parts.get(f"{package}/") is not None:
            named.add(base)
        for item in bullets(parts.get(f"{package}/", [])):
            tokens = [t.split("(")[0].rstrip("…").strip() for t in CODE.findall(item)]
            first = tokens[0] if tokens else ""
            narrowed = base / first.rstrip("/") if first.endswith("/") and (base / first.rstrip("/")).is_dir() \
                else base
            for token in tokens:
                token = token.removeprefix(f"{package}/")
                if token.endswith("/") and SOURCE_NAME.match(token):
                    named.update(p for p in (_resolve(narrowed, token)[:1] or _resolve(base, token)[:1]) if p.is_dir())
    return named


#: The folders whose packages are plugins, found by name (an engine, a task, a launcher kind): a plugin is one
#: folder that says what it is in its own ``__init__``, so adding one touches no line of ARCHITECTURE.md.
PLUGIN_HOMES = ("protocol/engines", "protocol/tasks", "runner/launch/kinds")


def folders(root: Path = ROOT) -> set[Path]:
    """Every package folder of the project's code (a folder whose ``__init__.py`` makes it one), but the plugins'
    own folders (:data:`PLUGIN_HOMES`) and what is inside them."""
    homes = [root / home for home in PLUGIN_HOMES]
    return {path.parent for package in PACKAGES for path in (root / package).rglob("__init__.py")
            if "results" not in path.parts and not any(home in path.parent.parents for home in homes)}


def test_every_folder_is_named_in_architecture() -> None:
    missing = sorted(path.relative_to(ROOT).as_posix()
                     for path in folders() - named_folders(ARCHITECTURE.read_text(encoding="utf-8")))
    assert not missing, f"folders ARCHITECTURE.md does not name (say what each is for in its package's list): " \
        f"{missing}"


def test_architecture_is_a_map_not_an_inventory() -> None:
    """About 150 lines: the floors, the folders, one campaign's data flow, where to add each kind."""
    assert len(ARCHITECTURE.read_text(encoding="utf-8").splitlines()) <= 160


def campaign_block_files(text: str) -> set[str]:
    """The file names of ARCHITECTURE.md's campaign-directory block (``DIR/summary.{md,json}`` → both)."""
    names: set[str] = set()
    for line in sections(text).get("Campaign directory", []):
        match = re.match(r"^DIR/(\S+)", line)
        if not match:
            continue
        for path in re.split(r",(?![^{]*\})", match.group(1)):
            leaf = path.strip().rstrip("/").split("/")[-1].removesuffix(".partial-N")
            brace = re.fullmatch(r"(.*)\{(.*)\}", leaf)
            names.update([brace.group(1) + ext for ext in brace.group(2).split(",")] if brace else [leaf])
    return names


def layout_files() -> set[str]:
    """Every file name runner/campaign_dir/layout.py declares: ``CAMPAIGN_FILES`` and the ``CampaignPaths``
    properties."""
    from runner.campaign_dir import layout

    paths = layout.CampaignPaths(Path("/campaign"))
    return set(layout.CAMPAIGN_FILES) | {getattr(paths, name).name for name, value in vars(layout.CampaignPaths).items()
                                         if isinstance(value, property)}


def test_layout_declares_every_file_a_real_campaign_wrote() -> None:
    """The golden 1.0 campaign (a real run, validated and summarized: tests/golden.py) holds no file layout.py
    does not declare (its writer lock aside, which the recording removed)."""
    golden = ROOT / "tests" / "data" / "golden_campaign"
    written = {path.name for path in golden.iterdir() if path.is_file()}
    assert written - layout_files() == set()


def test_the_campaign_directory_block_lists_every_file_a_campaign_writes() -> None:
    missing = sorted(layout_files() - campaign_block_files(ARCHITECTURE.read_text(encoding="utf-8")))
    assert not missing, f"layout.py's files not in ARCHITECTURE.md's campaign directory: {missing}"


def test_the_checks_catch_what_they_are_for() -> None:
    text = ("### runner/\n\n- `campaign_dir/` the campaign directory format\n\n"
            "## Campaign directory\n\n```\nDIR/raw.csv  rows\n```\n")
    assert ROOT / "runner" / "campaign_dir" in named_folders(text)
    assert ROOT / "runner" / "analysis" not in named_folders(text)
    nested = "### protocol/\n\n- `tasks/` the tasks: `embedding/`, `generation/`\n"
    tasks = ROOT / "protocol" / "tasks"
    assert {tasks / "embedding", tasks / "generation"} <= named_folders(nested)
    assert campaign_block_files(text) == {"raw.csv"}
    assert {"raw.csv", "campaign.json", "events.jsonl"} <= layout_files()


def test_the_launcher_interface_lists_the_protocols_members() -> None:
    """The ``base.py`` item of ``launch/`` names every member of the ``Launcher`` protocol, and no other."""
    from runner.launch.launcher import Launcher

    item = next(item for item in bullets(sections(ARCHITECTURE.read_text(encoding="utf-8"))["runner/"])
                if item.startswith("`launch/`"))
    listed = item.split("the `Launcher` interface", 1)[1].split("`LauncherBase`", 1)[0]
    named = {token for token in CODE.findall(listed) if re.fullmatch(r"[a-z_]+", token)}
    members = {name for name in vars(Launcher) if not name.startswith("_")} | set(Launcher.__annotations__)
    assert named == members, (sorted(named - members), sorted(members - named))
