"""The memo's words when the declared job fits no plan: that nothing fits, why, and what would cover it.

Its own section, first after the question, so that a reader of ``decision.md`` sees it before any campaign
figure: the record is :class:`protocol.costing.job_cost.NothingFits` (``decision.json``'s ``job.nothing_fits``).

Example: ``nothing_fits_lines(decision.job)[0] == "## Nothing fits the declared job"`` (``[]`` when something does).
"""

from __future__ import annotations

from protocol.costing.job_cost import JobDecision
from runner.decision.text_format import hours

#: ``isocost decide``'s exit status when the declared job fits no plan (the memo and decision.json are written).
NOTHING_FITS_EXIT = 3


def nothing_fits_lines(job: JobDecision | None) -> list[str]:
    """The section, or ``[]`` when there is no declared job or something covers it."""
    if job is None or job.nothing_fits is None:
        return []
    found = job.nothing_fits
    return ["## Nothing fits the declared job", "",
            f"**Nothing fits: no plan in the catalog covers the declared job ({job.job.inputs:,} inputs) on any "
            f"configuration.** The fastest, {found.configuration_id}, needs up to {hours(found.needs_h)} h on "
            f"{found.lots} lot(s); the longest plan priced for {found.gpu}, {found.plan} ({found.plan_hours:g} h), "
            f"is short by {hours(found.short_h)} h ({found.where}).", "",
            "What would cover it:", "", *[f"- {remedy}" for remedy in found.remedies], ""]
