"""The records of a decision: what ``decide`` returns (and writes to decision.json), and the expenses ledger.

:class:`Decision` holds one :class:`CampaignResult` per campaign and one
:class:`Configuration` per variant × campaign, each with its passes
(:class:`PassRecord`), memory peaks (:class:`MemoryCounter`) and cost
(:class:`CostResult` over :class:`PlanOption`); a :class:`Ledger` of other
project expenses travels beside it, never added to a configuration's cost.
Every record is frozen and writes a ``schema_version``; money is written as
text (``"220.00"``), hours and seconds as numbers.

Every record is written and read by the record codec (:mod:`protocol.records.codec`): nested records each carry the
``schema_version``; the figures a record derives (a contracted total, the ledger's total) are written beside its
fields, and read back must agree with them.

Example: ``codec.from_dict(Ledger, codec.to_dict(ledger)) == ledger``; ``codec.to_dict(decision)["chosen"]``
names the chosen configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, ClassVar

from protocol.costing.calendar import Window
from protocol.costing.job_cost import JobDecision
from protocol.costing.period import CampaignPeriod
from protocol.costing.plans import Quote
from protocol.decision.agreement import AgreementMatrix
from protocol.decision.market_rank import MarketDecision
from protocol.records.codec import OMIT_NONE, Schema, options

# Version history: 1 = first format (Decision and the records inside it; Ledger, Expense).
#: decision.json. History: 1: first version; 2: ``agreement`` (the matrix against the decision's reference) and
#: each configuration's ``cross_equivalent`` and ``cross_reason``.
SCHEMA_VERSION = 2


ARTIFACT_RULE = (
    "An accepted artifact is a distinct input corpus (identified by its content fingerprint) for which the "
    "configuration produced at least one accepted pass: every id present once, none missing, format valid, the "
    "quality minimum met. Repeating a pass over the same corpus proves stability, not production: five accepted "
    "passes of one corpus are ONE validated corpus. The count used for costing is min(distinct accepted corpora, "
    "expected_artifacts): the study declares before the campaign how many corpora the job needs, and corpora "
    "beyond that are not what the job buys. A corpus the job needs but no pass produced is not counted; a capacity "
    "forecast (\"it would take N more hours\") is a planning assumption, never an accepted result."
)


@dataclass(frozen=True)
class PassRecord:
    """One attempted pass as the raw table recorded it (failures included).

    ``pass_s`` is the raw pass time (``None`` when no pass completed); ``accepted`` is the re-derived verdict.
    """

    trial_id: str
    repetition: int
    status: str
    pass_s: float | None
    accepted: bool
    peak_rss_bytes: int | None
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    device_used_bytes: int | None
    CODEC: ClassVar[Schema] = Schema("pass record", SCHEMA_VERSION)


@dataclass(frozen=True)
class MemoryCounter:
    """One memory counter's per-pass peaks, beside the capacity it is bounded by.

    ``capacity_bytes`` is ``None`` when no capacity was recorded; ``capacity_reason`` says so.
    """

    name: str
    column: str
    values: tuple[int | None, ...]
    peak_bytes: int | None
    capacity_name: str
    capacity_bytes: int | None
    capacity_source: str
    capacity_reason: str
    CODEC: ClassVar[Schema] = Schema("memory counter", SCHEMA_VERSION)


@dataclass(frozen=True)
class PlanOption:
    """One plan length against the needed period: does it cover it, and what does it cost?

    ``total_usd`` is ``None`` when the plan does not cover the period or has
    no price (``reason`` holds the catalog's own error text).
    """

    plan_days: int
    plan_hours: int
    covers: bool
    margin_h: float
    price_usd_per_lot: Decimal | None
    total_usd: Decimal | None
    reason: str
    CODEC: ClassVar[Schema] = Schema("plan option", SCHEMA_VERSION)


@dataclass(frozen=True)
class CostResult:
    """The contracted plan for a configuration, or the reason there is none.

    Example: a 1.2-hour period on ``rtx-4090 ×2 lots`` with the shipped catalog is
    contracted as the 7-day plan: ``total_usd == Decimal("220.00")``.
    """

    gpu: str | None
    lots: int | None
    needed_h: float | None
    options: tuple[PlanOption, ...]
    contracted: Quote | None
    empty_reason: str
    advice: str = ""
    CODEC: ClassVar[Schema] = Schema("cost result", SCHEMA_VERSION,
                                     derived=("total_usd", "cost_per_validated_corpus_usd", "per_result_state"))

    @property
    def total_usd(self) -> Decimal | None:
        """Example: ``Decimal("220.00")`` for 2 lots of the 7-day RTX 4090 plan."""
        return None if self.contracted is None else self.contracted.total_usd

    @property
    def cost_per_validated_corpus_usd(self) -> Decimal | None:
        """``None`` when the cost is unknown or no corpus was accepted (undefined, not 0)."""
        return None if self.contracted is None else self.contracted.cost_per_validated_corpus_usd

    @property
    def per_result_state(self) -> str:
        """``defined``, ``undefined`` (zero accepted) or ``unknown`` (no contracted cost)."""
        return "unknown" if self.contracted is None else self.contracted.per_result_state



@dataclass(frozen=True)
class Configuration:
    """One variant on one campaign's hardware, with everything the decision weighs."""

    configuration_id: str
    variant_id: str
    campaign_label: str
    campaign_id: str
    hardware: str
    config: dict[str, Any]
    equivalent: bool | None
    quality_reason: str
    metric: str
    median_metric: float | None
    passes: tuple[PassRecord, ...]
    median_pass_s: float | None
    min_pass_s: float | None
    max_pass_s: float | None
    relative_spread: float | None
    attempts: int
    accepted_passes: int
    failures: int
    statuses: dict[str, int]
    distinct_accepted_corpora: int
    accepted_artifacts: int
    expected_artifacts: int
    artifact_note: str
    own_trials_s: float | None
    campaign_needed_h: float | None
    cost: CostResult
    deadline_fits: bool | None
    deadline_note: str
    uncertainty: tuple[str, ...]
    memory: tuple[MemoryCounter, ...]
    acceptable: bool
    exclusions: tuple[str, ...]
    rank: int | None = None
    #: Equivalent to the decision's one reference configuration (protocol.decision.agreement), and why.
    cross_equivalent: bool | None = None
    cross_reason: str = ""
    CODEC: ClassVar[Schema] = Schema("configuration", SCHEMA_VERSION)


@dataclass(frozen=True)
class CampaignResult:
    """One campaign as the decision saw it: hardware, rental, measured period."""

    label: str
    campaign_id: str
    hardware: str
    rental_gpu: str | None
    rental_lots: int | None
    rental_empty_reason: str
    host: str
    launcher: str
    attempts: int
    period: CampaignPeriod
    cost: CostResult
    notes: tuple[str, ...]
    CODEC: ClassVar[Schema] = Schema("campaign result", SCHEMA_VERSION)


@dataclass(frozen=True)
class Decision:
    """The answer to the study's question, with every configuration and the reasons."""

    study_name: str
    study_sha256: str
    question: str
    expected_artifacts: int
    corpus_fingerprint: str
    corpus_inputs: int
    model_fingerprint: str
    reference_variant: str
    catalog_path: str
    catalog_dates: str
    deadline: Window | None
    deadline_reason: str
    campaigns: tuple[CampaignResult, ...]
    configurations: tuple[Configuration, ...]
    ranking: tuple[str, ...]
    chosen: str | None
    target_load: str
    why: tuple[str, ...]
    deadline_note: str
    uncertain: tuple[str, ...]
    ledger: Ledger | None
    artifact_rule: str = ARTIFACT_RULE
    job: JobDecision | None = None  # the declared [job], projected and priced (protocol/costing/job_cost.py)
    agreement: AgreementMatrix | None = None  # every configuration by id against the decision's reference
    schema_version: int = SCHEMA_VERSION
    #: Set by the decide stage: where the catalog came from, and the banner of each directory read inconsistent.
    catalog_source: str | None = field(default=None, metadata=OMIT_NONE)
    inconsistent: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)
    #: Set by the decide stage: a campaign whose trials ran with the test-only fault hook (not a measurement).
    test_hooks: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)
    #: Set by the decide stage with --market: every configuration priced across providers (market_rank.py).
    market: MarketDecision | None = field(default=None, metadata=OMIT_NONE)
    CODEC: ClassVar[Schema] = Schema("decision.json", SCHEMA_VERSION)

    def configuration(self, configuration_id: str) -> Configuration:
        """Example: ``decision.configuration(decision.chosen).cost.total_usd``."""
        return next(c for c in self.configurations if c.configuration_id == configuration_id)




@dataclass(frozen=True)
class Expense:
    """One ledger line. Example: ``Expense(date(2026, 9, 30), "storage", Decimal("12.50"), "invoice 17", 2)``."""

    day: date = field(metadata=options(key="date"))
    description: str
    amount_usd: Decimal
    evidence: str
    line: int
    CODEC: ClassVar[Schema] = Schema("expense", SCHEMA_VERSION)

@dataclass(frozen=True)
class Ledger:
    """Other project expenses, each with its evidence; shown apart from every configuration's cost.

    Example: ``parse_ledger("date,description,amount_usd,evidence\\n2026-09-30,storage,12.50,inv 17\\n", "x")``
    has ``total_usd == Decimal("12.50")``.
    """

    path: str
    expenses: tuple[Expense, ...]
    schema_version: int = SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("ledger", SCHEMA_VERSION, derived=("total_usd", "note"))

    @property
    def total_usd(self) -> Decimal:
        """Example: lines of 12.50 and 7.25 USD total ``Decimal("19.75")``."""
        return sum((e.amount_usd for e in self.expenses), Decimal("0"))

    @property
    def note(self) -> str:
        """What decision.json says beside the total."""
        return "other project expenses: never part of a configuration's cost"
