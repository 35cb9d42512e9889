"""Fixtures for the Slurm tests: a real one-node cluster (munged, slurmctld, slurmd) for the session.

Without root or Debian's Slurm packages these tests skip with the reason; with
``ISOCOST_REQUIRE_SLURM=1`` (CI) they fail instead. The daemons are this fixture's children,
under a temporary directory, stopped at the end of the session (tests/slurm/cluster.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import image_lock
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))  # cases.py: the trial images

from cluster_fixture import cluster, slurm_cluster  # noqa: E402,F401


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slurm: needs a one-node Slurm cluster (started by the tests)")


def _image_or_skip(build: Callable[[], str]) -> str:
    """Build a trial image for the docker-runtime tests; skip with the reason without an engine (fail in CI)."""
    from cases import NotRun, docker_unavailable

    why = docker_unavailable()
    if why:
        if os.environ.get("ISOCOST_REQUIRE_DOCKER") == "1":
            pytest.fail(f"ISOCOST_REQUIRE_DOCKER=1 but {why}", pytrace=False)
        pytest.skip(why)
    try:
        return build()
    except NotRun as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cpu_image() -> str:
    """The image ID of this checkout's ``cpu`` image (built once per run, see tests/faults/cases.py)."""
    from cases import cpu_image as build

    with image_lock.held("shared"):  # not while another worker's test has removed it (tests/image_lock.py)
        return _image_or_skip(build)


@pytest.fixture(scope="module")
def cpu_vllm_image() -> str:
    """The image ID of this checkout's ``cpu-vllm`` image, built on the local base into a private lock."""

    def build() -> str:
        from cases import BASE_IMAGE

        from runner.images.build import build_image

        lock = Path(tempfile.mkdtemp(prefix="isocost-lock-")) / "images.lock"
        return build_image("cpu-vllm", BASE_IMAGE, lock_path=lock).image_id

    return _image_or_skip(build)
