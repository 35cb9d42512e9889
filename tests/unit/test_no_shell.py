"""Nothing a study, a corpus or a bundle says can reach a shell, an evaluator or a deserializer.

Two scans of every module in ``runner/`` and ``protocol/``: a plain-text grep
(catches the words even in comments, where a copy-paste would start) and an AST
walk (catches the calls however they are spelled).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for package in ("runner", "protocol") for p in (ROOT / package).rglob("*.py"))

#: Text that must not appear at all. ``eval(`` only as a bare call: ``model.eval()`` is torch's eval mode.
FORBIDDEN_TEXT = {
    "shell=True": re.compile(r"shell\s*=\s*True"),
    "os.system": re.compile(r"\bos\.system\b"),
    "os.popen": re.compile(r"\bos\.popen\b"),
    "eval(": re.compile(r"(?<![\w.])eval\s*\("),
    "exec(": re.compile(r"(?<![\w.])exec\s*\("),
    "pickle": re.compile(r"pickle", re.IGNORECASE),
}

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_ATTRIBUTE_CALLS = {
    ("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"),
    ("os", "execl"), ("os", "execlp"), ("os", "execle"), ("os", "execv"), ("os", "execvp"), ("os", "execvpe"),
    ("os", "spawnl"), ("os", "spawnlp"), ("os", "spawnv"), ("os", "spawnvp"),
}
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output"}


def test_the_scan_sees_the_code():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"runner/launch/kinds/process/launcher.py", "runner/bundle/pack.py", "protocol/study/load.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_forbidden_text(path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for what, pattern in FORBIDDEN_TEXT.items():
            assert not pattern.search(line), f"{path.relative_to(ROOT)}:{number}: {what!r} in {line.strip()!r}"


def _dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _is_text(node: ast.expr) -> bool:
    """A command given as one string (a shell would split it) rather than a list of arguments."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return False


def problems_in(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: imports {module}")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        for keyword in node.keywords:
            plainly_false = isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            if keyword.arg == "shell" and not plainly_false:
                found.append(f"line {node.lineno}: shell= in a call")
        if len(name) == 1 and name[0] in FORBIDDEN_CALLS:
            found.append(f"line {node.lineno}: calls {name[0]}()")
        if name[-2:] in FORBIDDEN_ATTRIBUTE_CALLS:
            found.append(f"line {node.lineno}: calls {'.'.join(name)}()")
        if name and name[-1] == "extractall":
            found.append(f"line {node.lineno}: calls extractall() (use protocol.io.safe_extract)")
        if name and name[-1] == "load" and "torch" in name[:-1]:
            if not any(k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                       for k in node.keywords):
                found.append(f"line {node.lineno}: torch.load without weights_only=True")
        if len(name) >= 2 and name[-2] == "subprocess" and name[-1] in SUBPROCESS_CALLS and node.args:
            if _is_text(node.args[0]):
                found.append(f"line {node.lineno}: subprocess.{name[-1]} with a command string")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_shell_eval_or_unsafe_deserialisation(path):
    assert problems_in(path.read_text(encoding="utf-8")) == []


def test_the_ast_scan_catches_every_spelling():
    bad = "\n".join([
        "import subprocess, os",
        "import pickle",
        "from marshal import loads",
        "subprocess.run('ls ' + x)",
        "subprocess.Popen(f'ls {x}')",
        "subprocess.check_output(cmd, shell=flag)",
        "os.system(x)",
        "eval(x)",
        "exec(x)",
        "tar.extractall(dest)",
        "torch.load(path)",
    ])
    flagged = sorted({int(problem.split(":")[0].removeprefix("line ")) for problem in problems_in(bad)})
    assert flagged == list(range(2, 12))  # every line but the harmless first one
    good = "subprocess.run(['ls', x], shell=False)\nmodel.eval()\ntorch.load(p, weights_only=True)\n"
    assert problems_in(good) == []
