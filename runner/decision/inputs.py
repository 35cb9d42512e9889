"""Reading what ``decide`` weighs: one campaign directory into :class:`CampaignEvidence`, the catalog, the ledger.

:func:`load_evidence` takes an opened :class:`~runner.campaign_dir.campaign.Campaign` (campaign.json, the study
and raw.csv read once, the evidence checks run there), re-derives its verdicts and summary in memory (as
``isocost summarize`` would, writing nothing into the directory), then reads events.jsonl and each trial's status
and manifest. :func:`choose_catalog` and :func:`read_ledger` read the other two inputs of the decision.

Example: ``evidence = load_evidence(open_campaign(Path("results/a")))``; ``evidence.hardware`` reads
``"rtx-4090 ×2 lots"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import Catalog, default_catalog_path
from protocol.costing.trial_files import trial_record
from protocol.decision.evidence import TrialCapacity
from protocol.decision.ledger import parse_ledger
from protocol.decision.rank import CampaignEvidence, Ledger
from protocol.errors import UserError
from protocol.records.codec import to_dict
from protocol.records.manifest import read_manifest
from protocol.records.stages import CampaignRecord, Rental, TrialStatus, read_status
from protocol.study.load import Study
from runner.analysis.summarize import derive_summary
from runner.analysis.verdicts import derive_verdicts, verdicts_record
from runner.campaign_dir.appendlog import require_whole
from runner.campaign_dir.campaign import Campaign
from runner.campaign_dir.fault_hooks import FAULT_HOOK_BANNER
from runner.campaign_dir.layout import FROZEN_CATALOG
from runner.campaign_dir.layout import read_events as read_campaign_events
from runner.campaign_dir.rentals import RENTALS_FILE, read_rentals

#: Keys a trial manifest may use for the host's RAM (MemTotal from /proc/meminfo), first found wins.
HOST_MEMORY_KEYS = ("memory_total_bytes", "mem_total_bytes", "ram_total_bytes", "memory_bytes")


def read_events(path: Path, *, verify: bool = True) -> tuple[dict[str, Any], ...]:
    """The campaign's events (empty when the file is absent), one dict each for the period, every line read as
    an event (:func:`runner.campaign_dir.layout.read_events`) and chained; ``verify=False``
    (``--allow-inconsistent``) reads edited lines as they are, a cut last one left out."""
    events, read = read_campaign_events(path, verify=verify)
    if verify:
        require_whole(read, path, "events.jsonl", "`isocost run STUDY --out DIR --resume` keeps its bytes in "
                      "events.jsonl.partial-N.")
    return tuple(to_dict(event) for event in events)


def trial_capacity(trial_dir: Path, status: TrialStatus | None) -> TrialCapacity:
    """Device and host memory capacities recorded by one trial (its status, read strictly; manifest.json)."""
    device: int | None = None
    device_source = ""
    host: int | None = None
    host_source = ""
    manifest = read_manifest(trial_dir)
    total = status.memory.device_total_bytes if status is not None else None
    if total is not None and total > 0:
        device, device_source = total, "status.json memory.device_total_bytes"
    else:
        total = ((manifest.device if manifest else None) or {}).get("gpu_memory_bytes")
        if isinstance(total, int) and total > 0:
            device, device_source = total, "manifest.json device.gpu_memory_bytes"
    host_facts = manifest.host if manifest else {}
    for key in HOST_MEMORY_KEYS:
        value = host_facts.get(key)
        if isinstance(value, int) and value > 0:
            host, host_source = value, f"manifest.json host.{key}"
            break
    return TrialCapacity(device, device_source, host, host_source)


def load_evidence(campaign: Campaign) -> CampaignEvidence:
    """An opened campaign (:func:`runner.campaign_dir.campaign.open_campaign`: the evidence checks ran there) as
    the evidence ``decide`` weighs: its verdicts and summary re-derived in memory from the stored prediction files,
    never written into the directory. A campaign opened with ``allow_inconsistent`` that failed the checks has
    the banner first among its notes."""
    root, record, study = campaign.root, campaign.record, campaign.study
    verify = not campaign.banner
    verdicts = derive_verdicts(campaign)
    summary, _ = derive_summary(campaign, verdicts)
    rental, notes = _rental(root, record, verify=verify)
    if record.study_sha256 != study.sha256:
        notes.append(f"study.toml in {root} hashes to {study.sha256}, not the {record.study_sha256} "
                     "recorded at the start: the frozen copy was edited")
    trial_ids = [row.trial_id for row in campaign.rows]
    # A status.json that is there but unreadable is refused by name, never read as an empty status.
    statuses = {trial_id: read_status(campaign.trial_dir(trial_id)) for trial_id in trial_ids}
    return CampaignEvidence(
        label=str(root),
        campaign_id=record.campaign_id,
        study_name=record.study_name or study.name,
        study_sha256=record.study_sha256,
        corpus_fingerprint=record.corpus.fingerprint if record.corpus else "",
        corpus_content_fingerprint=(record.corpus.content_fingerprint or "") if record.corpus else "",
        corpus_inputs=record.corpus_inputs,
        model_fingerprint=record.model.fingerprint if record.model else "",
        rental_gpu=str(rental.gpu) if rental else None,
        rental_lots=int(rental.lots) if rental else None,
        rental_empty_reason="" if rental else str(
            record.empty_reasons.get("rental")
            or "campaign.json records no rental (campaign started before `isocost run --gpu` existed)"
        ),
        # A multi-host campaign names the rented host; a local one, the machine that ran the CLI.
        host=str(record.launcher.get("host_name") or (record.host.hostname if record.host else "unknown host")),
        launcher=str(record.launcher.get("kind", "unknown launcher")),
        rows=campaign.rows,
        events=read_events(campaign.paths.events, verify=verify),
        summary=summary,
        accepted_trials=verdicts_record(campaign, verdicts).accepted_trials,
        capacities={trial_id: trial_capacity(campaign.trial_dir(trial_id), statuses[trial_id])
                    for trial_id in trial_ids},
        notes=tuple(w for w in summary.warnings if w.startswith(FAULT_HOOK_BANNER))
        + tuple([campaign.banner] if campaign.banner else []) + tuple(notes),
        trials={trial_id: trial_record(campaign.trial_dir(trial_id), statuses[trial_id]) for trial_id in trial_ids},
    )


def _rental(root: Path, record: CampaignRecord, verify: bool = True) -> tuple[Rental | None, list[str]]:
    """The rental weighed: the latest `isocost rental` record wins over the rental given to `run`."""
    recorded = read_rentals(root, verify=verify)
    if not recorded:
        return record.rental, []
    latest = recorded[-1]
    return Rental(latest.gpu, latest.lots), [
        f"rental {latest.gpu} ×{latest.lots} lot(s) recorded at {latest.recorded_at} with "
        f"`isocost rental` ({RENTALS_FILE}, latest of {len(recorded)})"]


def choose_catalog(catalog_path: Path | None, study: Study, record: CampaignRecord) -> tuple[Catalog, str]:
    """``--catalog`` wins; else the study's ``[costing] catalog``; else the shipped dated snapshot."""
    if catalog_path is not None:
        return load_catalog(catalog_path), f"--catalog {catalog_path}"
    frozen = study.path.parent / FROZEN_CATALOG  # copied into the campaign directory when it started
    if frozen.exists():
        origin = record.catalog.source if record.catalog else "unknown origin"
        return load_catalog(frozen), f"the catalog frozen at campaign start ({frozen}, from {origin})"
    if record.catalog is not None:
        raise UserError(
            f"the catalog frozen at the start is missing (campaign.json records {record.catalog.sha256}, from "
            f"{record.catalog.source})", str(frozen),
            "Restore catalog.csv from a backup or bundle, or price with another dated catalog on purpose: "
            "--catalog FILE (the memo then names it).")
    costing = getattr(study, "costing", None)
    declared = getattr(costing, "catalog", None) if costing is not None else None
    if declared is None:
        return load_catalog(default_catalog_path()), "the dated snapshot shipped with isocost"
    declared = Path(declared)
    candidates = [declared]
    # The frozen study.toml sits in the results directory; a relative catalog path was written
    # relative to the ORIGINAL study file, so look there too.
    frozen_dir = study.path.parent
    original = record.study_path
    if original:
        candidates.append(Path(os.path.normpath(Path(original).parent / os.path.relpath(declared, frozen_dir))))
    for candidate in candidates:
        if candidate.exists():
            return load_catalog(candidate), f"the study's [costing] catalog ({candidate})"
    raise UserError(
        "the catalog named by the study's [costing] table is not found",
        ", ".join(str(c) for c in candidates),
        "Pass the dated catalog with --catalog FILE.",
    )


def read_ledger(path: Path) -> Ledger:
    """Read ``--expenses FILE``."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserError("expenses ledger not found", str(path), "Check the path given with --expenses.") from None
    except UnicodeDecodeError:
        raise UserError("expenses ledger is not UTF-8 text", str(path), "Save it as UTF-8 CSV.") from None
    return parse_ledger(text, str(path))
