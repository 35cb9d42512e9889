"""The fault-injection suite as tests: every case must keep its row and reach the expected status.

Each case runs with trials as processes and, where a Docker engine answers, in containers
(``-m docker`` selects those). Without an engine the container cases skip with the reason, or
fail with ``ISOCOST_REQUIRE_DOCKER=1`` (CI), as in tests/docker.
"""

from __future__ import annotations

import os

import pytest
from cases import DOCKER_CASES, PROCESS_CASES, NotRun, docker_context, process_context

pytestmark = pytest.mark.e2e

REQUIRE_ENV = "ISOCOST_REQUIRE_DOCKER"


def unavailable(reason: str) -> None:
    """Skip, or fail when CI demands the engine (the pattern of tests/docker/conftest.py)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


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
    return cpu_image()


@pytest.mark.parametrize("name", sorted(PROCESS_CASES))
def test_fault_case_in_processes(name, tmp_path, tiny_model):
    if name == "disk-full" and os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    outcome = PROCESS_CASES[name](process_context(tmp_path, tiny_model))
    assert outcome.rows_lost == 0, outcome
    assert outcome.passed, outcome


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(DOCKER_CASES))
def test_fault_case_in_containers(name, tmp_path, tiny_model, fault_image):
    if name in ("disk-full", "engine-restart") and os.geteuid() != 0:
        unavailable("mounting a small tmpfs, or starting a second dockerd, needs root")
    try:
        outcome = DOCKER_CASES[name](docker_context(tmp_path, tiny_model, image=fault_image))
    except NotRun as exc:
        unavailable(str(exc))
    assert outcome.rows_lost == 0, outcome
    assert outcome.passed, outcome
