"""The market columns of a catalog row: where the plan is sold (provider, region, instance type), the card and its
memory, and the spot price, read into :class:`protocol.costing.plans.Offer`.

A catalog row with a ``provider`` is a market row (written by ``isocost catalog import``); it is priced like any
metered plan (:func:`protocol.costing.plans.charge`). A non-empty ``spot_usd_per_lot`` makes a second plan from
the same row, marked interruptible; an empty one means no spot offer (never a zero price). Names are plain
(letters, digits, ``.``, ``_``, ``+``, ``-``, ``/`` for a region's zone): no formula, markup or control character.

Example: ``with_offers(plan, {"provider": "lambda", …, "spot_usd_per_lot": ""}, "c.csv:2")`` is ``(plan with its
offer,)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal

from protocol.costing.plans import METERED, Offer, Plan
from protocol.errors import UserError

_MARKET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+/-]{0,127}$")
_ACCELERATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+ -]{0,63}$")
_DECIMAL = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_WHOLE = re.compile(r"^[0-9]{1,6}$")


def with_offers(plan: Plan, cells: Mapping[str, str], where: str) -> tuple[Plan, ...]:
    """The row's plan with its offer (and a second, interruptible plan when it has a spot price); a row without
    a provider is returned as it is (a plain catalog row)."""
    provider = cells.get("provider", "")
    market = ("region", "instance_type", "accelerator", "card_memory_gib", "spot_usd_per_lot")
    if not provider:
        given = [name for name in market if cells.get(name, "")]
        if given:
            raise UserError(f"market column(s) {', '.join(given)} given on a row without a provider", where,
                            "Name the provider that sells the instance, or leave the market columns empty.")
        return (plan,)
    if plan.billing not in METERED:
        raise UserError(f"a market row is billed {plan.billing}", f"{where}, column billing",
                        "Market rows are hourly or per-second prices per instance.")
    names = {name: _name(cells.get(name, ""), name, where) for name in ("provider", "region", "instance_type")}
    accelerator = cells.get("accelerator", "").strip()
    if not _ACCELERATOR.match(accelerator):
        raise UserError(f"accelerator {accelerator[:60]!a} is not a plain name", f"{where}, column accelerator",
                        "Write the catalog's accelerator name, e.g. H100.")
    memory_text = cells.get("card_memory_gib", "")
    if memory_text and not _WHOLE.match(memory_text):
        raise UserError(f"card_memory_gib {memory_text[:20]!a} is not a whole number", where,
                        "Write the card's memory in whole GiB, or leave it empty when the catalog does not say.")
    offer = Offer(provider=names["provider"], region=names["region"], instance_type=names["instance_type"],
                  accelerator=accelerator, card_memory_gib=int(memory_text) if memory_text else None,
                  interruptible=False)
    on_demand = replace(plan, offer=offer)
    spot_text = cells.get("spot_usd_per_lot", "")
    if not spot_text:
        return (on_demand,)
    if not _DECIMAL.match(spot_text) or Decimal(spot_text) <= 0:
        raise UserError(f"spot_usd_per_lot {spot_text[:30]!a} is not a positive decimal number",
                        f"{where}, column spot_usd_per_lot",
                        "Write the spot price per instance-hour, or leave it empty when there is no spot offer.")
    return on_demand, replace(plan, price_usd_per_lot=Decimal(spot_text), offer=replace(offer, interruptible=True))


def _name(text: str, column: str, where: str) -> str:
    if not _MARKET_NAME.match(text):
        raise UserError(f"{column} {text[:60]!a} is not a plain name", f"{where}, column {column}",
                        "Letters, digits, '.', '_', '+', '-' and '/', starting with a letter or digit: no formula, "
                        "markup or control character.")
    return text
