"""Fixtures for the Slurm tests: a real one-node cluster (munged, slurmctld, slurmd) for the session.

Without root or Debian's Slurm packages these tests skip with the reason; with
``ISOCOST_REQUIRE_SLURM=1`` (CI) they fail instead. The daemons are this fixture's children,
under a temporary directory, stopped at the end of the session (tests/slurm/cluster.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_fixture import cluster, slurm_cluster  # noqa: E402,F401


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slurm: needs a one-node Slurm cluster (started by the tests)")
