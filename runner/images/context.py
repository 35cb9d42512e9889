"""The build context of an image: Dockerfile, lock, wheelhouse and the source, plus the git revision.

:func:`assemble_context` copies only what the image needs (``pyproject.toml``, ``protocol/``,
``runner/`` …, no caches); :func:`git_revision` and :func:`git_source` are recorded as labels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from runner.images.stacks import (
    dockerfile_path,
    requirements_paths,
)


def git_revision(root: Path) -> str:
    """HEAD's commit, ``-dirty`` when the work tree differs; ``uncommitted`` without any commit."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)

    try:
        head = git("rev-parse", "--verify", "HEAD")
    except FileNotFoundError:
        return "unknown (git not installed)"
    if head.returncode != 0:
        return "uncommitted"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def git_source(root: Path) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True,
                              text=True, check=False)
    except FileNotFoundError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


_SOURCE_ITEMS = ("pyproject.toml", "README.md", "LICENSE", "protocol", "runner")


def assemble_context(ctx: Path, stack: str, root: Path, wheels: list[Path], debs: Sequence[Path] = ()) -> None:
    """Dockerfile, requirements.lock, the locked wheels and ``.deb`` files (hard links when possible), the sources."""
    shutil.copy2(dockerfile_path(stack, root), ctx / "Dockerfile")
    shutil.copy2(requirements_paths(stack, root)[1], ctx / "requirements.lock")
    for folder, files in (("wheels", wheels), ("debs", debs)):
        (ctx / folder).mkdir()
        for file in files:
            target = ctx / folder / file.name
            try:
                os.link(file, target)
            except OSError:
                shutil.copy2(file, target)
    src = ctx / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".mypy_cache", ".pytest_cache")
    for item in _SOURCE_ITEMS:
        path = root / item
        if path.is_dir():
            shutil.copytree(path, src / item, ignore=ignore)
        elif path.is_file():
            shutil.copy2(path, src / item)


