"""The validate stage: re-derive every trial's verdict from its stored prediction file.

Writes ``verdicts.csv`` and ``verdicts.json``. The raw table is never edited;
if a re-derived verdict disagrees with the raw row, the disagreement is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from protocol import codec
from protocol.csvio import csv_writer
from protocol.records import CampaignRecord, VerdictsRecord
from protocol.safe_write import write_handle
from protocol.study import Study, load_study
from protocol.tasks import Task, study_task
from runner.campaign.gather import load_reference
from runner.campaign_dir.integrity import refuse_less_evidence, require_evidence
from runner.campaign_dir.layout import CampaignPaths, load_record
from runner.campaign_dir.raw_frame import frame_rows, read_frame

VERDICT_COLUMNS = (
    "trial_id", "variant_id", "status", "expected_ids", "observed_ids", "ids_match", "duplicate_ids",
    "missing_ids", "unexpected_ids", "format_errors", "metric", "metric_value", "corpus_accepted",
    "agreement", "max_score_delta", "identical_to_reference", "reference_trial", "matches_raw", "reasons",
)


def validate_campaign(root: Path, *, allow_inconsistent: bool = False, checked: bool = False) -> list[dict[str, Any]]:
    """Re-derive every verdict; ``checked``: the caller already ran the evidence checks."""
    paths = CampaignPaths(root)
    campaign = load_record(root)
    banner = "" if checked else require_evidence(root, allow_inconsistent)
    study = load_study(paths.study)  # the frozen copy: thresholds as they were at the start
    reference = load_reference(root, study)
    frame = read_frame(paths.raw, allow_inconsistent=allow_inconsistent)
    return write_verdicts(root, campaign, study, frame, banner=banner, reference=reference)


def write_verdicts(
    root: Path, campaign: CampaignRecord, study: Study, frame: pd.DataFrame, *, banner: str = "",
    reference: Any = None,
) -> list[dict[str, Any]]:
    """Re-derive the verdict of every row of the raw table's frame (:func:`read_frame`) from its prediction file
    and write verdicts.json and verdicts.csv (what ``summarize`` calls with the campaign, study and table it has
    read already)."""
    reference = reference if reference is not None else load_reference(root, study)
    refuse_less_evidence(root / "verdicts.json", len(frame), "verdicts")
    paths = CampaignPaths(root)
    task = study_task(study)
    parsed: dict[str, Any] = {}
    verdicts: list[dict[str, Any]] = []
    rows = frame_rows(frame, ("trial_id", "variant_id", "status", "corpus_accepted", "ids_match", "order_index",
                              "attempt"))
    for row in rows:
        outputs = task.read_pass(paths.trial_dir(row.trial_id))
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
    record = VerdictsRecord(campaign.campaign_id, len(rows), tuple(verdicts), banner or None)
    codec.write_record(root / "verdicts.json", record, root)
    with write_handle(root / "verdicts.csv", root) as handle:
        writer = csv_writer(handle)  # no formula cells
        writer.writerow(VERDICT_COLUMNS)
        for verdict in verdicts:
            writer.writerow(_cell(verdict.get(k)) for k in VERDICT_COLUMNS)
    return verdicts


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
