"""The fault-injection suite as tests: every case must keep its row and reach the expected status."""

from __future__ import annotations

import pytest
from cases import PROCESS_CASES, process_context

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", sorted(PROCESS_CASES))
def test_fault_case_in_processes(name, tmp_path, tiny_model):
    if name == "disk-full" and __import__("os").geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    outcome = PROCESS_CASES[name](process_context(tmp_path, tiny_model))
    assert outcome.rows_lost == 0, outcome
    assert outcome.passed, outcome
