"""Campaigns of one study × dated plan catalog × deadline → the decision (pure; money is ``Decimal``).

The question: which configuration processes ALL documents, meets
the quality rule, finishes before the deadline and costs the least budget?

A **configuration** is one variant on one campaign's hardware: the same
variant on another GPU (another rental) is another configuration. Two
campaigns on the same GPU type are listed separately too: each is its own
rental with its own measured period.

For each configuration this module states, from measured evidence only:

- the quality verdict (equivalent to the study's reference variant, with the
  reason from :mod:`protocol.stats`), the raw pass durations and failures;
- the accepted artifacts, counted by :func:`count_artifacts` (the rule is in
  :data:`ARTIFACT_RULE`): repetitions of one benchmark are not production
  corpora;
- the campaign period (:mod:`protocol.costing.period`), the plan lengths that cover
  it, the contracted plan (the cheapest priced one that covers it; the whole
  plan price, never prorated), the cost per validated corpus (undefined with
  zero accepted corpora: the spend still stands);
- whether the period plus declared waiting fits the study's deadline window
  (measured on a real calendar by :mod:`protocol.costing.calendar`).

Acceptable configurations are ranked by contracted cost, then failures, then
remaining uncertainty (spread warnings, relative spread), then median pass
time. A campaign without a recorded rental, or a GPU the catalog does not
price, leaves the cost empty with the reason; nothing is guessed. Other
project expenses (a ledger) are shown apart and never added to a
configuration's cost.

Example: ``decide([evidence], study, load_catalog(default_catalog_path()))``
returns a :class:`Decision` whose ``chosen`` names the configuration.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from protocol.costing.calendar import Window, access_window, covering_plans, format_hours, merge_intervals
from protocol.costing.period import CampaignPeriod, measure_period, trial_intervals
from protocol.costing.plans import PLAN_LENGTHS_DAYS, Catalog, Quote, format_usd, quote
from protocol.decision.job_rank import job_decision
from protocol.errors import UserError
from protocol.jsonio import check_schema
from protocol.stats import Summary, VariantSummary

if TYPE_CHECKING:
    from protocol.costing.job_cost import JobDecision
    from protocol.costing.projection import TrialRecord

# Version history: 1 = first format (Decision and the records inside it; Ledger, Expense).
SCHEMA_VERSION = 1

ARTIFACT_RULE = (
    "An accepted artifact is a distinct input corpus (identified by its content fingerprint) for which the "
    "configuration produced at least one accepted pass: every id present once, none missing, format valid, the "
    "quality minimum met. Repeating a pass over the same corpus proves stability, not production: five accepted "
    "passes of one corpus are ONE validated corpus. The count used for costing is min(distinct accepted corpora, "
    "expected_artifacts): the study declares before the campaign how many corpora the job needs, and corpora "
    "beyond that are not what the job buys. A corpus the job needs but no pass produced is not counted; a capacity "
    "forecast (\"it would take N more hours\") is a planning assumption, never an accepted result."
)

LEDGER_COLUMNS: tuple[str, ...] = ("date", "description", "amount_usd", "evidence")

_AMOUNT_RE = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


# -- inputs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialCapacity:
    """The memory capacities recorded for one trial (``None`` + reason when not recorded).

    Example: ``TrialCapacity(None, "", 67_108_864_000, "manifest host.memory_total_bytes")``.
    """

    device_total_bytes: int | None
    device_source: str
    host_memory_bytes: int | None
    host_source: str


@dataclass(frozen=True)
class CampaignEvidence:
    """Everything ``decide`` needs from one campaign directory, already read from its files.

    ``rows`` are raw.csv rows (strings), ``events`` the parsed lines of
    events.jsonl, ``summary`` the per-variant summary (re-derived verdicts),
    ``accepted_trials`` the trial ids whose re-derived verdict accepted the corpus.
    """

    label: str
    campaign_id: str
    study_name: str
    study_sha256: str
    corpus_fingerprint: str
    corpus_content_fingerprint: str
    corpus_inputs: int
    model_fingerprint: str
    rental_gpu: str | None
    rental_lots: int | None
    rental_empty_reason: str
    host: str
    launcher: str
    rows: tuple[Mapping[str, str], ...]
    events: tuple[Mapping[str, Any], ...]
    summary: Summary
    accepted_trials: frozenset[str]
    capacities: Mapping[str, TrialCapacity] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    trials: Mapping[str, TrialRecord] = field(default_factory=dict)  # per-batch record, set-up, energy

    @property
    def hardware(self) -> str:
        """Example: ``"rtx-4090 ×2 lots"``, or ``"host vm (no rental recorded)"``."""
        if self.rental_gpu is None:
            return f"host {self.host} (no rental recorded)"
        lots = self.rental_lots or 1
        return f"{self.rental_gpu} ×{lots} lot{'s' if lots != 1 else ''}"


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


# -- outputs --------------------------------------------------------------------------------


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
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in self.__dict__.items()}}


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
        data = dict(self.__dict__)
        data["values"] = list(self.values)
        return {"schema_version": SCHEMA_VERSION, **data}


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
        return {
            "schema_version": SCHEMA_VERSION,
            "plan_days": self.plan_days,
            "plan_hours": self.plan_hours,
            "covers": self.covers,
            "margin_h": self.margin_h,
            "price_usd_per_lot": _money(self.price_usd_per_lot),
            "total_usd": _money(self.total_usd),
            "reason": self.reason,
        }


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
            "total_usd": _money(self.total_usd),
            "cost_per_validated_corpus_usd": _money(self.cost_per_validated_corpus_usd),
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

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["passes"] = [p.to_dict() for p in self.passes]
        data["cost"] = self.cost.to_dict()
        data["memory"] = [m.to_dict() for m in self.memory]
        data["uncertainty"] = list(self.uncertainty)
        data["exclusions"] = list(self.exclusions)
        data["statuses"] = dict(sorted(self.statuses.items()))
        return {"schema_version": SCHEMA_VERSION, **data}


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
        data = dict(self.__dict__)
        data["period"] = self.period.to_dict()
        data["cost"] = self.cost.to_dict()
        data["notes"] = list(self.notes)
        return {"schema_version": SCHEMA_VERSION, **data}


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
        }


# -- rules ----------------------------------------------------------------------------------


def check_same_study(campaigns: Sequence[CampaignEvidence]) -> None:
    """Refuse to combine campaigns of different studies, naming every difference.

    Example: two campaigns whose study sha256 differ raise ``UserError("results come from different
    studies: study sha256 differs …")``.
    """
    if not campaigns:
        raise UserError("no campaign to decide on", "decide", "Pass at least one results directory.")
    checks = (
        ("study sha256", lambda c: c.study_sha256),
        ("corpus fingerprint", lambda c: c.corpus_fingerprint),
        ("corpus content fingerprint", lambda c: c.corpus_content_fingerprint),
        ("model fingerprint", lambda c: c.model_fingerprint),
    )
    differences = []
    for name, get in checks:
        values = {c.label: get(c) for c in campaigns}
        if len(set(values.values())) > 1:
            shown = ", ".join(f"{label}: {value}" for label, value in values.items())
            differences.append(f"{name} differs ({shown})")
    if differences:
        raise UserError(
            "results come from different studies: " + "; ".join(differences),
            ", ".join(c.label for c in campaigns),
            "decide compares configurations of ONE study (same study file, corpus and model): pass only results "
            "directories of that study, or decide each study separately.",
        )
    ids = [c.campaign_id for c in campaigns]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        labels = [c.label for c in campaigns if c.campaign_id == repeated[0]]
        raise UserError(
            f"campaign {repeated[0]} is given twice ({', '.join(labels)})",
            "decide",
            "Pass each results directory once; a copy of a campaign is not a second campaign.",
        )


def count_artifacts(accepted_corpora: set[str] | frozenset[str], expected_artifacts: int) -> tuple[int, str]:
    """Accepted artifacts for costing: distinct accepted corpora, capped at what the job needs.

    Example: five accepted passes of one corpus, one expected: ``count_artifacts({"sha256:a"}, 1) == (1, …)``;
    ``count_artifacts(set(), 1)[0] == 0``.
    """
    distinct = len(accepted_corpora)
    counted = min(distinct, expected_artifacts)
    if distinct == 0:
        note = f"0 of {expected_artifacts} expected: no accepted pass, so no validated corpus"
    elif distinct < expected_artifacts:
        note = (f"{counted} of {expected_artifacts} expected: the campaign's passes covered {distinct} distinct "
                f"corpus; the other {expected_artifacts - distinct} were not produced and are not counted")
    elif distinct > expected_artifacts:
        note = (f"{counted} of {expected_artifacts} expected ({distinct} distinct corpora accepted; those beyond the "
                "declared need are not counted)")
    else:
        note = f"{counted} of {expected_artifacts} expected"
    return counted, note


def plan_cost(
    catalog: Catalog,
    gpu: str | None,
    lots: int | None,
    needed_h: float | None,
    accepted_artifacts: int | None,
    *,
    no_gpu_reason: str = "",
    no_period_reason: str = "",
) -> CostResult:
    """The plans covering ``needed_h`` for ``gpu``, and the contracted (cheapest priced covering) one.

    ``accepted_artifacts`` ``None`` prices the plan without a per-corpus figure (a campaign's own rental).

    The whole plan price × lots is charged, never prorated. A missing price is
    the catalog's own error text; nothing is guessed.

    Example: ``plan_cost(catalog, "rtx-4090", 2, 1.2, 1).total_usd == Decimal("220.00")``.
    """
    if gpu is None:
        return CostResult(gpu, lots, needed_h, (), None,
                          no_gpu_reason or "no rental recorded for this campaign: no plan can be priced")
    lots = lots or 1
    if needed_h is None or needed_h <= 0:
        return CostResult(gpu, lots, needed_h, (), None,
                          "campaign period unknown: " + (no_period_reason or "no timestamps recorded"))
    lengths = sorted(set(PLAN_LENGTHS_DAYS) | {p.plan_days for p in catalog.plans_for(gpu)})
    coverage = covering_plans(needed_h, lengths)
    unknown_gpu = ""
    try:
        quote(catalog, gpu, lengths[0], lots)
    except UserError as exc:
        if exc.what.startswith("unknown GPU"):
            unknown_gpu = exc.message
    options = []
    priced: list[tuple[Decimal, int, Quote]] = []
    for fit in coverage.fits:
        price = total = None
        if not fit.covers:
            reason = (f"too short: {fit.plan_hours} h < needed {format_hours(needed_h)} h "
                      f"(short by {format_hours(-fit.margin_h)} h)")
        elif unknown_gpu:
            reason = unknown_gpu
        else:
            try:
                priced_quote = quote(catalog, gpu, fit.plan_days, lots, accepted_artifacts)
            except UserError as exc:
                reason = exc.message
            else:
                price, total = priced_quote.plan.price_usd_per_lot, priced_quote.total_usd
                reason = "covers the needed period" + (f" ({format_hours(fit.margin_h)} h to spare)")
                priced.append((total, fit.plan_days, priced_quote))
        options.append(PlanOption(fit.plan_days, fit.plan_hours, fit.covers, fit.margin_h, price, total, reason))
    if priced:
        contracted = min(priced, key=lambda item: (item[0], item[1]))[2]
        return CostResult(gpu, lots, needed_h, tuple(options), contracted, "", coverage.advice)
    if coverage.needs_rescheduling:
        empty = coverage.advice
    elif unknown_gpu:
        empty = unknown_gpu
    else:
        missing = "; ".join(o.reason for o in options if o.covers)
        empty = f"no covering plan has a price: {missing}"
    return CostResult(gpu, lots, needed_h, tuple(options), None, empty, coverage.advice)


def deadline_fit(needed_h: float | None, window: Window | None, reason: str = "") -> tuple[bool | None, str]:
    """Does the measured period plus declared waiting fit inside the deadline window?

    Example: 100 h against a Monday 09:00 → Friday 09:00 window (96 h) is ``(False, "… 100 h > 96 h …")``.
    """
    if window is None:
        return None, reason or "the study declares no deadline: no deadline check"
    if needed_h is None:
        return None, "campaign period unknown: the deadline cannot be checked"
    window_h = window.elapsed_h
    if needed_h <= window_h:
        return True, (f"fits: needs {format_hours(needed_h)} h, the deadline window holds {format_hours(window_h)} h "
                      f"({format_hours(window_h - needed_h)} h to spare)")
    return False, (f"does not fit: needs {format_hours(needed_h)} h > the deadline window's {format_hours(window_h)} h "
                   f"(over by {format_hours(needed_h - window_h)} h)")


def rank_key(config: Configuration) -> tuple[Any, ...]:
    """Contracted cost, then failures, then remaining uncertainty, then median pass time, then name.

    Example: two configurations at 220.00 USD: the one with 0 failures ranks before the one with 1.
    """
    total = config.cost.total_usd
    return (
        total if total is not None else Decimal("Infinity"),
        config.failures,
        len(config.uncertainty),
        config.relative_spread if config.relative_spread is not None else float("inf"),
        config.median_pass_s if config.median_pass_s is not None else float("inf"),
        config.configuration_id,
    )


def really_faster(a: Configuration, b: Configuration) -> bool:
    """True when every accepted pass of ``a`` was faster than every accepted pass of ``b``.

    The spreads say the difference is real only when the pass-time ranges do not overlap.
    """
    return a.max_pass_s is not None and b.min_pass_s is not None and a.max_pass_s < b.min_pass_s


def break_cost_ties(ranked: list[Configuration]) -> list[Configuration]:
    """Among configurations that cost the same whole plan (and fail as often), a really faster one ranks
    first: a shorter job is what the user pays for next, not a smaller spread. Where the spreads overlap,
    the ``rank_key`` order stands.

    Example: at 220.00 USD each, pass times 5–7 s rank before 10.0–10.2 s despite the larger spread.
    """
    ordered = list(ranked)
    for i in range(len(ordered)):
        best = i
        for j in range(i + 1, len(ordered)):
            a, b = ordered[j], ordered[best]
            if a.cost.total_usd == b.cost.total_usd and a.failures == b.failures and really_faster(a, b):
                best = j
        ordered.insert(i, ordered.pop(best))
    return ordered


def parse_ledger(text: str, path: str) -> Ledger:
    """Read an expenses ledger CSV: ``date,description,amount_usd,evidence`` (one expense a line).

    Amounts are decimal USD (a credit may be negative); every line needs its evidence.

    Example: ``parse_ledger("date,description,amount_usd,evidence\\n2026-09-30,storage,12.50,inv 17\\n",
    "ledger.csv").expenses[0].amount_usd == Decimal("12.50")``.
    """
    try:
        reader = csv.reader(io.StringIO(text))
        numbered = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise UserError(f"expenses ledger is not valid CSV: {exc}", path) from None
    expected = f"The first line must be exactly: {','.join(LEDGER_COLUMNS)}."
    if not numbered:
        raise UserError("expenses ledger is empty", path, expected)
    header_line, header = numbered[0]
    columns = tuple(cell.strip() for cell in header)
    if columns != LEDGER_COLUMNS:
        raise UserError(f"expenses ledger header is {','.join(columns)!r}", f"{path}:{header_line}", expected)
    expenses = []
    for line, row in numbered[1:]:
        where = f"{path}:{line}"
        if len(row) != len(LEDGER_COLUMNS):
            raise UserError(f"line has {len(row)} fields, expected {len(LEDGER_COLUMNS)}", where,
                            "Quote a description or evidence that contains commas.")
        day_text, description, amount_text, evidence = (cell.strip() for cell in row)
        try:
            if not _DATE_RE.match(day_text):
                raise ValueError(day_text)
            day = date.fromisoformat(day_text)
        except ValueError:
            raise UserError(f"date is not YYYY-MM-DD: {day_text!r}", where, "Write it like 2026-09-30.") from None
        if not description:
            raise UserError("description is empty", where, "Say what the expense was.")
        if not _AMOUNT_RE.match(amount_text):
            raise UserError(f"amount_usd is not a decimal number: {amount_text!r}", where,
                            "Write USD with a dot and no currency sign or thousands separator, e.g. 1250.00.")
        if not evidence:
            raise UserError("evidence is empty", where,
                            "Every expense needs its evidence (invoice number, receipt file, ledger reference).")
        expenses.append(Expense(day, description, Decimal(amount_text), evidence, line))
    return Ledger(path=path, expenses=tuple(expenses))


# -- the decision ---------------------------------------------------------------------------


def decide(
    campaigns: Sequence[CampaignEvidence],
    study: Any,
    catalog: Catalog,
    ledger: Ledger | None = None,
    *,
    now: datetime | None = None,
) -> Decision:
    """Combine campaigns of ONE study into the decision.

    ``study`` is the frozen :class:`protocol.study.Study` (its ``expected_artifacts``,
    ``deadline`` and ``quality.reference_variant`` are used).

    With a ``[job]`` table in the study, the decision also carries the job's projection, priced under
    every billing option and ranked (:func:`protocol.decision.job_rank.job_decision`); ``now`` (default: the
    clock) refuses a deadline already past.

    Example: ``decide([evidence], study, catalog).chosen == "batch_size=8 on rtx-4090 ×2 lots"``.
    """
    check_same_study(campaigns)
    deadline = getattr(study, "deadline", None)
    window: Window | None = None
    deadline_reason = ""
    if deadline is None:
        deadline_reason = "the study declares no deadline table: no deadline check, no waiting period"
        waiting_h: float | None = None
    else:
        window = access_window(deadline.start, deadline.end, deadline.tz)
        waiting_h = float(deadline.waiting_h)

    labels = _configuration_labels(campaigns)
    results: list[CampaignResult] = []
    configs: list[Configuration] = []
    for evidence in campaigns:
        period = measure_period(evidence.events, evidence.rows, waiting_h)
        no_period = "; ".join(period.empty_reasons.values())
        campaign_cost = plan_cost(catalog, evidence.rental_gpu, evidence.rental_lots, period.needed_h, None,
                                  no_gpu_reason=evidence.rental_empty_reason, no_period_reason=no_period)
        results.append(CampaignResult(
            label=evidence.label, campaign_id=evidence.campaign_id, hardware=evidence.hardware,
            rental_gpu=evidence.rental_gpu, rental_lots=evidence.rental_lots,
            rental_empty_reason=evidence.rental_empty_reason, host=evidence.host, launcher=evidence.launcher,
            attempts=len(evidence.rows), period=period, cost=campaign_cost, notes=evidence.notes,
        ))
        spans = trial_intervals(evidence.events, evidence.rows)
        for variant in evidence.summary.variants:
            configs.append(_configuration(
                evidence, variant, labels[(evidence.campaign_id, variant.variant_id)], period, window,
                deadline_reason, catalog, study.expected_artifacts, spans, no_period,
            ))

    acceptable = break_cost_ties(sorted((c for c in configs if c.acceptable), key=rank_key))
    ranks = {c.configuration_id: i + 1 for i, c in enumerate(acceptable)}
    configs = [_with_rank(c, ranks.get(c.configuration_id)) for c in configs]
    ranked = [c for c in sorted(configs, key=lambda c: ranks.get(c.configuration_id, 10**9)) if c.acceptable]
    chosen = ranked[0] if ranked else None
    first = campaigns[0]
    needed = study.expected_artifacts
    target = (f"{needed} accepted {'corpus' if needed == 1 else 'corpora'} of {first.corpus_inputs} inputs "
              f"(corpus {first.corpus_fingerprint}): every id classified once, quality rule met")
    return Decision(
        study_name=first.study_name,
        study_sha256=first.study_sha256,
        question=str(getattr(study, "question", "")),
        expected_artifacts=study.expected_artifacts,
        corpus_fingerprint=first.corpus_fingerprint,
        corpus_inputs=first.corpus_inputs,
        model_fingerprint=first.model_fingerprint,
        reference_variant=study.quality.reference_variant,
        catalog_path=catalog.path,
        catalog_dates=catalog.dates_text,
        deadline=window,
        deadline_reason=deadline_reason,
        campaigns=tuple(results),
        configurations=tuple(configs),
        ranking=tuple(c.configuration_id for c in ranked),
        chosen=chosen.configuration_id if chosen else None,
        target_load=target,
        why=tuple(_why(chosen, ranked, configs)),
        deadline_note=_deadline_note(chosen, configs, window),
        uncertain=tuple(_uncertain(chosen, configs, results, campaigns, study)),
        ledger=ledger,
        job=None if getattr(study, "job", None) is None else job_decision(
            study.job, configs, campaigns, catalog, window, waiting_h or 0.0, now),
    )


def _configuration_labels(campaigns: Sequence[CampaignEvidence]) -> dict[tuple[str, str], str]:
    labels: dict[tuple[str, str], str] = {}
    hosts: dict[str, str] = {e.campaign_id: e.host for e in campaigns}
    for evidence in campaigns:
        for variant in evidence.summary.variants:
            labels[(evidence.campaign_id, variant.variant_id)] = f"{variant.variant_id} on {evidence.hardware}"
    values = list(labels.values())
    distinct_hosts = len(set(hosts.values())) == len(hosts)
    for key, label in list(labels.items()):
        if values.count(label) > 1:
            # Same variant on the same rented GPU type: name the host, or else the campaign.
            suffix = f"host {hosts[key[0]]}" if distinct_hosts else f"campaign {key[0][:8]}"
            labels[key] = f"{label} [{suffix}]"
    return labels


def _configuration(
    evidence: CampaignEvidence,
    variant: VariantSummary,
    label: str,
    period: CampaignPeriod,
    window: Window | None,
    deadline_reason: str,
    catalog: Catalog,
    expected_artifacts: int,
    spans: dict[str, list[tuple[Any, Any]]],
    no_period: str,
) -> Configuration:
    rows = [r for r in evidence.rows if r.get("variant_id") == variant.variant_id]
    rows.sort(key=lambda r: (_int(r.get("order_index")) or 0, _int(r.get("attempt")) or 0))
    passes = tuple(PassRecord(
        trial_id=str(r.get("trial_id", "")),
        repetition=_int(r.get("repetition")) or 0,
        status=str(r.get("status", "")),
        pass_s=_float(r.get("pass_s")),
        accepted=str(r.get("trial_id", "")) in evidence.accepted_trials,
        peak_rss_bytes=_int(r.get("peak_rss_bytes")),
        peak_allocated_bytes=_int(r.get("peak_allocated_bytes")),
        peak_reserved_bytes=_int(r.get("peak_reserved_bytes")),
        device_used_bytes=_int(r.get("device_used_bytes")),
    ) for r in rows)
    accepted_corpora = {evidence.corpus_content_fingerprint or evidence.corpus_fingerprint} if any(
        p.accepted for p in passes) else set()
    artifacts, artifact_note = count_artifacts(accepted_corpora, expected_artifacts)
    cost = plan_cost(catalog, evidence.rental_gpu, evidence.rental_lots, period.needed_h, artifacts,
                     no_gpu_reason=evidence.rental_empty_reason, no_period_reason=no_period)
    fits, fit_note = deadline_fit(period.needed_h, window, deadline_reason)
    own = [span for p in passes for span in spans.get(p.trial_id, [])]
    failures = sum(1 for p in passes if not p.accepted)
    statuses: dict[str, int] = {}
    for p in passes:
        statuses[p.status] = statuses.get(p.status, 0) + 1
    good = [p.pass_s for p in passes if p.accepted and p.pass_s is not None]
    median = statistics.median(good) if good else None
    spread = (max(good) - min(good)) / median if len(good) >= 2 and median else None
    uncertainty = tuple(w for w in evidence.summary.warnings if _names(w, variant.variant_id))

    exclusions = []
    if variant.equivalent is not True:
        word = "not equivalent to" if variant.equivalent is False else "equivalence unknown against"
        exclusions.append(f"quality: {word} the reference ({variant.equivalence_reason})")
    if artifacts == 0:
        exclusions.append("no accepted corpus: " + _status_text(statuses))
    if cost.total_usd is None:
        exclusions.append("contracted cost unknown: " + cost.empty_reason)
    if fits is False:
        exclusions.append("deadline: " + fit_note)
    return Configuration(
        configuration_id=label,
        variant_id=variant.variant_id,
        campaign_label=evidence.label,
        campaign_id=evidence.campaign_id,
        hardware=evidence.hardware,
        config=dict(variant.config),
        equivalent=variant.equivalent,
        quality_reason=variant.equivalence_reason,
        metric=variant.metric,
        median_metric=variant.median_metric,
        passes=passes,
        median_pass_s=median,
        min_pass_s=min(good) if good else None,
        max_pass_s=max(good) if good else None,
        relative_spread=spread,
        attempts=len(passes),
        accepted_passes=sum(1 for p in passes if p.accepted),
        failures=failures,
        statuses=statuses,
        distinct_accepted_corpora=len(accepted_corpora),
        accepted_artifacts=artifacts,
        expected_artifacts=expected_artifacts,
        artifact_note=artifact_note,
        own_trials_s=merge_intervals(own) if own else None,
        campaign_needed_h=period.needed_h,
        cost=cost,
        deadline_fits=fits,
        deadline_note=fit_note,
        uncertainty=uncertainty,
        memory=_memory(passes, evidence.capacities),
        acceptable=not exclusions,
        exclusions=tuple(exclusions),
    )


def _with_rank(config: Configuration, rank: int | None) -> Configuration:
    data = dict(config.__dict__)
    data["rank"] = rank
    return Configuration(**data)


_COUNTERS = (
    ("host peak RSS", "peak_rss_bytes", "host"),
    ("GPU peak allocated (tensors)", "peak_allocated_bytes", "device"),
    ("GPU peak reserved (allocator)", "peak_reserved_bytes", "device"),
    ("device memory used (NVML/amdsmi)", "device_used_bytes", "device"),
)


def _memory(passes: tuple[PassRecord, ...], capacities: Mapping[str, TrialCapacity]) -> tuple[MemoryCounter, ...]:
    counters = []
    caps = [capacities[p.trial_id] for p in passes if p.trial_id in capacities]
    for name, column, kind in _COUNTERS:
        values = tuple(getattr(p, column) for p in passes)
        known = [v for v in values if v is not None]
        if not known and kind == "device":
            continue  # no GPU counter at all (CPU trial): the raw table holds the reason
        if kind == "host":
            found = [(c.host_memory_bytes, c.host_source) for c in caps if c.host_memory_bytes]
            capacity_name = "host RAM"
            missing = "host RAM not recorded in the trial manifests (no manifest host.memory_total_bytes)"
        else:
            found = [(c.device_total_bytes, c.device_source) for c in caps if c.device_total_bytes]
            capacity_name = "device memory"
            missing = ("device capacity not recorded (status.json memory.device_total_bytes and manifest "
                       "device.gpu_memory_bytes are empty)")
        capacity, source = (max(found)[0], max(found)[1]) if found else (None, "")
        counters.append(MemoryCounter(
            name=name, column=column, values=values, peak_bytes=max(known) if known else None,
            capacity_name=capacity_name, capacity_bytes=capacity, capacity_source=source,
            capacity_reason="" if capacity else missing,
        ))
    return tuple(counters)


def _why(chosen: Configuration | None, ranked: list[Configuration], configs: list[Configuration]) -> list[str]:
    if chosen is None:
        if not configs:
            return ["no configuration: the campaigns hold no variant"]
        lines = ["no configuration is acceptable, so none is chosen:"]
        for config in configs:
            lines.append(f"{config.configuration_id}: {'; '.join(config.exclusions)}")
        return lines + _unpriced_ranking(configs)
    cost = chosen.cost
    assert cost.contracted is not None and cost.total_usd is not None
    plan = cost.contracted.plan
    lines = [
        f"quality: equivalent to the reference ({chosen.quality_reason})",
        f"artifacts: {chosen.artifact_note}; {chosen.accepted_passes} of {chosen.attempts} passes accepted",
        f"contracted plan: {plan.gpu} {plan.plan_days}-day plan, {cost.contracted.lots} lot(s) × "
        f"{format_usd(plan.price_usd_per_lot)} USD = {format_usd(cost.total_usd)} USD (whole plan price, catalog "
        f"{plan.catalog_date})",
        f"deadline: {chosen.deadline_note}",
    ]
    if len(ranked) == 1:
        lines.append("it is the only acceptable configuration")
        return lines
    runner_up = ranked[1]
    a, b = rank_key(chosen), rank_key(runner_up)
    assert runner_up.cost.total_usd is not None
    if a[0] != b[0]:
        lines.append(f"cheapest acceptable: {format_usd(cost.total_usd)} USD against "
                     f"{format_usd(runner_up.cost.total_usd)} USD for the next, {runner_up.configuration_id}")
    else:
        ties = [c.configuration_id for c in ranked[1:] if c.cost.total_usd == cost.total_usd]
        head = (f"ties on contracted cost ({format_usd(cost.total_usd)} USD) with {len(ties)} other "
                f"configuration(s); ranked first by ")
        if a > b:  # moved ahead by break_cost_ties
            lines.append(head + f"a faster median pass ({_sec(chosen.median_pass_s)} against "
                                f"{_sec(runner_up.median_pass_s)} for {runner_up.configuration_id}): every accepted "
                                f"pass took {_sec(chosen.min_pass_s)}–{_sec(chosen.max_pass_s)} against "
                                f"{_sec(runner_up.min_pass_s)}–{_sec(runner_up.max_pass_s)}, so the difference is "
                                "real; the plan price is the same, and a shorter job is what you pay for next")
        elif a[1] != b[1]:
            lines.append(head + f"fewer failed attempts ({chosen.failures} against {runner_up.failures} for "
                                f"{runner_up.configuration_id})")
        elif a[2] != b[2]:
            lines.append(head + f"fewer spread warnings ({len(chosen.uncertainty)} against "
                                f"{len(runner_up.uncertainty)} for {runner_up.configuration_id})")
        elif a[3] != b[3]:
            lines.append(head + f"a smaller relative spread of pass times ({_pct(chosen.relative_spread)} against "
                                f"{_pct(runner_up.relative_spread)} for {runner_up.configuration_id})")
        elif a[4] != b[4]:
            lines.append(head + f"a shorter median pass ({_sec(chosen.median_pass_s)} against "
                                f"{_sec(runner_up.median_pass_s)} for {runner_up.configuration_id}); the pass time "
                                "does not change the contracted cost")
        else:
            lines.append(head + "name only: every ranking criterion ties")
    return lines


def _unpriced_ranking(configs: list[Configuration]) -> list[str]:
    """When only the cost is missing (no rental recorded): rank by measured quality and time, and say what
    is missing for a cost."""
    unpriced = [c for c in configs if c.exclusions
                and all(e.startswith("contracted cost unknown:") for e in c.exclusions)]
    if not unpriced:
        return []
    order = break_cost_ties(sorted(unpriced, key=rank_key))  # the priced ranking, every cost unknown alike
    lines = ["missing for a cost: the rental these campaigns ran under; record it with "
             "`isocost rental DIR --gpu GPU --lots N` (then run decide again)",
             "by measured time and quality alone (no cost), the order would be:"]
    lines += [f"{i}. {c.configuration_id}: median pass {_sec(c.median_pass_s)}, {c.failures} failure(s), "
              f"quality {c.quality_reason}" for i, c in enumerate(order, start=1)]
    return lines


def _deadline_note(chosen: Configuration | None, configs: list[Configuration], window: Window | None) -> str:
    """Say when a faster option wins only because a cheaper one misses the deadline."""
    blocked = [c for c in configs
               if not c.acceptable and c.cost.total_usd is not None
               and all(e.startswith("deadline:") for e in c.exclusions)]
    if not blocked:
        return ""
    cheapest = min(blocked, key=rank_key)
    assert cheapest.cost.total_usd is not None and window is not None and cheapest.campaign_needed_h is not None
    needs = (f"needs {format_hours(cheapest.campaign_needed_h)} h, more than the deadline window's "
             f"{format_hours(window.elapsed_h)} h")
    if chosen is None:
        return (f"no configuration fits the deadline: {cheapest.configuration_id} would be acceptable at "
                f"{format_usd(cheapest.cost.total_usd)} USD, but it {needs}; reschedule, or negotiate the deadline")
    assert chosen.cost.total_usd is not None
    if cheapest.cost.total_usd < chosen.cost.total_usd:
        return (f"{chosen.configuration_id} wins only because of the deadline: {cheapest.configuration_id} would "
                f"cost {format_usd(cheapest.cost.total_usd)} USD instead of {format_usd(chosen.cost.total_usd)} USD, "
                f"but it {needs}; the faster {chosen.configuration_id} fits")
    return ""


def _uncertain(
    chosen: Configuration | None, configs: list[Configuration], results: list[CampaignResult],
    campaigns: Sequence[CampaignEvidence], study: Any,
) -> list[str]:
    lines: list[str] = []
    if chosen is not None:
        lines += [f"{chosen.configuration_id}: {w}" for w in chosen.uncertainty]
        if chosen.accepted_passes < 3:
            lines.append(f"{chosen.configuration_id}: only {chosen.accepted_passes} accepted pass(es); a median of "
                         "fewer than 3 passes says little")
        if chosen.accepted_artifacts < chosen.expected_artifacts:
            lines.append(f"the job needs {chosen.expected_artifacts} corpora; {chosen.artifact_note}")
    for evidence in campaigns:
        ids = [v.variant_id for v in evidence.summary.variants]
        lines += [f"{evidence.label}: {w}" for w in evidence.summary.warnings if not any(_names(w, i) for i in ids)]
        lines += [f"{evidence.label}: {note}" for note in evidence.notes]
    by_campaign = {r.campaign_id: r for r in results}
    for result in by_campaign.values():
        variants = len({c.variant_id for c in configs if c.campaign_id == result.campaign_id})
        if variants > 1 and result.period.needed_h is not None:
            lines.append(
                f"{result.label}: its period ({format_hours(result.period.needed_h)} h needed) measured the whole "
                f"comparison ({result.attempts} passes of {variants} variants): an upper bound for one configuration "
                "run alone, never a forecast of it"
            )
        lines += [f"{result.label}: {note}" for note in result.period.notes]
    unknown = [c.configuration_id for c in configs if c.cost.total_usd is None]
    if unknown:
        lines.append(f"{len(unknown)} configuration(s) have no contracted cost and could not be ranked: "
                     + ", ".join(unknown))
    reference = study.quality.reference_variant
    metrics = {}
    for evidence in campaigns:
        for variant in evidence.summary.variants:
            if variant.variant_id == reference and variant.median_metric is not None:
                metrics[evidence.label] = variant.median_metric
    if len(metrics) > 1:
        lines.append(
            "equivalence is judged within each campaign against that campaign's own run of the reference variant "
            f"{reference}; its median {study.quality.metric} per campaign: "
            + ", ".join(f"{label} {value:.4f}" for label, value in metrics.items())
        )
        if max(metrics.values()) - min(metrics.values()) > study.quality.max_metric_drop:
            lines.append(f"the reference variant's {study.quality.metric} differs between campaigns by more than "
                         f"the tolerance {study.quality.max_metric_drop}: check the hosts' software stacks")
    return lines


def _names(warning: str, variant_id: str) -> bool:
    return (warning.startswith(f"{variant_id}:") or warning.startswith(f"{variant_id} vs ")
            or f" vs {variant_id}:" in warning)


def _status_text(statuses: dict[str, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())) or "no attempt"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _sec(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _money(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


def _float(text: Any) -> float | None:
    return float(text) if text not in ("", None) else None


def _int(text: Any) -> int | None:
    return int(text) if text not in ("", None) else None


def _check(data: dict[str, Any], kind: str) -> None:
    check_schema(data, kind, SCHEMA_VERSION, kind)

