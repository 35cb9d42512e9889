"""The record codec's money, dates, own formats, renamed and unwritten fields, and derived keys
(protocol/records/codec.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pytest

from protocol.costing.calendar import format_offset, parse_offset
from protocol.decision.ledger import parse_ledger
from protocol.decision.records import Decision, Ledger
from protocol.errors import UserError
from protocol.io.jsonio import dumps
from protocol.records import codec
from protocol.records.codec import Convert, Schema, options

OFFSET = Convert(format_offset, parse_offset, 'a UTC offset like "+01:00"')


@dataclass(frozen=True)
class Bill:
    day: date = field(metadata=options(key="date"))
    amount_usd: Decimal
    refund_usd: Decimal | None = None
    offset: timedelta = field(default=timedelta(0), metadata=options(convert=OFFSET))
    samples: tuple[float, ...] = field(default=(), metadata=options(written=False))
    CODEC: ClassVar[Schema] = Schema("bill", 1, derived=("twice_usd",),
                                     extra=lambda bill: {"note": f"billed in {bill.day:%B}"})

    @property
    def twice_usd(self) -> Decimal:
        return self.amount_usd * 2


BILL = Bill(date(2026, 9, 30), Decimal("7.5"), None, timedelta(hours=-5, minutes=-30), samples=(1.0, 2.0))


def _written(record: Any) -> dict[str, Any]:
    return json.loads(json.dumps(codec.to_dict(record)))


def test_money_dates_formats_and_derived_keys_are_written_as_the_files_carry_them() -> None:
    assert _written(BILL) == {"schema_version": 1, "date": "2026-09-30", "amount_usd": "7.50", "refund_usd": None,
                              "offset": "-05:30", "twice_usd": "15.00", "note": "billed in September"}


def test_decimal_text_keeps_two_decimals_and_never_rounds() -> None:
    assert codec.decimal_text(Decimal("2071")) == "2071.00"
    assert codec.decimal_text(Decimal("0.125")) == "0.125"
    assert codec.decimal_text(Decimal("-12.5")) == "-12.50"


def test_round_trip_leaves_unwritten_fields_at_their_default() -> None:
    read = codec.from_dict(Bill, _written(BILL))
    assert read == Bill(BILL.day, BILL.amount_usd, None, BILL.offset)
    assert read.amount_usd == Decimal("7.50") and isinstance(read.amount_usd, Decimal)


@pytest.mark.parametrize(("change", "message"), [
    ({"amount_usd": 7.5}, "key 'amount_usd' must be a decimal number as text"),
    ({"amount_usd": "NaN"}, "key 'amount_usd' must be a decimal number as text"),
    ({"amount_usd": " 7.50"}, "key 'amount_usd' must be a decimal number as text"),
    ({"refund_usd": "-Infinity"}, "key 'refund_usd' must be a decimal number as text"),
    ({"date": "30/09/2026"}, "key 'date' must be a date as text"),
    ({"date": None}, "key 'date' must be a date as text"),
    ({"offset": "+x"}, "key 'offset' must be a UTC offset"),
    ({"offset": 3600}, "key 'offset' must be a UTC offset"),
    ({"day": "2026-09-30"}, "unknown key 'day'"),
    ({"samples": [1.0]}, "unknown key 'samples'"),
    ({"twice_usd": "16.00"}, "key 'twice_usd' is '16.00', but the record's other keys give '15.00'"),
    ({"note": "edited"}, "key 'note' is 'edited'"),
])
def test_bad_values_and_edited_derived_keys_are_refused_naming_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match="bill.json") as info:
        codec.from_dict(Bill, {**_written(BILL), **change}, "bill.json")
    assert message in info.value.message


def test_derived_keys_may_be_left_out() -> None:
    data = _written(BILL)
    del data["twice_usd"], data["note"]
    assert codec.from_dict(Bill, data).amount_usd == Decimal("7.50")


LEDGER = ("date,description,amount_usd,evidence\n"
          "2026-09-30,object storage,12.50,invoice S-17\n"
          "2026-10-02,engineer time,250,timesheet week 40\n")


def test_the_ledger_reads_back_as_written() -> None:
    ledger = parse_ledger(LEDGER, "ledger.csv")
    data = _written(ledger)
    assert data["total_usd"] == "262.50" and data["expenses"][1]["amount_usd"] == "250.00"
    assert data["note"] == "other project expenses: never part of a configuration's cost"
    assert data["expenses"][0]["date"] == "2026-09-30" and data["expenses"][0]["schema_version"] == 2
    assert codec.from_dict(Ledger, data) == ledger


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(total_usd="1.00"), "key 'total_usd' is '1.00', but the record's other keys give '262.50'"),
    (lambda d: d["expenses"][0].update(amount_usd=12.5), "key 'expenses[0].amount_usd' must be a decimal number"),
    (lambda d: d["expenses"][1].update(date="tomorrow"), "key 'expenses[1].date' must be a date as text"),
    (lambda d: d["expenses"][0].update(paid=True), "unknown key 'expenses[0].paid'"),
    (lambda d: d["expenses"][0].update(schema_version=9), "expense has schema_version 9"),
    (lambda d: d.pop("path"), "key 'path' is missing"),
])
def test_a_hostile_ledger_is_refused_naming_the_key(edit: Any, message: str) -> None:
    data = _written(parse_ledger(LEDGER, "ledger.csv"))
    edit(data)
    with pytest.raises(UserError, match="decision.json") as info:
        codec.from_dict(Ledger, data, "decision.json")
    assert message in info.value.message


GOLDEN_DECISION = Path(__file__).resolve().parents[1] / "data" / "golden_decide" / "decision.json"


def test_the_golden_decision_json_reads_back_and_writes_the_same_bytes() -> None:
    decision = codec.read_record(GOLDEN_DECISION, Decision)
    assert decision.agreement is not None and decision.catalog_source is not None
    assert dumps(codec.to_dict(decision)) == GOLDEN_DECISION.read_text(encoding="utf-8")


def test_a_record_with_an_unwritten_required_field_is_written_only() -> None:
    @dataclass(frozen=True)
    class Grouped:
        low: float = field(metadata=options(written=False))
        CODEC: ClassVar[Schema] = Schema("grouped", extra=lambda record: {"interval": [record.low]})

    assert codec.to_dict(Grouped(1.0)) == {"interval": [1.0]}
    with pytest.raises(TypeError, match="cannot read Grouped: its field 'low' is not written"):
        codec.from_dict(Grouped, {"interval": [1.0]})
