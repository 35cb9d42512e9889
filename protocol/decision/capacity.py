"""Serving capacity per configuration (issue 36): the highest declared rate at which every kept run held.

A server study runs each configuration at one or more declared target rates (MLPerf LoadGen's Server scenario). A
**configuration** is the variant minus its rate. One run (:class:`RunFacts`, read from the trial's sealed
manifest ``serving`` block and its re-derived verdict by :mod:`runner.decision.serving.runs`) **holds** when its
answers were accepted (the task's gate AND the same result as the reference), LoadGen called it ``VALID`` and the
latency at the declared percentile met the bound. A declared rate holds for a configuration when EVERY kept
repetition at that rate held.

The rule (:func:`capacities`), walking the declared rates upwards:

- a configuration with any run whose answers were NOT accepted gets no capacity (``None`` with the reason), never
  a zero: answers that change under load are a quality failure, whatever the latency;
- the capacity is the highest declared rate such that it and every declared rate below it held; the first rate
  that did not hold (or a declared rate with no kept run: a gap) ends the walk. A rate above it that holds again is
  not counted (the memo says so);
- when the lowest declared rate does not hold, there is no capacity (``None``: below the lowest rate, not measured).

The capacity is bracketed: at least ``capacity_qps``; below ``fails_at_qps`` when a higher declared rate failed,
unknown above when none did (the highest rate held, or a single rate was declared).

Example::

    runs = [RunFacts("t1", "batch_size=1", "batch_size=1", 2.0, "ok", True, "", "VALID", 80.0, 100.0, True),
            RunFacts("t2", "batch_size=1", "batch_size=1", 4.0, "ok", True, "", "VALID", 140.0, 100.0, False)]
    capacities(runs, (2.0, 4.0))[0].capacity_qps   # 2.0, fails_at_qps 4.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from protocol.records.codec import Schema
from protocol.records.stages import Variant
from protocol.study.model import configuration_id
from protocol.study.traffic import Traffic

SCHEMA_VERSION = 1
#: Fewer kept repetitions than this at the capacity rate is said to be uncertain in the memo.
FEW_REPETITIONS = 3


@dataclass(frozen=True)
class RunFacts:
    """One kept serving run (one trial): what the capacity rule reads. ``accepted``: True when the task's gate accepted
    the pass AND the variant is the same result as the reference; False when its answers were refused (malformed,
    differing, not the reference's result: a quality failure); None when they were incomplete (a failed trial, ids
    unanswered or never issued: the rate did not hold, no verdict on quality); ``accepted_reason`` says why not.
    ``result``: LoadGen's ``VALID``/``INVALID`` (None: no LoadGen result); ``within_bound``: the latency at the declared
    percentile met the bound (None: not reported). ``output_tokens``: output tokens over the run's answered queries
    (generation), None when the manifest records none."""

    trial_id: str
    variant_id: str
    configuration: str
    rate_qps: float
    status: str
    accepted: bool | None
    accepted_reason: str
    result: str | None
    latency_ms: float | None
    bound_ms: float | None
    within_bound: bool | None
    completed_qps: float | None = None
    queries: int | None = None
    output_tokens: int | None = None
    bound_detail: str = ""  # every declared bound against its measure, when more than one (generation: TTFT, TPOT)

    @property
    def held(self) -> bool:
        """Accepted answers AND LoadGen VALID AND the bound met."""
        return self.accepted is True and self.result == "VALID" and self.within_bound is True

    @property
    def why_not(self) -> str:
        """Why this run did not hold ('' when it did). Example: ``"LoadGen INVALID (trial 003)"``."""
        if self.accepted is not True:
            words = "answers not accepted" if self.accepted is False else "answers incomplete"
            return f"{words}: {self.accepted_reason} (trial {self.trial_id})"
        reasons = []
        if self.result != "VALID":
            reasons.append(f"LoadGen {self.result}" if self.result else "no LoadGen result (the run did not complete)")
        if self.within_bound is not True and self.bound_detail:
            reasons.append(self.bound_detail)
        elif self.within_bound is not True and (self.result is not None or self.latency_ms is not None):
            latency = "not reported" if self.latency_ms is None else f"{self.latency_ms:.1f} ms"
            bound = "" if self.bound_ms is None else f" against the {self.bound_ms:g} ms bound"
            reasons.append(f"latency at the percentile {latency}{bound}")
        if reasons:
            return f"{'; '.join(reasons)} (trial {self.trial_id})"
        return ""


@dataclass(frozen=True)
class RateOutcome:
    """One declared rate for one configuration: its kept runs, whether all held, and why not."""

    rate_qps: float
    trials: tuple[str, ...]
    held: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Capacity:
    """One configuration's capacity: ``capacity_qps`` (None with ``reason``), bracketed below ``fails_at_qps``
    (None: not bracketed above), the runs per declared rate, and what stays uncertain."""

    configuration: str
    variant_ids: tuple[str, ...]
    capacity_qps: float | None
    reason: str
    accepted: bool
    fails_at_qps: float | None
    repetitions_at_capacity: int
    rates: tuple[RateOutcome, ...]
    uncertain: tuple[str, ...]
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("capacity", SCHEMA_VERSION)


def rate_of(variant: Variant, traffic: Traffic) -> float:
    """The target rate a variant was served at: its ``rate_qps``; a variant without one (read from a campaign made
    before the rate was a variant field, which declared one rate) was served at the study's one rate.

    Example: ``rate_of(variant, traffic) == 20.0`` for a study declaring ``rate_qps = 20.0``."""
    return float(variant.rate_qps) if variant.rate_qps is not None else float(traffic.rates_qps[0])


def configuration_of(variant: Variant) -> str:
    """The configuration a variant belongs to: its id without the rate part
    (:func:`protocol.study.model.configuration_id`).

    Example: ``configuration_of(variant) == "batch_size=4"`` for ``batch_size=4@rate_qps=2``."""
    return configuration_id(variant.variant_id)


def capacities(runs: Sequence[RunFacts], declared_rates: Sequence[float]) -> tuple[Capacity, ...]:
    """Each configuration's capacity, in the order configurations first appear in ``runs``."""
    order = list(dict.fromkeys(run.configuration for run in runs))
    return tuple(capacity_of(name, [r for r in runs if r.configuration == name], declared_rates) for name in order)


def capacity_of(configuration: str, runs: Sequence[RunFacts], declared_rates: Sequence[float]) -> Capacity:
    """One configuration's capacity from its kept runs at the ``declared_rates`` (the rule in the module doc)."""
    rates = sorted(set(declared_rates) | {run.rate_qps for run in runs})
    outcomes = tuple(_outcome(rate, [r for r in runs if r.rate_qps == rate]) for rate in rates)
    variant_ids = tuple(dict.fromkeys(run.variant_id for run in runs))
    refused = [run for run in runs if run.accepted is False]
    if refused:
        why = "; ".join(f"{run.rate_qps:g} qps: {run.why_not}" for run in refused[:3])
        return Capacity(configuration, variant_ids, None, f"outputs not accepted ({why}), whatever the latency",
                        False, None, 0, outcomes, ())
    best: RateOutcome | None = None
    stop: RateOutcome | None = None
    for outcome in outcomes:
        if not outcome.held:
            stop = outcome
            break
        best = outcome
    uncertain = _uncertain(best, stop, outcomes, len(rates))
    if best is None:
        assert stop is not None  # at least one rate: the study declares one
        return Capacity(configuration, variant_ids, None, f"the bound does not hold at the lowest declared rate "
                        f"{stop.rate_qps:g} qps ({'; '.join(stop.reasons)}): capacity below it, not measured",
                        True, stop.rate_qps, 0, outcomes, uncertain)
    reason = (f"held at {best.rate_qps:g} qps in {len(best.trials)} of {len(best.trials)} kept run(s)"
              + (f"; not at {stop.rate_qps:g} qps ({'; '.join(stop.reasons)})" if stop else ""))
    return Capacity(configuration, variant_ids, best.rate_qps, reason, True, stop.rate_qps if stop else None,
                    len(best.trials), outcomes, uncertain)


def _outcome(rate: float, runs: Sequence[RunFacts]) -> RateOutcome:
    if not runs:
        return RateOutcome(rate, (), False, ("no kept run at this declared rate (a gap in the series)",))
    reasons = tuple(run.why_not for run in runs if not run.held)
    return RateOutcome(rate, tuple(run.trial_id for run in runs), not reasons, reasons)


def _uncertain(best: RateOutcome | None, stop: RateOutcome | None, outcomes: Sequence[RateOutcome],
               declared: int) -> tuple[str, ...]:
    """What the capacity leaves open: the bracket, a single rate, few repetitions, a rate holding above a failure."""
    lines: list[str] = []
    if best is not None and stop is not None:
        lines.append(f"capacity bracketed between {best.rate_qps:g} qps (held) and {stop.rate_qps:g} qps (did not "
                     "hold): the true capacity is somewhere in between; declare rates in between to narrow it")
    elif best is not None and declared == 1:
        lines.append(f"a single rate declared: the bound held at {best.rate_qps:g} qps, so the capacity is at least "
                     "that; how much more one replica takes was not measured (declare a series of rates)")
    elif best is not None:
        lines.append(f"the bound held at the highest declared rate {best.rate_qps:g} qps: capacity at least that, "
                     "not bracketed above")
    if best is not None and len(best.trials) < FEW_REPETITIONS:
        lines.append(f"{len(best.trials)} kept repetition(s) at {best.rate_qps:g} qps (fewer than "
                     f"{FEW_REPETITIONS}): one more run could fall on the other side of the bound")
    if stop is not None:
        above = [o.rate_qps for o in outcomes if o.rate_qps > stop.rate_qps and o.held]
        if above:
            lines.append(f"held again at {', '.join(f'{r:g}' for r in above)} qps after failing at "
                         f"{stop.rate_qps:g} qps: not counted (capacity is the highest rate with every rate below "
                         "it held)")
    return tuple(lines)
