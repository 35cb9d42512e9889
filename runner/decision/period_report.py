"""``isocost period``: one campaign's measured period beside the plans that cover it, as a record and as text.

:func:`campaign_period` reads the campaign directory (after the evidence checks), measures the period from
events.jsonl and raw.csv (:func:`protocol.costing.period.measure_period`) and prices the rental against it
(:func:`protocol.decision.rank.plan_cost`); :func:`render_period` writes the plain-text lines.

Example: ``render_period(campaign_period(Path("results/quick")))[0]`` reads
``campaign 20261102-…, rented as rtx-4090 ×1 lot(s)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from protocol.costing.period import SCHEMA_VERSION, CampaignPeriod, measure_period
from protocol.costing.timeline import iso_utc
from protocol.decision.rank import plan_cost
from protocol.decision.records import CostResult
from protocol.records.codec import OMIT_NONE, Schema
from protocol.records.stages import Rental
from runner.campaign_dir.campaign import open_campaign
from runner.campaign_dir.rentals import latest_rental
from runner.decision.inputs import choose_catalog, read_events
from runner.decision.render.text_format import hours, usd


@dataclass(frozen=True)
class PeriodReport:
    """One campaign's measured period and the plans priced against it.

    ``rental`` is the latest ``isocost rental`` record, else campaign.json's, or ``None``; ``inconsistent``
    is the banner when the directory was read with ``allow_inconsistent``.
    """

    campaign_id: str
    rental: Rental | None
    period: CampaignPeriod
    cost: CostResult
    catalog_source: str
    catalog_dates: str
    inconsistent: str | None = field(default=None, metadata=OMIT_NONE)
    #: What ``isocost period --json`` prints; ``schema_version`` is the period's.
    CODEC: ClassVar[Schema] = Schema("period report", SCHEMA_VERSION)


def campaign_period(root: Path, catalog_path: Path | None = None, allow_inconsistent: bool = False) -> PeriodReport:
    """The measured period of one campaign and the plans that cover it.

    The evidence checks run first; ``allow_inconsistent`` reads an inconsistent directory anyway and the
    report carries the banner.
    """
    campaign = open_campaign(root, allow_inconsistent=allow_inconsistent)
    record, study, rows, banner = campaign.record, campaign.study, list(campaign.rows), campaign.banner
    deadline = getattr(study, "deadline", None)
    events = read_events(campaign.paths.events, verify=not allow_inconsistent)
    period = measure_period(events, rows, None if deadline is None else deadline.waiting_h)
    catalog, source = choose_catalog(catalog_path, study, record)
    recorded = latest_rental(root, verify=not allow_inconsistent)
    rental = Rental(recorded.gpu, recorded.lots) if recorded else record.rental
    reason = "" if rental else str(record.empty_reasons.get("rental") or "no rental recorded")
    cost = plan_cost(catalog, rental.gpu if rental else None, rental.lots if rental else None,
                     period.needed_h, None, no_gpu_reason=reason,
                     no_period_reason="; ".join(period.empty_reasons.values()))
    return PeriodReport(campaign_id=record.campaign_id, rental=rental, period=period, cost=cost,
                        catalog_source=source, catalog_dates=catalog.dates_text, inconsistent=banner or None)


def render_period(report: PeriodReport) -> list[str]:
    """Plain text lines for ``isocost period``: the banner if any, every component with its source, the plans."""
    period = report.period
    rental = report.rental
    lines = [report.inconsistent] if report.inconsistent else []
    lines.append(f"campaign {report.campaign_id}, rented as "
                 + (f"{rental.gpu} ×{rental.lots} lot(s)" if rental else "unknown (no rental recorded)"))
    if period.used_s is None:
        lines.append("period unknown: " + "; ".join(sorted(set(period.empty_reasons.values()))))
    else:
        lines.append(f"from {iso_utc(period.start)} to {iso_utc(period.end)}")
    width = max(len(c.name) for c in period.components)
    for c in period.components:
        if c.seconds is None:
            lines.append(f"  {c.name:<{width}}  {'—':>12}  {'—':>10}  {c.source}")
        else:
            lines.append(f"  {c.name:<{width}}  {c.seconds:>10.1f} s  {hours(c.hours):>8} h  {c.source}")
    if period.used_s is not None:
        lines.append(f"used: {hours(period.used_h)} h ({period.sessions} session(s), {period.resumes} resume(s); "
                     f"overlaps counted once); idle between sessions: {hours(period.idle_h)} h")
        lines.append(f"needed period: {hours(period.needed_h)} h (used + declared waiting)")
    lines += [f"note: {note}" for note in period.notes]
    return lines + plan_text(report)


def plan_text(report: PeriodReport) -> list[str]:
    """The plans for the rental against the needed period, and the one contracted (or why none is)."""
    cost = report.cost
    if not cost.options:
        return [f"plans: none priced ({cost.empty_reason})"]
    lines = [f"plans for {cost.gpu} ×{cost.lots} lot(s) (catalog dated {report.catalog_dates}, "
             f"{report.catalog_source}):"]
    for option in cost.options:
        total = usd(option.total_usd)
        price = f"{total} USD" if total else "no price"
        lines.append(f"  {option.plan_days}-day plan ({option.plan_hours} h): "
                     f"{'covers' if option.covers else 'does not cover'}; {price}; {option.reason}")
    contracted = cost.contracted
    lines.append(f"contracted: {contracted.plan.plan_days}-day plan, {usd(contracted.total_usd)} USD "
                 "(whole plan price)" if contracted else f"contracted: none ({cost.empty_reason})")
    return lines
