"""The layering ARCHITECTURE.md describes, checked on the code.

- ``protocol/`` imports none of torch, transformers, docker or click;
- only ``runner/trial/`` imports torch or transformers;
- the host CLI starts without torch or transformers.

Each rule is checked by an AST walk over every file (an import inside a
function counts too) and, where it can be, by importing in a fresh interpreter
and looking at ``sys.modules``.
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
PROTOCOL = sorted((ROOT / "protocol").rglob("*.py"))
RUNNER = sorted((ROOT / "runner").rglob("*.py"))
TRIAL = ROOT / "runner" / "trial"
HOST = sorted(p for p in RUNNER if TRIAL not in p.parents)

PROTOCOL_FORBIDDEN = {"torch", "transformers", "docker", "click"}
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
    assert {"protocol/study.py", "protocol/records.py"} <= {_name(p) for p in PROTOCOL}
    assert {"runner/demo/build.py", "runner/cli/__init__.py", "runner/launch/docker.py"} <= {_name(p) for p in HOST}
    assert all(TRIAL not in p.parents for p in HOST)


def test_the_ast_scan_sees_imports_inside_functions():
    source = "import os\ndef f():\n    import torch.nn\n    from transformers import AutoModel\n"
    assert imported_roots(source) == {"os", "torch", "transformers"}
    assert imported_roots("from . import x\nfrom .y import z\n") == set()


@pytest.mark.parametrize("path", PROTOCOL, ids=_name)
def test_protocol_imports_no_framework(path):
    assert imported_roots(path.read_text(encoding="utf-8")) & PROTOCOL_FORBIDDEN == set()


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
