"""When no plan covers the declared job on any configuration: why, and what would cover it.

Not an error: ``decide`` still writes the memo and ``decision.json``, and says that nothing fits, by how much the
fastest configuration misses the longest plan of its GPU, and the three ways out the catalog and the rental leave:
more lots (the job's hours shrink about in proportion to the workers), another billing (hourly, per-second or
monthly billing has no fixed length), a longer period (a plan of at least the hours needed), besides a smaller job.
``isocost decide`` then exits with status 3.

Example::

    found = nothing_fits(job, results)   # None when some configuration has a billing option that covers the job
    found.remedies[0]                    # 'more lots: about 3 lots instead of 1 (…)'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol.costing.job import Job
from protocol.costing.job_cost import JobConfiguration, NothingFits
from protocol.costing.plans import BILLING_FLAT, BILLINGS, MAX_LOTS


def nothing_fits(job: Job, results: Sequence[JobConfiguration]) -> NothingFits | None:
    """The shortfall and the remedies when every projected, priced configuration has no covering option."""
    projected = [r for r in results if r.projection is not None and r.options]
    if not projected or any(r.chosen_option is not None for r in projected):
        return None
    fastest = min(projected, key=lambda r: r.projection.job_h if r.projection else 0.0)
    assert fastest.projection is not None
    nearest = max(fastest.options, key=lambda o: o.plan.plan_hours)
    needs_h, plan_h = fastest.projection.high_h, float(nearest.plan.plan_hours)
    lots = fastest.lots or 1
    lots_needed = math.ceil(lots * needs_h / plan_h) if plan_h > 0 else None
    if lots_needed is not None and lots_needed > MAX_LOTS:
        lots_needed = None
    gpu = fastest.gpu or nearest.plan.gpu
    return NothingFits(
        configuration_id=fastest.configuration_id, gpu=gpu, needs_h=needs_h,
        plan=f"{nearest.plan.gpu} {nearest.label}", plan_hours=plan_h, short_h=needs_h - plan_h, lots=lots,
        lots_needed=lots_needed, remedies=_remedies(job, fastest, lots, lots_needed, needs_h, plan_h),
        where=f"{job.source}, key job.inputs")


def _remedies(job: Job, fastest: JobConfiguration, lots: int, lots_needed: int | None, needs_h: float,
              plan_h: float) -> tuple[str, ...]:
    """More lots, another billing, a longer period, a smaller job: each with its figure where one is known."""
    gpu = fastest.gpu or ""
    more = (f"more lots: about {lots_needed} lots instead of {lots} (the job's hours shrink about in proportion "
            f"to the workers, plus each worker's set-up): rent them and record it, isocost rental DIR --lots "
            f"{lots_needed}, then decide again" if lots_needed is not None else
            f"more lots: more than {MAX_LOTS:,} would be needed at this speed: not a remedy here")
    offered = {o.plan.billing for o in fastest.options}
    missing = [b for b in BILLINGS if b != BILLING_FLAT and b not in offered]
    billing = (f"another billing: the catalog has no {', '.join(missing)} billing for {gpu}; hourly or per-second "
               "billing covers any length of job: load a catalog that prices it (--catalog FILE)"
               if missing else
               f"another billing: none of the catalog's billing options for {gpu} covers the job with "
               f"P >= {job.fit_level:g}: see the billing options below")
    period = (f"a longer period: a plan of at least {math.ceil(needs_h)} h ({math.ceil(needs_h / 24)} days) for "
              f"{gpu}, {needs_h - plan_h:.1f} h longer than the longest one priced ({plan_h:g} h)")
    smaller = (f"a smaller job: about {max(1, math.floor(job.inputs * plan_h / needs_h)):,} inputs fit the longest "
               f"plan on {lots} lot(s), or split the job into several")
    return (more, billing, period, smaller)
