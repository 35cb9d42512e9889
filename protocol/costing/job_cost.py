"""The declared job priced under every billing option, ranked, compared and plotted (money is ``Decimal``).

For each configuration (one variant on one campaign's hardware) with a
projection (:mod:`protocol.costing.projection`):

- every billing option the catalog has for its GPU is charged for every
  bootstrap resample of the job's hours (:func:`protocol.costing.plans.charge`): the
  probability that the option covers the job (a flat plan is too short when
  the job outlasts it; metered and monthly billing always cover), the
  expected cost (mean over the resamples it covers, rounded to the cent) and
  its interval;
- the option picked is the cheapest expected cost among those covering the
  job with probability at least the declared level, with its reason;
- the probability of fitting the deadline: resampled job hours plus the
  declared waiting, against the deadline window's real elapsed hours.

Ranking: by expected cost among configurations whose P(fits deadline) meets
the level (default 0.95); the others are listed with why. For the top
configurations, P(A cheaper than B) over paired resamples, a decisive / not
yet decisive verdict, and the passes that would likely settle it. The Pareto
view marks the configurations no other beats on cost per validated corpus,
job hours and quality together.

Example: ``price_options(catalog, "rtx-4090", 1, projection, 0.95)`` lists one option per billing row.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from statistics import NormalDist
from typing import Any, ClassVar

from protocol.costing.job import Job
from protocol.costing.plans import CENT, METERED, ROUNDING, Catalog, Plan, charge, format_usd
from protocol.costing.projection import Projection
from protocol.records.codec import OMIT_NONE, Schema, options

# Version history: 1 = first format (BillingOption, JobConfiguration, Comparison, JobDecision).
SCHEMA_VERSION = 1

#: How many of the top-ranked configurations are compared pairwise.
TOP_COMPARED = 3


@dataclass(frozen=True)
class BillingOption:
    """One catalog row priced for the job. ``expected_usd`` is ``None`` when it never covers the job."""

    plan: Plan
    lots: int
    p_covers: float
    point_usd: Decimal | None
    expected_usd: Decimal | None
    low_usd: Decimal | None = field(metadata=options(written=False))  # written as interval_usd
    high_usd: Decimal | None = field(metadata=options(written=False))
    fits: bool
    reason: str
    samples_usd: tuple[Decimal | None, ...] = field(repr=False, default=(), metadata=options(written=False))
    #: A text-generation job: the expected cost per million generated tokens (None when nothing is generated).
    per_million_tokens_usd: Decimal | None = field(default=None,
                                                   metadata=options(key="per_million_generated_tokens_usd"))
    CODEC: ClassVar[Schema] = Schema("billing option", SCHEMA_VERSION, derived=("label",), extra=lambda option: {
        "interval_usd": [option.low_usd, option.high_usd]})

    @property
    def label(self) -> str:
        """Example: ``"flat 7-day"``, ``"hourly"``, ``"monthly (30-day months)"``."""
        if self.plan.billing in METERED:
            return self.plan.billing
        if self.plan.billing == "monthly":
            return f"monthly ({self.plan.plan_days}-day months)"
        return f"flat {self.plan.plan_days}-day"



@dataclass(frozen=True)
class JobConfiguration:
    """One configuration against the declared job."""

    configuration_id: str
    gpu: str | None
    lots: int | None
    workers: int | None
    metric: str
    median_metric: float | None
    projection: Projection | None
    refused: str
    options: tuple[BillingOption, ...]
    chosen_option: str | None
    choice_reason: str
    expected_usd: Decimal | None
    per_corpus_usd: Decimal | None
    p_fits_plan: float | None
    p_fits_deadline: float | None
    deadline_reason: str
    energy: dict[str, Any]
    exclusions: tuple[str, ...]
    rank: int | None = None
    pareto: bool = False
    p_keeps_up: float | None = None  # a daily job (inputs_per_day × days): P(job hours <= days × 24)
    per_million_tokens_usd: Decimal | None = None  # text generation: the picked option's cost per million tokens
    CODEC: ClassVar[Schema] = Schema("job configuration", SCHEMA_VERSION)

    @property
    def chosen(self) -> BillingOption | None:
        return next((o for o in self.options if o.label == self.chosen_option), None)



@dataclass(frozen=True)
class Comparison:
    """A against B over paired bootstrap resamples of their costs."""

    a: str
    b: str
    p_a_cheaper: float
    p_tie: float
    p_b_cheaper: float
    verdict: str  # decisive, not yet decisive, tie
    extra_passes: int | None
    note: str
    CODEC: ClassVar[Schema] = Schema("comparison", SCHEMA_VERSION)


@dataclass(frozen=True)
class NothingFits:
    """No plan covers the declared job on any configuration: why (the fastest configuration against the longest
    plan of its GPU), and what would cover it (:func:`protocol.decision.nothing_fits.nothing_fits`)."""

    configuration_id: str
    gpu: str
    needs_h: float  # the fastest configuration's projected hours, upper end of the interval
    plan: str  # the nearest (longest) plan, e.g. "rtx-4090 flat 7-day"
    plan_hours: float
    short_h: float
    lots: int
    lots_needed: int | None  # about this many lots would bring the job inside the plan (None: beyond the bound)
    remedies: tuple[str, ...]
    where: str  # the study key the job's size comes from
    CODEC: ClassVar[Schema] = Schema("nothing fits", SCHEMA_VERSION)


@dataclass(frozen=True)
class JobDecision:
    """The declared job's answer: ranked configurations, comparisons, Pareto front, method."""

    job: Job
    level: float
    configurations: tuple[JobConfiguration, ...]
    ranking: tuple[str, ...]
    chosen: str | None
    comparisons: tuple[Comparison, ...]
    why: tuple[str, ...]
    method: tuple[str, ...]
    assumptions: tuple[str, ...]
    nothing_fits: NothingFits | None = field(default=None, metadata=OMIT_NONE)
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("job decision", SCHEMA_VERSION, extra=lambda decision: {
        "pareto": [c.configuration_id for c in decision.configurations if c.pareto]})


def price_options(catalog: Catalog, gpu: str, lots: int, projection: Projection, level: float) -> \
        tuple[tuple[BillingOption, ...], BillingOption | None, str]:
    """Every billing option for ``gpu`` charged for every resample; the cheapest that fits, and why."""
    options = []
    for plan in catalog.options_for(gpu):
        samples = tuple(charge(plan, h, lots) for h in projection.samples_h)
        covered = [s for s in samples if s is not None]
        p_covers = len(covered) / len(samples) if samples else 0.0
        point = charge(plan, projection.job_h, lots)
        expected: Decimal | None = None
        low: Decimal | None = None
        high: Decimal | None = None
        if covered:
            expected = (sum(covered, Decimal(0)) / len(covered)).quantize(CENT, rounding=ROUNDING)
            ordered = sorted(covered)
            low, high = ordered[math.floor(0.025 * (len(ordered) - 1))], ordered[math.ceil(0.975 * (len(ordered) - 1))]
        fits = p_covers >= level
        if plan.billing == "flat":
            reason = (f"covers the job in {p_covers:.0%} of resamples ({plan.plan_hours} h plan, job "
                      f"{projection.low_h:.1f}–{projection.high_h:.1f} h)")
            if not fits:
                reason = "too short: " + reason
        elif plan.billing == "monthly":
            reason = f"every started {plan.plan_days}-day month paid whole"
        else:
            reason = (f"{format_usd(plan.price_usd_per_lot)} USD per lot-hour, billed in {plan.increment_s} s steps, "
                      f"minimum {plan.minimum_s} s")
        options.append(BillingOption(plan, lots, p_covers, point, expected, low, high, fits, reason, samples,
                                     per_million_tokens(expected, projection)))
    fitting = [o for o in options if o.fits and o.expected_usd is not None]
    if not fitting:
        return tuple(options), None, ""
    best = min(fitting, key=lambda o: (o.expected_usd, options.index(o)))
    others = [o for o in fitting if o is not best]
    reason = f"cheapest expected cost among the options covering the job with P >= {level:g}"
    if others:
        reason += ": " + ", ".join(f"{o.label} {format_usd(o.expected_usd)} USD" for o in others
                                   if o.expected_usd is not None)
    unfit = [o.label for o in options if not o.fits]
    if unfit:
        reason += "; not covering: " + ", ".join(unfit)
    return tuple(options), best, reason


def per_million_tokens(cost: Decimal | None, projection: Projection) -> Decimal | None:
    """``cost`` per million generated tokens of the job (inputs × corpora × measured tokens per input); None
    without generated tokens. Example: 10.00 USD for 2,000,000 tokens is 5.00 USD per million."""
    per_input = projection.generated_per_input
    if cost is None or not per_input:
        return None
    tokens = Decimal(projection.job_inputs * projection.corpora) * Decimal(repr(per_input))
    return (cost * Decimal(1_000_000) / tokens).quantize(CENT, rounding=ROUNDING)


def p_fits_deadline(samples_h: Sequence[float], window_h: float | None, waiting_h: float) -> float | None:
    """Share of resamples whose job hours plus waiting fit the window (``None``: no deadline).

    Example: ``p_fits_deadline([1, 2, 3, 4], 3.5, 0.5) == 0.75``.
    """
    if window_h is None or not samples_h:
        return None
    return sum(1 for h in samples_h if h + waiting_h <= window_h) / len(samples_h)


def compare(a: JobConfiguration, b: JobConfiguration, level: float) -> Comparison:
    """P(A cheaper than B) over paired resamples (a cost that does not cover counts as infinite).

    Decisive when P(A dearer than B) <= 1 - level. Not decisive: the passes that would likely settle
    it, from the spread of the cost difference shrinking as 1/sqrt(passes).
    """
    oa, ob = a.chosen, b.chosen
    assert oa is not None and ob is not None and a.projection is not None and b.projection is not None
    inf = Decimal("Infinity")
    pairs = [(x if x is not None else inf, y if y is not None else inf)
             for x, y in zip(oa.samples_usd, ob.samples_usd, strict=False)]
    n = len(pairs)
    cheaper = sum(1 for x, y in pairs if x < y) / n
    tie = sum(1 for x, y in pairs if x == y) / n
    dearer = 1.0 - cheaper - tie
    passes = min(a.projection.passes, b.projection.passes)
    if tie == 1.0:
        return Comparison(a.configuration_id, b.configuration_id, cheaper, tie, dearer, "tie", None,
                          "the same cost in every resample: more passes cannot separate them on cost")
    if dearer <= 1 - level:
        return Comparison(a.configuration_id, b.configuration_id, cheaper, tie, dearer, "decisive", 0,
                          f"{a.configuration_id} costs no more in {1 - dearer:.1%} of resamples")
    diffs = [float(y - x) for x, y in pairs if x != inf and y != inf]
    mean = statistics.fmean(diffs) if diffs else 0.0
    spread = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    if mean <= 0 or spread == 0:
        return Comparison(a.configuration_id, b.configuration_id, cheaper, tie, dearer, "not yet decisive", None,
                          "on average B is not dearer: more passes are unlikely to make A decisively cheaper")
    z = NormalDist().inv_cdf(level)
    needed = passes * (z * spread / mean) ** 2
    extra = max(1, math.ceil(needed - passes))
    return Comparison(a.configuration_id, b.configuration_id, cheaper, tie, dearer, "not yet decisive", extra,
                      f"about {extra} more accepted pass(es) each would likely settle it (the spread of the cost "
                      f"difference, {spread:.2f} USD over {passes} passes, shrinking as 1/sqrt(passes))")


def pareto_front(configs: Sequence[JobConfiguration]) -> set[str]:
    """Ids no other configuration beats on cost per validated corpus, job hours and quality at once.

    Example: A (10 USD, 5 h, 0.90) and B (20 USD, 2 h, 0.90) are both on the front; C (30 USD, 6 h, 0.80) is not.
    """
    points = {c.configuration_id: (c.per_corpus_usd, c.projection.job_h, c.median_metric if c.median_metric
                                   is not None else -math.inf)
              for c in configs if c.per_corpus_usd is not None and c.projection is not None}

    def dominates(p: tuple[Any, ...], q: tuple[Any, ...]) -> bool:
        return p[0] <= q[0] and p[1] <= q[1] and p[2] >= q[2] and (p[0] < q[0] or p[1] < q[1] or p[2] > q[2])

    return {k for k, p in points.items() if not any(dominates(q, p) for j, q in points.items() if j != k)}


def rank_job(configs: list[JobConfiguration], level: float) -> tuple[list[JobConfiguration], list[str]]:
    """Rank by expected cost among configurations meeting the deadline level; why for the first."""
    eligible = [c for c in configs if not c.exclusions]
    ranked = sorted(eligible, key=lambda c: (c.expected_usd, -(c.p_fits_deadline or 1.0),
                                             c.projection.job_h if c.projection else math.inf, c.configuration_id))
    why: list[str] = []
    if not ranked:
        why.append("no configuration can do the job as declared:")
        why += [f"{c.configuration_id}: {'; '.join(c.exclusions)}" for c in configs]
        return ranked, why
    first = ranked[0]
    option = first.chosen
    assert option is not None and first.projection is not None and first.expected_usd is not None
    p = first.projection
    why.append(f"projected job: {p.job_h:.1f} h (interval {p.low_h:.1f}–{p.high_h:.1f} h) on {first.workers} "
               f"worker(s)")
    why.append(f"billing: {option.label}, expected {format_usd(first.expected_usd)} USD ({first.choice_reason})")
    deadline = ("no deadline declared" if first.p_fits_deadline is None
                else f"P(fits deadline) {first.p_fits_deadline:.1%} >= {level:g}")
    why.append(deadline)
    if len(ranked) > 1:
        second = ranked[1]
        assert second.expected_usd is not None
        why.append(f"next: {second.configuration_id} at {format_usd(second.expected_usd)} USD expected")
    else:
        why.append("it is the only configuration that meets the level")
    return ranked, why
