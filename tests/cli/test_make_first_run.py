"""The first command on a new machine: ``make run`` builds only what its study needs, and ``make torch`` says
what it installs and can be pointed at a CPU build.

Read with ``make -n`` (the commands make would run, none run): the recipes, not a build.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.isocost-installed"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def dry_run(*args: str) -> str:
    """What ``make -n ARGS`` would run (``-o STAMP``: the venv counts as built)."""
    result = subprocess.run(["make", "--no-print-directory", "-n", "-o", STAMP, *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def prepare_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "demo prepare" in line]


@pytest.mark.parametrize(("study", "target"), [
    ("quick", "run"), ("classify-1000", "run"), ("embed", "run"), ("generate", "run"), ("quick", "run-cpu"),
])
def test_make_run_builds_only_the_demo_its_study_needs(study: str, target: str) -> None:
    lines = prepare_lines(dry_run(target, f"STUDY={study}"))
    assert len(lines) == 1, lines
    assert f"--study {study}" in lines[0], lines[0]


def test_make_run_defaults_to_the_quick_study_alone() -> None:
    lines = prepare_lines(dry_run("run"))
    assert len(lines) == 1 and "--study quick" in lines[0], lines


def test_make_demo_still_builds_every_demo() -> None:
    lines = prepare_lines(dry_run("demo"))
    assert len(lines) == 1 and "--study" not in lines[0], lines


def test_make_torch_takes_a_wheel_folder_and_says_what_it_installed(tmp_path: Path) -> None:
    output = dry_run("torch", f"TORCH_WHEELS={tmp_path}")
    assert f"--find-links {tmp_path}" in output
    assert "torch.version.cuda" in output  # the installed build is reported, not assumed


@pytest.mark.parametrize("target", ["help"])
def test_make_help_documents_the_torch_variables(target: str) -> None:
    output = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=False).stdout
    assert "TORCH_WHEELS" in output and "TORCH_INDEX" in output and "STUDY" in output


def test_the_readme_says_how_to_point_make_at_a_cpu_torch() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "TORCH_WHEELS=" in readme and "TORCH_INDEX=" in readme
    assert "CPU build `torch" not in readme  # what it installs depends on the index: said, not promised
