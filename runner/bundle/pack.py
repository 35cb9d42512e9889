"""Bundles: pack a campaign into one verifiable archive, verify it, replay trials from it.

A bundle is a deterministic ``.tar.gz`` (sorted names, fixed mtimes, uid/gid 0,
no links) holding::

    BUNDLE.json                      what is inside: every file's sha256 and size, input
                                     fingerprints, the ledger facts (host, rental, dates)
    campaign/campaign.json, study.toml, corpus_index.csv, schedule.csv, events.jsonl,
    campaign/raw.csv, verdicts.{csv,json}, summary.{md,json}, decision/report files if any
    campaign/trials/<id>/            spec.json, manifest.json, predictions.jsonl, status.json,
                                     trial.log, launcher.json
    catalog/<catalog>.csv            the dated plan catalog the study prices with
    images/images.lock               the image lock, when this checkout has one
    inputs/{corpus,tuning,model}/    only with --include-inputs

:func:`verify_bundle` checks every hash, that the archive holds exactly the
listed files, and that the campaign is internally consistent (raw rows ↔ trial
directories ↔ specs, manifests, statuses, predictions; schedule ↔ rows;
events ↔ rows; the study's hash). :func:`replay_bundle` reruns trials with the
same spec, inputs checked by hash, through the launcher the original used, and
compares the predictions as the study's ``quality.replay`` declares.

Example::

    create_bundle(Path("results/quick"), Path("quick.tar.gz"))
    verify_bundle(Path("quick.tar.gz")).ok          # True
    replay_bundle(Path("quick.tar.gz"), trial_ids=["001-r1-batch_size-1"]).matches
"""

from __future__ import annotations

import dataclasses
import fnmatch
import gzip
import io
import math
import os
import shutil
import tarfile
import tempfile
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol import __version__
from protocol.errors import UserError
from protocol.fingerprint import sha256_bytes, sha256_file
from protocol.jsonio import dumps, read_json, write_json_atomic, write_text_atomic
from protocol.paths import check_allowed_root, check_safe_name
from protocol.records import TrialSpec
from protocol.records import csv_cell as _cell
from protocol.safe_extract import (
    DEFAULT_LIMITS,
    ArchiveError,
    ExtractLimits,
    FileDigest,
    read_archive,
    safe_extract,
)
from protocol.schedule import Slot
from protocol.study import parse_study
from protocol.study_records import Study
from protocol.validate import (
    Agreement,
    ParsedPredictions,
    Reference,
    check_pass,
    compare_predictions,
    parse_predictions,
)
from runner.campaign_dir.findings import MALFORMED as _MALFORMED
from runner.campaign_dir.findings import Discrepancy
from runner.campaign_dir.integrity import check_campaign
from runner.campaign_dir.layout import read_csv_rows as _read_csv_rows
from runner.campaign_dir.layout import read_event_lines as _events
from runner.campaign_dir.slots import planned_slots as _slots
from runner.campaign_dir.slots import unfinished_slots
from runner.launch.base import Launcher

#: BUNDLE.json format. History: 1 (0.1.0): first version.
BUNDLE_SCHEMA_VERSION = 1
#: replay.json format. History: 1 (0.1.0): first version.
REPLAY_SCHEMA_VERSION = 1

MANIFEST_NAME = "BUNDLE.json"
CAMPAIGN_PREFIX = "campaign/"
INPUTS_PREFIX = "inputs/"

#: Files every bundled campaign has (the last four: `isocost summarize` writes them).
CAMPAIGN_FILES = (
    "campaign.json", "study.toml", "corpus_index.csv", "schedule.csv", "events.jsonl", "raw.csv",
    "verdicts.csv", "verdicts.json", "summary.json", "summary.md",
)
#: Decision memo and report files, bundled when present.
OPTIONAL_PATTERNS = (
    "decision*.md", "decision*.json", "decision*.html", "memo*.md", "report*.md", "report*.html", "report*.json",
    "raw.csv.partial-*",  # a last row cut while it was written, kept by --resume (runner.campaign_dir.rawtable)
    "rentals.jsonl",  # rentals recorded after the campaign (`isocost rental`): decide prices from them
)
#: Every member's mtime (2000-01-01T00:00:00Z): the archive's bytes depend on content only.
FIXED_MTIME = 946_684_800
_GZIP_LEVEL = 6
_INPUT_KINDS = ("corpus", "tuning", "model")

#: Trial-directory leftovers of an interrupted atomic write (``.name.xxxx.tmp``): never bundled.
_TMP_PATTERN = ".*.tmp"

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


def _now() -> str:
    """Now, or ``SOURCE_DATE_EPOCH`` when set (reproducible bundles)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC).isoformat(timespec="seconds")
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- records --------------------------------------------------------------------------------------


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


# -- packing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackedFile:
    """A file to pack: its archive path and where its bytes come from (a file on disk, or bytes)."""

    path: str
    disk: Path | None = None
    data: bytes | None = None


def create_bundle(
    campaign_dir: Path,
    output: Path,
    *,
    include_inputs: bool = False,
    lock_path: Path | None = None,
    progress: Progress = _quiet,
) -> BundleManifest:
    """Pack ``campaign_dir`` into ``output`` (a new file). The result is verified before it is kept."""
    from runner.campaign_dir.layout import load_campaign

    root = campaign_dir
    description = load_campaign(root)
    if output.exists():
        raise UserError("the bundle file already exists", str(output), "Choose another -o, or remove it first.")
    for name in CAMPAIGN_FILES:
        _refuse_link(root / name)
    missing = [name for name in CAMPAIGN_FILES if not (root / name).is_file()]
    if missing:
        derived = {"verdicts.csv", "verdicts.json", "summary.json", "summary.md"}
        fix = (f"Run `isocost summarize {root}` first (it writes verdicts and summary)."
               if set(missing) <= derived else "Bundle the directory `isocost run --out` wrote.")
        raise UserError(f"the campaign lacks {', '.join(missing)}", str(root), fix)
    progress(f"checking campaign {description['campaign_id']} in {root}")
    problems = check_campaign(root)
    if problems:
        raise UserError(
            f"the campaign is not internally consistent: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            str(root),
            "A bundle must verify. If a trial was left unrecorded by a host crash, `isocost run STUDY --out DIR "
            "--resume` records it; otherwise the campaign directory was edited and cannot be bundled as is.",
        )
    study = _frozen_study(root, description)
    sources: list[PackedFile] = [PackedFile(CAMPAIGN_PREFIX + name, disk=root / name) for name in CAMPAIGN_FILES]
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name not in CAMPAIGN_FILES and any(fnmatch.fnmatchcase(child.name, p) for p in OPTIONAL_PATTERNS):
            _refuse_link(child)
            if child.is_file():
                sources.append(PackedFile(CAMPAIGN_PREFIX + child.name, disk=child))
    sources += _trial_sources(root)

    empty_reasons: dict[str, str] = {}
    catalog_archive = ""
    catalog_path = _catalog_path(study, root)
    if catalog_path is not None and catalog_path.is_file():
        name = catalog_path.name
        if catalog_path == root / "catalog.csv":  # the frozen copy: keep the dated catalog's own name
            name = Path(str((description.get("catalog") or {}).get("source") or name)).name
        catalog_archive = f"catalog/{name}"
        sources.append(PackedFile(catalog_archive, disk=catalog_path))
    else:
        empty_reasons["catalog"] = f"the study's catalog {catalog_path} is not readable on this host"
    lock = lock_path if lock_path is not None else _default_lock_path()
    images_lock = ""
    if lock is not None and lock.is_file():
        images_lock = "images/images.lock"
        sources.append(PackedFile(images_lock, disk=lock))
    else:
        empty_reasons["images_lock"] = f"no images lock at {lock}"

    inputs: list[InputRecord] = []
    for kind in _INPUT_KINDS:
        record, extra = _input_record(kind, description, include_inputs, progress)
        inputs.append(record)
        sources += extra

    progress(f"hashing {len(sources)} files")
    entries = [_entry(source) for source in sorted(sources, key=lambda s: s.path)]
    rows = _read_csv_rows(root / "raw.csv")
    manifest = BundleManifest(
        campaign_id=str(description["campaign_id"]),
        study_name=str(description.get("study_name", "")),
        study_sha256=str(description["study_sha256"]),
        created_at=_now(),
        isocost_version=__version__,
        ledger=_ledger(root, description, study, catalog_archive),
        inputs=tuple(inputs),
        trials=tuple(sorted(row["trial_id"] for row in rows)),
        unfinished_slots=tuple(unfinished_slots(rows, _slots(description))),
        catalog=catalog_archive,
        images_lock=images_lock,
        files=tuple(entries),
        empty_reasons=empty_reasons,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        progress(f"writing {output}")
        manifest_bytes = dumps(manifest.to_dict()).encode("utf-8")
        write_deterministic_tar(tmp, [PackedFile(MANIFEST_NAME, data=manifest_bytes), *sorted(sources,
                                                                                       key=lambda s: s.path)])
        progress("verifying the new bundle")
        report = verify_bundle(tmp)
        if not report.ok:
            raise UserError(f"the new bundle does not verify: {report.first}", str(output),
                            "A file changed while it was packed; run `isocost bundle` again when the campaign is idle.")
        os.chmod(tmp, 0o644)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    # No export event is logged into the campaign: a bundle must not change what it packs (two bundles
    # of one campaign are identical but for created_at). The period reports export as not recorded.
    return manifest


def write_deterministic_tar(output: Path, sources: Iterable[PackedFile]) -> None:
    """A gzip'd tar whose bytes depend only on the names and contents given (in the order given)."""
    with open(output, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=_GZIP_LEVEL) as zipped:
            with tarfile.open(fileobj=zipped, mode="w|", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
                for source in sources:
                    info = tarfile.TarInfo(source.path)
                    info.mtime = FIXED_MTIME
                    info.mode = 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.type = tarfile.REGTYPE
                    if source.data is not None:
                        info.size = len(source.data)
                        tar.addfile(info, io.BytesIO(source.data))
                    else:
                        assert source.disk is not None
                        info.size = source.disk.stat().st_size
                        with open(source.disk, "rb") as handle:
                            tar.addfile(info, handle)
        raw.flush()
        os.fsync(raw.fileno())


def _refuse_link(path: Path) -> None:
    """Bundles pack bytes, never links: a link in the campaign directory is refused, not followed."""
    if path.is_symlink():
        raise UserError("a symbolic link is in the campaign directory", str(path),
                        "Bundles hold no links: replace it with the file it points to, or remove it.")


def _trial_sources(root: Path) -> list[PackedFile]:
    """Every regular file below trials/, by archive path (leftover atomic-write temp files excepted)."""
    trials = root / "trials"
    sources: list[PackedFile] = []
    if not trials.is_dir():
        return sources
    _refuse_link(trials)
    for trial_dir in sorted(trials.iterdir(), key=lambda p: p.name):
        _refuse_link(trial_dir)
        check_safe_name(trial_dir.name, what="trial directory", where=str(trial_dir))
        if not trial_dir.is_dir():
            raise UserError("a file where trial directories live", str(trial_dir), "Move it out of trials/.")
        for path in sorted(trial_dir.rglob("*"), key=lambda p: p.relative_to(trial_dir).as_posix()):
            _refuse_link(path)
            if path.is_dir():
                continue
            if not path.is_file():
                raise UserError("not a regular file", str(path), "Bundles hold regular files only; remove it.")
            if fnmatch.fnmatchcase(path.name, _TMP_PATTERN):
                continue  # an atomic write the trial never finished: not part of its record
            sources.append(PackedFile(f"{CAMPAIGN_PREFIX}trials/{path.relative_to(trials).as_posix()}", disk=path))
    return sources


def _entry(source: PackedFile) -> FileEntry:
    if source.data is not None:
        return FileEntry(source.path, sha256_bytes(source.data), len(source.data))
    assert source.disk is not None
    return FileEntry(source.path, sha256_file(source.disk), source.disk.stat().st_size)


def _default_lock_path() -> Path | None:
    try:
        from runner.images.lock import default_lock_path

        return default_lock_path()
    except ImportError:  # the images module needs nothing extra today; be robust if that changes
        return None


def _catalog_path(study: Study | None, root: Path) -> Path | None:
    """The catalog `decide` used (decision.json), else the study's ``[costing] catalog``, else the shipped one."""
    from protocol.costing.plans import default_catalog_path

    decision = root / "decision.json"
    if decision.is_file():
        try:
            source = str(read_json(decision).get("catalog_source", ""))
        except (UserError, AttributeError):
            source = ""
        if source.startswith("--catalog "):
            return Path(source.removeprefix("--catalog "))
        if source.startswith("the study's [costing] catalog (") and source.endswith(")"):
            return Path(source.removeprefix("the study's [costing] catalog (")[:-1])
    frozen = root / "catalog.csv"  # the catalog copied into the campaign when it started
    if frozen.is_file():
        return frozen
    costing = getattr(study, "costing", None)
    catalog = getattr(costing, "catalog", None)
    return Path(catalog) if catalog is not None else default_catalog_path()


def _frozen_study(root: Path, description: dict[str, Any]) -> Study | None:
    """The frozen study copy, with relative paths resolved where the original study lived."""
    data = (root / "study.toml").read_bytes()
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
        original = Path(str(description.get("study_path") or root / "study.toml"))
        return parse_study(parsed, path=original, sha256=sha256_bytes(data))
    except _MALFORMED:
        return None


def _ledger(root: Path, description: dict[str, Any], study: Study | None, catalog: str) -> dict[str, Any]:
    """What a rental ledger entry is matched on: host, rental, the campaign's dates, the deadline."""
    events = _events(root / "events.jsonl")
    stamps = [str(e.get("at")) for e in events if isinstance(e, dict) and e.get("at")]
    deadline = getattr(study, "deadline", None)
    reasons = dict(description.get("empty_reasons") or {})
    if deadline is None:
        reasons["deadline"] = "the study declares no [deadline] window"
    return {
        "campaign_id": description.get("campaign_id"),
        "study_name": description.get("study_name"),
        "host": description.get("host"),
        "rental": description.get("rental"),
        "launcher": description.get("launcher"),
        "campaign_created_at": description.get("created_at"),
        "first_event_at": min(stamps) if stamps else None,
        "last_event_at": max(stamps) if stamps else None,
        "deadline": dataclasses.asdict(deadline) if deadline is not None else None,
        "catalog": catalog or None,
        "empty_reasons": reasons,
    }


def _input_record(
    kind: str, description: dict[str, Any], include: bool, progress: Progress
) -> tuple[InputRecord, list[PackedFile]]:
    info = description.get(kind) or {}
    original = Path(str(info.get("path", "")))
    expected = str(info.get("fingerprint", ""))
    present = original.is_dir() if kind == "model" else original.is_file()
    if not present:
        if include:
            raise UserError(f"the {kind} is not at {original}", f"campaign.json {kind}.path",
                            "Restore it there, or bundle without --include-inputs.")
        return InputRecord(kind, str(original), expected, False, "", (),
                           f"not readable on the bundling host at {original}"), []
    if kind == "model":
        from protocol.fingerprint import tree_files

        try:
            paths = tree_files(original)
        except ValueError as exc:
            raise UserError(str(exc), str(original), "Model directories hold no symbolic links.") from None
        listing = tuple(
            FileEntry(p.relative_to(original).as_posix(), sha256_file(p), p.stat().st_size) for p in paths
        )
        actual = _tree_fingerprint([(e.path, e.sha256) for e in listing])
    else:
        listing = (FileEntry(original.name, sha256_file(original), original.stat().st_size),)
        actual = listing[0].sha256
    if actual != expected:
        if include:
            raise UserError(f"the {kind} at {original} has fingerprint {actual}, the campaign ran with {expected}",
                            f"campaign.json {kind}.fingerprint",
                            "Restore the exact inputs the campaign used, or bundle without --include-inputs.")
        return InputRecord(kind, str(original), expected, False, "", (),
                           f"changed on disk since the campaign ({actual}): per-file hashes not recorded"), []
    if not include:
        return InputRecord(kind, str(original), expected, False, "", listing,
                           "not included (bundle made without --include-inputs)"), []
    progress(f"including the {kind} ({len(listing)} file(s))")
    archive_path = _input_archive_path(kind, original)
    if kind == "model":
        sources = [PackedFile(f"{archive_path}/{e.path}", disk=original / e.path) for e in listing]
    else:
        sources = [PackedFile(archive_path, disk=original)]
    return InputRecord(kind, str(original), expected, True, archive_path, listing), sources


def _input_archive_path(kind: str, original: Path) -> str:
    """Where an included input lives in the archive: inputs/model, inputs/corpus/<name>, inputs/tuning/<name>."""
    return f"{INPUTS_PREFIX}model" if kind == "model" else f"{INPUTS_PREFIX}{kind}/{original.name}"


# -- verification ---------------------------------------------------------------------------------


def _tree_fingerprint(entries: list[tuple[str, str]]) -> str:
    """``protocol.fingerprint.sha256_tree`` computed from (relative path, sha256) pairs."""
    lines = "".join(f"{sha.removeprefix('sha256:')}  {rel}\n" for rel, sha in sorted(entries))
    return sha256_bytes(lines.encode("utf-8"))


def verify_bundle(path: Path, limits: ExtractLimits = DEFAULT_LIMITS) -> VerifyReport:
    """Check a bundle without trusting it: hashes, completeness, then internal consistency."""
    shown = str(path)
    with tempfile.TemporaryDirectory(prefix="isocost-verify-") as tmp:
        work = Path(tmp)
        try:
            digests = read_archive(path, dest=work, limits=limits,
                                   select=lambda n: n == MANIFEST_NAME or n.startswith(CAMPAIGN_PREFIX))
        except ArchiveError as exc:
            return _failed(shown, Discrepancy(exc.where or shown, "archive", exc.what))
        if MANIFEST_NAME not in digests:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "presence", "missing: this is not an isocost bundle"))
        try:
            manifest = BundleManifest.from_dict(read_json(work / MANIFEST_NAME))
        except UserError as exc:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "content", exc.what))
        except (ValueError, RecursionError) as exc:
            return _failed(shown, Discrepancy(MANIFEST_NAME, "content", f"unreadable JSON ({type(exc).__name__})"))
        problems = _check_listing(manifest, digests)
        problems += check_campaign(work / "campaign", CAMPAIGN_PREFIX)
        problems += _check_manifest(manifest, digests, work / "campaign")
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
    )


def _failed(bundle: str, problem: Discrepancy) -> VerifyReport:
    return VerifyReport(bundle=bundle, ok=False, discrepancies=(problem,), files_checked=0, bytes_checked=0,
                        campaign_id="", study_sha256="", trials=0, inputs_included=())


def _check_listing(manifest: BundleManifest, digests: dict[str, FileDigest]) -> list[Discrepancy]:
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


def _check_manifest(manifest: BundleManifest, digests: dict[str, FileDigest], root: Path) -> list[Discrepancy]:
    problems: list[Discrepancy] = []
    try:
        description = read_json(root / "campaign.json")
        rows = _read_csv_rows(root / "raw.csv")
        slots = _slots(description)
        _compare_manifest(manifest, digests, description, rows, slots, problems)
    except (*_MALFORMED, OSError):
        pass  # malformed campaign files are already named by the campaign checks
    return problems


def _compare_manifest(
    manifest: BundleManifest, digests: dict[str, FileDigest], description: dict[str, Any],
    rows: list[dict[str, str]], slots: tuple[Slot, ...], problems: list[Discrepancy],
) -> None:
    def add(field_name: str, message: str) -> None:
        problems.append(Discrepancy(MANIFEST_NAME, field_name, message))

    for key in ("campaign_id", "study_sha256"):
        if getattr(manifest, key) != description.get(key):
            add(key, f"{getattr(manifest, key)!r}, campaign/campaign.json says {description.get(key)!r}")
    trial_ids = tuple(sorted(row.get("trial_id", "") for row in rows))
    if manifest.trials != trial_ids:
        add("trials", f"{len(manifest.trials)} trial id(s) that differ from campaign/raw.csv's {len(trial_ids)}")
    unfinished = tuple(unfinished_slots(rows, slots))
    if manifest.unfinished_slots != unfinished:
        add("unfinished_slots", f"{list(manifest.unfinished_slots)}, campaign/raw.csv and schedule.csv give "
                                f"{list(unfinished)}")
    kinds = [record.kind for record in manifest.inputs]
    if sorted(kinds) != sorted(_INPUT_KINDS):
        add("inputs", f"kinds {kinds}, expected one each of {list(_INPUT_KINDS)}")
    for record in manifest.inputs:
        campaign_input = description.get(record.kind) or {}
        campaign_fp = campaign_input.get("fingerprint")
        if record.fingerprint != campaign_fp:
            add(f"inputs.{record.kind}.fingerprint", f"{record.fingerprint}, campaign.json says {campaign_fp}")
        expected_path = _input_archive_path(record.kind, Path(str(campaign_input.get("path", "")))) \
            if record.included else ""
        if record.archive_path != expected_path:
            add(f"inputs.{record.kind}.archive_path", f"{record.archive_path!r}, expected {expected_path!r}")
            continue
        if not record.included:
            continue
        if record.kind == "model":
            prefix = record.archive_path + "/"
            pairs = [(n[len(prefix):], d.sha256) for n, d in digests.items() if n.startswith(prefix)]
            actual = _tree_fingerprint(pairs)
        else:
            digest = digests.get(record.archive_path)
            actual = digest.sha256 if digest is not None else "(missing)"
        if actual != record.fingerprint:
            add(f"inputs.{record.kind}", f"the bundled {record.kind} fingerprints to {actual}, "
                                         f"the campaign ran with {record.fingerprint}")


# -- replay ---------------------------------------------------------------------------------------


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

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["reasons"] = list(self.reasons)
        return data


@dataclass(frozen=True)
class ReplayReport:
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


REPLAY_LAUNCHERS = ("original", "process", "docker")


def default_replay_dir(bundle: Path) -> Path:
    """``<bundle folder>/<bundle name>.replay-<UTC time>``: next to the bundle, never over anything."""
    stem = bundle.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return bundle.resolve().parent / f"{stem}.replay-{stamp}"


def replay_bundle(
    bundle: Path,
    *,
    trial_ids: Iterable[str] = (),
    out: Path | None = None,
    inputs_dir: Path | None = None,
    launcher_kind: str = "original",
    allowed_roots: tuple[Path, ...] = (),
    limits: ExtractLimits = DEFAULT_LIMITS,
    progress: Progress = _quiet,
) -> ReplayReport:
    """Rerun trials of a verified bundle and compare them as the study's ``quality.replay`` declares."""
    if launcher_kind not in REPLAY_LAUNCHERS:
        raise UserError(f"unknown launcher {launcher_kind!r}", "--launcher", f"Use one of {REPLAY_LAUNCHERS}.")
    requested = [check_safe_name(t, what="trial id", where="--trial") for t in trial_ids]
    progress(f"verifying {bundle}")
    report = verify_bundle(bundle, limits)
    if not report.ok:
        raise UserError(f"the bundle does not verify: {report.first}", str(bundle),
                        "Replay only a bundle that verifies (isocost verify FILE names every discrepancy).")
    out = out if out is not None else default_replay_dir(bundle)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError("the replay folder exists and is not empty", str(out),
                        "Choose a new --out; a replay never writes over earlier results.")
    created = not out.exists()
    try:
        p = _prepare_replay(bundle, out, requested, inputs_dir, launcher_kind, allowed_roots, limits, progress)
    except BaseException:
        if created:  # refused before any trial ran: leave nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    campaign_root = out / "bundle" / "campaign"
    corpus, model = (Path(use.path) for use in p.inputs)
    reference = _reference(campaign_root)
    results: list[TrialReplay] = []
    interrupted = False
    for number, trial_id in enumerate(p.chosen, start=1):
        progress(f"[{number}/{len(p.chosen)}] replaying {trial_id} ({p.specs[trial_id].variant.variant_id}) "
                 f"with launcher {p.launcher.name}")
        result, interrupted = _replay_one(p.specs[trial_id], p.rows[trial_id], campaign_root, out, p.launcher,
                                          corpus, model, p.study, reference)
        results.append(result)
        progress(f"[{number}/{len(p.chosen)}] {trial_id}: {'matches' if result.matches else 'DIFFERS'}")
        if interrupted:
            break
    replay = ReplayReport(
        bundle=str(bundle),
        bundle_sha256=p.bundle_sha256,
        campaign_id=p.manifest.campaign_id,
        study_sha256=p.manifest.study_sha256,
        mode=p.study.quality.replay,
        max_score_delta=p.study.quality.max_score_delta,
        launcher=p.launcher_facts,
        inputs=p.inputs,
        trials=tuple(results),
        out_dir=str(out),
        created_at=_now(),
    )
    write_json_atomic(out / "replay.json", replay.to_dict())
    write_text_atomic(out / "replay.md", render_replay(replay))
    if interrupted:  # what ran is written; stop like Ctrl-C does
        raise KeyboardInterrupt
    return replay


@dataclass(frozen=True)
class _Prepared:
    """Everything a replay needs before its first trial runs."""

    bundle_sha256: str
    manifest: BundleManifest
    study: Study
    chosen: list[str]
    specs: dict[str, TrialSpec]
    rows: dict[str, dict[str, str]]
    inputs: tuple[InputUse, ...]  # corpus, model
    launcher: Launcher
    launcher_facts: dict[str, Any]


def _prepare_replay(
    bundle: Path, out: Path, requested: list[str], inputs_dir: Path | None, launcher_kind: str,
    allowed_roots: tuple[Path, ...], limits: ExtractLimits, progress: Progress,
) -> _Prepared:
    """Extract, re-check every hash, resolve the inputs and the launcher. Nothing runs yet."""
    bundle_sha256 = sha256_file(bundle)
    extracted = out / "bundle"
    progress(f"extracting into {extracted}")
    digests = safe_extract(bundle, extracted, limits)
    manifest = BundleManifest.from_dict(read_json(extracted / MANIFEST_NAME))
    for entry in manifest.files:  # the bytes written are the bytes verified
        digest = digests.get(entry.path)
        if digest is None or digest.sha256 != entry.sha256:
            raise UserError("an extracted file differs from BUNDLE.json", entry.path,
                            "The bundle changed while it was read; copy it again and retry.")
    campaign_root = extracted / "campaign"
    description = read_json(campaign_root / "campaign.json")
    study_bytes = (campaign_root / "study.toml").read_bytes()
    if sha256_bytes(study_bytes) != manifest.study_sha256:
        raise UserError("the study's hash differs from the bundle's", "campaign/study.toml",
                        "The bundle is inconsistent; do not use it.")
    study = parse_study(tomllib.loads(study_bytes.decode("utf-8")), path=campaign_root / "study.toml",
                        sha256=manifest.study_sha256)
    rows = {row["trial_id"]: row for row in _read_csv_rows(campaign_root / "raw.csv")}
    chosen = _choose_trials(requested, rows, description)
    uses = tuple(_resolve_input(kind, manifest, description, extracted, inputs_dir, allowed_roots)
                 for kind in ("corpus", "model"))
    specs = {t: TrialSpec.from_dict(read_json(campaign_root / "trials" / t / "spec.json")) for t in chosen}
    launcher, launcher_facts = _replay_launcher(launcher_kind, specs)
    return _Prepared(bundle_sha256, manifest, study, chosen, specs, rows, uses, launcher, launcher_facts)


def _choose_trials(requested: list[str], rows: dict[str, dict[str, str]], description: dict[str, Any]) -> list[str]:
    for trial_id in requested:
        check_safe_name(trial_id, what="trial id", where="--trial")
        if trial_id not in rows:
            raise UserError(f"no trial {trial_id!r} in this bundle", "--trial",
                            f"Use one of: {', '.join(sorted(rows))}.")
        row = rows[trial_id]
        if row["status"] != "ok" or row["corpus_accepted"] != "true":
            raise UserError(
                f"trial {trial_id} was not an accepted pass (status {row['status']}, "
                f"corpus_accepted {row['corpus_accepted']})",
                "--trial",
                "Replay compares accepted passes; choose a trial whose row says ok and accepted.",
            )
    if requested:
        return list(dict.fromkeys(requested))
    chosen: list[str] = []
    ordered = sorted(rows.values(), key=lambda r: (int(r["order_index"]), int(r["attempt"])))
    for variant in description["variants"]:
        first = next((r for r in ordered if r["variant_id"] == variant["variant_id"]
                      and r["status"] == "ok" and r["corpus_accepted"] == "true"), None)
        if first is not None:
            chosen.append(check_safe_name(first["trial_id"], what="trial id", where="campaign/raw.csv"))
    if not chosen:
        raise UserError("the bundle holds no accepted pass to replay", "campaign/raw.csv",
                        "Replay needs at least one trial with status ok and an accepted corpus.")
    return chosen


def _resolve_input(
    kind: str,
    manifest: BundleManifest,
    description: dict[str, Any],
    extracted: Path,
    inputs_dir: Path | None,
    allowed_roots: tuple[Path, ...],
) -> InputUse:
    record = manifest.input(kind)
    expected = str((description.get(kind) or {}).get("fingerprint", ""))
    original = Path(str((description.get(kind) or {}).get("path", "")))
    if original.name in ("", ".", ".."):
        raise UserError(f"the bundle names no usable {kind} path ({original})", f"campaign.json {kind}.path",
                        "The bundle is malformed; do not use it.")
    if record is not None and record.included:
        path, source = extracted / record.archive_path, "bundle"
        check_allowed_root(path, [extracted], what=f"bundled {kind}", where=f"BUNDLE.json inputs.{kind}")
    elif inputs_dir is not None:
        path, source = inputs_dir / original.name, "--inputs"
        check_allowed_root(path, allowed_roots, what=f"{kind} path", where="--inputs")
    else:
        if not original.is_absolute():
            raise UserError(f"the bundle names a relative {kind} path {original}", f"campaign.json {kind}.path",
                            "Pass --inputs DIR holding the inputs.")
        path, source = original, "original path"
        check_allowed_root(path, allowed_roots, what=f"{kind} path", where=f"campaign.json {kind}.path")
    present = path.is_dir() if kind == "model" else path.is_file()
    if not present:
        where = "--inputs" if source == "--inputs" else f"campaign.json {kind}.path"
        raise UserError(f"the {kind} is not at {path}", where,
                        "The bundle holds no inputs: pass --inputs DIR holding the corpus file and the model "
                        f"directory under their original names ({original.name}), or replay a bundle made with "
                        "--include-inputs.")
    from protocol.fingerprint import fingerprint_path

    try:
        actual = fingerprint_path(path)
    except ValueError as exc:
        raise UserError(f"the {kind} cannot be fingerprinted: {exc}", str(path), "Remove links from it.") from None
    if actual != expected:
        detail = _first_file_difference(path, record) if kind == "model" else ""
        raise UserError(
            f"the {kind} at {path} has fingerprint {actual}, the bundle's campaign ran with {expected}{detail}",
            f"{kind} ({source})",
            "Replay refuses inputs that differ: use the exact inputs of the campaign (or a bundle made with "
            "--include-inputs). A changed model or corpus is a new study, not a replay.",
        )
    return InputUse(kind=kind, path=str(path), fingerprint=actual, source=source)


def _first_file_difference(path: Path, record: InputRecord | None) -> str:
    if record is None or not record.files:
        return ""
    from protocol.fingerprint import tree_files

    listed = {f.path: f.sha256 for f in record.files}
    here = {p.relative_to(path).as_posix(): p for p in tree_files(path)}
    for name in sorted(set(listed) | set(here)):
        if name not in here:
            return f"; first difference: {name} is missing"
        if name not in listed:
            return f"; first difference: {name} is not in the original"
        if sha256_file(here[name]) != listed[name]:
            return f"; first difference: {name} has other content"
    return ""


def _replay_launcher(kind: str, specs: dict[str, TrialSpec]) -> tuple[Launcher, dict[str, Any]]:
    """The launcher the originals used: a fresh process, or a container of the exact recorded image."""
    from runner.launch.process import ProcessLauncher

    originals = sorted({spec.launcher for spec in specs.values()})
    images = sorted({spec.image_digest or spec.image_id for spec in specs.values()} - {""})
    original = originals[0] if len(originals) == 1 else "mixed"
    wanted = original if kind == "original" else kind
    if wanted == "process":
        exact = original == "process"
        note = "" if exact else (f"the original trials ran with launcher {original!r} (image {', '.join(images)}); "
                                 "this replay ran them as local processes (--launcher process): not an exact replay")
        return ProcessLauncher(), {"kind": "process", "original": original, "exact": exact, "image": "", "note": note}
    if wanted != "docker" or not images:
        raise UserError(
            f"the original trials ran with launcher {original!r}, and no image digest is recorded",
            "--launcher",
            "Replay them with --launcher process (or --launcher original).",
        )
    if len(images) != 1:
        raise UserError(f"the chosen trials ran in several images ({', '.join(images)})", "--trial",
                        "Replay the trials of one image at a time.")
    from runner.launch.docker import DockerLauncher

    stacks = sorted({spec.variant.stack for spec in specs.values()})
    try:
        docker_launcher = DockerLauncher(images[0], stack=stacks[0])
    except UserError as exc:
        raise UserError(f"the exact image {images[0]} cannot be run here: {exc.what}", exc.where,
                        f"{exc.fix} Or replay knowingly outside it with --launcher process (reported as not "
                        "exact).") from None
    return docker_launcher, {"kind": "docker", "original": original, "exact": True, "image": images[0], "note": ""}


def _reference(campaign_root: Path) -> Reference:
    rows = _read_csv_rows(campaign_root / "corpus_index.csv")
    ids = tuple(row["id"] for row in rows)
    return Reference(ids=ids, labels={row["id"]: row["label"] for row in rows}, groups={})


def _replay_one(
    original: TrialSpec,
    row: dict[str, str],
    campaign_root: Path,
    out: Path,
    launcher: Launcher,
    corpus: Path,
    model: Path,
    study: Study,
    reference: Reference,
) -> tuple[TrialReplay, bool]:
    """Rerun one trial with its original spec (inputs and image as this host sees them); compare. Returns
    the comparison and whether the user interrupted it."""
    from runner.campaign.gather import decide_status, read_status
    from runner.launch.base import HostInterrupt, TrialPaths

    trial_dir = out / "trials" / check_safe_name(original.trial_id, what="trial id")
    trial_dir.mkdir(parents=True, exist_ok=False)
    paths = TrialPaths(trial_dir=trial_dir.resolve(), corpus=corpus.resolve(), model=model.resolve())
    corpus_view, model_view, _ = launcher.trial_view(paths)
    image_ref, image_id, image_digest = launcher.image_fields()
    spec = dataclasses.replace(original, corpus_path=corpus_view, model_path=model_view, launcher=launcher.name,
                               image_ref=image_ref, image_id=image_id, image_digest=image_digest)
    write_json_atomic(trial_dir / "spec.json", spec.to_dict())
    interrupted = False
    try:
        result = launcher.run(paths, original.timeout_s)
    except HostInterrupt as exc:
        result, interrupted = exc.result, True
    status, _ = read_status(trial_dir)
    final = decide_status(status, result)
    replayed = parse_predictions(trial_dir / "predictions.jsonl")
    before = parse_predictions(campaign_root / "trials" / original.trial_id / "predictions.jsonl")
    quality = study.quality
    check = check_pass(replayed, reference, quality.metric, quality.minimum)
    agreement = compare_predictions(replayed, before)
    reasons = replay_differences(final, check.accepted, check.reasons, agreement, replayed, before,
                                 quality.replay, quality.max_score_delta)
    metric = row.get("metric_value") or ""
    original_pass = row.get("pass_s") or ""
    return TrialReplay(
        trial_id=original.trial_id,
        variant_id=original.variant.variant_id,
        mode=quality.replay,
        matches=not reasons,
        reasons=tuple(reasons),
        status=final,
        compared_ids=len({p.id for p in replayed.predictions} & {p.id for p in before.predictions}),
        label_agreement=agreement.agreement,
        max_score_delta=agreement.max_score_delta,
        identical=agreement.identical,
        original_metric=float(metric) if metric else None,
        replay_metric=check.metric_value,
        replay_accepted=final == "ok" and check.accepted,
        original_pass_s=float(original_pass) if original_pass else None,
        replay_pass_s=status.phases.pass_s if status is not None and final == "ok" else None,
        environment_differences=_environment_differences(campaign_root / "trials" / original.trial_id,
                                                         trial_dir),
        trial_dir=str(trial_dir),
    ), interrupted


def replay_differences(
    final: str, accepted: bool, check_reasons: tuple[str, ...], agreement: Agreement, replayed: ParsedPredictions,
    before: ParsedPredictions, mode: str, bound: float | None,
) -> list[str]:
    """Why a rerun does not match its original under the study's replay rule (empty: it matches).

    ``identical``: same ids, labels and scores. ``bounded``: same labels, max |Δscore| ≤ ``bound``.
    ``quality``: the rerun is an accepted pass under the same quality rule.
    """
    reasons: list[str] = []
    if final != "ok":
        reasons.append(f"the replay ended with status {final}")
    if not accepted:
        reasons.append("the replay is not an accepted pass under the study's quality rule: " + "; ".join(check_reasons))
    if mode == "quality":
        return reasons
    if agreement.agreement is None or agreement.max_score_delta is None:
        reasons.append(f"the replay's ids differ from the original's ({len(replayed.predictions)} vs "
                       f"{len(before.predictions)} predictions)")
        return reasons
    if mode == "identical" and not agreement.identical:
        reasons.append(f"not identical: label agreement {agreement.agreement:.4f}, max |Δscore| "
                       f"{agreement.max_score_delta:.3g}")
    if mode == "bounded":
        if agreement.agreement < 1.0:
            reasons.append(f"labels differ: agreement {agreement.agreement:.4f}")
        if bound is None or not math.isfinite(bound) or bound < 0:
            reasons.append(f"the study's quality.max_score_delta {bound!r} is not a usable bound")
        elif agreement.max_score_delta > bound:
            reasons.append(f"max |Δscore| {agreement.max_score_delta:.3g} exceeds the declared bound {bound:g}")
    return reasons


def _environment_differences(original_dir: Path, replay_dir: Path) -> dict[str, list[Any]]:
    """Software, device and host facts that differ between the two manifests (informative)."""
    try:
        before = read_json(original_dir / "manifest.json")
        after = read_json(replay_dir / "manifest.json")
    except UserError:
        return {}
    differences: dict[str, list[Any]] = {}
    for section in ("software", "device", "host"):
        old, new = before.get(section) or {}, after.get(section) or {}
        if not isinstance(old, dict) or not isinstance(new, dict):
            continue
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                differences[f"{section}.{key}"] = [old.get(key), new.get(key)]
    for key in ("image_id", "image_digest", "launcher"):
        if before.get(key) != after.get(key):
            differences[key] = [before.get(key), after.get(key)]
    return differences


def render_replay(report: ReplayReport) -> str:
    bound = f" (max |Δscore| ≤ {report.max_score_delta:g})" if report.mode == "bounded" else ""
    lines = [
        f"# Replay of {Path(report.bundle).name}",
        "",
        f"Campaign {report.campaign_id}, study {report.study_sha256}.",
        f"Replay rule (quality.replay): {report.mode}{bound}.",
        f"Launcher: {report.launcher['kind']} (original: {report.launcher['original']}"
        + (f", image {report.launcher['image']}" if report.launcher.get("image") else "") + ")"
        + ("" if report.launcher.get("exact") else " - NOT an exact replay: " + report.launcher.get("note", "")),
        "Inputs: " + "; ".join(f"{i.kind} {i.fingerprint} from {i.source}" for i in report.inputs),
        "",
    ]
    for t in report.trials:
        delta = f"{t.max_score_delta:.3g}" if t.max_score_delta is not None else "-"
        agreement = f"{t.label_agreement:.4f}" if t.label_agreement is not None else "-"
        verdict = "MATCHES" if t.matches else "DIFFERS: " + "; ".join(t.reasons)
        lines.append(f"- {t.trial_id} ({t.variant_id}): status {t.status}, label agreement {agreement}, "
                     f"max |Δscore| {delta}, identical {_cell(t.identical) or '-'}: {verdict}")
        if t.environment_differences:
            shown = ", ".join(f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in list(t.environment_differences.items())[:6])
            lines.append(f"  environment differences: {shown}")
    lines += ["", f"Result: {'the replay MATCHES' if report.matches else 'the replay DIFFERS'} ({report.mode})."]
    return "\n".join(lines) + "\n"

