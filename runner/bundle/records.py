"""What a bundle says about itself: ``BUNDLE.json``, the verification report, the replay report.

Frozen records read and written through :mod:`protocol.records.codec` (``BundleManifest`` rejects an unknown
``schema_version`` with a message that says what to do), the archive's fixed names
(``BUNDLE.json``, ``campaign/``, ``inputs/``) and the small helpers packing, verifying and
replaying share: where an included input lives in the archive, the campaign's facts for one
input kind, and a model directory's fingerprint from its per-file hashes.
:mod:`runner.bundle.pack` writes these records; :mod:`runner.bundle.verify` and
:mod:`runner.bundle.replay` read them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from protocol.io.fingerprint import sha256_bytes
from protocol.records.codec import Schema
from protocol.records.stages import CampaignRecord, InputFacts
from runner.campaign_dir.findings import Discrepancy

#: BUNDLE.json format. History: 1 (0.1.0): first version.
BUNDLE_SCHEMA_VERSION = 1
#: replay.json format. History: 1 (0.1.0): first version; 2: each trial's ``outputs_sha256`` (the replayed output
#: files, ``name=sha256;…``), checked when ``isocost compare`` or ``decide`` read the replay; 3: each trial's
#: ``manifest_sha256`` (the rerun's manifest.json, which carries the fault-hook flag), checked the same way.
REPLAY_SCHEMA_VERSION = 3

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
    CODEC: ClassVar[Schema] = Schema(MANIFEST_NAME, BUNDLE_SCHEMA_VERSION, fix=(
        "This bundle was not written by this isocost version, or was edited: verify it with the version named by "
        "its isocost_version."))

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
    #: what was checked only in part, e.g. memory estimates that could not be re-derived (no model here)
    caveats: tuple[str, ...] = ()
    schema_version: int = BUNDLE_SCHEMA_VERSION

    @property
    def first(self) -> Discrepancy | None:
        return self.discrepancies[0] if self.discrepancies else None


def input_archive_path(kind: str, original: Path) -> str:
    """Where an included input lives in the archive: inputs/model, inputs/corpus/<name>, inputs/tuning/<name>."""
    return f"{INPUTS_PREFIX}model" if kind == "model" else f"{INPUTS_PREFIX}{kind}/{original.name}"


def campaign_input(campaign: CampaignRecord, kind: str) -> InputFacts | None:
    """The campaign's facts for one input kind (corpus, tuning, model); None when absent or not an input kind."""
    return getattr(campaign, kind) if kind in INPUT_KINDS else None


def tree_fingerprint(entries: list[tuple[str, str]]) -> str:
    """``protocol.io.fingerprint.sha256_tree`` computed from (relative path, sha256) pairs."""
    lines = "".join(f"{sha.removeprefix('sha256:')}  {rel}\n" for rel, sha in sorted(entries))
    return sha256_bytes(lines.encode("utf-8"))


@dataclass(frozen=True)
class InputUse:
    """Which bytes a replay ran on, and where they came from."""

    kind: str
    path: str
    fingerprint: str
    source: str  # "bundle" | "--inputs" | "original path"


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
    #: the sha256 of the rerun's manifest.json ("" when it wrote none): its fault-hook flag is read from it
    manifest_sha256: str = ""


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
    #: ``matches`` is derived from the trials: written for readers, and a file whose ``matches`` disagrees is refused.
    CODEC: ClassVar[Schema] = Schema("replay.json", REPLAY_SCHEMA_VERSION, derived=("matches",),
                                     fix="Replay the bundle again with this isocost.")

    @property
    def matches(self) -> bool:
        return bool(self.trials) and all(t.matches for t in self.trials)
