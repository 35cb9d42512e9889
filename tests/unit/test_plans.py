"""Plan catalog and calculator: hand-computed expectations, Decimal money, loud errors."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from protocol.costing.catalog_file import CATALOG_COLUMNS, load_catalog
from protocol.costing.plans import (
    PER_RESULT_DEFINED,
    PER_RESULT_NOT_REQUESTED,
    PER_RESULT_UNDEFINED,
    PLAN_LENGTHS_DAYS,
    Catalog,
    Plan,
    Quote,
    default_catalog_path,
    quote,
)
from protocol.errors import UserError
from protocol.records import codec

HEADER = ",".join(CATALOG_COLUMNS)


def write_catalog(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "catalog.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def catalog() -> Catalog:
    return load_catalog(default_catalog_path())


def test_shipped_catalog_holds_exactly_the_two_seed_prices(catalog: Catalog) -> None:
    assert catalog.gpus == ("b200", "rtx-4090")
    assert catalog.catalog_dates == (date(2026, 9, 24),)
    rtx = catalog.find("rtx-4090", 7)
    b200 = catalog.find("b200", 7)
    assert rtx is not None and b200 is not None
    assert (rtx.cards_per_lot, rtx.price_usd_per_lot) == (1, Decimal("110.00"))
    assert (b200.cards_per_lot, b200.price_usd_per_lot) == (2, Decimal("2071.00"))
    assert len(catalog.plans) == 2
    assert all(plan.source == "IteraGPU catalog snapshot (2026-09-24 edition)" for plan in catalog.plans)


def test_shipped_catalog_csv_has_the_exact_columns() -> None:
    first_line = default_catalog_path().read_text(encoding="utf-8").splitlines()[0]
    assert (
        first_line == "gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source"
    )


def test_plan_lengths_are_the_calculator_choices() -> None:
    assert PLAN_LENGTHS_DAYS == (3, 7, 30)


def test_rtx_4090_two_lots_seven_days_is_220(catalog: Catalog) -> None:
    result = quote(catalog, "rtx-4090", 7, 2)
    assert result.total_usd == Decimal("220.00")
    assert isinstance(result.total_usd, Decimal)
    assert result.cards == 2
    assert result.cost_per_validated_corpus_usd is None
    assert result.per_result_state == PER_RESULT_NOT_REQUESTED


def test_b200_lot_already_holds_two_cards_never_doubled(catalog: Catalog) -> None:
    one = quote(catalog, "b200", 7, 1)
    assert one.cards == 2
    assert one.total_usd == Decimal("2071.00")
    three = quote(catalog, "b200", 7, 3)
    assert three.cards == 6
    assert three.total_usd == Decimal("6213.00")


def test_gpu_name_is_case_and_space_insensitive(catalog: Catalog) -> None:
    assert quote(catalog, " RTX-4090 ", 7, 1).total_usd == Decimal("110.00")


def test_cost_per_validated_corpus_divides_the_total(catalog: Catalog) -> None:
    result = quote(catalog, "rtx-4090", 7, 2, accepted_results=2)
    assert result.cost_per_validated_corpus_usd == Decimal("110.00")
    assert result.per_result_state == PER_RESULT_DEFINED


def test_cost_per_validated_corpus_rounds_half_even_to_cents(catalog: Catalog) -> None:
    # 2071.00 / 3 = 690.3333… -> 690.33
    assert quote(catalog, "b200", 7, 1, 3).cost_per_validated_corpus_usd == Decimal("690.33")
    # 220.00 / 8 = 27.50 exactly; 110.00 / 8 = 13.75 exactly
    assert quote(catalog, "rtx-4090", 7, 2, 8).cost_per_validated_corpus_usd == Decimal("27.50")


def test_half_even_tie_goes_to_the_even_cent(tmp_path: Path) -> None:
    # 0.25 / 10 = 0.025: half-even gives 0.02 (half-up would give 0.03).
    path = write_catalog(tmp_path, "x,1,3,0.25,USD,2026-01-01,test")
    result = quote(load_catalog(path), "x", 3, 1, 10)
    assert result.cost_per_validated_corpus_usd == Decimal("0.02")


def test_zero_accepted_results_is_undefined_and_the_spend_stands(catalog: Catalog) -> None:
    result = quote(catalog, "b200", 7, 1, accepted_results=0)
    assert result.per_result_state == PER_RESULT_UNDEFINED
    assert result.cost_per_validated_corpus_usd is None
    assert result.total_usd == Decimal("2071.00")
    assert codec.to_dict(result)["cost_per_validated_corpus_usd"] is None
    assert codec.to_dict(result)["per_result_state"] == "undefined"


def test_money_is_never_float(catalog: Catalog) -> None:
    result = quote(catalog, "b200", 7, 1, 3)
    assert isinstance(result.total_usd, Decimal)
    assert isinstance(result.cost_per_validated_corpus_usd, Decimal)
    assert isinstance(result.plan.price_usd_per_lot, Decimal)
    data = codec.to_dict(result)
    assert data["total_usd"] == "2071.00"
    assert data["cost_per_validated_corpus_usd"] == "690.33"
    assert data["plan"]["price_usd_per_lot"] == "2071.00"


def test_missing_plan_names_gpu_days_date_and_existing_plans(catalog: Catalog) -> None:
    with pytest.raises(UserError) as caught:
        quote(catalog, "rtx-4090", 3, 2)
    message = caught.value.message
    assert "no price for rtx-4090 for 3 days" in message
    assert "2026-09-24" in message
    assert "Plans that exist for rtx-4090: 7 days" in message
    assert "No price is guessed" in message


def test_unknown_gpu_lists_the_known_ones(catalog: Catalog) -> None:
    with pytest.raises(UserError) as caught:
        quote(catalog, "h100", 7, 1)
    assert "unknown GPU 'h100'" in caught.value.message
    assert "Known GPUs: b200, rtx-4090" in caught.value.message


@pytest.mark.parametrize("lots", [0, -1, 1.5, True, "2"])
def test_lots_must_be_a_positive_int(catalog: Catalog, lots: object) -> None:
    with pytest.raises(UserError, match="lots must be a positive whole number"):
        quote(catalog, "rtx-4090", 7, lots)  # type: ignore[arg-type]


@pytest.mark.parametrize("accepted", [-1, 2.0, False])
def test_accepted_results_must_be_a_non_negative_int(catalog: Catalog, accepted: object) -> None:
    with pytest.raises(UserError, match="accepted results must be a whole number"):
        quote(catalog, "rtx-4090", 7, 1, accepted)  # type: ignore[arg-type]


@pytest.mark.parametrize("days", [0, -7, 7.0])
def test_days_must_be_a_positive_int(catalog: Catalog, days: object) -> None:
    with pytest.raises(UserError, match="plan length must be a positive whole number"):
        quote(catalog, "rtx-4090", days, 1)  # type: ignore[arg-type]


def test_round_trips(catalog: Catalog) -> None:
    assert codec.from_dict(Catalog, codec.to_dict(catalog)) == catalog
    for plan in catalog.plans:
        assert codec.from_dict(Plan, codec.to_dict(plan)) == plan
    for accepted in (None, 0, 3):
        result = quote(catalog, "b200", 7, 2, accepted)
        assert codec.from_dict(Quote, codec.to_dict(result)) == result


def test_from_dict_rejects_unknown_schema_version(catalog: Catalog) -> None:
    data = codec.to_dict(quote(catalog, "b200", 7, 1))
    data["schema_version"] = 99
    with pytest.raises(UserError, match="schema_version 99"):
        codec.from_dict(Quote, data)


def test_records_are_frozen(catalog: Catalog) -> None:
    result = quote(catalog, "b200", 7, 1)
    with pytest.raises(AttributeError):
        result.total_usd = Decimal("1")  # type: ignore[misc]


# --- catalog validation ---------------------------------------------------------


def test_user_catalog_with_other_plans(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path,
        "l40s,1,3,45.50,USD,2026-10-01,my quote",
        '"l40s",1,30,400,USD,2026-10-01,"my quote, page 2"',
    )
    catalog = load_catalog(path)
    assert [p.plan_days for p in catalog.plans_for("l40s")] == [3, 30]
    assert quote(catalog, "l40s", 30, 2).total_usd == Decimal("800")
    assert catalog.plans[1].source == "my quote, page 2"


def test_duplicate_plan_names_both_lines_even_with_equal_price(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path,
        "rtx-4090,1,7,110.00,USD,2026-09-24,a",
        "b200,2,7,2071.00,USD,2026-09-24,a",
        "rtx-4090,1,7,110.00,USD,2026-09-24,a",
    )
    with pytest.raises(UserError) as caught:
        load_catalog(path)
    assert "duplicate plan rtx-4090 for 7 days on lines 2 and 4" in caught.value.message


def test_missing_column(tmp_path: Path) -> None:
    header = "gpu,cards_per_lot,plan_days,price_usd_per_lot,catalog_date,source"
    path = write_catalog(tmp_path, "x,1,7,1.00,2026-09-24,a", header=header)
    with pytest.raises(UserError, match="lacks column\\(s\\) currency"):
        load_catalog(path)


def test_unknown_column(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "x,1,7,1.00,USD,2026-09-24,a,EU", header=HEADER + ",zone")
    with pytest.raises(UserError, match="unknown column\\(s\\) zone"):
        load_catalog(path)


def test_a_market_column_needs_a_provider(tmp_path: Path) -> None:
    """region is a market column (docs/catalogs.md): on a plain flat row, without a provider, it is refused."""
    path = write_catalog(tmp_path, "x,1,7,1.00,USD,2026-09-24,a,EU", header=HEADER + ",region")
    with pytest.raises(UserError, match="market column\\(s\\) region given on a row without a provider"):
        load_catalog(path)


def test_row_with_wrong_field_count_names_its_line(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "x,1,7,1.00,USD,2026-09-24,a, b")
    with pytest.raises(UserError, match="catalog.csv:2"):
        load_catalog(path)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("x,1,7,-5.00,USD,2026-09-24,a", "negative price '-5.00'"),
        ("x,1,7,abc,USD,2026-09-24,a", "not a decimal number: 'abc'"),
        ("x,1,7,NaN,USD,2026-09-24,a", "not a decimal number: 'NaN'"),
        ("x,1,7,1e3,USD,2026-09-24,a", "not a decimal number: '1e3'"),
        ("x,1,7,,USD,2026-09-24,a", "not a decimal number: ''"),
        ("x,1,7,1.00,EUR,2026-09-24,a", "unknown currency 'EUR'"),
        ("x,1,7,1.00,,2026-09-24,a", "unknown currency ''"),
        ("x,1,7,1.00,USD,,a", "catalog_date is missing"),
        ("x,1,7,1.00,USD,2026-02-30,a", "catalog_date is not a valid date: '2026-02-30'"),
        ("x,1,7,1.00,USD,24/09/2026,a", "catalog_date is not a valid date"),
        ("x,0,7,1.00,USD,2026-09-24,a", "cards_per_lot must be a whole number of at least 1"),
        ("x,1.5,7,1.00,USD,2026-09-24,a", "cards_per_lot must be a whole number of at least 1"),
        ("x,1,0,1.00,USD,2026-09-24,a", "plan_days must be a positive whole number"),
        ("x,1,7.5,1.00,USD,2026-09-24,a", "plan_days must be a positive whole number"),
        ("x,1,-3,1.00,USD,2026-09-24,a", "plan_days must be a positive whole number"),
        (",1,7,1.00,USD,2026-09-24,a", "gpu is empty"),
        ("x,1,7,1.00,USD,2026-09-24,", "source is empty"),
    ],
)
def test_invalid_rows_are_refused_with_their_line(tmp_path: Path, row: str, expected: str) -> None:
    path = write_catalog(tmp_path, row)
    with pytest.raises(UserError) as caught:
        load_catalog(path)
    assert expected in caught.value.message
    assert f"{path}:2" in caught.value.message


def test_empty_and_header_only_catalogs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(UserError, match="catalog is empty"):
        load_catalog(empty)
    with pytest.raises(UserError, match="header but no plans"):
        load_catalog(write_catalog(tmp_path))


def test_missing_catalog_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="catalog file not found"):
        load_catalog(tmp_path / "nope.csv")
