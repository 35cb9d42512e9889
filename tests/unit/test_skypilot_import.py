"""SkyPilot provider catalogs read and imported: the real 2026-12-03 snapshot (row counts, hand-checked prices from
the files) and hostile files (each a clear error naming the file and line, or a counted exclusion).

The real snapshot lives beside the clone (``../shared``, tests/skypilot_snapshot.py); those tests skip without it.
"""

from __future__ import annotations

import tracemalloc
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from skypilot_snapshot import COMMITS, check_snapshot, requires_snapshot

from protocol.costing.catalog_file import load_catalog
from protocol.costing.market_import import Billing, import_catalogs
from protocol.costing.skypilot import read_metadata, read_provider
from protocol.errors import UserError

HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
ROW = "gpu_1x_h100,H100,1.0,26.0,200.0,{price},{region},,{spot}\n"


def _offers(provider: str, instance: str, region: str) -> list:
    folder = check_snapshot()
    read = read_provider(folder / provider / "vms.csv", provider, read_metadata(folder / "common" / "metadata.csv"))
    return [o for o in read.offers if o.instance_type == instance and o.region == region]


@requires_snapshot
def test_the_real_lambda_catalog_is_read_row_by_row() -> None:
    folder = check_snapshot()
    lambda_ = read_provider(folder / "lambda" / "vms.csv", "lambda")
    # 323 data rows (README): 17 CPU-only, 306 GPU rows, each instance type in its own region once.
    assert sum(lambda_.skipped.values()) == 17 and lambda_.skipped == {"CPU only (no accelerator)": 17}
    assert len(lambda_.offers) == 306 and lambda_.repeated_rows == 0
    assert all(o.spot_usd_per_hour is None for o in lambda_.offers)  # empty in every Lambda row: never zero
    [h100] = [o for o in lambda_.offers if o.instance_type == "gpu_1x_h100_sxm5" and o.region == "us-east-1"]
    assert (h100.accelerator, h100.cards, h100.price_usd_per_hour, h100.card_memory_gib, h100.line) == (
        "H100", 1, Decimal("3.29"), 80, 247)
    [a100] = [o for o in lambda_.offers if o.instance_type == "gpu_8x_a100_80gb_sxm4" and o.region == "us-east-1"]
    assert (a100.cards, a100.price_usd_per_hour, a100.card_memory_gib) == (8, Decimal("14.32"), 80)  # one card's MiB


@requires_snapshot
def test_the_real_runpod_catalog_merges_zones_and_keeps_its_quirks() -> None:
    folder = check_snapshot()
    runpod = read_provider(folder / "runpod" / "vms.csv", "runpod", read_metadata(folder / "common" / "metadata.csv"))
    # 2750 data rows: 750 CPU-only; 2x_B200_SECURE lists its 14 US zones twice: 14 identical repeats dropped.
    assert runpod.skipped == {"CPU only (no accelerator)": 750} and runpod.repeated_rows == 14
    assert len(runpod.offers) == 639  # zones of one region at one price → one row per instance × region
    [a100] = _offers("runpod", "1x_A100-80GB_SECURE", "CA")
    assert (a100.price_usd_per_hour, a100.spot_usd_per_hour, a100.line) == (Decimal("1.64"), Decimal("1.19"), 2)
    [sxm] = _offers("runpod", "1x_H100-SXM_SECURE", "CA")
    assert (sxm.price_usd_per_hour, sxm.spot_usd_per_hour) == (Decimal("2.99"), Decimal("2.69"))
    [l40s] = _offers("runpod", "1x_L40S_SECURE", "CA")
    assert (l40s.price_usd_per_hour, l40s.spot_usd_per_hour) == (Decimal("0.43"), Decimal("0.86"))  # kept as is
    assert any("spot above on-demand" in note for note in runpod.notes)
    [a6000] = _offers("runpod", "8x_RTXA6000_SECURE", "CA")
    assert (a6000.cards, a6000.price_usd_per_hour) == (8, Decimal("3.92"))
    assert not _offers("runpod", "8x_RTXA6000_SECURE", "US")  # 11 rows, no US zone (README)
    assert {o.region for o in runpod.offers if o.instance_type == "2x_B200_SECURE"} == {
        "CA", "CZ", "IS", "NL", "NO", "RO", "SE", "US"}  # EU-SE-1 under both NO and SE: two regions
    b200 = _offers("runpod", "1x_B200_SECURE", "US")[0]
    assert b200.card_memory_gib == 80  # from common/metadata.csv as published (the GPU map says 180: see gpu_map)


@requires_snapshot
def test_the_real_snapshot_imports_as_one_dated_sourced_catalog(tmp_path: Path) -> None:
    folder = check_snapshot()
    out = tmp_path / "market.csv"
    report = import_catalogs(folder, date(2026, 12, 3), out, commits=COMMITS)
    assert report.rows_written == 306 + 639
    catalog = load_catalog(out)
    spot_rows = sum(1 for o in report.providers[1].offers if o.spot_usd_per_hour is not None)
    assert len(catalog.plans) == report.rows_written + spot_rows == report.plans
    assert catalog.catalog_dates == (date(2026, 12, 3),)
    h100 = [p for p in catalog.plans if p.offer and p.offer.instance_type == "gpu_1x_h100_sxm5"
            and p.offer.region == "us-east-1"]
    assert len(h100) == 1 and h100[0].price_usd_per_lot == Decimal("3.29") and h100[0].gpu == "h100"
    assert h100[0].billing == "hourly" and (h100[0].minimum_s, h100[0].increment_s) == (3600, 3600)
    assert "sha256 6db151005077cd16a3f1885c56afa93ebb0421b0f12b9717c840a47fdf8347b0" in h100[0].source
    assert f"commit {COMMITS['lambda']}" in h100[0].source and "line 247" in h100[0].source
    sxm = [p for p in catalog.plans if p.offer and p.offer.instance_type == "1x_H100-SXM_SECURE"
           and p.offer.region == "CA"]
    assert sorted((p.offer.interruptible, p.price_usd_per_lot) for p in sxm if p.offer) == [
        (False, Decimal("2.99")), (True, Decimal("2.69"))]
    only = import_catalogs(folder, date(2026, 12, 3), tmp_path / "lambda.csv", providers=["lambda"],
                           billing=Billing("per-second", 60, 1))
    assert only.rows_written == 306 and {p.billing for p in load_catalog(tmp_path / "lambda.csv").plans} == {
        "per-second"}


def _write(tmp_path: Path, text: str, name: str = "vms.csv") -> Path:
    path = tmp_path / "acme" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def _refused(tmp_path: Path, text: str) -> UserError:
    with pytest.raises(UserError) as info:
        read_provider(_write(tmp_path, text), "acme")
    return info.value


@pytest.mark.parametrize(("row", "message", "line"), [
    (ROW.format(price="-2.49", region="r1", spot=""), "Price '-2.49' is not a decimal number", 2),
    (ROW.format(price="nan", region="r1", spot=""), "Price 'nan' is not a decimal number", 2),
    (ROW.format(price="1e30", region="r1", spot=""), "Price '1e30' is not a decimal number", 2),
    (ROW.format(price="0", region="r1", spot=""), "Price '0' is not above zero", 2),
    (ROW.format(price="5000.00", region="r1", spot=""), "5000.00 USD per card-hour, above the bound of 1000", 2),
    (ROW.format(price="2.49", region="r1", spot="-1"), "SpotPrice '-1' is not a decimal number", 2),
    (ROW.format(price="2.49", region="=HYPERLINK(1)", spot=""), "Region '=HYPERLINK(1)' is not a plain name", 2),
    (ROW.format(price="2.49", region="<b>x</b>", spot=""), "is not a plain name", 2),
    (ROW.format(price="2.49", region="r1\x1b[2J", spot=""), "control character", 2),
    ("@cmd,H100,1.0,26.0,200.0,2.49,r1,,\n", "InstanceType '@cmd' is not a plain name", 2),
    ("gpu,H100,0,26.0,200.0,2.49,r1,,\n", "AcceleratorCount '0' is not 1 to 64", 2),
    ("gpu,H100,1.5,26.0,200.0,2.49,r1,,\n", "'1.5' is not a whole number of cards", 2),
    ("gpu,H100,1.0,26.0,200.0,2.49,r1\n", "the row has 7 fields, the header 9", 2),
])
def test_a_malformed_row_is_refused_with_file_and_line(tmp_path: Path, row: str, message: str, line: int) -> None:
    error = _refused(tmp_path, HEADER + row)
    assert message in error.what, error.message
    assert error.where.endswith(f"vms.csv:{line}")


def test_a_region_named_twice_with_two_prices_is_refused_naming_both_lines(tmp_path: Path) -> None:
    text = HEADER + ROW.format(price="2.49", region="r1", spot="") + ROW.format(price="2.99", region="r1", spot="")
    error = _refused(tmp_path, text)
    assert "gpu_1x_h100 in region r1 is listed twice with two prices: line 2" in error.what
    assert "line 3 (2.99 USD/h" in error.what


def test_an_identical_repeat_is_dropped_and_counted_and_empty_spot_stays_empty(tmp_path: Path) -> None:
    text = (HEADER + ROW.format(price="2.49", region="r1", spot="") * 2
            + ROW.format(price="2.49", region="r2", spot="1.10")
            + "cpu_4x,,,4.0,16.0,0.2,r1,,\n" + "frac,A10,0.25,4.0,16.0,0.2,r1,,\n" + "nop,A10,1.0,4.0,16.0,,r1,,\n")
    read = read_provider(_write(tmp_path, text), "acme")
    assert read.repeated_rows == 1
    assert [(o.region, o.spot_usd_per_hour) for o in read.offers] == [("r1", None), ("r2", Decimal("1.10"))]
    assert read.skipped == {"CPU only (no accelerator)": 1, "fractional GPU share (not a whole card)": 1,
                            "no on-demand price": 1}


def test_zones_of_a_region_at_two_prices_stay_apart(tmp_path: Path) -> None:
    header = HEADER.strip() + ",AvailabilityZone\n"
    text = (header + "x1,A10,1.0,4.0,16.0,1.00,US,,,US-1\n" + "x1,A10,1.0,4.0,16.0,1.00,US,,,US-2\n"
            + "x1,A10,1.0,4.0,16.0,1.00,EU,,,EU-1\n" + "x1,A10,1.0,4.0,16.0,1.20,EU,,,EU-2\n")
    regions = sorted(o.region for o in read_provider(_write(tmp_path, text), "acme").offers)
    assert regions == ["EU/EU-1", "EU/EU-2", "US"]


@pytest.mark.parametrize(("text", "message"), [
    ("", "the SkyPilot catalog is empty"),
    (HEADER, "has a header but no rows"),
    ("gpu,cards_per_lot,plan_days\nrtx-4090,1,7\n", "not a SkyPilot catalog: the header lacks column(s) InstanceType"),
    ("InstanceType,InstanceType\n", "not a SkyPilot catalog"),
])
def test_a_file_that_is_not_a_skypilot_catalog_is_refused(tmp_path: Path, text: str, message: str) -> None:
    assert message in _refused(tmp_path, text).what


def test_bytes_that_are_not_text_and_overlong_lines_are_refused_by_line(tmp_path: Path) -> None:
    path = _write(tmp_path, HEADER)
    path.write_bytes(HEADER.encode() + b"gpu,H100,1.0,26.0,200.0,2.49,r\xff1,,\n")
    with pytest.raises(UserError, match="not UTF-8 text") as info:
        read_provider(path, "acme")
    assert info.value.where.endswith("vms.csv:2")
    path.write_bytes(HEADER.encode() + b"gpu," + b"x" * 100_000 + b"\n")
    with pytest.raises(UserError, match="line longer than"):
        read_provider(path, "acme")


def test_a_large_file_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """1.7 MB of CPU rows (what most of a cloud's catalog is) never sit in memory: the peak stays under an eighth of
    the file (a 1 GB file was measured by hand: docs/catalogs.md)."""
    path = _write(tmp_path, "")
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(HEADER)
        block = "".join(f"cpu_{i}x_general,,,4.0,16.0,0.2,region-{i},,\r\n" for i in range(1000))
        for _ in range(40):
            handle.write(block)
        handle.write(ROW.format(price="2.49", region="r1", spot=""))
    assert path.stat().st_size > 1_600_000
    tracemalloc.start()
    try:
        read = read_provider(path, "acme")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read.skipped == {"CPU only (no accelerator)": 40_000} and len(read.offers) == 1
    assert peak < 200_000, peak


def test_import_refuses_no_gpu_rows_and_a_bad_commit(tmp_path: Path) -> None:
    source = _write(tmp_path, HEADER + "cpu_4x,,,4.0,16.0,0.2,r1,,\n")
    with pytest.raises(UserError, match="no GPU offer to import"):
        import_catalogs(source, date(2026, 12, 3), tmp_path / "out.csv")
    good = _write(tmp_path, HEADER + ROW.format(price="2.49", region="r1", spot="1.00"))
    with pytest.raises(UserError, match="is not a git commit"):
        import_catalogs(good, date(2026, 12, 3), tmp_path / "out.csv", commits={"acme": "not-a-commit"})
    report = import_catalogs(good, date(2026, 12, 3), tmp_path / "out.csv", commits={"acme": "abcdef1"})
    assert report.rows_written == 1 and report.plans == 2
    assert "acme/vms.csv" in load_catalog(tmp_path / "out.csv").plans[0].source
