"""Which plan lengths cover a period: a plan covers when the period's hours fit its days × 24.

A period no plan covers is not extended by assumption: :attr:`Coverage.advice`
says to reschedule or to estimate the extra period explicitly. The hours come
from a measured access window (:func:`protocol.costing.calendar.access_window`)
or a campaign's measured period (:mod:`protocol.costing.period`).

Example: ``covering_plans(96, (3, 7, 30)).covering_days == (7, 30)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from protocol.costing.calendar import SCHEMA_VERSION, format_hours
from protocol.errors import UserError
from protocol.records.codec import Schema

_DAY_H = 24


@dataclass(frozen=True)
class PlanFit:
    """Whether one plan length covers a window. Example: ``PlanFit(7, 168, True, 72.0)``."""

    plan_days: int
    plan_hours: int
    covers: bool
    margin_h: float  # plan hours minus window hours; negative = the plan is that much too short
    CODEC: ClassVar[Schema] = Schema("plan fit", SCHEMA_VERSION)

@dataclass(frozen=True)
class Coverage:
    """Which plan lengths cover a window, and what to do when none does.

    Example: ``covering_plans(800, (3, 7, 30)).needs_rescheduling is True``.
    """

    window_h: float
    fits: tuple[PlanFit, ...]
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("coverage", SCHEMA_VERSION, derived=("covering_days", "needs_rescheduling",
                                                                          "advice"))

    @property
    def covering_days(self) -> tuple[int, ...]:
        """Example: ``covering_plans(96, (3, 7, 30)).covering_days == (7, 30)``."""
        return tuple(fit.plan_days for fit in self.fits if fit.covers)

    @property
    def needs_rescheduling(self) -> bool:
        """Example: ``covering_plans(96, (3,)).needs_rescheduling is True``."""
        return not self.covering_days

    @property
    def advice(self) -> str:
        """Example: ``"no automatic extension" in covering_plans(96, (3,)).advice``."""
        if not self.needs_rescheduling:
            days = ", ".join(f"{day}-day" for day in self.covering_days)
            return (
                f"candidates: {days} plans. This says nothing about whether the work fits: "
                "durations must be measured."
            )
        longest = max(self.fits, key=lambda fit: fit.plan_hours, default=None)
        if longest is None:
            return "no plan length to compare: give at least one plan length."
        return (
            f"no plan covers {format_hours(self.window_h)} h: reschedule the work, or estimate "
            f"the extra period explicitly (the longest plan, {longest.plan_days} days = "
            f"{longest.plan_hours} h, is short by {format_hours(-longest.margin_h)} h); "
            "no automatic extension is assumed."
        )



def covering_plans(window_hours: float, plan_days_list: Iterable[int]) -> Coverage:
    """Which plan lengths cover a window: a plan covers when window hours <= days × 24.

    Example: ``covering_plans(96, (3, 7, 30)).covering_days == (7, 30)``.
    """
    if isinstance(window_hours, bool) or not window_hours > 0:
        raise UserError(
            f"window hours must be positive, got {window_hours!r}",
            "window",
            "Measure the window with access_window first.",
        )
    fits = []
    for days in plan_days_list:
        if isinstance(days, bool) or not isinstance(days, int) or days < 1:
            raise UserError(
                f"plan length must be a positive whole number of days, got {days!r}",
                "plan_days",
                "Use the catalog's plan lengths, e.g. 3, 7 or 30.",
            )
        plan_hours = days * _DAY_H
        fits.append(
            PlanFit(
                plan_days=days,
                plan_hours=plan_hours,
                covers=window_hours <= plan_hours,
                margin_h=float(plan_hours - window_hours),
            )
        )
    fits.sort(key=lambda fit: fit.plan_days)
    return Coverage(window_h=float(window_hours), fits=tuple(fits))


