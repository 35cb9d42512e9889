"""One card's measured hours priced on every offer of every catalog: providers, regions, instances, billings.

:func:`price_card` takes a card of the GPU map (:mod:`protocol.costing.gpu_map`), the cards the job needs, its
needed hours and accepted results, and charges every catalog row that sells the card
(:func:`protocol.costing.plans.charge`): an imported market row per started hour (or second) on demand, its spot
price marked interruptible (:data:`protocol.costing.plans.SPOT_RISK`), a plain catalog's flat and metered plans.
Whole instances are paid: a 1-card job on an 8-card instance pays 8 cards (the 1-card instance, where one
exists, is then cheaper and ranks first). The same price for one instance type in several regions is one entry
that lists the regions. A row that cannot be used is a named exclusion, counted: a catalog card memory that
disagrees with the map's, a flat plan shorter than the job, a row outside the declared filter.

Example::

    pricing = price_card([catalog], gpu_map.card_named("h100-sxm"), cards=1, needed_h=2.5, accepted=1)
    pricing.offers[0].provider, pricing.offers[0].instance, pricing.offers[0].total_usd
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal, localcontext
from typing import ClassVar

from protocol.costing.gpu_map import Card
from protocol.costing.plans import (
    BILLING_FLAT,
    CENT,
    MAX_LOTS,
    MONEY_DIGITS,
    ROUNDING,
    SPOT_RISK,
    Catalog,
    Plan,
    charge,
)
from protocol.errors import UserError
from protocol.records.codec import Schema

SCHEMA_VERSION = 1
CAPACITIES = ("both", "on-demand", "spot")


@dataclass(frozen=True)
class MarketFilter:
    """Which offers are weighed: providers and regions (empty: all), and on-demand, spot or both.

    Example: ``MarketFilter(providers=("lambda",), capacity="on-demand")``.
    """

    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    capacity: str = "both"
    CODEC: ClassVar[Schema] = Schema("market filter", SCHEMA_VERSION)

    def __post_init__(self) -> None:
        if self.capacity not in CAPACITIES:
            raise UserError(f"unknown capacity {self.capacity!r}", "--capacity",
                            f"Use one of: {', '.join(CAPACITIES)}.")

    def admits(self, plan: Plan, provider: str) -> bool:
        """Example: a spot row is not admitted by ``capacity="on-demand"``."""
        spot = plan.offer is not None and plan.offer.interruptible
        if (self.capacity == "spot" and not spot) or (self.capacity == "on-demand" and spot):
            return False
        if self.providers and provider not in self.providers:
            return False
        region = plan.offer.region if plan.offer else ""
        return not self.regions or region.split("/")[0] in self.regions

    @property
    def text(self) -> str:
        """Example: ``"providers lambda; all regions; on-demand and spot"``."""
        capacity = "on-demand and spot" if self.capacity == "both" else f"{self.capacity} only"
        return (f"{'providers ' + ', '.join(self.providers) if self.providers else 'all providers'}; "
                f"{'regions ' + ', '.join(self.regions) if self.regions else 'all regions'}; {capacity}")


@dataclass(frozen=True)
class OfferCost:
    """One offer charged for the job: where, how billed, how many instances, the total and per accepted result."""

    provider: str
    instance: str
    regions: tuple[str, ...]
    billing: str
    capacity: str  # on-demand, spot or flat
    cards_per_instance: int
    instances: int
    price_usd_per_instance: Decimal
    total_usd: Decimal
    per_result_usd: Decimal | None
    catalog_date: date
    risk: str = ""
    CODEC: ClassVar[Schema] = Schema("offer cost", SCHEMA_VERSION)

    @property
    def cards_paid(self) -> int:
        """Example: one 8-card instance pays 8 cards."""
        return self.cards_per_instance * self.instances

    @property
    def where(self) -> str:
        """Example: ``"lambda gpu_1x_h100_sxm5 (17 regions, on-demand)"``."""
        regions = "" if not self.regions else (self.regions[0] if len(self.regions) == 1
                                                else f"{len(self.regions)} regions")
        return f"{self.provider} {self.instance} ({', '.join(p for p in (regions, self.capacity) if p)})"


@dataclass(frozen=True)
class CardPricing:
    """Every offer of one card for one job, cheapest first, and what was left out and why."""

    card: str
    cards_needed: int
    needed_h: float
    accepted_results: int
    offers: tuple[OfferCost, ...]
    excluded: tuple[str, ...]
    CODEC: ClassVar[Schema] = Schema("card pricing", SCHEMA_VERSION, derived=("cheapest_usd", "median_provider_usd"))

    @property
    def cheapest_usd(self) -> Decimal | None:
        """The cheapest total, or ``None`` when no offer is left."""
        return self.offers[0].total_usd if self.offers else None

    def by_provider(self) -> dict[str, OfferCost]:
        """Each provider's cheapest offer. Example: ``{"lambda": …, "runpod": …}``."""
        best: dict[str, OfferCost] = {}
        for offer in self.offers:
            best.setdefault(offer.provider, offer)
        return best

    @property
    def median_provider_usd(self) -> Decimal | None:
        """The median over providers of each one's cheapest total (the spread's other end)."""
        totals = sorted(offer.total_usd for offer in self.by_provider().values())
        if not totals:
            return None
        with localcontext(prec=MONEY_DIGITS):
            return Decimal(statistics.median(totals)).quantize(CENT, rounding=ROUNDING)


def provider_name(plan: Plan) -> str:
    """A market row's provider, or a plain catalog's source up to its first comma or parenthesis."""
    if plan.offer is not None:
        return plan.offer.provider
    return plan.source.split(" (")[0].split(",")[0][:60]


def price_card(catalogs: Sequence[Catalog], card: Card, *, cards: int, needed_h: float, accepted: int,
               market_filter: MarketFilter | None = None) -> CardPricing:
    """Charge ``needed_h`` hours on ``cards`` cards on every catalog row that sells ``card``, cheapest first."""
    if not 1 <= cards <= MAX_LOTS:
        raise UserError(f"the job needs {cards} cards, not 1 to {MAX_LOTS:,}", "cards", "Name 1 or more cards.")
    chosen = market_filter or MarketFilter()
    priced: dict[tuple[object, ...], OfferCost] = {}
    excluded: dict[str, int] = {}
    for catalog in catalogs:
        for plan in catalog.plans:
            if not card.offers(plan):
                continue
            reason = _unusable(plan, card, chosen)
            if reason:
                excluded[reason] = excluded.get(reason, 0) + 1
                continue
            offer = _charge(plan, cards, needed_h, accepted)
            if offer is None:
                key = f"{provider_name(plan)} {plan.gpu} {plan.length_text} plan: shorter than the job's " \
                      f"{needed_h:.2f} h"
                excluded[key] = excluded.get(key, 0) + 1
                continue
            _merge(priced, plan, offer)
    offers = _smallest_instances(sorted(priced.values(),
                                        key=lambda o: (o.total_usd, o.capacity == "spot", o.provider, o.instance)),
                                 excluded)
    return CardPricing(card=card.card, cards_needed=cards, needed_h=needed_h, accepted_results=accepted,
                       offers=tuple(offers),
                       excluded=tuple(f"{reason} ({count} row{'s' if count != 1 else ''})"
                                      for reason, count in sorted(excluded.items())))


def _smallest_instances(offers: list[OfferCost], excluded: dict[str, int]) -> list[OfferCost]:
    """Leave out an instance larger than the job needs when the same provider sells a smaller one, billed and
    interruptible alike, for no more: the job rents the smaller one (whole instances are paid either way)."""
    kept: list[OfferCost] = []
    for offer in offers:
        if any(other.provider == offer.provider and other.capacity == offer.capacity
               and other.billing == offer.billing and other.cards_paid < offer.cards_paid
               and other.total_usd <= offer.total_usd for other in kept):
            reason = f"{offer.provider} {offer.instance}: more cards than the job needs, a smaller instance costs less"
            excluded[reason] = excluded.get(reason, 0) + len(offer.regions or ("",))
            continue
        kept.append(offer)
    return kept


def _unusable(plan: Plan, card: Card, chosen: MarketFilter) -> str:
    """Why a row that sells the card is left out, or ``""``."""
    provider = provider_name(plan)
    if not chosen.admits(plan, provider):
        return f"outside the filter ({chosen.text})"
    listed = plan.offer.card_memory_gib if plan.offer else None
    if listed is not None and not card.memory_matches(listed):
        return (f"{provider} {plan.offer.accelerator if plan.offer else plan.gpu}: the catalog lists {listed} GiB "
                f"per card, the GPU map's {card.card} has {card.memory_gib} GiB")
    return ""


def _charge(plan: Plan, cards: int, needed_h: float, accepted: int) -> OfferCost | None:
    instances = -(-cards // plan.cards_per_lot)
    total = charge(plan, needed_h, instances)
    if total is None:
        return None
    with localcontext(prec=MONEY_DIGITS):
        total = total.quantize(CENT, rounding=ROUNDING)
        per_result = (total / accepted).quantize(CENT, rounding=ROUNDING) if accepted > 0 else None
    offer = plan.offer
    spot = offer is not None and offer.interruptible
    return OfferCost(
        provider=provider_name(plan),
        instance=offer.instance_type if offer else f"{plan.gpu} lot of {plan.cards_per_lot}",
        regions=(offer.region,) if offer else (),
        billing=plan.billing if plan.billing != BILLING_FLAT else f"flat {plan.plan_days}-day",
        capacity="spot" if spot else ("on-demand" if offer else plan.billing if plan.billing != BILLING_FLAT
                                      else "flat"),
        cards_per_instance=plan.cards_per_lot, instances=instances, price_usd_per_instance=plan.price_usd_per_lot,
        total_usd=total, per_result_usd=per_result, catalog_date=plan.catalog_date, risk=SPOT_RISK if spot else "",
    )


def _merge(priced: dict[tuple[object, ...], OfferCost], plan: Plan, offer: OfferCost) -> None:
    """One entry per provider × instance × billing × capacity × price × date; regions gathered."""
    key = (offer.provider, offer.instance, offer.billing, offer.capacity, offer.price_usd_per_instance,
           offer.catalog_date)
    earlier = priced.get(key)
    priced[key] = offer if earlier is None else replace(earlier, regions=earlier.regions + offer.regions)

