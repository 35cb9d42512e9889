"""Every configuration of a decision priced across providers: the cheapest offer, the runner-up, and what the
provider choice changes against the configuration choice (pure; money is ``Decimal``).

For each configuration the host side names its card (measured by the trials' driver, else declared by the rental;
:mod:`protocol.costing.gpu_map`) and the cards the job needs; :func:`market_decision` prices the configuration's
measured needed period on every offer of every catalog (:func:`protocol.costing.market.price_card`) and states:

- for the chosen configuration, the cheapest provider and instance, and the runner-up;
- how much the provider changes the cost (cheapest, median and dearest provider for the chosen configuration)
  against how much the configuration does (each acceptable configuration at its cheapest offer);
- the date of every catalog used, flagged when it is dated after the decision or more than
  :data:`MAX_CATALOG_AGE_DAYS` days before the first campaign started.

The decision's own ranking (by the contracted plan of each campaign's rental) is left as it is: this is a second
view beside it, never a re-pricing of it.

Example: ``market_decision(decision, cards, [catalog, market], gpu_map, MarketFilter(), today=date(2026, 12, 3))``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, ClassVar

from protocol.costing.gpu_map import Card, GpuMap
from protocol.costing.market import CardPricing, MarketFilter, OfferCost, price_card
from protocol.costing.plans import SPOT_RISK, Catalog, format_usd
from protocol.records.codec import Schema

SCHEMA_VERSION = 1
#: A catalog dated more than this many days before the first campaign started is flagged as far older.
MAX_CATALOG_AGE_DAYS = 90


@dataclass(frozen=True)
class CardChoice:
    """A configuration's card as the host side found it: the card (or why none), where it comes from, how many.

    Example: ``CardChoice(card, "measured: NVIDIA H100 80GB HBM3, 79.6 GiB (trial manifests)", 1, "")``.
    """

    card: Card | None
    source: str
    cards_needed: int
    empty_reason: str = ""


@dataclass(frozen=True)
class CatalogUse:
    """One catalog weighed: where, its sha256, its date(s), the providers it sells, and its date flags."""

    path: str
    sha256: str
    dates: tuple[date, ...]
    providers: tuple[str, ...]
    flags: tuple[str, ...]
    CODEC: ClassVar[Schema] = Schema("catalog use", SCHEMA_VERSION)

    @property
    def dates_text(self) -> str:
        """Example: ``"2026-12-03"``."""
        return ", ".join(day.isoformat() for day in self.dates)


@dataclass(frozen=True)
class ConfigurationMarket:
    """One configuration across providers: its card, where it comes from, and the offers (or why there are none)."""

    configuration_id: str
    acceptable: bool
    card: str | None
    card_source: str
    pricing: CardPricing | None
    empty_reason: str
    CODEC: ClassVar[Schema] = Schema("configuration market", SCHEMA_VERSION)


@dataclass(frozen=True)
class MarketDecision:
    """The decision's configurations priced across providers, with every catalog's date and the two effects."""

    catalogs: tuple[CatalogUse, ...]
    gpu_map_version: int
    gpu_map_sources: tuple[str, ...]
    market_filter: MarketFilter
    configurations: tuple[ConfigurationMarket, ...]
    chosen: str | None
    cheapest: OfferCost | None
    runner_up: OfferCost | None
    provider_effect: str
    configuration_effect: str
    cheapest_configuration: str | None
    spot_risk: str = SPOT_RISK
    earlier: tuple[str, ...] = field(default=())
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("market decision", SCHEMA_VERSION)

    @property
    def dates_text(self) -> str:
        """Every catalog's date. Example: ``"2026-09-24 (catalog-2026-09-24.csv), 2026-12-03 (market.csv)"``."""
        return ", ".join(f"{use.dates_text} ({use.path})" for use in self.catalogs)


def catalog_use(catalog: Catalog, sha256: str, today: date, first_start: date | None) -> CatalogUse:
    """A catalog with its date flags: dated after ``today``, or far before the first campaign's start."""
    flags = []
    for day in catalog.catalog_dates:
        if day > today:
            flags.append(f"dated {day.isoformat()}, after the decision ({today.isoformat()}): a catalog from the "
                         "future is a typo or a wrong clock")
        if first_start is not None and (first_start - day).days > MAX_CATALOG_AGE_DAYS:
            flags.append(f"dated {day.isoformat()}, {(first_start - day).days} days before the first campaign "
                         f"started ({first_start.isoformat()}): prices that old may no longer hold")
    providers = sorted({plan.offer.provider for plan in catalog.plans if plan.offer is not None})
    return CatalogUse(path=catalog.path, sha256=sha256, dates=catalog.catalog_dates, providers=tuple(providers),
                      flags=tuple(flags))


def market_decision(decision: Any, cards: Mapping[str, CardChoice], catalogs: Sequence[Catalog],
                    uses: Sequence[CatalogUse], gpu_map: GpuMap, market_filter: MarketFilter,
                    spot_risk: str = SPOT_RISK) -> MarketDecision:
    """Price each configuration of ``decision`` (by id in ``cards``) across ``catalogs``; ``spot_risk``: what a spot
    offer risks, in the decision's own terms (a lost pass offline, a stopped replica for a service)."""
    priced = tuple(_configuration(config, cards.get(config.configuration_id), catalogs, market_filter)
                   for config in decision.configurations)
    by_id = {item.configuration_id: item for item in priced}
    chosen = by_id.get(decision.chosen) if decision.chosen else None
    offers = chosen.pricing.offers if chosen and chosen.pricing else ()
    acceptable = [item for item in priced if item.acceptable and item.pricing and item.pricing.offers]
    cheapest_config = min(acceptable, key=lambda item: (_cheapest(item), item.configuration_id != decision.chosen,
                                                        item.configuration_id), default=None)  # a tie keeps the chosen
    return MarketDecision(
        catalogs=tuple(uses), gpu_map_version=gpu_map.version, gpu_map_sources=gpu_map.sources,
        market_filter=market_filter, configurations=priced, chosen=decision.chosen,
        cheapest=offers[0] if offers else None, runner_up=offers[1] if len(offers) > 1 else None,
        provider_effect=_provider_effect(chosen), configuration_effect=_configuration_effect(acceptable),
        cheapest_configuration=cheapest_config.configuration_id if cheapest_config else None, spot_risk=spot_risk,
    )


def _configuration(config: Any, choice: CardChoice | None, catalogs: Sequence[Catalog],
                   market_filter: MarketFilter) -> ConfigurationMarket:
    def empty(reason: str, card: str | None = None) -> ConfigurationMarket:
        return ConfigurationMarket(config.configuration_id, config.acceptable, card,
                                   choice.source if choice else "", None, reason)

    if choice is None or choice.card is None:
        return empty(choice.empty_reason if choice else "no card found for this configuration")
    if not config.campaign_needed_h:
        return empty("the campaign's needed period is unknown: nothing to price", choice.card.card)
    pricing = price_card(catalogs, choice.card, cards=choice.cards_needed, needed_h=config.campaign_needed_h,
                         accepted=config.accepted_artifacts, market_filter=market_filter)
    names = ", ".join(n.text for n in choice.card.catalog_names)
    reason = "" if pricing.offers else (f"no catalog offers {choice.card.card}"
                                        + (f" that can be used: {'; '.join(pricing.excluded)}" if pricing.excluded
                                           else f" (catalog names {names})"))
    return ConfigurationMarket(config.configuration_id, config.acceptable, choice.card.card, choice.source, pricing,
                               reason)


def _cheapest(item: ConfigurationMarket) -> Decimal:
    assert item.pricing is not None and item.pricing.cheapest_usd is not None
    return item.pricing.cheapest_usd


def _provider_effect(chosen: ConfigurationMarket | None) -> str:
    if chosen is None:
        return "no configuration is chosen: no provider choice to weigh"
    pricing = chosen.pricing
    if pricing is None or not pricing.offers:
        return f"{chosen.configuration_id} has no offer: {chosen.empty_reason}"
    best = pricing.by_provider()
    if len(best) < 2:
        only = next(iter(best.values()))
        return (f"only one provider ({only.provider}) offers {chosen.card} within the filter: the provider "
                f"choice changes nothing measured here ({format_usd(only.total_usd)} USD at its cheapest)")
    low, high = pricing.offers[0], max(best.values(), key=lambda o: o.total_usd)
    median = pricing.median_provider_usd
    assert median is not None
    dates = sorted({offer.catalog_date.isoformat() for offer in best.values()})
    mixed = (f" (the providers' prices come from catalogs dated {' and '.join(dates)}, each as published on its "
             "date)") if len(dates) > 1 else ""
    return (f"for {chosen.configuration_id}, the provider changes the cost from {format_usd(low.total_usd)} USD "
            f"({low.where}) to {format_usd(high.total_usd)} USD ({high.where}) at each provider's cheapest offer, "
            f"×{_ratio(high.total_usd, low.total_usd)}; the median provider costs {format_usd(median)} USD, "
            f"{format_usd(median - low.total_usd)} USD more than the cheapest{mixed}")


def _configuration_effect(acceptable: list[ConfigurationMarket]) -> str:
    if len(acceptable) < 2:
        return ("one acceptable configuration has an offer: no configuration choice to weigh"
                if acceptable else "no acceptable configuration has an offer")
    ranked = sorted(acceptable, key=lambda item: (_cheapest(item), item.configuration_id))
    low, high = ranked[0], ranked[-1]
    return (f"the configuration changes the cost from {format_usd(_cheapest(low))} USD ({low.configuration_id}) to "
            f"{format_usd(_cheapest(high))} USD ({high.configuration_id}), each at its cheapest offer, "
            f"×{_ratio(_cheapest(high), _cheapest(low))}")


def _ratio(high: Decimal, low: Decimal) -> str:
    return f"{high / low:.2f}" if low > 0 else "∞"
