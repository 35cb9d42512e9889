"""What the decision reads from each campaign directory, and the rule that they come from one study.

:class:`CampaignEvidence` is everything :func:`protocol.decision.rank.decide`
needs from one campaign (raw rows, events, summary, rental, capacities),
already read from its files by the host side; :func:`check_same_study`
refuses to combine campaigns of different studies, corpora or models.

Example: ``check_same_study([a, b])`` raises ``UserError`` when ``a`` and ``b`` ran different study files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import UserError
from protocol.records.raw_record import RawRecord
from protocol.records.summary import Summary

if TYPE_CHECKING:
    from protocol.costing.trial_files import TrialRecord


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

    ``rows`` are raw.csv's rows in file order (typed :class:`protocol.records.raw_record.RawRecord`), ``events``
    the parsed lines of events.jsonl, ``summary`` the per-variant summary (re-derived verdicts),
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
    rows: tuple[RawRecord, ...]
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


def check_same_study(campaigns: Sequence[CampaignEvidence], command: str = "decide") -> None:
    """Refuse to combine campaigns of different studies, naming every difference (``command``: the isocost
    command that combines them, named in the error).

    Example: two campaigns whose study sha256 differ raise ``UserError("results come from different
    studies: study sha256 differs …")``.
    """
    if not campaigns:
        raise UserError(f"no campaign to {command}", f"isocost {command}", "Pass at least one results directory.")
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
            f"isocost {command} compares configurations of ONE study (same study file, corpus and model): pass "
            f"only results directories of that study, or run {command} on each study separately.",
        )
    ids = [c.campaign_id for c in campaigns]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        labels = [c.label for c in campaigns if c.campaign_id == repeated[0]]
        raise UserError(
            f"campaign {repeated[0]} is given twice ({', '.join(labels)})",
            f"isocost {command}",
            "Pass each results directory once; a copy of a campaign is not a second campaign.",
        )


def names_variant(warning: str, variant_id: str) -> bool:
    """Does a summary warning name this variant (``"v1: …"``, ``"v1 vs v2: …"``, ``"v2 vs v1: …"``)?

    Example: ``names_variant("threads=4 vs threads=1: spread …", "threads=1")`` is True.
    """
    return (warning.startswith(f"{variant_id}:") or warning.startswith(f"{variant_id} vs ")
            or f" vs {variant_id}:" in warning)
