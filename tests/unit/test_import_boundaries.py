"""The layering ARCHITECTURE.md describes, checked on the code.

- ``protocol/`` imports none of torch, transformers, docker or click, but for the trial halves of its plugins;
- only ``runner/trial/`` and those trial halves import torch or transformers;
- the host CLI starts without torch or transformers;
- what runs inside the trial images (``protocol/``, ``runner/trial/``) never imports pandas, and the images'
  requirements hold none: pandas is the host's (pyproject's ``host`` extra).

Each rule is checked by an AST walk over every file (an import inside a
function counts too) and, where it can be, by importing in a fresh interpreter
and looking at ``sys.modules``. A built-in task or engine is one folder, like a user's: its pure half
(``__init__.py`` and its siblings) and its trial half (``trial.py``, or a ``trial/`` package) side by side. The
rules apply to modules, not folders: a trial half is on the trial's layer (``runner.trial``), its pure siblings on
``protocol``'s, which never import it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = [ROOT / "protocol" / "tasks", ROOT / "protocol" / "engines"]


def is_trial_half(path: Path) -> bool:
    """A plugin's ``trial.py`` or a module of its ``trial/`` package (``protocol/engines/vllm/trial/server.py``)."""
    for plugins in PLUGINS:
        if plugins in path.parents:
            parts = path.relative_to(plugins).parts
            return len(parts) >= 2 and (parts[1] == "trial.py" or (parts[1] == "trial" and len(parts) > 2))
    return False


ALL_PROTOCOL = sorted((ROOT / "protocol").rglob("*.py"))
TRIAL_HALVES = [p for p in ALL_PROTOCOL if is_trial_half(p)]
PROTOCOL = [p for p in ALL_PROTOCOL if not is_trial_half(p)]
RUNNER = sorted((ROOT / "runner").rglob("*.py"))
TRIAL = ROOT / "runner" / "trial"
HOST = sorted(p for p in RUNNER if TRIAL not in p.parents)

PROTOCOL_FORBIDDEN = {"torch", "transformers", "docker", "click", "pandas"}
#: The host's table library: never in the code the trial images run, nor in their requirements.
HOST_ONLY = {"pandas"}
IN_IMAGES = ALL_PROTOCOL + sorted(TRIAL.rglob("*.py"))
MODEL_LIBRARIES = {"torch", "transformers"}


def imported_roots(source: str) -> set[str]:
    """Top-level names of every module ``source`` imports, at any depth (relative imports skipped)."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_scan_sees_the_code():
    assert {"protocol/study/load.py", "protocol/records/stages.py"} <= {_name(p) for p in PROTOCOL}
    halves = {_name(p) for p in TRIAL_HALVES}
    assert {"protocol/tasks/classification/trial.py", "protocol/engines/vllm/trial/server.py"} <= halves
    assert not {"protocol/tasks/classification/__init__.py", "protocol/tasks/base.py"} & halves
    host_names = {_name(p) for p in HOST}
    assert {"runner/demo/build.py", "runner/cli/__init__.py", "runner/launch/kinds/docker/launcher.py"} <= host_names
    assert all(TRIAL not in p.parents for p in HOST)


def test_the_ast_scan_sees_imports_inside_functions():
    source = "import os\ndef f():\n    import torch.nn\n    from transformers import AutoModel\n"
    assert imported_roots(source) == {"os", "torch", "transformers"}
    assert imported_roots("from . import x\nfrom .y import z\n") == set()


@pytest.mark.parametrize("path", PROTOCOL, ids=_name)
def test_protocol_imports_no_framework(path):
    assert imported_roots(path.read_text(encoding="utf-8")) & PROTOCOL_FORBIDDEN == set()


@pytest.mark.parametrize("path", IN_IMAGES, ids=_name)
def test_what_runs_in_the_images_imports_no_pandas(path):
    assert imported_roots(path.read_text(encoding="utf-8")) & HOST_ONLY == set()


def test_the_images_requirements_hold_no_pandas_and_the_host_extra_pins_it():
    requirements = sorted((ROOT / "images").glob("*/requirements.lock"))
    assert [path.parent.name for path in requirements] == ["cpu", "cpu-vllm", "cuda", "rocm"]
    for path in requirements:  # the locks: every package an image installs, its dependencies' included
        names = {line.split("#")[0].split("==")[0].strip().lower() for line in path.read_text().splitlines()}
        assert names & HOST_ONLY == set(), path
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any(d.startswith("pandas") for d in project["dependencies"])  # `pip check` in the images
    assert [d for d in project["optional-dependencies"]["host"] if d.startswith("pandas")] == ["pandas==3.1.1"]


@pytest.mark.parametrize("path", HOST, ids=_name)
def test_only_the_trial_imports_torch_or_transformers(path):
    assert imported_roots(path.read_text(encoding="utf-8")) & MODEL_LIBRARIES == set()


def test_importing_every_protocol_module_loads_no_framework():
    modules = [_module(p) for p in PROTOCOL]
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in {sorted(PROTOCOL_FORBIDDEN)!r})))\n"
    )
    result = _fresh(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_the_host_cli_starts_without_torch():
    code = (
        "import json, sys\n"
        "import runner.cli\n"
        f"print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in {sorted(MODEL_LIBRARIES)!r})))\n"
    )
    result = _fresh(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    help_run = subprocess.run([sys.executable, "-m", "runner.cli", "--help"], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                              timeout=120, check=False)
    assert help_run.returncode == 0, help_run.stderr
    assert "Usage:" in help_run.stdout and "demo" in help_run.stdout


# --------------------------------------------------------------------------- layers
#: The host side's packages, lowest first (ARCHITECTURE.md draws them). A module may import its own
#: package, ``protocol`` and any package on a lower layer; never one on its own layer or above.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"protocol", "runner"}),
    frozenset({"runner.trial"}),
    frozenset({"runner.campaign_dir"}),
    frozenset({"runner.launch"}),
    frozenset({"runner.images"}),
    frozenset({"runner.campaign"}),
    frozenset({"runner.analysis", "runner.hosts"}),
    frozenset({"runner.decision", "runner.bundle", "runner.own", "runner.demo", "runner.selfcheck"}),
    frozenset({"runner.cli"}),
)


def _package(module: str) -> str:
    path = ROOT / Path(*module.split("."))
    if is_trial_half(path.with_suffix(".py")) or is_trial_half(path / "__init__.py"):
        return "runner.trial"
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "runner" and len(parts) > 1 else parts[0]


def _layer(module: str) -> int:
    package = _package(module)
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"{module}: package {package} is on no layer; add it to LAYERS and ARCHITECTURE.md")


def project_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` counts as ``a.b``), at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] in {"protocol", "runner"})
    return found


def test_every_package_is_on_a_layer():
    for path in ALL_PROTOCOL + RUNNER:
        _layer(_module(path))


def test_the_layer_check_sees_an_upward_import():
    assert _layer("runner.launch.kinds.docker.launcher") < _layer("runner.images.build")
    # a plugin's pure half may not import its trial half (layer 1), which may import the trial's own modules
    assert _layer("protocol.tasks.generation") < _layer("protocol.tasks.generation.trial") == _layer("runner.trial.run")
    assert _package("protocol.engines.vllm.trial.server") == _package("runner.trial.tasks.base") == "runner.trial"
    assert _layer("runner.campaign_dir.layout") < _layer("runner.campaign.run")


@pytest.mark.parametrize("path", ALL_PROTOCOL + RUNNER, ids=_name)
def test_no_import_runs_back_up_a_layer(path):
    here = _module(path)
    upward = sorted(
        target for target in project_imports(path)
        if _package(target) != _package(here) and _layer(target) >= _layer(here)
    )
    assert upward == [], f"{here} imports from its own layer or above: {upward}"


def _imports_of(path: Path, modules: dict[str, Path], module_level: bool, typing_only: bool = False) -> set[str]:
    """The project modules ``path`` imports: at module level only, or anywhere (inside functions too); those under
    ``if TYPE_CHECKING:``, which no run executes, only with ``typing_only``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING" and not typing_only:
            node.body = []
    targets: set[str] = set()
    for node in (tree.body if module_level else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            targets.add(node.module)
            targets.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
        elif isinstance(node, ast.Import):
            targets.update(a.name for a in node.names if a.name in modules)
    return targets


def _first_cycle(module_level: bool, typing_only: bool = False) -> str:
    modules = {_module(p): p for p in ALL_PROTOCOL + RUNNER}
    graph = {name: _imports_of(path, modules, module_level, typing_only) - {name} for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> str:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return " -> ".join([*trail[trail.index(target):], target])
            if target not in state:
                found = visit(target, [*trail, target])
                if found:
                    return found
        state[node] = 2
        return ""

    for name in sorted(graph):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return ""


def test_no_module_level_import_cycle():
    """Module-level imports form no cycle between modules."""
    assert _first_cycle(module_level=True) == ""


def test_no_import_cycle_even_through_imports_inside_functions():
    """Nor do all imports, those inside functions included (a deferred import is not a way round a cycle)."""
    assert _first_cycle(module_level=False) == ""


def test_no_import_cycle_even_through_typing_only_imports():
    """Nor do the imports under ``if TYPE_CHECKING:``: a type a module needs from one that imports it back is a
    circle a reader follows all the same (the trial's passes fill a TrialState, not the Trial)."""
    assert _first_cycle(module_level=False, typing_only=True) == ""

