"""The pytest fixtures of a real test cluster, shared by tests/slurm and the Slurm fault cases.

``slurm_cluster`` (session): the cluster of tests/slurm/cluster.py, ``SLURM_CONF`` set for the
session. ``cluster`` (per test): the same cluster with no job left and its node up, before and after.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster import Cluster, SetupMissing, start, stop  # noqa: E402

#: Set to 1 where the Slurm tests must run (CI): a missing Slurm is then a failure, not a skip.
REQUIRE_ENV = "ISOCOST_REQUIRE_SLURM"


def unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="isocost-slurm-"))  # short: slurmd's paths and munge's socket
    try:
        running = start(root)
    except SetupMissing as exc:
        shutil.rmtree(root, ignore_errors=True)
        unavailable(str(exc))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(running.conf)
    try:
        yield running
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
        stop(running)
        shutil.rmtree(root, ignore_errors=True)


def _ready(running: Cluster) -> None:
    running.cancel_all()
    if not running.usable(running.node_state()):
        running.set_node("resume")
    running.wait_idle()


@pytest.fixture
def cluster(slurm_cluster: Cluster) -> Iterator[Cluster]:
    _ready(slurm_cluster)
    yield slurm_cluster
    _ready(slurm_cluster)
