"""The record codec's money, dates, own formats, renamed and unwritten fields, and derived keys (protocol/codec.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any, ClassVar

import pytest

from protocol import codec
from protocol.codec import Convert, Schema, options
from protocol.costing.calendar import format_offset, parse_offset
from protocol.errors import UserError

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

