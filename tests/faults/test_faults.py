"""The fault-injection suite as tests: every case must keep its row and reach the expected status.

Each case runs with trials as processes and, where a Docker engine answers, in containers
(``-m docker`` selects those). Without an engine the container cases skip with the reason, or
fail with ``ISOCOST_REQUIRE_DOCKER=1`` (CI), as in tests/docker.
"""

from __future__ import annotations

import os

import image_lock
import pytest
from cases import (
    DOCKER_CASES,
    PROCESS_CASES,
    REQUIRE_DOCKER_ENV,
    REQUIRE_MOUNT_ENV,
    NotRun,
    docker_context,
    mount_refused,
    process_context,
)

pytestmark = pytest.mark.e2e

#: Cases that mount a small tmpfs: they need the capability, probed by trying it (not by the uid).
MOUNTING_CASES = ("disk-full",)


def unavailable(reason: str, required_by: str = REQUIRE_DOCKER_ENV) -> None:
    """Skip, or fail when CI demands it (the pattern of tests/docker/conftest.py)."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{required_by}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_mount(name: str) -> None:
    if name in MOUNTING_CASES:
        why = mount_refused()
        if why:
            unavailable(why, REQUIRE_MOUNT_ENV)


@pytest.fixture(scope="session")
def fault_image() -> str:
    """This checkout's CPU image (built once per session; seconds with the layer cache)."""
    try:
        import docker  # noqa: F401
    except ImportError:
        unavailable("the docker Python SDK is not installed (pip install 'docker>=7')")
    from cases import cpu_image, docker_unavailable

    why = docker_unavailable()
    if why:
        unavailable(why)
    with image_lock.held("shared"):  # not while another worker's test has removed it (tests/image_lock.py)
        return cpu_image()


@pytest.mark.parametrize("name", sorted(PROCESS_CASES))
def test_fault_case_in_processes(name, tmp_path, tiny_model):
    require_mount(name)
    try:
        outcome = PROCESS_CASES[name](process_context(tmp_path, tiny_model))
    except NotRun as exc:
        unavailable(str(exc), exc.required_by)
    assert outcome.rows_lost == 0, outcome
    assert outcome.passed, outcome


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(DOCKER_CASES))
def test_fault_case_in_containers(name, tmp_path, tiny_model, fault_image):
    require_mount(name)
    if name == "engine-restart" and os.geteuid() != 0:
        unavailable("starting a second dockerd needs root")
    try:
        outcome = DOCKER_CASES[name](docker_context(tmp_path, tiny_model, image=fault_image))
    except NotRun as exc:
        unavailable(str(exc), exc.required_by)
    assert outcome.rows_lost == 0, outcome
    assert outcome.passed, outcome
