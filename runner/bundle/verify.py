"""Verify a bundle without trusting it: every hash, nothing missing or extra, a consistent campaign.

:func:`verify_bundle` reads the archive through :mod:`protocol.io.safe_extract` (limits, no
links, no escapes) into a temporary folder, then checks three things and reports every
discrepancy by file and field in a :class:`~runner.bundle.records.VerifyReport`:

1. the listing: each member's size and sha256 against ``BUNDLE.json``, nothing unlisted;
2. the campaign's own consistency (the deep checks of :func:`runner.campaign_dir.campaign.inspect_campaign`, which
   reads raw.csv once: the checks, BUNDLE.json's claims and the re-derivation all use that one read);
3. ``BUNDLE.json``'s claims against the campaign: ids, trials, unfinished slots, input fingerprints;
4. the derived files (verdicts, summary, and the decision where a ``decision_check`` is given) against the ones
   re-derived from the sealed evidence (:mod:`runner.analysis.rederive`, :mod:`runner.decision.redecide`): the
   first that disagrees is named. The memory estimates are re-derived from the model bundled with
   ``--include-inputs`` or found at the recorded path; where neither is there the report carries a caveat that
   names them as not re-derived (never a silent pass).

It never raises on a malformed archive: a report with ``ok=False`` names what is wrong.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from protocol.errors import UserError
from protocol.io.safe_extract import DEFAULT_LIMITS, ArchiveError, ExtractLimits, FileDigest, read_archive
from protocol.records.codec import read_record
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord
from protocol.study.schedule import Slot
from runner.analysis.rederive import derived_findings, estimate_caveat, estimate_model
from runner.bundle.records import (
    CAMPAIGN_PREFIX,
    INPUT_KINDS,
    MANIFEST_NAME,
    BundleManifest,
    FileEntry,
    InputRecord,
    VerifyReport,
    campaign_input,
    input_archive_path,
    tree_fingerprint,
)
from runner.campaign_dir.campaign import Campaign, Inspection, inspect_campaign
from runner.campaign_dir.findings import MALFORMED, Discrepancy
from runner.campaign_dir.slots import planned_slots, unfinished_slots

#: A check of the decision files of an extracted bundle's campaign (the opened campaign, the bundle root, the name
#: prefix): :func:`runner.decision.redecide.decision_findings`, handed in by the commands (``verify``, ``replay``).
DecisionCheck = Callable[[Campaign, Path, str], list[Discrepancy]]

#: Where an included model lives in the archive (extracted so the memory estimates can be re-derived from it).
_MODEL = input_archive_path("model", Path("model")) + "/"


def verify_bundle(path: Path, limits: ExtractLimits = DEFAULT_LIMITS, *,
                  decision_check: DecisionCheck | None = None) -> VerifyReport:
    """Check a bundle without trusting it: hashes, completeness, internal consistency, then the derived files
    re-derived from the sealed evidence (verdicts, summary; the decision with ``decision_check``)."""
    shown = str(path)
    with tempfile.TemporaryDirectory(prefix="isocost-verify-") as tmp:
        work = Path(tmp)
        try:
            digests = read_archive(path, dest=work, limits=limits, select=lambda n: n == MANIFEST_NAME
                                   or n.startswith((CAMPAIGN_PREFIX, "catalog/", _MODEL)))
        except ArchiveError as exc:
            return _failed(shown, Discrepancy(exc.where or shown, "archive", exc.what))
        if MANIFEST_NAME not in digests:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "presence", "missing: this is not an isocost bundle"))
        try:
            manifest = read_record(work / MANIFEST_NAME, BundleManifest)
        except UserError as exc:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "content", exc.what))
        except (ValueError, RecursionError) as exc:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "content", f"unreadable JSON ({type(exc).__name__})"))
        problems = _check_listing(manifest, digests)
        inspection = inspect_campaign(work / "campaign", CAMPAIGN_PREFIX)  # raw.csv read once, for all below
        problems += inspection.problems
        problems += _check_manifest(manifest, digests, inspection)
        caveats: list[str] = []
        if not problems:  # the evidence holds (and a bundled model has its fingerprint): derived files must follow
            problems += _derived(work, inspection.campaign, decision_check, caveats)
    return VerifyReport(
        bundle=shown,
        ok=not problems,
        discrepancies=tuple(problems),
        files_checked=len(digests),
        bytes_checked=sum(d.size_bytes for d in digests.values()),
        campaign_id=manifest.campaign_id,
        study_sha256=manifest.study_sha256,
        trials=len(manifest.trials),
        inputs_included=tuple(i.kind for i in manifest.inputs if i.included),
        caveats=tuple(caveats),
    )


def _derived(work: Path, campaign: Campaign | None, decision_check: DecisionCheck | None,
             caveats: list[str]) -> list[Discrepancy]:
    """The derived files of the extracted campaign (opened once, by :func:`inspect_campaign`) re-derived from its
    evidence; what could not be re-derived is added to ``caveats``."""
    if campaign is None:  # the campaign checks passed: only a study or table that cannot be parsed is left
        return [Discrepancy(CAMPAIGN_PREFIX + "campaign.json", "content",
                            "the consistent campaign cannot be opened (its study or raw.csv cannot be parsed)")]
    model_dir = estimate_model(campaign, work / _MODEL.rstrip("/"))
    if model_dir is None:
        caveats.append(estimate_caveat(campaign, CAMPAIGN_PREFIX))
    problems = derived_findings(campaign, CAMPAIGN_PREFIX, model_dir)
    if decision_check is not None:
        problems += decision_check(campaign, work, CAMPAIGN_PREFIX)
    return problems


def _failed(bundle: str, problem: Discrepancy) -> VerifyReport:
    """A report for a bundle that could not be read far enough to check anything else."""
    return VerifyReport(bundle=bundle, ok=False, discrepancies=(problem,), files_checked=0, bytes_checked=0,
                        campaign_id="", study_sha256="", trials=0, inputs_included=())


def _check_listing(manifest: BundleManifest, digests: dict[str, FileDigest]) -> list[Discrepancy]:
    """Each archive member against its BUNDLE.json entry: listed once, present, same size and sha256."""
    problems: list[Discrepancy] = []
    listed: dict[str, FileEntry] = {}
    for listed_entry in manifest.files:
        if listed_entry.path == MANIFEST_NAME:
            problems.append(Discrepancy(MANIFEST_NAME, "files", "BUNDLE.json lists itself"))
        elif listed_entry.path in listed:
            problems.append(Discrepancy(MANIFEST_NAME, "files", f"{listed_entry.path!r} is listed twice"))
        listed[listed_entry.path] = listed_entry
    for name in sorted((set(listed) | set(digests)) - {MANIFEST_NAME}):
        entry, digest = listed.get(name), digests.get(name)
        if entry is None:
            problems.append(Discrepancy(name, "presence", "in the archive but not listed in BUNDLE.json"))
        elif digest is None:
            problems.append(Discrepancy(name, "presence", "listed in BUNDLE.json but missing from the archive"))
        elif digest.size_bytes != entry.size_bytes:
            problems.append(Discrepancy(name, "size_bytes",
                                        f"{digest.size_bytes} in the archive, BUNDLE.json says {entry.size_bytes}"))
        elif digest.sha256 != entry.sha256:
            problems.append(Discrepancy(name, "sha256",
                                        f"{digest.sha256} in the archive, BUNDLE.json says {entry.sha256}"))
    return problems


def _check_manifest(manifest: BundleManifest, digests: dict[str, FileDigest], inspection: Inspection) \
        -> list[Discrepancy]:
    """BUNDLE.json's claims against the bundled campaign (as :func:`inspect_campaign` read it, rows as they are:
    the campaign checks name breaks): ids, trials, unfinished slots, inputs."""
    problems: list[Discrepancy] = []
    if inspection.record is None or inspection.rows is None:
        return problems  # named by the campaign checks
    try:
        slots = planned_slots(inspection.record)
        _compare_campaign(manifest, inspection.record, list(inspection.rows), slots, problems)
        _compare_inputs(manifest, digests, inspection.record, problems)
    except (*MALFORMED, OSError):
        pass  # malformed campaign files are already named by the campaign checks
    return problems


def _compare_campaign(
    manifest: BundleManifest, campaign: CampaignRecord, rows: list[RawRecord], slots: tuple[Slot, ...],
    problems: list[Discrepancy],
) -> None:
    def add(field_name: str, message: str) -> None:
        problems.append(Discrepancy(MANIFEST_NAME, field_name, message))

    for key in ("campaign_id", "study_sha256"):
        if getattr(manifest, key) != getattr(campaign, key):
            add(key, f"{getattr(manifest, key)!r}, campaign/campaign.json says {getattr(campaign, key)!r}")
    trial_ids = tuple(sorted(row.trial_id for row in rows))
    if manifest.trials != trial_ids:
        add("trials", f"{len(manifest.trials)} trial id(s) that differ from campaign/raw.csv's {len(trial_ids)}")
    unfinished = tuple(unfinished_slots(rows, slots))
    if manifest.unfinished_slots != unfinished:
        add("unfinished_slots", f"{list(manifest.unfinished_slots)}, campaign/raw.csv and schedule.csv give "
                                f"{list(unfinished)}")


def _compare_inputs(
    manifest: BundleManifest, digests: dict[str, FileDigest], campaign: CampaignRecord,
    problems: list[Discrepancy],
) -> None:
    def add(field_name: str, message: str) -> None:
        problems.append(Discrepancy(MANIFEST_NAME, field_name, message))

    kinds = [record.kind for record in manifest.inputs]
    if sorted(kinds) != sorted(INPUT_KINDS):
        add("inputs", f"kinds {kinds}, expected one each of {list(INPUT_KINDS)}")
    for record in manifest.inputs:
        facts = campaign_input(campaign, record.kind)
        campaign_fp = facts.fingerprint if facts is not None else None
        if record.fingerprint != campaign_fp:
            add(f"inputs.{record.kind}.fingerprint", f"{record.fingerprint}, campaign.json says {campaign_fp}")
        expected_path = input_archive_path(record.kind, Path(facts.path if facts is not None else "")) \
            if record.included else ""
        if record.archive_path != expected_path:
            add(f"inputs.{record.kind}.archive_path", f"{record.archive_path!r}, expected {expected_path!r}")
            continue
        if not record.included:
            continue
        actual = _bundled_fingerprint(record, digests)
        if actual != record.fingerprint:
            add(f"inputs.{record.kind}", f"the bundled {record.kind} fingerprints to {actual}, "
                                         f"the campaign ran with {record.fingerprint}")


def _bundled_fingerprint(record: InputRecord, digests: dict[str, FileDigest]) -> str:
    """The fingerprint of an included input, from the archive's own hashes."""
    if record.kind == "model":
        prefix = record.archive_path + "/"
        pairs = [(n[len(prefix):], d.sha256) for n, d in digests.items() if n.startswith(prefix)]
        return tree_fingerprint(pairs)
    digest = digests.get(record.archive_path)
    return digest.sha256 if digest is not None else "(missing)"
