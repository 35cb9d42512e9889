"""What a measured period costs on the plan catalog, and whether it fits the deadline.

:func:`plan_cost` lists every plan length against the needed hours
(:func:`protocol.costing.calendar.covering_plans`) and contracts the cheapest
priced one that covers them: the whole plan price × lots, never prorated; a
missing price is the catalog's own error text. :func:`deadline_fit` checks
the needed hours against the deadline window's real elapsed hours.

Example: ``plan_cost(catalog, "rtx-4090", 2, 1.2, 1).total_usd == Decimal("220.00")``.
"""

from __future__ import annotations

from protocol.costing.calendar import Window, format_hours
from protocol.costing.coverage import PlanFit, covering_plans
from protocol.costing.plans import MAX_LOTS, PLAN_LENGTHS_DAYS, Catalog, Quote, quote
from protocol.decision.records import CostResult, PlanOption
from protocol.errors import UserError


def plan_cost(
    catalog: Catalog,
    gpu: str | None,
    lots: int | None,
    needed_h: float | None,
    accepted_artifacts: int | None,
    *,
    no_gpu_reason: str = "",
    no_period_reason: str = "",
) -> CostResult:
    """The plans covering ``needed_h`` for ``gpu``, and the contracted (cheapest priced covering) one.

    ``accepted_artifacts`` ``None`` prices the plan without a per-corpus figure (a campaign's own rental).

    The whole plan price × lots is charged, never prorated. A missing price is
    the catalog's own error text; nothing is guessed.

    Example: ``plan_cost(catalog, "rtx-4090", 2, 1.2, 1).total_usd == Decimal("220.00")``.
    """
    if gpu is None:
        return CostResult(gpu, lots, needed_h, (), None,
                          no_gpu_reason or "no rental recorded for this campaign: no plan can be priced")
    lots = lots or 1
    if not isinstance(lots, int) or not 1 <= lots <= MAX_LOTS:  # a hand-edited rentals.jsonl, an old campaign.json
        shown = str(lots) if len(str(lots)) <= 40 else f"{str(lots)[:40]}… ({len(str(lots))} digits)"
        raise UserError(f"the recorded rental names {shown} lots of {gpu}, not 1 to {MAX_LOTS:,}",
                        "the campaign's latest rental: rentals.jsonl, else campaign.json",
                        f"Record the rental again: `isocost rental DIR --gpu {gpu} --lots N`, N from 1 to "
                        f"{MAX_LOTS:,}.")
    if needed_h is None or needed_h <= 0:
        return CostResult(gpu, lots, needed_h, (), None,
                          "campaign period unknown: " + (no_period_reason or "no timestamps recorded"))
    lengths = sorted(set(PLAN_LENGTHS_DAYS) | {p.plan_days for p in catalog.plans_for(gpu)})
    coverage = covering_plans(needed_h, lengths)
    unknown_gpu = _unknown_gpu(catalog, gpu, lengths[0], lots)
    options: list[PlanOption] = []
    priced: list[Quote] = []
    for fit in coverage.fits:
        option, priced_quote = _price_fit(catalog, gpu, lots, needed_h, accepted_artifacts, fit, unknown_gpu)
        options.append(option)
        if priced_quote is not None:
            priced.append(priced_quote)
    if priced:
        contracted = min(priced, key=lambda q: (q.total_usd, q.plan.plan_days))
        return CostResult(gpu, lots, needed_h, tuple(options), contracted, "", coverage.advice)
    if coverage.needs_rescheduling:
        empty = coverage.advice
    elif unknown_gpu:
        empty = unknown_gpu
    else:
        missing = "; ".join(o.reason for o in options if o.covers)
        empty = f"no covering plan has a price: {missing}"
    return CostResult(gpu, lots, needed_h, tuple(options), None, empty, coverage.advice)


def _unknown_gpu(catalog: Catalog, gpu: str, plan_days: int, lots: int) -> str:
    """The catalog's error text when it does not know ``gpu`` at all, else ``""``."""
    try:
        quote(catalog, gpu, plan_days, lots)
    except UserError as exc:
        if exc.what.startswith("unknown GPU"):
            return exc.message
    return ""


def _price_fit(
    catalog: Catalog, gpu: str, lots: int, needed_h: float, accepted_artifacts: int | None, fit: PlanFit,
    unknown_gpu: str,
) -> tuple[PlanOption, Quote | None]:
    """One plan length as an option: too short, unpriced (the catalog's reason), or priced."""
    if not fit.covers:
        reason = (f"too short: {fit.plan_hours} h < needed {format_hours(needed_h)} h "
                  f"(short by {format_hours(-fit.margin_h)} h)")
        return PlanOption(fit.plan_days, fit.plan_hours, fit.covers, fit.margin_h, None, None, reason), None
    if unknown_gpu:
        return PlanOption(fit.plan_days, fit.plan_hours, fit.covers, fit.margin_h, None, None, unknown_gpu), None
    try:
        priced = quote(catalog, gpu, fit.plan_days, lots, accepted_artifacts)
    except UserError as exc:
        return PlanOption(fit.plan_days, fit.plan_hours, fit.covers, fit.margin_h, None, None, exc.message), None
    reason = f"covers the needed period ({format_hours(fit.margin_h)} h to spare)"
    return PlanOption(fit.plan_days, fit.plan_hours, fit.covers, fit.margin_h, priced.plan.price_usd_per_lot,
                      priced.total_usd, reason), priced

def deadline_fit(needed_h: float | None, window: Window | None, reason: str = "") -> tuple[bool | None, str]:
    """Does the measured period plus declared waiting fit inside the deadline window?

    Example: 100 h against a Monday 09:00 → Friday 09:00 window (96 h) is ``(False, "… 100 h > 96 h …")``.
    """
    if window is None:
        return None, reason or "the study declares no deadline: no deadline check"
    if needed_h is None:
        return None, "campaign period unknown: the deadline cannot be checked"
    window_h = window.elapsed_h
    if needed_h <= window_h:
        return True, (f"fits: needs {format_hours(needed_h)} h, the deadline window holds {format_hours(window_h)} h "
                      f"({format_hours(window_h - needed_h)} h to spare)")
    return False, (f"does not fit: needs {format_hours(needed_h)} h > the deadline window's {format_hours(window_h)} h "
                   f"(over by {format_hours(needed_h - window_h)} h)")


