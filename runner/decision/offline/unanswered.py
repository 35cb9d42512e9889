"""The memo's words when the declared job fits no plan: that nothing fits, why, and what would cover it.

Its own section, first after the question, so that a reader of ``decision.md`` sees it before any campaign
figure: the record is :class:`protocol.costing.job_cost.NothingFits` (``decision.json``'s ``job.nothing_fits``).

:func:`unanswered` says, for ``isocost decide``'s exit status (:data:`UNANSWERED_EXIT`), whether the memo answers
the question with a choice at all: nothing fits the declared job, no configuration can do it, or no configuration is
chosen (none accepted, no plan or rental known for its hardware, the deadline out of reach, no pass yet).

Example: ``nothing_fits_lines(decision.job)[0] == "## Nothing fits the declared job"`` (``[]`` when something does);
``unanswered(decision) == ""`` when the memo names a choice.
"""

from __future__ import annotations

from protocol.costing.job_cost import JobDecision
from protocol.decision.records import Decision
from runner.decision.render.text_format import hours

#: ``isocost decide``'s exit status when the memo answers no (:func:`unanswered`): the memo is printed, and with
#: ``--out`` it and decision.json are written, as for any answer.
UNANSWERED_EXIT = 3


def unanswered(decision: Decision) -> str:
    """What the memo says instead of a choice, in one phrase ("" when it names one): the declared job fits no plan,
    no configuration can do the declared job, or no configuration is chosen (its "Why not" lines say why)."""
    job = decision.job
    if job is not None and job.nothing_fits is not None:
        return "Nothing fits: no plan covers the declared job on any configuration"
    if decision.chosen is None:
        return ("No configuration is chosen: the campaigns hold no variant" if not decision.configurations else
                "No configuration is chosen: none is acceptable (quality, accepted passes, plan or deadline)")
    if job is not None and job.chosen is None:
        return "No configuration can do the declared job"
    return ""


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
