"""The records of a decision: what ``decide`` returns (and writes to decision.json), and the expenses ledger.

:class:`Decision` holds one :class:`CampaignResult` per campaign and one
:class:`Configuration` per variant × campaign, each with its passes
(:class:`PassRecord`), memory peaks (:class:`MemoryCounter`) and cost
(:class:`CostResult` over :class:`PlanOption`); a :class:`Ledger` of other
project expenses travels beside it, never added to a configuration's cost.
Every record is frozen and writes a ``schema_version``; money is written as
text (``"220.00"``), hours and seconds as numbers.

Example: ``Ledger.from_dict(ledger.to_dict()) == ledger``; ``decision.to_dict()["chosen"]`` names the
chosen configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from protocol.costing.calendar import Window
from protocol.costing.period import CampaignPeriod
from protocol.costing.plans import Quote, format_optional_usd, format_usd
from protocol.decision.agreement import AgreementMatrix
from protocol.jsonio import check_schema, record_dict

if TYPE_CHECKING:
    from protocol.costing.job_cost import JobDecision

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

    ``pass_s`` is the raw pass time (``None`` when no pass completed);
    ``accepted`` is the re-derived verdict.
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

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self, SCHEMA_VERSION)


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

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self, SCHEMA_VERSION, values=list(self.values))


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

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self, SCHEMA_VERSION, price_usd_per_lot=format_optional_usd(self.price_usd_per_lot),
                           total_usd=format_optional_usd(self.total_usd))


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "gpu": self.gpu,
            "lots": self.lots,
            "needed_h": self.needed_h,
            "options": [o.to_dict() for o in self.options],
            "contracted": None if self.contracted is None else self.contracted.to_dict(),
            "total_usd": format_optional_usd(self.total_usd),
            "cost_per_validated_corpus_usd": format_optional_usd(self.cost_per_validated_corpus_usd),
            "per_result_state": self.per_result_state,
            "empty_reason": self.empty_reason,
            "advice": self.advice,
        }


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

    def to_dict(self) -> dict[str, Any]:
        return record_dict(
            self, SCHEMA_VERSION, passes=[p.to_dict() for p in self.passes], cost=self.cost.to_dict(),
            memory=[m.to_dict() for m in self.memory], uncertainty=list(self.uncertainty),
            exclusions=list(self.exclusions), statuses=dict(sorted(self.statuses.items())),
        )


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

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self, SCHEMA_VERSION, period=self.period.to_dict(), cost=self.cost.to_dict(),
                           notes=list(self.notes))


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

    def configuration(self, configuration_id: str) -> Configuration:
        """Example: ``decision.configuration(decision.chosen).cost.total_usd``."""
        return next(c for c in self.configurations if c.configuration_id == configuration_id)

    def to_dict(self) -> dict[str, Any]:
        """Sorted-JSON-ready dict; money as strings, hours and seconds as numbers."""
        return {
            "schema_version": self.schema_version,
            "study_name": self.study_name,
            "study_sha256": self.study_sha256,
            "question": self.question,
            "expected_artifacts": self.expected_artifacts,
            "corpus_fingerprint": self.corpus_fingerprint,
            "corpus_inputs": self.corpus_inputs,
            "model_fingerprint": self.model_fingerprint,
            "reference_variant": self.reference_variant,
            "catalog_path": self.catalog_path,
            "catalog_dates": self.catalog_dates,
            "deadline": None if self.deadline is None else self.deadline.to_dict(),
            "deadline_reason": self.deadline_reason,
            "campaigns": [c.to_dict() for c in self.campaigns],
            "configurations": [c.to_dict() for c in self.configurations],
            "ranking": list(self.ranking),
            "chosen": self.chosen,
            "target_load": self.target_load,
            "why": list(self.why),
            "deadline_note": self.deadline_note,
            "uncertain": list(self.uncertain),
            "ledger": None if self.ledger is None else self.ledger.to_dict(),
            "artifact_rule": self.artifact_rule,
            "job": None if self.job is None else self.job.to_dict(),
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
        }


def _check(data: dict[str, Any], kind: str) -> None:
    check_schema(data, kind, SCHEMA_VERSION, kind)


@dataclass(frozen=True)
class Expense:
    """One ledger line. Example: ``Expense(date(2026, 9, 30), "storage", Decimal("12.50"), "invoice 17", 2)``."""

    day: date
    description: str
    amount_usd: Decimal
    evidence: str
    line: int

    def to_dict(self) -> dict[str, Any]:
        """Example: ``Expense.from_dict(e.to_dict()) == e``."""
        return {
            "schema_version": SCHEMA_VERSION,
            "date": self.day.isoformat(),
            "description": self.description,
            "amount_usd": format_usd(self.amount_usd),
            "evidence": self.evidence,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Expense:
        """Example: ``Expense.from_dict(e.to_dict()) == e``."""
        _check(data, "expense")
        return cls(
            day=date.fromisoformat(data["date"]),
            description=str(data["description"]),
            amount_usd=Decimal(str(data["amount_usd"])),
            evidence=str(data["evidence"]),
            line=int(data["line"]),
        )


@dataclass(frozen=True)
class Ledger:
    """Other project expenses, each with its evidence; shown apart from every configuration's cost.

    Example: ``parse_ledger("date,description,amount_usd,evidence\\n2026-09-30,storage,12.50,inv 17\\n", "x")``
    has ``total_usd == Decimal("12.50")``.
    """

    path: str
    expenses: tuple[Expense, ...]
    schema_version: int = SCHEMA_VERSION

    @property
    def total_usd(self) -> Decimal:
        """Example: lines of 12.50 and 7.25 USD total ``Decimal("19.75")``."""
        return sum((e.amount_usd for e in self.expenses), Decimal("0"))

    def to_dict(self) -> dict[str, Any]:
        """Example: ``Ledger.from_dict(ledger.to_dict()) == ledger``."""
        return {
            "schema_version": self.schema_version,
            "path": self.path,
            "expenses": [e.to_dict() for e in self.expenses],
            "total_usd": format_usd(self.total_usd),
            "note": "other project expenses: never part of a configuration's cost",
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ledger:
        """Example: ``Ledger.from_dict(ledger.to_dict()) == ledger``."""
        _check(data, "ledger")
        return cls(path=str(data["path"]), expenses=tuple(Expense.from_dict(e) for e in data["expenses"]))


