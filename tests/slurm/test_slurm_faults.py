"""The Slurm fault cases (tests/faults/slurm_cases.py) under pytest: rows lost 0 and the expected outcome each."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))

from slurm_cases import SLURM_CASES, SlurmContext, ready  # noqa: E402

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.mark.parametrize("name", sorted(SLURM_CASES))
def test_slurm_fault_case(name, slurm_cluster, tmp_path, tiny_model):
    ready(slurm_cluster)
    try:
        outcome = SLURM_CASES[name](SlurmContext(root=tmp_path, model=tiny_model, cluster=slurm_cluster))
    finally:
        ready(slurm_cluster)
    said = f"observed: {outcome.observed}; expected: {outcome.expected}; detail: {outcome.detail}"
    assert outcome.rows_lost == 0, said
    assert outcome.passed, said
