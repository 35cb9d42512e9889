"""The process launcher says, before anything runs, that a study on a GPU stack would have every trial refused by
its interpreter's torch build (issue 48, bad input: ``check`` of a CUDA study under a CPU torch said "isocost run
would start", and ``run`` then refused trial after trial). The build is read from ``torch/version.py`` by the
interpreter itself: real interpreters, with a torch package of each build on their path."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.launch.kinds.process.interpreter import wrong_builds

VERSION = "__version__ = '2.13.0{local}'\ncuda: Optional[str] = {cuda}\nhip: Optional[str] = {hip}\n"


def _python(tmp_path: Path, name: str, version_py: str | None) -> str:
    """An interpreter (this one, behind a script) whose ``torch`` is a stand-in package with ``version_py``."""
    site = tmp_path / name / "site"
    if version_py is not None:
        (site / "torch").mkdir(parents=True)
        (site / "torch" / "__init__.py").write_text("", encoding="utf-8")
        (site / "torch" / "version.py").write_text("from typing import Optional\n" + version_py, encoding="utf-8")
    else:
        site.mkdir(parents=True)
    script = tmp_path / name / "python"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={site} PYTHONNOUSERSITE=1 exec {sys.executable} -S \"$@\"\n",
                      encoding="utf-8")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(("build", "version_py", "refused"), [
    ("cpu", VERSION.format(local="+cpu", cuda="None", hip="None"), "is a cpu build"),
    ("cuda", VERSION.format(local="+cu130", cuda="'13.0'", hip="None"), ""),
    ("rocm", VERSION.format(local="+rocm7.2", cuda="None", hip="'7.2.4'"), "is a rocm build"),
    ("none", None, "is missing"),
])
def test_a_cuda_study_is_refused_unless_the_interpreters_torch_is_a_cuda_build(
        tmp_path: Path, build: str, version_py: str | None, refused: str) -> None:
    python = _python(tmp_path, build, version_py)
    variants = [SimpleNamespace(stack=stack, engine="transformers") for stack in ("cuda", "cpu")]
    errors = wrong_builds(variants, python)
    if not refused:
        assert errors == []
        return
    (error,) = errors
    assert f"the study's stack is 'cuda', and the torch of {python} {refused}" in error.what
    assert "every trial would be refused" in error.what and "--stack cuda" in error.fix


def test_a_cpu_study_asks_no_interpreter(tmp_path: Path) -> None:
    assert wrong_builds([SimpleNamespace(stack="cpu", engine="transformers")], str(tmp_path / "no-python")) == []
