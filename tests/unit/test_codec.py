"""The record codec (protocol/records/codec.py): round trips, and every refusal as a UserError naming the file and the
key."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import UserError
from protocol.records import codec
from protocol.records.codec import Schema


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    load_s: float | None = None
    count: int = 0


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner
    flag: bool = False
    tags: tuple[str, ...] = ()
    shapes: tuple[tuple[int, int], ...] = ()
    extra: dict[str, int] = field(default_factory=dict)
    free: dict[str, Any] = field(default_factory=dict)
    colour: Colour = Colour.RED
    mode: Literal["a", "b"] = "a"
    items: list[Inner] = field(default_factory=list)
    maybe: Inner | None = None
    CODEC: ClassVar[Schema] = Schema("outer.json", 2, (1, 2), upgrade=lambda data, version: {**data, "flag": True})


def test_round_trip_through_json() -> None:
    record = Outer("x", Inner(1.5, 2), True, ("a", "b"), ((1, 2), (3, 4)), {"k": 1}, {"any": [1, {"n": None}]},
                   Colour.BLUE, "b", [Inner(None, 3)], Inner(0.0))
    data = json.loads(json.dumps(codec.to_dict(record)))
    assert data["schema_version"] == 2 and data["colour"] == "blue" and data["shapes"] == [[1, 2], [3, 4]]
    assert "schema_version" not in data["inner"]  # a nested record without a schema carries none
    assert codec.from_dict(Outer, data, "outer.json") == record


def test_an_older_version_is_read_through_its_upgrade() -> None:
    data = {**codec.to_dict(Outer("x", Inner())), "schema_version": 1}
    assert codec.from_dict(Outer, data).flag is True


def test_a_float_field_takes_a_json_integer() -> None:
    assert codec.from_dict(Inner, {"load_s": 2}).load_s == 2.0
    assert isinstance(codec.from_dict(Inner, {"load_s": 2}).load_s, float)


def _refusal(data: Any) -> UserError:
    with pytest.raises(UserError) as caught:
        codec.from_dict(Outer, data, "/c/outer.json")
    assert caught.value.where == "/c/outer.json"
    return caught.value


GOOD = {"schema_version": 2, "name": "x", "inner": {}}


@pytest.mark.parametrize(("data", "what"), [
    ({**GOOD, "schema_version": 3}, "outer.json has schema_version 3; this isocost reads 1 or 2"),
    ({"name": "x", "inner": {}}, "outer.json has schema_version None; this isocost reads 1 or 2"),
    ({**GOOD, "schema_version": True}, "outer.json has schema_version True; this isocost reads 1 or 2"),
    ({**GOOD, "colour2": 1}, "unknown key 'colour2'"),
    ({**GOOD, "inner": {"load_s": 1.0, "pace": 2}}, "unknown key 'inner.pace'"),
    ({"schema_version": 2, "inner": {}}, "key 'name' is missing"),
    ({**GOOD, "inner": {"load_s": "x"}}, "key 'inner.load_s' must be a number or null, got 'x'"),
    ({**GOOD, "inner": {"count": True}}, "key 'inner.count' must be an integer, got true"),
    ({**GOOD, "inner": {"count": 1.5}}, "key 'inner.count' must be an integer, got 1.5"),
    ({**GOOD, "flag": 1}, "key 'flag' must be true or false, got 1"),
    ({**GOOD, "name": None}, "key 'name' must be a string, got null"),
    ({**GOOD, "tags": "ab"}, "key 'tags' must be a list, got 'ab'"),
    ({**GOOD, "tags": ["a", 2]}, "key 'tags[1]' must be a string, got 2"),
    ({**GOOD, "shapes": [[1, 2, 3]]}, "key 'shapes[0]' must be a list of 2 items, got 3"),
    ({**GOOD, "extra": {"k": "v"}}, "key 'extra.k' must be an integer, got 'v'"),
    ({**GOOD, "extra": []}, "key 'extra' must be a JSON object, got a list"),
    ({**GOOD, "colour": "green"}, "key 'colour' must be one of 'red', 'blue', got 'green'"),
    ({**GOOD, "mode": "c"}, "key 'mode' must be one of 'a', 'b', got 'c'"),
    ({**GOOD, "items": [{"count": "3"}]}, "key 'items[0].count' must be an integer, got '3'"),
    ({**GOOD, "maybe": {"count": "3"}}, "key 'maybe.count' must be an integer, got '3'"),
    ({**GOOD, "inner": 3}, "key 'inner' must be a JSON object, got 3"),
    ([GOOD], "outer.json must be a JSON object, got a list"),
])
def test_every_refusal_names_the_key(data: Any, what: str) -> None:
    assert _refusal(data).what == what


def test_a_file_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "outer.json"
    codec.write_record(path, Outer("x", Inner()))
    assert codec.read_record(path, Outer) == Outer("x", Inner())
    path.write_text('{"schema_version": 2, "name": "x", "name": "y", "inner": {}}', encoding="utf-8")
    with pytest.raises(UserError, match="duplicate key 'name'"):
        codec.read_record(path, Outer)
    with pytest.raises(UserError, match=r"key 'inner' is missing \(outer.json, line 3\)"):
        codec.parse_record('{"schema_version": 2, "name": "x"}', Outer, "outer.json, line 3")


_text = st.text(max_size=8)
_inner = st.builds(Inner, st.none() | st.floats(0, 10**9), st.integers())  # load_s: seconds (protocol.records.domains)


@given(st.builds(Outer, _text, _inner, st.booleans(), st.lists(_text).map(tuple),
                 st.lists(st.tuples(st.integers(), st.integers())).map(tuple),
                 st.dictionaries(_text, st.integers()), st.just({}), st.sampled_from(Colour),
                 st.sampled_from(["a", "b"]), st.lists(_inner), st.none() | _inner))
def test_any_record_round_trips(record: Outer) -> None:
    assert codec.from_dict(Outer, json.loads(json.dumps(codec.to_dict(record)))) == record


@pytest.mark.parametrize(("data", "what"), [
    ({"load_s": -5}, "key 'load_s' is -5.0: outside its domain (≥ 0, ≤ 10^9)"),
    ({"load_s": 1e300}, "key 'load_s' is 1e+300: outside its domain"),
    ({"load_s": float("inf")}, "key 'load_s' must be a number or null, got inf"),
    ({"load_s": float("nan")}, "key 'load_s' must be a number or null, got nan"),
])
def test_a_number_outside_its_units_domain_is_refused_naming_the_key(data, what):
    """Issue 38 class 2: a sealed file is unchanged, not possible; a value no run produces is refused when read."""
    with pytest.raises(UserError) as caught:
        codec.from_dict(Inner, data, "status.json")
    assert what in str(caught.value) and "status.json" in str(caught.value)


def test_a_field_declares_its_own_domain():
    from dataclasses import field

    from protocol.records.domains import POSITIVE

    @dataclass(frozen=True)
    class Lots:
        lots: int = field(default=1, metadata=codec.options(domain=POSITIVE))

    assert codec.from_dict(Lots, {"lots": 3}).lots == 3
    with pytest.raises(UserError, match=r"key 'lots' is 0: outside its domain \(≥ 1"):
        codec.from_dict(Lots, {"lots": 0})


def test_json_nan_and_infinity_are_refused_by_the_strict_reader():
    from protocol.io.jsonio import parse_json

    for text in ('{"load_s": NaN}', '{"load_s": Infinity}', '[-Infinity]'):
        with pytest.raises(UserError, match="is not a number JSON allows"):
            parse_json(text, "status.json")
