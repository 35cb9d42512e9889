"""Billing models in the catalog: hand-computed charges in Decimal, loud errors for bad rows.

Every catalog here is MADE UP for the test (marked in its source column); the shipped snapshot
keeps only the seed's two flat prices.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import BILLING_FLAT, Plan, charge, default_catalog_path
from protocol.errors import UserError
from protocol.records import codec

HEADER = "gpu,cards_per_lot,billing,plan_days,price_usd_per_lot,minimum_s,increment_s,currency,catalog_date,source"
MADE_UP = "MADE-UP test catalog (not a real offer)"


def write(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "made-up-catalog.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def mixed(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        f"rtx-4090,1,flat,7,110.00,,,USD,2026-11-30,{MADE_UP}",
        f"rtx-4090,1,hourly,,0.70,3600,3600,USD,2026-11-30,{MADE_UP}",
        f"rtx-4090,1,per-second,,0.90,60,1,USD,2026-11-30,{MADE_UP}",
        f"rtx-4090,1,monthly,30,400.00,,,USD,2026-11-30,{MADE_UP}",
    )


def test_old_catalog_loads_as_flat_plans() -> None:
    catalog = load_catalog(default_catalog_path())
    assert {p.billing for p in catalog.plans} == {BILLING_FLAT}
    assert [p.price_usd_per_lot for p in catalog.options_for("b200")] == [Decimal("2071.00")]


def test_every_billing_option_is_listed_flat_first(mixed: Path) -> None:
    catalog = load_catalog(mixed)
    assert [p.billing for p in catalog.options_for("rtx-4090")] == ["flat", "hourly", "per-second", "monthly"]
    assert [p.plan_days for p in catalog.plans_for("rtx-4090")] == [7]  # flat plans only
    hourly = catalog.options_for("rtx-4090")[1]
    assert (hourly.minimum_s, hourly.increment_s, hourly.plan_days) == (3600, 3600, 0)
    assert codec.from_dict(Plan, codec.to_dict(hourly)) == hourly


def test_flat_plan_is_whole_price_never_prorated(mixed: Path) -> None:
    flat = load_catalog(mixed).options_for("rtx-4090")[0]
    assert charge(flat, 1.0, 2) == Decimal("220.00")
    assert charge(flat, 168, 1) == Decimal("110.00")
    assert charge(flat, 168.01, 1) is None  # too short: no price, never stretched


def test_hourly_rounds_up_to_the_increment_with_a_minimum(mixed: Path) -> None:
    hourly = load_catalog(mixed).options_for("rtx-4090")[1]
    # 10 minutes: the one-hour minimum, 0.70 USD × 1 lot.
    assert charge(hourly, Decimal(10) / 60, 1) == Decimal("0.70")
    # 2.01 h → 3 billed hours × 0.70 × 2 lots = 4.20.
    assert charge(hourly, 2.01, 2) == Decimal("4.20")
    # exactly 2 h → 2 billed hours = 1.40.
    assert charge(hourly, 2, 1) == Decimal("1.40")


def test_per_second_rounds_to_the_second_with_a_minimum(mixed: Path) -> None:
    per_second = load_catalog(mixed).options_for("rtx-4090")[2]
    # 30 s → the 60 s minimum: 0.90 × 60 / 3600 = 0.015 → half-even to 0.02.
    assert charge(per_second, Decimal(30) / 3600, 1) == Decimal("0.02")
    # 1000.5 s → 1001 s: 0.90 × 1001 / 3600 = 0.25025 → 0.25; × 3 lots = 0.75075 → 0.75.
    assert charge(per_second, Decimal("1000.5") / 3600, 3) == Decimal("0.75")
    # 100 h: 0.90 × 100 = 90.00.
    assert charge(per_second, 100, 1) == Decimal("90.00")


def test_monthly_pays_every_started_month(mixed: Path) -> None:
    monthly = load_catalog(mixed).options_for("rtx-4090")[3]
    assert charge(monthly, 1, 1) == Decimal("400.00")
    assert charge(monthly, 720, 1) == Decimal("400.00")
    assert charge(monthly, 721, 2) == Decimal("1600.00")  # 2 months × 2 lots


def test_charges_are_decimal(mixed: Path) -> None:
    for plan in load_catalog(mixed).options_for("rtx-4090"):
        assert isinstance(charge(plan, 1, 1), Decimal)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (f"x,1,hourly,,0.70,,3600,USD,2026-11-30,{MADE_UP}", "hourly row for x has no minimum charge"),
        (f"x,1,per-second,,0.70,,,USD,2026-11-30,{MADE_UP}", "per-second row for x has no minimum charge"),
        (f"x,1,hourly,,0.70,60,0,USD,2026-11-30,{MADE_UP}", "increment_s must be a whole number of seconds"),
        (f"x,1,hourly,,0.70,6.5,60,USD,2026-11-30,{MADE_UP}", "minimum_s must be a whole number of seconds"),
        (f"x,1,weekly,7,0.70,,,USD,2026-11-30,{MADE_UP}", "unknown billing 'weekly'"),
        (f"x,1,flat,7,70,60,,USD,2026-11-30,{MADE_UP}", "minimum_s/increment_s given on a flat row"),
        (f"x,1,hourly,,,60,60,USD,2026-11-30,{MADE_UP}", "price_usd_per_lot is not a decimal number: ''"),
        (f"x,1,monthly,,400,,,USD,2026-11-30,{MADE_UP}", "plan_days must be a positive whole number"),
    ],
)
def test_bad_billing_rows_name_file_line_and_column(tmp_path: Path, row: str, expected: str) -> None:
    path = write(tmp_path, row)
    with pytest.raises(UserError) as caught:
        load_catalog(path)
    assert expected in caught.value.message
    assert f"{path}:2" in caught.value.message


def test_a_catalog_mixing_currencies_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"x,1,flat,7,70,,,USD,2026-11-30,{MADE_UP}",
        f"y,1,flat,7,70,,,EUR,2026-11-30,{MADE_UP}",
    )
    with pytest.raises(UserError) as caught:
        load_catalog(path)
    message = caught.value.message
    assert "catalog mixes currencies: 'USD' on line 2, 'EUR' on line 3" in message
    assert f"{path}:3, column currency" in message


def test_duplicate_entry_names_gpu_billing_and_length(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"x,1,hourly,,0.70,60,60,USD,2026-11-30,{MADE_UP}",
        f"x,1,flat,7,70,,,USD,2026-11-30,{MADE_UP}",
        f"x,1,hourly,,0.80,60,60,USD,2026-11-30,{MADE_UP}",
    )
    with pytest.raises(UserError, match=r"duplicate plan x for per hour \(hourly\) on lines 2 and 4"):
        load_catalog(path)
