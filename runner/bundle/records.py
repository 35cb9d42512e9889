"""What a bundle says about itself: ``BUNDLE.json``, the verification report, the replay report.

Frozen records with explicit ``to_dict``/``from_dict`` (``BundleManifest`` rejects an unknown
``schema_version`` with a message that says what to do), the archive's fixed names
(``BUNDLE.json``, ``campaign/``, ``inputs/``) and the small helpers packing, verifying and
replaying share: where an included input lives in the archive, the campaign's facts for one
input kind, and a model directory's fingerprint from its per-file hashes.
:mod:`runner.bundle.pack` writes these records; :mod:`runner.bundle.verify` and
:mod:`runner.bundle.replay` read them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.fingerprint import sha256_bytes
from protocol.records import CampaignRecord, InputFacts
from runner.campaign_dir.findings import Discrepancy

#: BUNDLE.json format. History: 1 (0.1.0): first version.
BUNDLE_SCHEMA_VERSION = 1
#: replay.json format. History: 1 (0.1.0): first version; 2: each trial's ``outputs_sha256`` (the replayed output
#: files, ``name=sha256;…``), checked when ``isocost compare`` or ``decide`` read the replay.
REPLAY_SCHEMA_VERSION = 2

#: The bundle's own manifest, at the archive's top level.
MANIFEST_NAME = "BUNDLE.json"
#: The campaign directory's files live under this archive folder.
CAMPAIGN_PREFIX = "campaign/"
#: Included inputs (``--include-inputs``) live under this archive folder.
INPUTS_PREFIX = "inputs/"
#: The study's inputs a bundle records, each exactly once.
INPUT_KINDS = ("corpus", "tuning", "model")

#: Receives one line per step of a long operation (the CLI prints them on stderr).
Progress = Callable[[str], None]


def quiet(message: str) -> None:
    """A :data:`Progress` that says nothing (the library default)."""
    return None


def creation_time() -> str:
    """Now, or ``SOURCE_DATE_EPOCH`` when set (reproducible bundles)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC).isoformat(timespec="seconds")
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class FileEntry:
    """One file of the bundle (or of an input), by its path inside the archive."""

    path: str
    sha256: str
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size_bytes": self.size_bytes}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileEntry:
        return cls(path=str(data["path"]), sha256=str(data["sha256"]), size_bytes=int(data["size_bytes"]))


@dataclass(frozen=True)
class InputRecord:
    """One input of the study: where it was, its fingerprint, and whether its bytes are in the bundle."""

    kind: str  # corpus | tuning | model
    original_path: str
    fingerprint: str
    included: bool
    archive_path: str  # "" when not included
    files: tuple[FileEntry, ...]  # relative to the input (a model's files); empty with a reason if unknown
    empty_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "original_path": self.original_path,
            "fingerprint": self.fingerprint,
            "included": self.included,
            "archive_path": self.archive_path,
            "files": [f.to_dict() for f in self.files],
            "empty_reason": self.empty_reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputRecord:
        return cls(
            kind=str(data["kind"]),
            original_path=str(data["original_path"]),
            fingerprint=str(data["fingerprint"]),
            included=bool(data["included"]),
            archive_path=str(data["archive_path"]),
            files=tuple(FileEntry.from_dict(f) for f in data["files"]),
            empty_reason=str(data.get("empty_reason", "")),
        )


@dataclass(frozen=True)
class BundleManifest:
    """``BUNDLE.json``: what the bundle holds and the facts to match it against the rental ledger."""

    campaign_id: str
    study_name: str
    study_sha256: str
    created_at: str
    isocost_version: str
    ledger: dict[str, Any]
    inputs: tuple[InputRecord, ...]
    trials: tuple[str, ...]
    unfinished_slots: tuple[str, ...]
    catalog: str  # archive path of the catalog snapshot, "" if unavailable (see empty_reasons)
    images_lock: str  # archive path of images.lock, "" if none
    files: tuple[FileEntry, ...]
    empty_reasons: dict[str, str] = field(default_factory=dict)
    schema_version: int = BUNDLE_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "campaign_id": self.campaign_id,
            "study_name": self.study_name,
            "study_sha256": self.study_sha256,
            "created_at": self.created_at,
            "isocost_version": self.isocost_version,
            "ledger": self.ledger,
            "inputs": [i.to_dict() for i in self.inputs],
            "trials": list(self.trials),
            "unfinished_slots": list(self.unfinished_slots),
            "catalog": self.catalog,
            "images_lock": self.images_lock,
            "files": [f.to_dict() for f in self.files],
            "empty_reasons": self.empty_reasons,
        }

    @classmethod
    def from_dict(cls, data: Any) -> BundleManifest:
        if not isinstance(data, dict):
            raise UserError("BUNDLE.json is not a JSON object", MANIFEST_NAME, "This is not an isocost bundle.")
        version = data.get("schema_version")
        if version != BUNDLE_SCHEMA_VERSION:
            raise UserError(
                f"BUNDLE.json has schema_version {version!r}; this isocost reads {BUNDLE_SCHEMA_VERSION}",
                MANIFEST_NAME,
                "Verify it with the isocost version that wrote it (see isocost_version inside).",
            )
        try:
            return cls(
                campaign_id=str(data["campaign_id"]),
                study_name=str(data["study_name"]),
                study_sha256=str(data["study_sha256"]),
                created_at=str(data["created_at"]),
                isocost_version=str(data["isocost_version"]),
                ledger=dict(data["ledger"]),
                inputs=tuple(InputRecord.from_dict(i) for i in data["inputs"]),
                trials=tuple(str(t) for t in data["trials"]),
                unfinished_slots=tuple(str(t) for t in data["unfinished_slots"]),
                catalog=str(data["catalog"]),
                images_lock=str(data["images_lock"]),
                files=tuple(FileEntry.from_dict(f) for f in data["files"]),
                empty_reasons=dict(data.get("empty_reasons", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise UserError(f"BUNDLE.json is malformed ({type(exc).__name__}: {exc})", MANIFEST_NAME,
                            "This bundle was not written by this isocost version, or was edited.") from None

    def input(self, kind: str) -> InputRecord | None:
        return next((i for i in self.inputs if i.kind == kind), None)


@dataclass(frozen=True)
class VerifyReport:
    """What `isocost verify` found: every discrepancy (file and field), and what was checked."""

    bundle: str
    ok: bool
    discrepancies: tuple[Discrepancy, ...]
    files_checked: int
    bytes_checked: int
    campaign_id: str
    study_sha256: str
    trials: int
    inputs_included: tuple[str, ...]
    schema_version: int = BUNDLE_SCHEMA_VERSION

    @property
    def first(self) -> Discrepancy | None:
        return self.discrepancies[0] if self.discrepancies else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "bundle": self.bundle,
            "ok": self.ok,
            "discrepancies": [d.to_dict() for d in self.discrepancies],
            "files_checked": self.files_checked,
            "bytes_checked": self.bytes_checked,
            "campaign_id": self.campaign_id,
            "study_sha256": self.study_sha256,
            "trials": self.trials,
            "inputs_included": list(self.inputs_included),
        }


def input_archive_path(kind: str, original: Path) -> str:
    """Where an included input lives in the archive: inputs/model, inputs/corpus/<name>, inputs/tuning/<name>."""
    return f"{INPUTS_PREFIX}model" if kind == "model" else f"{INPUTS_PREFIX}{kind}/{original.name}"


def campaign_input(campaign: CampaignRecord, kind: str) -> InputFacts | None:
    """The campaign's facts for one input kind (corpus, tuning, model); None when absent or not an input kind."""
    return getattr(campaign, kind) if kind in INPUT_KINDS else None


def tree_fingerprint(entries: list[tuple[str, str]]) -> str:
    """``protocol.fingerprint.sha256_tree`` computed from (relative path, sha256) pairs."""
    lines = "".join(f"{sha.removeprefix('sha256:')}  {rel}\n" for rel, sha in sorted(entries))
    return sha256_bytes(lines.encode("utf-8"))


@dataclass(frozen=True)
class InputUse:
    """Which bytes a replay ran on, and where they came from."""

    kind: str
    path: str
    fingerprint: str
    source: str  # "bundle" | "--inputs" | "original path"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrialReplay:
    """One rerun trial compared with its original."""

    trial_id: str
    variant_id: str
    mode: str
    matches: bool
    reasons: tuple[str, ...]
    status: str
    compared_ids: int
    label_agreement: float | None
    max_score_delta: float | None
    identical: bool | None
    original_metric: float | None
    replay_metric: float | None
    replay_accepted: bool
    original_pass_s: float | None
    replay_pass_s: float | None
    environment_differences: dict[str, list[Any]]
    trial_dir: str
    outputs_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["reasons"] = list(self.reasons)
        return data


@dataclass(frozen=True)
class ReplayReport:
    """``replay.json``: the rerun trials, the launcher and inputs they ran with, and whether all match."""

    bundle: str
    bundle_sha256: str
    campaign_id: str
    study_sha256: str
    mode: str
    max_score_delta: float | None
    launcher: dict[str, Any]
    inputs: tuple[InputUse, ...]
    trials: tuple[TrialReplay, ...]
    out_dir: str
    created_at: str
    schema_version: int = REPLAY_SCHEMA_VERSION

    @property
    def matches(self) -> bool:
        return bool(self.trials) and all(t.matches for t in self.trials)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "bundle": self.bundle,
            "bundle_sha256": self.bundle_sha256,
            "campaign_id": self.campaign_id,
            "study_sha256": self.study_sha256,
            "mode": self.mode,
            "max_score_delta": self.max_score_delta,
            "launcher": self.launcher,
            "inputs": [i.to_dict() for i in self.inputs],
            "trials": [t.to_dict() for t in self.trials],
            "matches": self.matches,
            "out_dir": self.out_dir,
            "created_at": self.created_at,
        }
