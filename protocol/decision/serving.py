"""The serving decision (issue 36): declared traffic × capacity per configuration → replicas, money, the choice.

The demand (:class:`ServingDemand`, from ``isocost decide --peak-qps Q --hours-per-day H --days D``): a peak rate
of ``Q`` queries per second, held ``H`` hours a day, over a period of ``D`` days. For each configuration (the
variant minus its rate, on one campaign's hardware) with a capacity (:mod:`protocol.decision.capacity`):

- **replicas** = ceil(peak rate / capacity), exact (the rates are read as decimals, never divided as floats: 1.1 / 0.1
  is 11 replicas, not 12). One replica is one card serving as the trials served (one worker each); a lot of the
  catalog holds ``cards_per_lot`` cards, so the lots rented are ceil(replicas / cards_per_lot);
- **the money**: those lots held for the whole period (``D`` × 24 hours: a service stays up between its peaks),
  under every billing option the catalog sells for the campaign's GPU: a flat plan renewed whole as many times as
  the period needs (never prorated), hourly and per-second billing by :func:`protocol.costing.plans.charge`,
  monthly plans per started month; the cheapest is the cost;
- **cost per million requests** at the bound: that cost ÷ (peak rate × 3,600 × ``H`` × ``D``) × 10⁶ (only the
  declared peak traffic is counted; requests outside the peak hours would lower it); **per million output tokens**
  for generation when the manifests count the tokens, else an empty cell with the reason.

Ranked: only configurations whose outputs are accepted AND whose bound holds at their capacity (so at
peak ÷ replicas per replica) AND whose cost is known; by cost, then fewer cards, then the higher capacity.

Example::

    demand = ServingDemand(peak_qps=40.0, hours_per_day=8.0, days=30)
    replicas_needed(40.0, 15.0)                       # 3
    decide_serving(inputs, demand, catalog).chosen    # "batch_size=4 on rtx-4090 ×1 lot"
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import ClassVar

from protocol.costing.plans import (
    BILLING_FLAT,
    CENT,
    MAX_LOTS,
    MONEY_DIGITS,
    ROUNDING,
    Catalog,
    Plan,
    charge,
    format_usd,
    gpu_key,
)
from protocol.decision.capacity import Capacity
from protocol.decision.market_rank import MarketDecision
from protocol.decision.records import Ledger
from protocol.errors import UserError
from protocol.records.codec import Schema

#: 2: the record names the campaigns it weighs (``campaigns``), so ``isocost verify`` can re-derive it from a bundle.
#: 3: ``market``, every configuration's replicas priced across providers (``decide --market``; None without).
SCHEMA_VERSION = 3
#: The longest serving period ``decide`` prices, in days (ten years: more is a typo).
MAX_DAYS = 3650
#: The highest peak rate ``decide`` accepts, queries per second.
MAX_PEAK_QPS = 1e9
_FIX = "Declare the traffic to serve: --peak-qps Q (queries per second at the peak) --hours-per-day H --days D."


@dataclass(frozen=True)
class ServingDemand:
    """The declared traffic: ``peak_qps`` queries per second for ``hours_per_day`` hours a day over ``days`` days."""

    peak_qps: float
    hours_per_day: float
    days: int

    @property
    def period_h(self) -> int:
        """Example: 30 days → 720 hours."""
        return self.days * 24

    @property
    def requests(self) -> Decimal:
        """Requests at the peak over the period. Example: 40 qps × 3600 × 8 h × 30 days = 34,560,000."""
        return Decimal(str(self.peak_qps)) * 3600 * Decimal(str(self.hours_per_day)) * self.days


def serving_demand(peak_qps: float | None, hours_per_day: float | None, days: int | None) -> ServingDemand:
    """The declared traffic, validated; each refusal names the option and the fix.

    Example: ``serving_demand(40.0, 8.0, 30).period_h == 720``; ``serving_demand(0, 8, 30)`` raises."""
    for option, value in (("--peak-qps", peak_qps), ("--hours-per-day", hours_per_day), ("--days", days)):
        if value is None:
            raise UserError(f"a server study's decision needs the declared traffic: {option} is missing", option, _FIX)
    assert peak_qps is not None and hours_per_day is not None and days is not None
    _check(peak_qps, "--peak-qps", MAX_PEAK_QPS, "queries per second at the peak, above 0")
    _check(hours_per_day, "--hours-per-day", 24.0, "hours a day at the peak rate, above 0 and at most 24")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise UserError(f"--days must be a whole number of days from 1 to {MAX_DAYS}, got {days!r}", "--days", _FIX)
    return ServingDemand(float(peak_qps), float(hours_per_day), days)


def _check(value: float, option: str, high: float, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= high:
        raise UserError(f"{option} must be a finite number above 0 and at most {high:g}, got {value!r}", option,
                        f"Give {meaning}. {_FIX}")


def replicas_needed(peak_qps: float, capacity_qps: float) -> int:
    """ceil(peak ÷ capacity), exact on the decimals written. Example: ``replicas_needed(1.1, 0.1) == 11``."""
    return math.ceil(Fraction(str(peak_qps)) / Fraction(str(capacity_qps)))


@dataclass(frozen=True)
class ServingConfigInput:
    """One configuration to weigh: its id (the configuration on its campaign's hardware), its capacity, the
    campaign's rental (GPU, or None with the reason), the mean output tokens per request (None + reason) and the
    campaign it was measured in."""

    configuration_id: str
    capacity: Capacity
    rental_gpu: str | None
    rental_empty_reason: str
    tokens_per_request: float | None
    tokens_reason: str
    campaign_id: str = ""


@dataclass(frozen=True)
class ServingOption:
    """One billing option priced for the replicas over the period (``total_usd`` None: ``note`` says why)."""

    billing: str
    length: str
    price_usd_per_lot: Decimal
    lots: int
    total_usd: Decimal | None
    note: str


@dataclass(frozen=True)
class ServingConfiguration:
    """One configuration's replicas and money (empty cells carry their reason), and its rank (None: not ranked)."""

    configuration_id: str
    capacity: Capacity
    replicas: int | None
    cards_per_lot: int | None
    lots: int | None
    options: tuple[ServingOption, ...]
    cost_usd: Decimal | None
    cost_option: str
    cost_reason: str
    per_million_requests_usd: Decimal | None
    per_million_tokens_usd: Decimal | None
    tokens_reason: str
    rank: int | None
    not_ranked: str
    campaign_id: str = ""  # the campaign it was measured in


@dataclass(frozen=True)
class ServingCampaign:
    """One campaign the serving decision weighs: the directory as given, its id, its hardware, and the test-only
    fault hook's flag when its trials ran with it."""

    label: str
    campaign_id: str
    hardware: str
    test_hooks: tuple[str, ...] = ()  # the fault hook's flag when its trials ran with it: not a measurement


@dataclass(frozen=True)
class ServingDecision:
    """decision.json of a server study (``schema_version`` 3): the campaigns weighed, the demand, every
    configuration, the ranking, and with ``decide --market`` the configurations priced across providers."""

    study_name: str
    question: str
    task: str
    bound: str
    declared_rates_qps: tuple[float, ...]
    demand: ServingDemand
    catalog_path: str
    catalog_dates: str
    configurations: tuple[ServingConfiguration, ...]
    ranking: tuple[str, ...]
    chosen: str | None
    why: tuple[str, ...]
    uncertain: tuple[str, ...]
    catalog_source: str = ""
    test_hooks: tuple[str, ...] = ()
    campaigns: tuple[ServingCampaign, ...] = ()
    ledger: Ledger | None = None  # other project expenses (--expenses): shown apart, never added to a cost
    market: MarketDecision | None = None  # decide --market: each configuration's replicas priced across providers
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("serving_decision", SCHEMA_VERSION)


def price_configuration(item: ServingConfigInput, demand: ServingDemand, catalog: Catalog) -> ServingConfiguration:
    """Replicas, lots and the cheapest billing option over the period for one configuration (not yet ranked)."""
    capacity = item.capacity.capacity_qps
    empty = ServingConfiguration(item.configuration_id, item.capacity, None, None, None, (), None, "", "", None,
                                 None, item.tokens_reason, None, "", item.campaign_id)
    if capacity is None:
        return _replace(empty, cost_reason=f"no capacity: {item.capacity.reason}",
                        not_ranked=f"no capacity: {item.capacity.reason}")
    replicas = replicas_needed(demand.peak_qps, capacity)
    if item.rental_gpu is None:
        why = f"no rental recorded for its campaign ({item.rental_empty_reason}): no price is guessed"
        return _replace(empty, replicas=replicas, cost_reason=why, not_ranked=why)
    plans = catalog.options_for(item.rental_gpu)
    if not plans:
        why = (f"the catalog (dated {catalog.dates_text}, {catalog.path}) prices no {gpu_key(item.rental_gpu)}: "
               "load a dated catalog that does with --catalog FILE")
        return _replace(empty, replicas=replicas, cost_reason=why, not_ranked=why)
    cards = plans[0].cards_per_lot
    lots = math.ceil(Fraction(replicas, cards))
    options = tuple(_option(plan, demand, lots) for plan in plans)
    priced = [o for o in options if o.total_usd is not None]
    best = min(priced, key=lambda o: o.total_usd or Decimal(0)) if priced else None
    if best is None or best.total_usd is None:
        why = "no billing option prices the period: " + "; ".join(o.note for o in options)
        return _replace(empty, replicas=replicas, cards_per_lot=cards, lots=lots, options=options, cost_reason=why,
                        not_ranked=why)
    per_million, per_tokens = _per_million(best.total_usd, demand, item.tokens_per_request)
    return ServingConfiguration(item.configuration_id, item.capacity, replicas, cards, lots, options,
                                best.total_usd, f"{best.billing} ({best.length})", best.note, per_million,
                                per_tokens, item.tokens_reason if per_tokens is None else "", None, "",
                                item.campaign_id)


def _replace(config: ServingConfiguration, **changes: object) -> ServingConfiguration:
    return replace(config, **changes)  # type: ignore[arg-type]


def _option(plan: Plan, demand: ServingDemand, lots: int) -> ServingOption:
    """One billing option for ``lots`` lots held for the whole period."""
    length = plan.length_text if plan.billing != BILLING_FLAT else f"{plan.plan_days} days"
    if lots > MAX_LOTS:
        return ServingOption(plan.billing, length, plan.price_usd_per_lot, lots, None,
                             f"{lots} lots: more than the {MAX_LOTS:,} one rental may name")
    if plan.billing == BILLING_FLAT:
        renewals = math.ceil(Fraction(demand.period_h, plan.plan_hours))
        with localcontext(prec=MONEY_DIGITS):
            total = plan.price_usd_per_lot * renewals * lots
        return ServingOption(plan.billing, length, plan.price_usd_per_lot, lots, total,
                             f"{renewals} consecutive {plan.plan_days}-day plan(s) × {lots} lot(s) × "
                             f"{format_usd(plan.price_usd_per_lot)} USD (whole plans, never prorated)")
    metered = charge(plan, demand.period_h, lots)
    note = (f"{demand.period_h} h × {lots} lot(s) at {format_usd(plan.price_usd_per_lot)} USD "
            f"({plan.billing} billing)")
    return ServingOption(plan.billing, length, plan.price_usd_per_lot, lots, metered, note)


def _per_million(total: Decimal, demand: ServingDemand,
                 tokens_per_request: float | None) -> tuple[Decimal, Decimal | None]:
    """Cost per million requests at the peak, and per million output tokens when tokens were counted."""
    requests = demand.requests
    if tokens_per_request is None or tokens_per_request <= 0:
        return per_million(total, requests), None
    return per_million(total, requests), per_million(total, requests * Decimal(str(tokens_per_request)))


def per_million(total_usd: Decimal, count: Decimal) -> Decimal:
    """A total per million requests (or tokens), to the cent. Example: 330.00 USD over 10,080,000 requests → 32.74."""
    with localcontext(prec=MONEY_DIGITS):
        return (total_usd * 1_000_000 / count).quantize(CENT, rounding=ROUNDING)


def rank_serving(configs: Sequence[ServingConfiguration]) -> tuple[tuple[ServingConfiguration, ...], tuple[str, ...]]:
    """Every configuration with its rank, and the ranking: cost, then fewer cards, then the higher capacity."""
    eligible = [c for c in configs if c.cost_usd is not None and c.capacity.capacity_qps is not None]
    eligible.sort(key=lambda c: (c.cost_usd, c.replicas or 0, -(c.capacity.capacity_qps or 0.0), c.configuration_id))
    ranks = {c.configuration_id: i + 1 for i, c in enumerate(eligible)}
    ranked = tuple(_replace(c, rank=ranks.get(c.configuration_id)) for c in configs)
    return ranked, tuple(c.configuration_id for c in eligible)


def why_lines(chosen: ServingConfiguration, demand: ServingDemand, ranked: Sequence[ServingConfiguration],
              bound: str) -> tuple[str, ...]:
    """Why the chosen configuration: its capacity, replicas, cost, and what decided against the runner-up."""
    capacity = chosen.capacity
    lines = ["answers: accepted in every kept run (the task's gate, and the same result as the reference)",
             f"capacity: {capacity.capacity_qps:g} qps per replica with {bound} ({capacity.reason})",
             f"replicas: ceil({demand.peak_qps:g} qps ÷ {capacity.capacity_qps:g} qps) = {chosen.replicas} card(s), "
             f"{chosen.lots} lot(s) of {chosen.cards_per_lot}; each replica then serves "
             f"{demand.peak_qps / (chosen.replicas or 1):.4g} qps at the peak, within its capacity",
             f"cost: {format_usd(chosen.cost_usd or Decimal(0))} USD over {demand.days} day(s), {chosen.cost_option}: "
             f"{chosen.cost_reason}"]
    others = [c for c in ranked if c.rank is not None and c.configuration_id != chosen.configuration_id]
    if others:
        runner = min(others, key=lambda c: c.rank or 0)
        if runner.cost_usd != chosen.cost_usd:
            lines.append(f"runner-up {runner.configuration_id}: {format_usd(runner.cost_usd or Decimal(0))} USD "
                         f"({runner.replicas} card(s) at {runner.capacity.capacity_qps:g} qps each): dearer")
        else:
            lines.append(f"ties on cost with {runner.configuration_id}; ranked first by "
                         + ("fewer cards" if runner.replicas != chosen.replicas else "the higher capacity per replica"
                            if runner.capacity.capacity_qps != capacity.capacity_qps else "name"))
    return tuple(lines)
