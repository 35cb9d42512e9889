"""The deep checks of one trial directory against its raw row and campaign.json.

``spec.json``, ``status.json`` and ``manifest.json`` must name the same trial, variant, campaign and
inputs as the row and campaign.json; ``predictions.jsonl``, validated again, must give the row's
ids and verdict. Each difference is a :class:`~runner.campaign_dir.findings.Discrepancy`.

Example::

    TrialChecks(findings, campaign, study, reference).check(row, number=1)
"""

from __future__ import annotations

from typing import Any

from protocol.records.manifest import Manifest
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord, InputFacts, TrialSpec, TrialStatus, csv_cell
from protocol.study.load import Study
from protocol.tasks import study_task
from runner.campaign_dir.findings import Findings

#: The note a row carries when its trial wrote no status.json (see runner.campaign.gather).
STATUS_MISSING_NOTE = "the trial wrote no status.json"
_HOST_OVERRIDES = {"timeout", "oom"}  # outside evidence the host records over any trial status


def _fingerprint(facts: InputFacts | None) -> str | None:
    return facts.fingerprint if facts is not None else None


class TrialChecks:
    """Checks each row's trial directory; ``study`` and ``reference`` None: predictions are not re-derived."""

    def __init__(self, findings: Findings, campaign: CampaignRecord, study: Study | None, reference: Any) -> None:
        self.findings = findings
        self.campaign = campaign
        self.study = study
        self.reference = reference

    def check(self, row: RawRecord, number: int) -> None:
        add = self.findings.add
        where = f"row {number} ({row.trial_id})"
        base = f"trials/{row.trial_id}/"
        trial_dir = self.findings.root / "trials" / row.trial_id
        if not trial_dir.is_dir():
            add(base, "presence", f"raw.csv {where} names this trial, its directory is missing")
            return
        spec = self.findings.record(base + "spec.json", TrialSpec, "a trial spec")
        if spec is not None:
            self._spec(row, where, base, spec)
        if not (trial_dir / "status.json").is_file():
            if STATUS_MISSING_NOTE not in row.notes:
                add(base + "status.json", "presence", f"missing, and raw.csv {where} does not say the trial wrote none")
        else:
            self._status_file(row, where, base)
        if (trial_dir / "manifest.json").is_file():
            manifest = self.findings.record(base + "manifest.json", Manifest)
            if manifest is not None:
                self._manifest(row, base, manifest)
        if self.study is not None and self.reference is not None:
            self._predictions(row, where, base, self.study, self.reference)

    def _status_file(self, row: RawRecord, where: str, base: str) -> None:
        add = self.findings.add
        if STATUS_MISSING_NOTE in row.notes:
            add(base + "status.json", "presence", f"present, but raw.csv {where} says the trial wrote none")
        status = self.findings.record(base + "status.json", TrialStatus, "a trial status")
        if status is not None:
            self._status(row, where, base, status)
        if not (self.findings.root / base / "manifest.json").is_file():
            add(base + "manifest.json", "presence", "missing (the trial writes it before its status)")

    def _spec(self, row: RawRecord, where: str, base: str, spec: TrialSpec) -> None:
        campaign = self.campaign
        expected: dict[str, tuple[Any, Any, str]] = {
            "trial_id": (spec.trial_id, row.trial_id, "raw.csv"),
            "variant.variant_id": (spec.variant.variant_id, row.variant_id, "raw.csv"),
            "repetition": (str(spec.repetition), row.cell("repetition"), "raw.csv"),
            "order_index": (str(spec.order_index), row.cell("order_index"), "raw.csv"),
            "attempt": (str(spec.attempt), row.cell("attempt"), "raw.csv"),
            "launcher": (spec.launcher, row.launcher, "raw.csv"),
            "campaign_id": (spec.campaign_id, campaign.campaign_id, "campaign.json"),
            "study_sha256": (spec.study_sha256, campaign.study_sha256, "campaign.json"),
            "corpus_fingerprint": (spec.corpus_fingerprint, _fingerprint(campaign.corpus),
                                   "campaign.json corpus.fingerprint"),
            "model_fingerprint": (spec.model_fingerprint, _fingerprint(campaign.model),
                                  "campaign.json model.fingerprint"),
        }
        for key, value in spec.variant.config().items():
            expected[f"variant.{key}"] = (csv_cell(value), row.cell(key), "raw.csv")
        if spec.image_id and row.image_id:
            expected["image_id"] = (spec.image_id, row.image_id, "raw.csv")
        for key, (ours, theirs, source) in expected.items():
            if ours != theirs:
                said_by = f"raw.csv {where}" if source == "raw.csv" else source
                self.findings.add(base + "spec.json", key, f"{ours!r}, {said_by} says {theirs!r}")

    def _status(self, row: RawRecord, where: str, base: str, status: TrialStatus) -> None:
        add = self.findings.add
        if status.trial_id != row.trial_id:
            add(base + "status.json", "trial_id", f"{status.trial_id!r}, raw.csv {where} says {row.trial_id!r}")
        final = row.status
        allowed = final == status.status or final in _HOST_OVERRIDES or (final == "error" and status.status == "ok")
        if not allowed:
            add(base + "status.json", "status",
                f"{status.status!r}, raw.csv {where} says {final!r} (the host only overrides with "
                "timeout, oom, or error for a non-zero exit)")
        if str(status.completed) != row.cell("completed"):
            add(base + "status.json", "completed",
                f"{status.completed}, raw.csv {where} column completed says {row.cell('completed')}")

    def _manifest(self, row: RawRecord, base: str, manifest: Manifest) -> None:
        campaign = self.campaign
        expected: dict[str, tuple[Any, Any, str]] = {
            "trial_id": (manifest.trial_id, row.trial_id, "raw.csv"),
            "variant.variant_id": (manifest.variant.variant_id, row.variant_id, "raw.csv"),
            "campaign_id": (manifest.campaign_id, campaign.campaign_id, "campaign.json"),
            "study_sha256": (manifest.study_sha256, campaign.study_sha256, "campaign.json"),
            "corpus_fingerprint": (manifest.corpus_fingerprint, _fingerprint(campaign.corpus), "campaign.json"),
            "model_fingerprint": (manifest.model_fingerprint, _fingerprint(campaign.model), "campaign.json"),
        }
        for key in ("repetition", "order_index", "attempt"):
            expected[key] = (csv_cell(getattr(manifest, key)), row.cell(key), "raw.csv")
        for key, (ours, theirs, source) in expected.items():
            if ours != theirs:
                said_by = f"raw.csv row of {row.trial_id}" if source == "raw.csv" else source
                self.findings.add(base + "manifest.json", key, f"{ours!r}, {said_by} says {theirs!r}")

    def _predictions(self, row: RawRecord, where: str, base: str, study: Study, reference: Any) -> None:
        task = study_task(study)
        try:
            outputs = task.read_pass(self.findings.root / "trials" / row.trial_id)
        except (ValueError, OverflowError, RecursionError) as exc:  # the readers describe problems; defence in depth
            self.findings.add(base + task.output_files[0], "content", f"unparseable ({type(exc).__name__})")
            return
        check = task.check_pass(outputs, reference, study)
        derived = {
            "observed_ids": str(check.observed_ids),
            "expected_ids": str(check.expected_ids),
            "ids_match": csv_cell(check.ids_match),
            "corpus_accepted": csv_cell(row.status == "ok" and check.accepted),
            "metric_value": csv_cell(check.metric_value),
        }
        for key, value in derived.items():
            if row.cell(key) != value:
                self.findings.add(base + task.output_files[0], key, f"re-derived {value!r} from the file, raw.csv "
                                  f"{where} column {key} says {row.cell(key)!r}")
