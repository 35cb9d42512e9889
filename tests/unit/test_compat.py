"""The CUDA minimum-driver table and the ROCm matrix: hand-checked lookups against the shipped data."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.hardware.compat import (
    CUDA_TABLE,
    LISTED,
    NOT_LISTED,
    ROCM_TABLE,
    UNKNOWN,
    check_cuda,
    check_device,
    check_rocm,
    load_table,
    version_tuple,
)


def test_tables_carry_source_date_and_version() -> None:
    for path in (CUDA_TABLE, ROCM_TABLE):
        table = load_table(path)
        assert table.meta["source"]
        assert table.meta["read"] == "2026-09"
        assert table.meta["version"].startswith("2026-09")
        assert table.rows


def test_version_tuple() -> None:
    assert version_tuple("570.124.06") == (570, 124, 6)
    assert version_tuple("7.2.4-123") == (7, 2, 4)
    assert version_tuple("6.4.1.60401-83~22.04") == (6, 4, 1, 60401)
    assert version_tuple("2.10.0+rocm7.2") == (2, 10, 0)
    assert version_tuple("") == ()


@pytest.mark.parametrize(
    ("runtime", "driver", "status"),
    [
        ("12.8", "570.26", LISTED),  # exactly the CUDA 12.8 GA minimum
        ("12.8", "570.124.06", LISTED),
        ("12.8", "570.25.99", NOT_LISTED),  # below: only minor-version compatibility (12.x ≥ 525)
        ("12.8", "520.61.05", NOT_LISTED),  # below the 12.x minor-version floor too
        ("13.0", "580.65.06", LISTED),
        ("13.0", "575.57.08", NOT_LISTED),  # 13.x needs ≥ 580 even for minor-version compatibility
        ("12.7", "560.35.05", UNKNOWN),  # no 12.7 row in the table
        ("10.2", "440.33", UNKNOWN),  # older than the table
        (None, "570.26", UNKNOWN),
        ("12.8", None, UNKNOWN),
    ],
)
def test_cuda(runtime: str | None, driver: str | None, status: str) -> None:
    result = check_cuda(runtime, driver)
    assert result.status == status, result.detail
    assert result.table == "cuda-min-driver.csv"
    assert result.data_version.startswith("2026-09")
    assert result.detail


def test_cuda_minor_version_detail() -> None:
    result = check_cuda("12.8", "565.57.01")
    assert "minor-version compatibility" in result.detail
    assert "570.26" in result.detail


def test_cuda_listed_names_update_minimums() -> None:
    result = check_cuda("12.8", "570.26")
    assert "12.8U1: ≥ 570.124.06" in result.detail


@pytest.mark.parametrize(
    ("rocm", "gfx", "torch", "status"),
    [
        ("6.4.2", "gfx942:sramecc+:xnack-", "2.6.0", LISTED),  # MI300X, range row 6.4.1-6.4.3
        ("7.0.1", "gfx950", "2.7.1", LISTED),  # "7.0.0/7.0.1" row
        ("7.1.0", "gfx942", "2.8.0", LISTED),
        ("6.4.0", "gfx1201", "2.6.0", NOT_LISTED),  # RDNA4 only from 6.4.1
        ("6.3.3", "gfx942", "2.6.0", NOT_LISTED),  # torch 2.6 not listed for 6.3.x
        ("7.2.4", "gfx942", "2.10.0", UNKNOWN),  # newer than the shipped matrix
        ("5.7.1", "gfx90a", "2.1.0", UNKNOWN),  # older than the shipped matrix
        (None, "gfx942", "2.6.0", UNKNOWN),
        ("6.4.2", None, "2.6.0", UNKNOWN),
        ("6.4.2", "gfx942", None, UNKNOWN),
    ],
)
def test_rocm(rocm: str | None, gfx: str | None, torch: str | None, status: str) -> None:
    result = check_rocm(rocm, gfx, torch)
    assert result.status == status, result.detail
    assert result.table == "rocm-compat.csv"
    assert result.data_read == "2026-09"


def test_rocm_not_listed_says_which_part() -> None:
    result = check_rocm("6.3.3", "gfx1201", "2.6.0")
    assert "gfx1201" in result.detail and "PyTorch 2.6" in result.detail


def test_rocm_unknown_names_coverage() -> None:
    # Was 7.2.4 → "6.1.0 to 7.1.0": issue 12 extended the matrix to the pinned image's ROCm 7.2.4.
    assert "6.1.0 to 7.2.4" in check_rocm("7.3.0", "gfx942", "2.10.0").detail


def test_rocm_72_row_of_the_pinned_image_checks_pytorch_but_not_gpu_targets() -> None:
    # The pinned image rocm/pytorch:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0 (ROCm 7.2.4, PyTorch 2.10).
    pinned = check_rocm("7.2.4", "gfx942", "2.10.0+rocm7.2.4")
    assert pinned.status == UNKNOWN and "no GPU target list" in pinned.detail
    assert "rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0" in pinned.detail  # cites its source
    assert check_rocm("7.2.0", "gfx942", "2.12.0").status == UNKNOWN
    off = check_rocm("7.2.4", "gfx942", "2.9.1")
    assert off.status == NOT_LISTED and "PyTorch 2.9" in off.detail


def test_every_rocm_row_names_its_source() -> None:
    assert all(row["source"] for row in load_table(ROCM_TABLE).rows)


def test_check_device_dispatch() -> None:
    cpu = check_device({"backend": "cpu"}, "2.13.0")
    assert cpu["status"] == UNKNOWN and "not applicable" in cpu["detail"] and cpu["table"] == ""
    cuda = check_device({"backend": "cuda", "backend_version": "12.8", "driver_version": "580.95.05"}, "2.11.0")
    assert cuda["status"] == LISTED and cuda["table"] == "cuda-min-driver.csv"
    rocm = check_device({"backend": "rocm", "rocm_version": "6.4.2", "gfx_arch": "gfx90a"}, "2.5.1+rocm6.4")
    assert rocm["status"] == LISTED and rocm["inputs"]["torch_version"] == "2.5.1+rocm6.4"


def test_custom_table(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("# source: test\n# read: 2000-01\n# version: x\nkind,cuda,min_linux_driver,below_linux_driver\n"
                     "toolkit,12.8,600.1,\n", encoding="utf-8")
    result = check_cuda("12.8", "599.9", table_path=table)
    assert result.status == NOT_LISTED and result.data_version == "x"


def test_device_facts_records_compat_for_cpu() -> None:
    torch = pytest.importorskip("torch")
    from runner.trial.env import device_facts

    facts, _ = device_facts(torch, "cpu")
    assert facts["compat"]["status"] == UNKNOWN
    assert "CPU trial" in facts["compat"]["detail"]
