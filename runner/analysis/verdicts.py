"""The validate stage: re-derive every trial's verdict from its stored prediction file.

:func:`derive_verdicts` re-derives them in memory from an opened :class:`~runner.campaign_dir.campaign.Campaign`
(what ``decide``, ``compare`` and ``verify`` use: they write nothing into the campaign); :func:`write_verdicts`
writes ``verdicts.csv`` and ``verdicts.json`` (``validate``, ``summarize`` and ``run`` only). The raw table is
never edited; if a re-derived verdict disagrees with the raw row, the disagreement is reported.

Example::

    verdicts = derive_verdicts(open_campaign(Path("results/quick")))
    [v["corpus_accepted"] for v in verdicts]
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from protocol.io.csvio import csv_writer
from protocol.io.safe_write import write_handle
from protocol.records import codec
from protocol.records.stages import VerdictsRecord
from protocol.study.load import Study
from protocol.tasks import Task, study_task
from runner.campaign.gather import load_reference
from runner.campaign_dir.campaign import Campaign
from runner.campaign_dir.integrity import refuse_less_evidence
from runner.campaign_dir.raw_frame import frame_rows

VERDICT_COLUMNS = (
    "trial_id", "variant_id", "status", "expected_ids", "observed_ids", "ids_match", "duplicate_ids",
    "missing_ids", "unexpected_ids", "format_errors", "metric", "metric_value", "corpus_accepted",
    "agreement", "max_score_delta", "identical_to_reference", "reference_trial", "matches_raw", "reasons",
)


#: The raw columns a verdict is derived beside (the rest comes from the trial's files).
_ROW_COLUMNS = ("trial_id", "variant_id", "status", "corpus_accepted", "ids_match", "order_index", "attempt")


def derive_verdicts(campaign: Campaign, reference: Any = None) -> list[dict[str, Any]]:
    """Re-derive the verdict of every raw row from its prediction file, in memory (nothing is written): the
    frozen study's thresholds, the frozen corpus index as the reference."""
    study = campaign.study
    reference = reference if reference is not None else load_reference(campaign.root, study)
    task = study_task(study)
    parsed: dict[str, Any] = {}
    verdicts: list[dict[str, Any]] = []
    rows = frame_rows(campaign.frame(_ROW_COLUMNS), _ROW_COLUMNS)
    for row in rows:
        outputs = task.read_pass(campaign.trial_dir(row.trial_id))
        parsed[row.trial_id] = outputs
        check = task.check_pass(outputs, reference, study)
        accepted = row.status == "ok" and check.accepted
        reasons = list(check.reasons)
        if row.status != "ok":
            reasons.insert(0, f"status {row.status}")
        raw_accepted = _cell(row.corpus_accepted) == "true"
        verdicts.append({
            "trial_id": row.trial_id,
            "variant_id": row.variant_id,
            "status": row.status,
            **{k: v for k, v in codec.to_dict(check).items() if k not in ("accepted", "reasons")},
            "corpus_accepted": accepted,
            "matches_raw": raw_accepted == accepted and _cell(row.ids_match) == str(check.ids_match).lower(),
            "reasons": "; ".join(reasons),
        })
    _add_agreement(verdicts, parsed, task, study, rows)
    return verdicts


def verdicts_record(campaign: Campaign, verdicts: list[dict[str, Any]], banner: str = "") -> VerdictsRecord:
    """verdicts.json's record of ``verdicts``."""
    return VerdictsRecord(campaign.record.campaign_id, len(verdicts), tuple(verdicts), banner or None)


def verdicts_csv(verdicts: list[dict[str, Any]]) -> str:
    """verdicts.csv's text: one row per verdict, no formula cells."""
    buffer = io.StringIO()
    writer = csv_writer(buffer)  # no formula cells
    writer.writerow(VERDICT_COLUMNS)
    for verdict in verdicts:
        writer.writerow(_cell(verdict.get(k)) for k in VERDICT_COLUMNS)
    return buffer.getvalue()


def write_verdicts(campaign: Campaign, verdicts: list[dict[str, Any]], *, banner: str = "") -> None:
    """Write verdicts.json and verdicts.csv into the campaign (``validate``, ``summarize`` and ``run`` only),
    never replacing files computed from more raw rows."""
    root = campaign.root
    refuse_less_evidence(root / "verdicts.json", len(verdicts), "verdicts")
    codec.write_record(root / "verdicts.json", verdicts_record(campaign, verdicts, banner), root)
    with write_handle(root / "verdicts.csv", root) as handle:
        handle.write(verdicts_csv(verdicts))


def _add_agreement(
    verdicts: list[dict[str, Any]], parsed: dict[str, Any], task: Task, study: Study, rows: Sequence[Any],
) -> None:
    """Compare each accepted pass with its reference variant's first accepted pass (same seed)."""
    order = {r.trial_id: (r.order_index, r.attempt) for r in rows}
    first_accepted: dict[str, str] = {}
    for verdict in sorted(verdicts, key=lambda v: order[v["trial_id"]]):
        if verdict["corpus_accepted"]:
            first_accepted.setdefault(verdict["variant_id"], verdict["trial_id"])
    for verdict in verdicts:
        reference_trial = first_accepted.get(study.reference_for(verdict["variant_id"]))
        verdict["reference_trial"] = reference_trial
        complete = verdict["ids_match"] and not verdict["duplicate_ids"] and not verdict["format_errors"]
        if reference_trial is None or not complete:
            verdict["agreement"] = verdict["max_score_delta"] = verdict["identical_to_reference"] = None
            continue
        agreement = task.agreement(parsed[verdict["trial_id"]], parsed[reference_trial], study)
        if agreement.details:
            verdict["agreement_details"] = agreement.details
        if agreement.failures:
            verdict["agreement_failures"] = list(agreement.failures)
        verdict["agreement"] = agreement.agreement
        verdict["max_score_delta"] = agreement.max_score_delta
        verdict["identical_to_reference"] = agreement.identical


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ""
    return str(value)
