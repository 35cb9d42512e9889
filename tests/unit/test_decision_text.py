"""The decision's plain-text number formats and the SVG axis helpers (runner.decision.render: text_format, svg)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runner.decision.render.svg import legend, nice_max, svg_open, text_trunc, tick, ticks
from runner.decision.render.text_format import cell, hours, joules, pct, seconds, usd


@pytest.mark.parametrize(("value", "text"), [
    (None, "—"), (0.0, "0"), (0.00005, "< 0.0001"), (0.004, "0.0040"), (0.27, "0.27"), (96.0, "96"),
])
def test_hours_never_reads_a_sliver_as_zero(value: float | None, text: str) -> None:
    assert hours(value) == text


def test_shares_seconds_joules_and_money() -> None:
    assert pct(None) == "—" and pct(0.951) == "95.1%"
    assert seconds(None) == "—" and seconds(12.345) == "12.35"
    assert joules(None) == "—" and joules(5.0) == "5" and joules(5e6) == "5e+06"
    assert usd(None) is None and usd(Decimal("220")) == "220.00" and usd(Decimal("0")) == "0.00"


def test_a_cell_stays_one_markdown_cell() -> None:
    assert cell("a|b\nc") == "a\\|b c"


@pytest.mark.parametrize(("value", "top"), [(27.9, 30.0), (0.0, 1.0), (1.0, 1.0), (101.0, 200.0), (0.42, 0.5)])
def test_nice_max_is_a_round_number_at_or_above(value: float, top: float) -> None:
    assert nice_max(value) == pytest.approx(top)


def test_ticks_run_from_zero_to_the_axis_end() -> None:
    assert ticks(30.0) == [0.0, 10.0, 20.0, 30.0]
    assert ticks(1.0) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert [tick(v) for v in (30.0, 2.5)] == ["30", "2.5"]


def test_svg_pieces_escape_and_truncate() -> None:
    head = svg_open(100, "a <b>", "memory")
    assert head[0].startswith('<svg class="plot memory"') and "a &lt;b&gt;" in head[2]
    text = text_trunc(0, 0, "x" * 100, 60)
    assert "…" in text and f"<title>{'x' * 100}</title>" in text
    keys = legend(10, [("dot", "#000", "one"), ("empty", "#000", "two")])
    assert keys[0] == '<g class="legend">' and keys[-1] == "</g>" and sum("<text" in k for k in keys) == 2
