"""Dated plan catalog and the plan calculator (money is ``Decimal``, never float).

A plan is a rental offer for a GPU type and the cards one lot holds, under one
billing model (the optional ``billing`` column; a catalog without it holds
only flat plans, like the shipped 2026-09-24 snapshot):

- ``flat``: a length in days and a price per lot for the whole plan. The
  rental budget is the price per lot times the lots; a short run still pays
  the whole plan, never prorated.
- ``hourly`` / ``per-second``: ``price_usd_per_lot`` is the price of one lot
  for one hour; the time is billed in steps of ``increment_s`` seconds with a
  minimum of ``minimum_s`` seconds (both required on such rows).
- ``monthly``: ``price_usd_per_lot`` buys one lot for ``plan_days`` days (a
  month as the catalog defines it); every started month is paid whole.

See :func:`charge` for the arithmetic; the catalog CSV is read and validated by
:func:`protocol.costing.catalog_file.load_catalog`. The cost per validated corpus is
that budget divided by the corpora actually accepted, and is undefined (not
0, not infinity) when none was accepted: the spend still stands.

Example: ``quote(load_catalog(default_catalog_path()), "rtx-4090", 7, 2).total_usd``
is ``Decimal("220.00")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal, localcontext
from pathlib import Path
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.records.codec import OMIT_NONE, Schema, decimal_text

# Version history: 1 = first format (Plan, Catalog, Quote); 2 = Plan gains billing, minimum_s,
# increment_s (version-1 records still load, as flat plans).
SCHEMA_VERSION = 2
_READABLE_VERSIONS = (1, 2)

#: The most lots one rental or quote may name (`cost --lots`, `rental --lots`, a hosts file's rental,
#: rentals.jsonl): more is a typo (30 digits overflowed the money arithmetic).
MAX_LOTS = 10_000
#: The most accepted corpora a per-result cost is divided by (the bound of a study's expected_artifacts).
MAX_ACCEPTED_RESULTS = 1_000_000
#: Decimal digits money is computed with: any price × lots × billed time below 10^90 is exact to the cent
#: (the default context's 28 digits would make a large total an InvalidOperation, not a figure).
MONEY_DIGITS = 100

# The plan lengths the calculator offers: the rental plans sold for 3, 7 and 30 days (a catalog may price only some).
PLAN_LENGTHS_DAYS: tuple[int, ...] = (3, 7, 30)

BILLING_FLAT = "flat"
BILLING_HOURLY = "hourly"
BILLING_PER_SECOND = "per-second"
BILLING_MONTHLY = "monthly"
BILLINGS: tuple[str, ...] = (BILLING_FLAT, BILLING_HOURLY, BILLING_PER_SECOND, BILLING_MONTHLY)
METERED: tuple[str, ...] = (BILLING_HOURLY, BILLING_PER_SECOND)
CATALOG_CURRENCY = "USD"
DEFAULT_CATALOG_NAME = "catalog-2026-09-24.csv"

CENT = Decimal("0.01")
ROUNDING = ROUND_HALF_EVEN
ROUNDING_NOTE = "rounded half-even (banker's rounding) to 0.01 USD"

# Per-result cost states: not asked for, computed, or undefined (zero accepted corpora).
PER_RESULT_NOT_REQUESTED = "not_requested"
PER_RESULT_DEFINED = "defined"
PER_RESULT_UNDEFINED = "undefined"



def default_catalog_path() -> Path:
    """The catalog snapshot shipped with isocost.

    Example: ``default_catalog_path().name == "catalog-2026-09-24.csv"``.
    """
    return Path(__file__).resolve().parents[1] / "data" / DEFAULT_CATALOG_NAME


def format_usd(amount: Decimal) -> str:
    """Money as text with at least two decimals, no thousands separator.

    Example: ``format_usd(Decimal("2071")) == "2071.00"`` (as the record codec writes money).
    """
    return decimal_text(amount)


def _current(data: dict[str, Any], version: int) -> dict[str, Any]:
    """A version-1 plan, catalog or quote: the same keys, a flat plan (billing's default)."""
    return {**data, "schema_version": SCHEMA_VERSION}


def _schema(kind: str, **more: Any) -> Schema:
    return Schema(kind, SCHEMA_VERSION, _READABLE_VERSIONS, upgrade=_current, **more)


@dataclass(frozen=True)
class Offer:
    """Where a market plan is sold: one provider's instance type in one region (an imported catalog's row).

    ``interruptible`` marks a spot price: the provider may stop the instance at any time
    (:data:`SPOT_RISK`). Example: ``Offer("lambda", "us-east-1", "gpu_1x_h100_pcie", "H100", 80, False)``.
    """

    provider: str
    region: str
    instance_type: str
    accelerator: str
    card_memory_gib: int | None
    interruptible: bool
    CODEC: ClassVar[Schema] = _schema("offer")

    @property
    def capacity(self) -> str:
        """Example: ``"spot"`` or ``"on-demand"``."""
        return "spot" if self.interruptible else "on-demand"


#: What a spot (interruptible) price means for a measured job, said wherever one is shown.
SPOT_RISK = ("spot: interruptible, the provider may stop the instance at any time; an interrupted pass is lost and "
             "run again, so the cost shown holds only if no interruption happens")


@dataclass(frozen=True)
class Plan:
    """One catalog row. Example: ``load_catalog(default_catalog_path()).plans[1].gpu == "b200"``."""

    gpu: str
    cards_per_lot: int
    plan_days: int
    price_usd_per_lot: Decimal
    catalog_date: date
    source: str
    billing: str = BILLING_FLAT
    minimum_s: int | None = None  # metered billing only
    increment_s: int | None = None  # metered billing only
    schema_version: int = SCHEMA_VERSION
    #: An imported market catalog's row: provider, region, instance type (absent on a plain catalog's plans).
    offer: Offer | None = field(default=None, metadata=OMIT_NONE)
    CODEC: ClassVar[Schema] = _schema("plan", derived=("currency",))

    @property
    def currency(self) -> str:
        """Example: ``"USD"``: every catalog price is in US dollars."""
        return CATALOG_CURRENCY

    @property
    def plan_hours(self) -> int:
        """Example: a 7-day plan has ``plan_hours == 168`` (0 for metered billing: no fixed length)."""
        return self.plan_days * 24

    @property
    def length_text(self) -> str:
        """How the entry is named in messages. Example: ``"7 days"``, ``"per hour"``."""
        if self.billing in METERED:
            return "per hour"
        return f"{self.plan_days} days"


@dataclass(frozen=True)
class Catalog:
    """A dated set of plans read from one CSV. Example: ``load_catalog(default_catalog_path())``."""

    path: str
    plans: tuple[Plan, ...]
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = _schema("catalog")

    @property
    def gpus(self) -> tuple[str, ...]:
        """Example: ``catalog.gpus == ("b200", "rtx-4090")``."""
        return tuple(sorted({plan.gpu for plan in self.plans}))

    @property
    def catalog_dates(self) -> tuple[date, ...]:
        """Example: ``catalog.catalog_dates == (date(2026, 9, 24),)``."""
        return tuple(sorted({plan.catalog_date for plan in self.plans}))

    @property
    def dates_text(self) -> str:
        """Example: ``catalog.dates_text == "2026-09-24"``."""
        return ", ".join(day.isoformat() for day in self.catalog_dates)

    def plans_for(self, gpu: str) -> tuple[Plan, ...]:
        """The flat plans. Example: ``[p.plan_days for p in catalog.plans_for("b200")] == [7]``."""
        key = gpu_key(gpu)
        return tuple(sorted((p for p in self.plans if p.gpu == key and p.billing == BILLING_FLAT),
                            key=lambda p: p.plan_days))

    def options_for(self, gpu: str) -> tuple[Plan, ...]:
        """Every billing option for ``gpu``, flat plans first.

        Example: ``[p.billing for p in catalog.options_for("b200")] == ["flat"]`` for the shipped snapshot.
        """
        key = gpu_key(gpu)
        return tuple(sorted((p for p in self.plans if p.gpu == key),
                            key=lambda p: (BILLINGS.index(p.billing), p.plan_days)))

    def find(self, gpu: str, days: int) -> Plan | None:
        """Example: ``catalog.find("rtx-4090", 3) is None``."""
        for plan in self.plans_for(gpu):
            if plan.plan_days == days:
                return plan
        return None


@dataclass(frozen=True)
class Quote:
    """A priced rental: plan × lots, and optionally the cost per validated corpus.

    Example: ``quote(catalog, "b200", 7, 1).cards == 2`` (a B200 lot already holds 2 cards).

    ``per_result_state`` is ``not_requested`` (no accepted count given, no figure), ``defined`` or ``undefined`` (zero
    accepted corpora: no ratio, the spend ``total_usd`` still stands).
    """

    plan: Plan
    lots: int
    cards: int
    total_usd: Decimal
    accepted_results: int | None
    cost_per_validated_corpus_usd: Decimal | None
    per_result_state: str
    rounding: str = ROUNDING_NOTE
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = _schema("quote")





def quote(catalog: Catalog, gpu: str, days: int, lots: int, accepted_results: int | None = None) -> Quote:
    """Price ``lots`` lots of the ``(gpu, days)`` plan; never guesses a missing price.

    Example: ``quote(catalog, "rtx-4090", 7, 2, accepted_results=2).cost_per_validated_corpus_usd``
    is ``Decimal("110.00")``.
    """
    if not _is_int(days) or days < 1:
        raise UserError(
            f"plan length must be a positive whole number of days, got {days!r}",
            "days",
            f"The calculator offers {join_days(PLAN_LENGTHS_DAYS)} days.",
        )
    check_lots(lots, "lots")
    if accepted_results is not None and (not _is_int(accepted_results)
                                         or not 0 <= accepted_results <= MAX_ACCEPTED_RESULTS):
        raise UserError(
            f"accepted results must be a whole number of 0 or more (at most {MAX_ACCEPTED_RESULTS:,}), "
            f"got {str(accepted_results)[:40]}",
            "accepted_results",
            "Count only corpora actually completed, validated and not duplicated; "
            "leave it out when none has been validated yet.",
        )
    plan = _find_plan(catalog, gpu, days)
    with localcontext(prec=MONEY_DIGITS):
        total = plan.price_usd_per_lot * lots
        cards = plan.cards_per_lot * lots
        if accepted_results is None:
            per_result: Decimal | None = None
            state = PER_RESULT_NOT_REQUESTED
        elif accepted_results == 0:
            per_result = None
            state = PER_RESULT_UNDEFINED
        else:
            per_result = (total / accepted_results).quantize(CENT, rounding=ROUNDING)
            state = PER_RESULT_DEFINED
    return Quote(
        plan=plan,
        lots=lots,
        cards=cards,
        total_usd=total,
        accepted_results=accepted_results,
        cost_per_validated_corpus_usd=per_result,
        per_result_state=state,
    )


def _find_plan(catalog: Catalog, gpu: str, days: int) -> Plan:
    key = gpu_key(gpu)
    where = f"catalog dated {catalog.dates_text}, {catalog.path}"
    if key not in catalog.gpus:
        raise UserError(
            f"unknown GPU {gpu!r}",
            where,
            f"Known GPUs: {', '.join(catalog.gpus)}. "
            "Pick one, or load your own dated catalog with --catalog FILE.",
        )
    plan = catalog.find(key, days)
    if plan is None:
        existing = join_days([p.plan_days for p in catalog.plans_for(key)])
        raise UserError(
            f"no price for {key} for {days} days",
            where,
            f"Plans that exist for {key}: {existing} days. No price is guessed: choose one "
            f"of those, or load a dated catalog that lists a {days}-day {key} plan "
            "with --catalog FILE.",
        )
    return plan








def charge(plan: Plan, hours: float | Decimal, lots: int) -> Decimal | None:
    """What ``lots`` lots of ``plan`` cost for a run of ``hours`` wall hours (``None``: the plan is too short).

    - flat: the whole price × lots when ``hours`` fits the plan length, never prorated;
    - hourly / per-second: seconds rounded UP to the billing increment, at least the minimum,
      × price per lot-hour / 3600 × lots, rounded half-even to the cent at the end;
    - monthly: every started month (``plan_days`` days) paid whole × lots.

    Example: an hourly plan at 2.00 USD/h, increment 3600 s, minimum 3600 s: 1.5 h on 2 lots
    is ``Decimal("8.00")`` (2 billed hours × 2 lots); 10 minutes is ``Decimal("4.00")``.
    """
    need = Decimal(str(hours))
    if not need.is_finite() or need < 0:
        raise ValueError(f"hours must be finite and >= 0, got {hours!r}")
    check_lots(lots, "lots")
    with localcontext(prec=MONEY_DIGITS):
        return _charge(plan, need, lots)


def _charge(plan: Plan, need: Decimal, lots: int) -> Decimal | None:
    if plan.billing == BILLING_FLAT:
        return plan.price_usd_per_lot * lots if need <= plan.plan_hours else None
    if plan.billing == BILLING_MONTHLY:
        months = max(Decimal(1), (need / plan.plan_hours).to_integral_value(rounding=ROUND_CEILING))
        return plan.price_usd_per_lot * months * lots
    assert plan.minimum_s is not None and plan.increment_s is not None  # checked when the catalog was read
    seconds = need * 3600
    steps = (seconds / plan.increment_s).to_integral_value(rounding=ROUND_CEILING)
    billed_s = max(Decimal(plan.minimum_s), steps * plan.increment_s)
    return (plan.price_usd_per_lot * billed_s / 3600 * lots).quantize(CENT, rounding=ROUNDING)


def check_lots(lots: int, where: str) -> int:
    """``lots`` if it is a whole number from 1 to :data:`MAX_LOTS`, else a :class:`UserError` naming the bound.

    Example: ``check_lots(2, "--lots") == 2``; ``check_lots(10**30, "--lots")`` raises.
    """
    if not _is_int(lots) or not 1 <= lots <= MAX_LOTS:
        shown = f"{str(lots)[:40]}…" if len(str(lots)) > 40 else str(lots)
        raise UserError(f"lots must be a positive whole number of at most {MAX_LOTS:,}, got {shown}", where,
                        f"Rent at least one lot and at most {MAX_LOTS:,}.")
    return lots


def gpu_key(gpu: str) -> str:
    """How a GPU name is looked up in a catalog. Example: ``gpu_key(" RTX-4090 ") == "rtx-4090"``."""
    return gpu.strip().lower()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def join_days(days: Any) -> str:
    """Example: ``join_days([3, 7, 30]) == "3, 7 or 30"``."""
    values = [str(day) for day in days]
    if len(values) <= 1:
        return "".join(values)
    return ", ".join(values[:-1]) + " or " + values[-1]

