"""The memo's section on prices across providers (``decide --market``): the answer, every catalog's date, each
configuration's offers, what was left out and why.

:func:`market_lines` writes Markdown from a :class:`protocol.decision.market_rank.MarketDecision`: the cheapest
provider and instance for the chosen configuration and the runner-up, how much the provider changes the cost
against the configuration, the date of every catalog (with its flags), the earlier decision kept beside, then one
table per configuration. Names reach Markdown through :func:`protocol.io.names.markdown_text`.

Example: ``market_lines(decision.market)[0] == "## Prices across providers"``.
"""

from __future__ import annotations

from decimal import Decimal

from protocol.costing.market import CardPricing, OfferCost
from protocol.costing.plans import SPOT_RISK, format_usd
from protocol.decision.market_rank import ConfigurationMarket, MarketDecision
from protocol.decision.serving import per_million
from protocol.io.names import markdown_text
from runner.decision.render.text_format import hours as hours_text

#: Offers listed per configuration in the memo (all of them are in decision.json).
SHOWN_OFFERS = 8
#: The columns ``decide --market --format csv`` appends: each configuration's cheapest offer across providers.
MARKET_COLUMNS = ("market_card", "market_cheapest_provider", "market_cheapest_instance", "market_cheapest_capacity",
                  "market_cheapest_usd", "market_cheapest_per_accepted_result_usd", "market_median_provider_usd",
                  "market_catalog_date", "market_no_offer_because")


def market_lines(market: MarketDecision, requests: Decimal | None = None) -> list[str]:
    """``## Prices across providers``: the answer, the effects, the catalogs' dates, then each configuration.
    ``requests``: a server study's requests at the peak over the period (each offer then shows its cost per million
    requests, not per accepted result)."""
    lines = ["## Prices across providers", ""]
    lines += answer_lines(market)
    lines += ["", "Catalogs (every price below is from the catalog of its date; none is re-priced in place):", ""]
    for use in market.catalogs:
        providers = f", providers {', '.join(use.providers)}" if use.providers else ""
        lines.append(f"- dated **{use.dates_text}**: {markdown_text(use.path)} ({use.sha256 or 'sha256 unknown'}"
                     f"{providers})")
        lines += [f"  - **flag:** {markdown_text(flag)}" for flag in use.flags]
    lines += [f"- earlier decision: {markdown_text(note)}" for note in market.earlier]
    lines += ["", f"GPU map v{market.gpu_map_version} ({', '.join(map(markdown_text, market.gpu_map_sources))}); "
              f"filter: {market.market_filter.text}. Whole instances are paid; a spot price is marked "
              f"(spot: {market.spot_risk.split(': ', 1)[1]}).", ""]
    for item in market.configurations:
        lines += configuration_lines(item, requests)
    return lines


def answer_lines(market: MarketDecision) -> list[str]:
    """The cheapest offer for the chosen configuration, the runner-up, and the provider against configuration."""
    if market.chosen is None:
        lines = ["No configuration is chosen: no provider to name."]
    elif market.cheapest is None:
        chosen = next(c for c in market.configurations if c.configuration_id == market.chosen)
        lines = [f"No offer for **{market.chosen}**: {markdown_text(chosen.empty_reason)}."]
    else:
        lines = [f"**Cheapest across providers for {market.chosen}: {_offer(market.cheapest)}**."]
        if market.runner_up is not None:
            lines += ["", f"Runner-up: {_offer(market.runner_up)}."]
    lines += ["", f"Provider choice: {markdown_text(market.provider_effect)}.", "",
              f"Configuration choice: {markdown_text(market.configuration_effect)}."]
    if market.cheapest_configuration and market.cheapest_configuration != market.chosen:
        lines += ["", f"Across providers, the cheapest acceptable configuration is "
                  f"**{market.cheapest_configuration}** (the chosen one is ranked on its campaign's rental)."]
    return lines


def configuration_lines(item: ConfigurationMarket, requests: Decimal | None = None) -> list[str]:
    """One configuration's card and its cheapest offers as a table, or why it has none (``requests``: see
    :func:`market_lines`)."""
    head = f"### {item.configuration_id}" + ("" if item.acceptable else " (not ranked)")
    lines = [head, "", f"Card: {item.card or '—'} ({markdown_text(item.card_source) or 'no card'})."]
    pricing = item.pricing
    if pricing is None or not pricing.offers:
        lines += ["", f"No offer: {markdown_text(item.empty_reason)}.", ""]
        return lines + _excluded(item)
    median = pricing.median_provider_usd
    counted = (f"{pricing.accepted_results} accepted result(s)" if requests is None
               else f"the replicas, {int(requests):,} requests at the peak")
    lines += ["", f"Needed period {hours_text(pricing.needed_h)} h on {pricing.cards_needed} card(s), "
              f"{counted}. Cheapest {format_usd(pricing.offers[0].total_usd)} USD, "
              f"median provider {format_usd(median) if median is not None else '—'} USD.", "",
              "| provider | instance | regions | billing | capacity | instances × cards | price per instance (USD) "
              f"| total (USD) | {'per accepted result' if requests is None else 'per million requests'} (USD) "
              "| catalog date |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for offer in pricing.offers[:SHOWN_OFFERS]:
        regions = ", ".join(offer.regions[:3]) + (f" +{len(offer.regions) - 3}" if len(offer.regions) > 3 else "")
        lines.append(
            f"| {markdown_text(offer.provider)} | {markdown_text(offer.instance)} | {markdown_text(regions) or '—'} "
            f"| {offer.billing} | {offer.capacity} | {offer.instances} × {offer.cards_per_instance} "
            f"| {format_usd(offer.price_usd_per_instance)} | {format_usd(offer.total_usd)} "
            f"| {_per_unit(offer, requests)} | {offer.catalog_date.isoformat()} |")
    if len(pricing.offers) > SHOWN_OFFERS:
        lines += ["", f"{len(pricing.offers) - SHOWN_OFFERS} dearer offer(s) are in decision.json."]
    return lines + [""] + _excluded(item)


def _per_unit(offer: OfferCost, requests: Decimal | None) -> str:
    """The offer's total per accepted result, or per million requests for a server study."""
    if requests is not None:
        return format_usd(per_million(offer.total_usd, requests))
    return format_usd(offer.per_result_usd) if offer.per_result_usd is not None else "undefined (0 accepted)"


def _excluded(item: ConfigurationMarket) -> list[str]:
    if item.pricing is None or not item.pricing.excluded:
        return []
    return ["Left out:", "", *[f"- {markdown_text(reason)}" for reason in item.pricing.excluded], ""]


def _offer(offer: OfferCost) -> str:
    per_result = (f", {format_usd(offer.per_result_usd)} USD per accepted result" if offer.per_result_usd is not None
                  else "")
    risk = " (spot: interruptible, see the risk below)" if offer.capacity == "spot" else ""
    return (f"{markdown_text(offer.provider)} {markdown_text(offer.instance)}, {offer.capacity}{risk}, "
            f"{offer.instances} instance(s) × {format_usd(offer.price_usd_per_instance)} USD ({offer.billing}) = "
            f"{format_usd(offer.total_usd)} USD{per_result}, catalog dated {offer.catalog_date.isoformat()}")


def pricing_lines(pricing: CardPricing) -> list[str]:
    """``isocost cost --market`` as text: one line per offer, cheapest first, then what was left out."""
    lines = [f"card {pricing.card}: {hours_text(pricing.needed_h)} h on {pricing.cards_needed} card(s), "
             f"{len(pricing.offers)} offer(s), cheapest first (whole instances paid)"]
    for offer in pricing.offers:
        per_result = f", {format_usd(offer.per_result_usd)} USD per accepted result" if offer.per_result_usd else ""
        lines.append(f"  {format_usd(offer.total_usd):>10} USD  {offer.where}: {offer.instances} × "
                     f"{format_usd(offer.price_usd_per_instance)} USD ({offer.billing}), catalog dated "
                     f"{offer.catalog_date.isoformat()}{per_result}")
    if not pricing.offers:
        lines.append("  no offer")
    median = pricing.median_provider_usd
    if median is not None and pricing.cheapest_usd is not None:
        lines.append(f"median provider: {format_usd(median)} USD ({format_usd(median - pricing.cheapest_usd)} USD "
                     "above the cheapest)")
    lines += [f"left out: {reason}" for reason in pricing.excluded]
    if any(offer.capacity == "spot" for offer in pricing.offers):
        lines.append(SPOT_RISK)
    return lines


#: The same for a server study's ``decide --market --format csv``: the cheapest offer per million requests.
SERVING_MARKET_COLUMNS = tuple(column.replace("per_accepted_result", "per_million_requests")
                               for column in MARKET_COLUMNS)


def market_cells(market: MarketDecision, configuration_id: str, requests: Decimal | None = None) -> list[object]:
    """One configuration's :data:`MARKET_COLUMNS` cells (empty where there is no offer, with the reason); with
    ``requests`` (a server study), :data:`SERVING_MARKET_COLUMNS`' cells."""
    item = next((c for c in market.configurations if c.configuration_id == configuration_id), None)
    if item is None or item.pricing is None or not item.pricing.offers:
        return [item.card if item else None, *[None] * 7, item.empty_reason if item else "not priced"]
    best, median = item.pricing.offers[0], item.pricing.median_provider_usd
    per_unit = (format_usd(per_million(best.total_usd, requests)) if requests is not None
                else format_usd(best.per_result_usd) if best.per_result_usd is not None else None)
    return [item.card, best.provider, best.instance, best.capacity, format_usd(best.total_usd), per_unit,
            format_usd(median) if median is not None else None, best.catalog_date.isoformat(), None]
