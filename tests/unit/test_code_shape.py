"""The shape a reader can hold in their head, checked on the code (ruff checks complexity and statements).

No module in ``protocol/``, ``runner/`` or ``benchmarks/`` over 500 lines; no function over 60 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted(p for top in ("protocol", "runner", "benchmarks") for p in (ROOT / top).rglob("*.py"))
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method longer than ``limit`` lines, decorators excluded."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_the_scan_sees_the_code_and_a_long_function():
    assert {"protocol/records/stages.py", "runner/cli/__init__.py", "benchmarks/scale.py"} <= {
        p.relative_to(ROOT).as_posix() for p in CODE}
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [("f", MAX_FUNCTION_LINES + 1)]
    assert long_functions("def g():\n    return 1\n") == []


@pytest.mark.parametrize("path", CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_module_and_function_length(path: Path):
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"split {path.name} by concern"
    assert long_functions(source) == [], "split these functions into named steps"
