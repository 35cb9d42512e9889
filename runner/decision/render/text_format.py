"""How the plain-text outputs of the decision write numbers: hours, seconds, shares, joules, USD, table cells.

Shared by the memo (:mod:`runner.decision.offline.memo`, :mod:`runner.decision.offline.job`) and ``isocost period``
(:mod:`runner.decision.period_report`), so the same figure reads the same everywhere.

Example: ``hours(0.004) == "0.0040"``, ``pct(0.5) == "50.0%"``, ``cell("a|b") == "a\\\\|b"``.
"""

from __future__ import annotations

from decimal import Decimal

from protocol.costing.calendar import format_hours
from protocol.costing.plans import format_usd


def pct(value: float | None) -> str:
    """A share as a percentage with one decimal; "—" when unknown. Example: ``pct(0.951) == "95.1%"``."""
    return "—" if value is None else f"{value:.1%}"


def joules(value: float | None) -> str:
    """Energy with four significant digits; "—" when not recorded. Example: ``joules(5.0) == "5"``."""
    return "—" if value is None else f"{value:.4g}"


def seconds(value: float | None) -> str:
    """Seconds with two decimals; "—" when unknown. Example: ``seconds(12.345) == "12.35"``."""
    return "—" if value is None else f"{value:.2f}"


def hours(value: float | None) -> str:
    """Hours with two decimals; a sliver under 0.01 h keeps four so it never reads as 0."""
    if value is None:
        return "—"
    if 0 < value < 0.0001:
        return "< 0.0001"
    if 0 < value < 0.01:
        return f"{value:.4f}"
    return format_hours(value)


def usd(value: Decimal | None) -> str | None:
    """Money as decision.json writes it (two decimals, a string), ``None`` when there is none.

    Example: ``usd(Decimal("220")) == "220.00"``, ``usd(None) is None``.
    """
    return None if value is None else format_usd(value)


def cell(text: str) -> str:
    """Text made safe for one Markdown table cell (pipes escaped, one line)."""
    return text.replace("|", "\\|").replace("\n", " ")
