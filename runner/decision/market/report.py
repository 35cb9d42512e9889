"""The report's view of prices across providers (``decide --market``): one plot and the answer in words.

:func:`market_svg` draws, per configuration, one bar per provider: the cost per accepted result at that
provider's cheapest offer (a spot offer hatched, as it may be interrupted), the median provider marked by a
dashed line, and the spread between the cheapest and the median provider written at the right.
:func:`market_html` wraps it with the answer (cheapest provider and instance, runner-up, the provider against the
configuration) and every catalog's date. Text-only SVG, every name escaped.

Example: ``"".join(market_html(decision.market))`` holds ``<svg class="plot market"``.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from html import escape

from protocol.costing.market import OfferCost
from protocol.costing.plans import format_usd
from protocol.decision.market_rank import ConfigurationMarket, MarketDecision
from runner.decision.render.svg import (
    BLUE,
    GREEN,
    GREY,
    INK,
    LABEL_W,
    RED,
    RIGHT_W,
    ROW_H,
    TOP,
    WIDTH,
    legend,
    nice_max,
    note,
    svg_open,
    text_trunc,
    tick,
    x_axis,
)


def market_html(market: MarketDecision) -> list[str]:
    """The report section: the answer in words, the plot, the catalogs with their dates and flags."""
    parts = ["<h2>Prices across providers</h2>"]
    if market.cheapest is not None:
        parts.append(f"<p class=\"answer\"><strong>Cheapest for {escape(market.chosen or '')}:</strong> "
                     f"{escape(_offer(market.cheapest))}"
                     + (f"<br>Runner-up: {escape(_offer(market.runner_up))}" if market.runner_up else "") + "</p>")
    parts += [f"<p>Provider choice: {escape(market.provider_effect)}.<br>"
              f"Configuration choice: {escape(market.configuration_effect)}.</p>",
              f"<figure>{market_svg(market)}<figcaption>Cost per accepted result at each provider's cheapest offer "
              "(whole instances, the needed period measured by each configuration's campaign); the dashed line is "
              f"the median provider. {escape(market.spot_risk)}.</figcaption></figure>", "<ul>"]
    for use in market.catalogs:
        parts.append(f"<li>catalog dated <strong>{escape(use.dates_text)}</strong>: <code>{escape(use.path)}</code>"
                     + "".join(f"<br><strong>flag:</strong> {escape(flag)}" for flag in use.flags) + "</li>")
    parts += [f"<li>earlier decision: {escape(note_text)}</li>" for note_text in market.earlier]
    parts.append(f"<li>filter: {escape(market.market_filter.text)}; GPU map v{market.gpu_map_version}</li></ul>")
    return parts


def _rows(market: MarketDecision) -> list[tuple[ConfigurationMarket, OfferCost | None]]:
    """One row per configuration × provider (its cheapest offer); a configuration without offers: one empty row."""
    rows: list[tuple[ConfigurationMarket, OfferCost | None]] = []
    for item in market.configurations:
        best = item.pricing.by_provider() if item.pricing else {}
        rows += [(item, offer) for offer in best.values()] or [(item, None)]
    return rows


def _value(offer: OfferCost) -> Decimal:
    return offer.per_result_usd if offer.per_result_usd is not None else offer.total_usd


def market_svg(market: MarketDecision) -> str:
    """Cost per accepted result by provider, per configuration, with the median provider and the spread."""
    rows = _rows(market)
    values = [float(_value(offer)) for _, offer in rows if offer is not None]
    x_max = nice_max(max(values) if values else 1.0)
    plot_w = WIDTH - LABEL_W - RIGHT_W - 20
    height = TOP + ROW_H * max(len(rows), 1) + 52 + 34

    def x(value: float) -> float:
        return LABEL_W + plot_w * value / x_max

    out = svg_open(height, "Cost per accepted result by provider, per configuration", "market")
    out += x_axis(x_max, x, TOP, TOP + ROW_H * len(rows), "cost per accepted result (USD)", tick)
    out.append('<defs><pattern id="spot" width="6" height="6" patternUnits="userSpaceOnUse" '
               f'patternTransform="rotate(45)"><rect width="3" height="6" fill="{BLUE}"/></pattern></defs>')
    if not rows:
        out.append(note(LABEL_W + 10, TOP + 20, "no configuration"))
    seen: set[str] = set()
    for row, (item, offer) in enumerate(rows):
        mid = TOP + ROW_H * row + ROW_H / 2
        first = item.configuration_id not in seen
        seen.add(item.configuration_id)
        label = f"{item.configuration_id} · {offer.provider}" if offer else item.configuration_id
        out.append(text_trunc(8, mid + 4, label, LABEL_W - 16, size=12, fill=INK if first else "#555"))
        if first and row:
            out.append(f'<line x1="0" x2="{WIDTH}" y1="{mid - ROW_H / 2:.1f}" y2="{mid - ROW_H / 2:.1f}" '
                       'stroke="#bbb"/>')
        out += _bar(item, offer, market, mid, x, plot_w) + (_median(item, row, x) if first else [])
    out += legend(height - 18, [("rect", GREEN, "cheapest, chosen config"), ("rect", BLUE, "on-demand or flat"),
                                ("rect", "url(#spot)", "spot (hatched)"), ("dash", RED, "median provider"),
                                ("empty", GREY, "no offer")])
    out.append("</svg>")
    return "".join(out)


def _bar(item: ConfigurationMarket, offer: OfferCost | None, market: MarketDecision, mid: float,
         x: Callable[[float], float], plot_w: float) -> list[str]:
    if offer is None:
        reason = item.empty_reason or "no offer"
        return [f'<rect class="market-empty" x="{LABEL_W}" y="{mid - 10:.1f}" width="{plot_w:.1f}" height="20" '
                f'fill="none" stroke="{GREY}" stroke-dasharray="4 3"><title>{escape(reason)}</title></rect>',
                text_trunc(LABEL_W + 8, mid + 4, reason, plot_w - 16, size=11, fill="#555")]
    value = _value(offer)
    width = max(x(float(value)) - LABEL_W, 1.0)
    cheapest = item.configuration_id == market.chosen and offer == market.cheapest
    fill = GREEN if cheapest else ("url(#spot)" if offer.capacity == "spot" else BLUE)
    what = "per accepted result" if offer.per_result_usd is not None else "total (no accepted result)"
    return [f'<rect class="market-bar" x="{LABEL_W}" y="{mid - 10:.1f}" width="{width:.1f}" height="20" '
            f'fill="{fill}"><title>{escape(_offer(offer))}</title></rect>',
            f'<text x="{LABEL_W + width + 6:.1f}" y="{mid + 4:.1f}" font-size="11" fill="{INK}">'
            f"{format_usd(value)} USD {what} · {escape(offer.instance)} ({escape(offer.capacity)})</text>"]


def _median(item: ConfigurationMarket, first_row: int, x: Callable[[float], float]) -> list[str]:
    """The median provider's dashed line over the configuration's rows, and the spread written beside it."""
    pricing = item.pricing
    if pricing is None or not pricing.offers or pricing.median_provider_usd is None:
        return []
    per_result = pricing.accepted_results or 1
    median = pricing.median_provider_usd / per_result
    cheapest = pricing.offers[0].total_usd / per_result
    rows = len(pricing.by_provider())
    top, bottom = TOP + ROW_H * first_row + 3, TOP + ROW_H * (first_row + rows) - 3
    spread = f"median provider − cheapest: {format_usd(median - cheapest)} USD per accepted result"
    return [f'<line class="market-median" x1="{x(float(median)):.1f}" x2="{x(float(median)):.1f}" y1="{top}" '
            f'y2="{bottom}" stroke="{RED}" stroke-width="2" stroke-dasharray="5 3"><title>{escape(spread)}</title>'
            "</line>",
            f'<text class="market-spread" x="{WIDTH - RIGHT_W + 4}" y="{top + 12}" font-size="10" fill="{RED}">'
            "median − cheapest</text>",
            f'<text x="{WIDTH - RIGHT_W + 4}" y="{top + 24}" font-size="10" fill="{RED}">'
            f"+{format_usd(median - cheapest)} USD</text>"]


def _offer(offer: OfferCost) -> str:
    return (f"{offer.provider} {offer.instance} ({offer.capacity}, {offer.billing}), {offer.instances} instance(s) × "
            f"{format_usd(offer.price_usd_per_instance)} USD = {format_usd(offer.total_usd)} USD, catalog dated "
            f"{offer.catalog_date.isoformat()}")
