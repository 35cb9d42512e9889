"""The card floor of a CUDA torch build (issue 48): the architectures its wheel was compiled for
(``torch.cuda.get_arch_list()``) against the card's compute capability. The CUDA 13 wheels of the ``cuda`` image
list sm_75 … sm_120: a Volta (7.0) or Pascal (6.1) card is older than the oldest and must be refused before rented
time is spent, with what to do instead; a cubin runs on a later minor of its major, PTX on any later card."""

from __future__ import annotations

import pytest

from protocol.hardware.compat import LISTED, NOT_LISTED, UNKNOWN, check_card, check_device

CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # torch 2.13.0+cu130, read in the cuda image


@pytest.mark.parametrize(("capability", "status"), [
    ("7.5", LISTED), ("8.0", LISTED), ("8.9", LISTED),  # 8.9 runs the sm_86 cubin (same major, later minor)
    ("9.0", LISTED), ("12.0", LISTED), ("12.1", LISTED),
    ("7.0", NOT_LISTED), ("6.1", NOT_LISTED),  # Volta, Pascal: older than sm_75
    ("11.0", NOT_LISTED),  # a major with no cubin and no PTX to JIT from
])
def test_capability_against_the_cu130_wheel(capability: str, status: str) -> None:
    assert check_card(capability, CU130).status == status


def test_an_older_card_is_named_with_the_oldest_architecture_and_the_way_out() -> None:
    result = check_card("7.0", CU130)
    assert "sm_70" in result.detail and "sm_75" in result.detail and "older" in result.detail
    assert "base" in result.detail  # the fix: a torch build for it, through a base or index override
    assert result.inputs == {"compute_capability": "7.0", "arch_list": " ".join(CU130)}


def test_ptx_runs_on_any_later_card_an_arch_specific_cubin_on_its_own_only() -> None:
    assert check_card("10.0", ["sm_80", "compute_90"]).status == LISTED  # JIT from PTX
    assert check_card("8.6", ["sm_80", "compute_90"]).status == LISTED  # the sm_80 cubin
    assert check_card("9.0", ["sm_90a"]).status == LISTED
    assert check_card("10.0", ["sm_90a"]).status == NOT_LISTED


@pytest.mark.parametrize(("capability", "arch_list"), [(None, CU130), ("9.0", []), ("nine", CU130)])
def test_nothing_detected_is_unknown(capability: str | None, arch_list: list[str]) -> None:
    assert check_card(capability, arch_list).status == UNKNOWN


def test_the_trials_compat_record_refuses_the_card_though_the_driver_is_new_enough() -> None:
    facts = {"backend": "cuda", "backend_version": "13.0", "driver_version": "580.95.05"}
    assert check_device({**facts, "compute_capability": "9.0", "arch_list": CU130}, "2.13.0")["status"] == LISTED
    old = check_device({**facts, "compute_capability": "7.0", "arch_list": CU130}, "2.13.0")
    assert old["status"] == NOT_LISTED and "sm_70" in old["detail"]
    assert old["inputs"]["driver_version"] == "580.95.05" and old["inputs"]["compute_capability"] == "7.0"
    low = check_device({**facts, "driver_version": "570.124.06", "compute_capability": "9.0", "arch_list": CU130},
                       "2.13.0")
    assert low["status"] == NOT_LISTED and "580.65.06" in low["detail"]  # the driver floor still speaks first
