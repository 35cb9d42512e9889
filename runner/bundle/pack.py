"""Pack a campaign directory into a bundle: a deterministic ``.tar.gz`` with ``BUNDLE.json``.

:func:`create_bundle` refuses a campaign that is incomplete, inconsistent or holds links,
collects its files (plus the plan catalog, the image lock and, with ``include_inputs``, the
corpus, tuning corpus and model), hashes them into a :class:`~runner.bundle.records.BundleManifest`,
writes the archive with :func:`write_deterministic_tar` (its bytes depend on content only) and
keeps it only once :func:`runner.bundle.verify.verify_bundle` accepts it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import gzip
import io
import os
import tarfile
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol import __version__
from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes, sha256_file
from protocol.io.jsonio import dumps, read_json
from protocol.io.paths import check_safe_name
from protocol.io.safe_write import check_writable_target, make_dirs, refuse_hard_link
from protocol.records.codec import to_dict
from protocol.records.stages import CampaignRecord
from protocol.study.load import Study, parse_study
from runner.bundle.records import (
    CAMPAIGN_PREFIX,
    INPUT_KINDS,
    MANIFEST_NAME,
    BundleManifest,
    FileEntry,
    InputRecord,
    Progress,
    campaign_input,
    creation_time,
    input_archive_path,
    quiet,
    tree_fingerprint,
)
from runner.bundle.verify import verify_bundle
from runner.campaign_dir.campaign import Campaign, inspect_campaign
from runner.campaign_dir.findings import MALFORMED
from runner.campaign_dir.layout import load_record, read_events
from runner.campaign_dir.slots import planned_slots, unfinished_slots

#: Files every bundled campaign has (the last four: `isocost summarize` writes them).
CAMPAIGN_FILES = (
    "campaign.json", "study.toml", "corpus_index.csv", "schedule.csv", "events.jsonl", "raw.csv",
    "verdicts.csv", "verdicts.json", "summary.json", "summary.md",
)
#: Decision memo and report files, bundled when present.
OPTIONAL_PATTERNS = (
    "decision*.md", "decision*.json", "decision*.html", "memo*.md", "report*.md", "report*.html", "report*.json",
    "raw.csv.partial-*",  # a last row cut while it was written, kept by --resume (runner.campaign_dir.raw_table)
    "rentals.jsonl",  # rentals recorded after the campaign (`isocost rental`): decide prices from them
    "rentals.jsonl.partial-*", "events.jsonl.partial-*",  # cut last lines, kept by the next writer
    "catalog.csv",  # the catalog frozen at the start, which campaign.json's catalog.sha256 names
    "queries.jsonl",  # a task's frozen input (protocol.tasks: an embedding's queries), fingerprinted by the study
)
#: Every member's mtime (2000-01-01T00:00:00Z): the archive's bytes depend on content only.
FIXED_MTIME = 946_684_800
_GZIP_LEVEL = 6

#: Trial-directory leftovers of an interrupted atomic write (``.name.xxxx.tmp``): never bundled.
_TMP_PATTERN = ".*.tmp"

#: Where the image lock lives in the archive.
IMAGES_LOCK_PATH = "images/images.lock"


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
    progress: Progress = quiet,
) -> BundleManifest:
    """Pack ``campaign_dir`` into ``output`` (a new file). The result is verified before it is kept."""
    root = campaign_dir
    campaign = load_record(root)
    opened = _check_packable(root, output, campaign, progress)  # raw.csv read once: checked, typed and packed
    study = _frozen_study(root, campaign)
    sources = [PackedFile(s.path, data=opened.chain.data) if s.path == CAMPAIGN_PREFIX + "raw.csv" else s
               for s in _campaign_sources(root)]
    empty_reasons: dict[str, str] = {}
    catalog_archive = _add_catalog(sources, empty_reasons, root, campaign, study)
    images_lock = _add_images_lock(sources, empty_reasons, lock_path)
    inputs: list[InputRecord] = []
    for kind in INPUT_KINDS:
        record, extra = _input_record(kind, campaign, include_inputs, progress)
        inputs.append(record)
        sources += extra
    progress(f"hashing {len(sources)} files")
    rows = opened.rows
    manifest = BundleManifest(
        campaign_id=campaign.campaign_id,
        study_name=campaign.study_name,
        study_sha256=campaign.study_sha256,
        created_at=creation_time(),
        isocost_version=__version__,
        ledger=_ledger(root, campaign, study, catalog_archive),
        inputs=tuple(inputs),
        trials=tuple(sorted(row.trial_id for row in rows)),
        unfinished_slots=tuple(unfinished_slots(rows, planned_slots(campaign))),
        catalog=catalog_archive,
        images_lock=images_lock,
        files=tuple(_entry(source) for source in sorted(sources, key=lambda s: s.path)),
        empty_reasons=empty_reasons,
    )
    _write_verified(output, manifest, sources, progress)
    # No export event is logged into the campaign: a bundle must not change what it packs (two bundles
    # of one campaign are identical but for created_at). The period reports export as not recorded.
    return manifest


def _check_packable(root: Path, output: Path, campaign: CampaignRecord, progress: Progress) -> Campaign:
    """Refuse before packing anything: an existing output, links, missing files, an inconsistent campaign; the
    campaign, opened from the one read of raw.csv its checks made (:func:`inspect_campaign`)."""
    check_writable_target(output, fix="Choose another -o: isocost never writes through a link.")
    if os.path.lexists(output):
        raise UserError("the bundle file already exists", str(output), "Choose another -o, or remove it first.")
    for name in CAMPAIGN_FILES:
        _refuse_link(root / name)
    missing = [name for name in CAMPAIGN_FILES if not (root / name).is_file()]
    derived = {"verdicts.csv", "verdicts.json", "summary.json", "summary.md"}
    if missing and not set(missing) <= derived:
        raise UserError(f"the campaign lacks {', '.join(missing)}", str(root),
                        "Bundle the directory `isocost run --out` wrote.")
    progress(f"checking campaign {campaign.campaign_id} in {root}")
    inspection = inspect_campaign(root)
    problems = list(inspection.problems)  # an edited file is named before a missing summary is
    if missing and not problems:
        raise UserError(f"the campaign lacks {', '.join(missing)}", str(root),
                        f"Run `isocost summarize {root}` first (it writes verdicts and summary).")
    if problems:
        raise UserError(
            f"the campaign is not internally consistent: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            str(root),
            "A bundle must verify. If a trial was left unrecorded by a host crash, `isocost run STUDY --out DIR "
            "--resume` records it; otherwise the campaign directory was edited and cannot be bundled as is.",
        )
    if inspection.campaign is None:  # consistent, yet its study or table cannot be parsed
        raise UserError("the campaign cannot be opened (its study or raw.csv cannot be parsed)", str(root),
                        "Bundle the directory `isocost run --out` wrote.")
    return inspection.campaign


def _campaign_sources(root: Path) -> list[PackedFile]:
    """The campaign's own files: the fixed ones, the decision and report files present, every trial file."""
    sources = [PackedFile(CAMPAIGN_PREFIX + name, disk=root / name) for name in CAMPAIGN_FILES]
    for name in CAMPAIGN_FILES:
        _refuse_link(root / name)
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name not in CAMPAIGN_FILES and any(fnmatch.fnmatchcase(child.name, p) for p in OPTIONAL_PATTERNS):
            _refuse_link(child)
            if child.is_file():
                sources.append(PackedFile(CAMPAIGN_PREFIX + child.name, disk=child))
    return sources + _trial_sources(root)


def _add_catalog(
    sources: list[PackedFile], empty_reasons: dict[str, str], root: Path, campaign: CampaignRecord,
    study: Study | None,
) -> str:
    """Add the plan catalog the campaign prices with; its archive path, or "" with a reason recorded."""
    catalog_path = _catalog_path(study, root)
    if catalog_path is None or not catalog_path.is_file():
        empty_reasons["catalog"] = f"the study's catalog {catalog_path} is not readable on this host"
        return ""
    name = catalog_path.name
    if catalog_path == root / "catalog.csv":  # the frozen copy: keep the dated catalog's own name
        name = Path((campaign.catalog.source if campaign.catalog is not None else "") or name).name
    sources.append(PackedFile(f"catalog/{name}", disk=catalog_path))
    return f"catalog/{name}"


def _add_images_lock(sources: list[PackedFile], empty_reasons: dict[str, str], lock_path: Path | None) -> str:
    """Add the image lock (given, or this checkout's); its archive path, or "" with a reason recorded."""
    lock = lock_path if lock_path is not None else _default_lock_path()
    if lock is None or not lock.is_file():
        empty_reasons["images_lock"] = f"no images lock at {lock}"
        return ""
    sources.append(PackedFile(IMAGES_LOCK_PATH, disk=lock))
    return IMAGES_LOCK_PATH


def _write_verified(output: Path, manifest: BundleManifest, sources: list[PackedFile], progress: Progress) -> None:
    """Write the archive beside ``output``, verify it, and only then move it into place."""
    make_dirs(output.parent, fix="Choose a writable -o.")
    try:
        fd, tmp_name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name[:100]}.", suffix=".tmp")
    except OSError as exc:
        raise UserError(f"cannot write the bundle: {exc.strerror}", str(output), "Choose a writable -o.") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        progress(f"writing {output}")
        manifest_bytes = dumps(to_dict(manifest)).encode("utf-8")
        write_deterministic_tar(tmp, [PackedFile(MANIFEST_NAME, data=manifest_bytes),
                                      *sorted(sources, key=lambda s: s.path)])
        progress("verifying the new bundle")
        report = verify_bundle(tmp)
        if not report.ok:
            raise UserError(f"the new bundle does not verify: {report.first}", str(output),
                            "A file changed while it was packed; run `isocost bundle` again when the campaign is idle.")
        os.chmod(tmp, 0o644)
        check_writable_target(output, fix="Choose another -o: isocost never writes through a link.")
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)


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
    """Bundles pack bytes, never links: a symbolic link in the campaign directory is refused, not followed, and
    so is a file with another name (a hard link: perhaps a file outside the campaign)."""
    if path.is_symlink():
        raise UserError("a symbolic link is in the campaign directory", str(path),
                        "Bundles hold no links: replace it with the file it points to, or remove it.")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    refuse_hard_link(path, info)


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
        named = None
        if source.startswith("--catalog "):
            named = Path(source.removeprefix("--catalog "))
        elif source.startswith("the study's [costing] catalog (") and source.endswith(")"):
            named = Path(source.removeprefix("the study's [costing] catalog (")[:-1])
        if named is not None and _is_catalog(named):  # decision.json is derived: a path it names is never trusted
            return named
    frozen = root / "catalog.csv"  # the catalog copied into the campaign when it started
    if frozen.is_file():
        return frozen
    costing = getattr(study, "costing", None)
    catalog = getattr(costing, "catalog", None)
    return Path(catalog) if catalog is not None else default_catalog_path()


def _is_catalog(path: Path) -> bool:
    """Is ``path`` a regular file that reads as a dated plan catalog (what decision.json may name; anything else,
    a secret among them, is never packed)?"""
    from protocol.costing.catalog_file import load_catalog

    if path.is_symlink() or not path.is_file():
        return False
    try:
        load_catalog(path)
    except (*MALFORMED, OSError):
        return False
    return True


def _frozen_study(root: Path, campaign: CampaignRecord) -> Study | None:
    """The frozen study copy, with relative paths resolved where the original study lived."""
    data = (root / "study.toml").read_bytes()
    try:
        parsed = tomllib.loads(data.decode("utf-8"))
        original = Path(campaign.study_path or root / "study.toml")
        return parse_study(parsed, path=original, sha256=sha256_bytes(data))
    except MALFORMED:
        return None


def _ledger(root: Path, campaign: CampaignRecord, study: Study | None, catalog: str) -> dict[str, Any]:
    """What a rental ledger entry is matched on: host, rental, the campaign's dates, the deadline."""
    events, _ = read_events(root / "events.jsonl")  # the campaign checks above read the same lines: they hold
    stamps = [event.at for event in events if event.at]
    deadline = getattr(study, "deadline", None)
    reasons = dict(campaign.empty_reasons)
    if deadline is None:
        reasons["deadline"] = "the study declares no [deadline] window"
    return {
        "campaign_id": campaign.campaign_id,
        "study_name": campaign.study_name,
        "host": to_dict(campaign.host) if campaign.host is not None else None,
        "rental": to_dict(campaign.rental) if campaign.rental is not None else None,
        "launcher": dict(campaign.launcher),
        "campaign_created_at": campaign.created_at,
        "first_event_at": min(stamps) if stamps else None,
        "last_event_at": max(stamps) if stamps else None,
        "deadline": dataclasses.asdict(deadline) if deadline is not None else None,
        "catalog": catalog or None,
        "empty_reasons": reasons,
    }


def _input_record(
    kind: str, campaign: CampaignRecord, include: bool, progress: Progress
) -> tuple[InputRecord, list[PackedFile]]:
    """The input's record for BUNDLE.json (fingerprint checked on disk) and its files to pack, if included."""
    facts = campaign_input(campaign, kind)
    original = Path(facts.path if facts is not None else "")
    expected = facts.fingerprint if facts is not None else ""
    present = original.is_dir() if kind == "model" else original.is_file()
    if not present:
        if include:
            raise UserError(f"the {kind} is not at {original}", f"campaign.json {kind}.path",
                            "Restore it there, or bundle without --include-inputs.")
        return InputRecord(kind, str(original), expected, False, "", (),
                           f"not readable on the bundling host at {original}"), []
    if kind == "model":
        from protocol.io.fingerprint import tree_files

        try:
            paths = tree_files(original)
        except ValueError as exc:
            raise UserError(str(exc), str(original), "Model directories hold no symbolic links.") from None
        listing = tuple(FileEntry(p.relative_to(original).as_posix(), sha256_file(p), p.stat().st_size) for p in paths)
        actual = tree_fingerprint([(e.path, e.sha256) for e in listing])
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
    archive_path = input_archive_path(kind, original)
    if kind == "model":
        sources = [PackedFile(f"{archive_path}/{e.path}", disk=original / e.path) for e in listing]
    else:
        sources = [PackedFile(archive_path, disk=original)]
    return InputRecord(kind, str(original), expected, True, archive_path, listing), sources
