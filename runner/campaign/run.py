"""A campaign: freeze the study, run every planned trial in rotated order, keep every attempt.

Each trial runs in a fresh process or container through a :class:`Launcher`.
Its row is appended to ``raw.csv`` (and fsynced) the moment it ends, so a
crash of the host loses at most the trial that was running, and ``--resume``
finds that trial and records it before running the slot again.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol import __version__
from protocol.corpus import check_disjoint, content_fingerprint, read_corpus, token_lengths
from protocol.costing.plans import default_catalog_path, load_catalog
from protocol.errors import UserError
from protocol.fingerprint import fingerprint_path, tree_files
from protocol.jsonio import read_json, write_json_atomic
from protocol.labels import check_labels
from protocol.paths import allowed_roots, check_allowed_root
from protocol.records import (
    NO_GPU_ERROR,
    RAW_COLUMNS,
    RAW_SCHEMA_VERSION,
    WRONG_BUILD_ERROR,
    RawRow,
    Rental,
    TrialSpec,
    Variant,
)
from protocol.schedule import Slot, attempt_trial_id, rotated_schedule
from protocol.study import Study, bucket_for, load_study
from runner.campaign.gather import gather_trial, load_reference, read_status, trial_inputs
from runner.campaign.seen import check_and_record
from runner.campaign_dir.layout import (
    CAMPAIGN_SCHEMA_VERSION,
    FROZEN_CATALOG,
    LOCK_NAME,
    CampaignPaths,
    load_campaign,
    log_event,
    now_iso,
    read_raw,
    writer_lock,
)
from runner.campaign_dir.rawtable import HOST_STOP_NOTE, append_row, is_host_stopped, quarantine_partial
from runner.launch.base import HostInterrupt, Launcher, LaunchResult, TrialPaths

Progress = Callable[[str], None]








@dataclass(frozen=True)
class CampaignOutcome:
    root: Path
    rows_written: int
    rows_total: int
    slots_total: int


# -- raw table ------------------------------------------------------------------------------




# -- single writer --------------------------------------------------------------------------









# -- freezing -------------------------------------------------------------------------------


def _stat_snapshot(path: Path) -> list[tuple[str, int, int]]:
    files = tree_files(path) if path.is_dir() else [path]
    return [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def _check_fingerprint(kind: str, path: Path, expected: str, where: str) -> None:
    if not path.exists():
        raise UserError(f"{kind} not found at {path}", where, f"Fix [{kind}] path in the study.")
    actual = fingerprint_path(path)
    if actual != expected:
        raise UserError(
            f"{kind} fingerprint {actual} differs from the study's {expected}",
            where,
            f"The {kind} on disk is not the one the study was written for: restore it, or update "
            f"[{kind}] fingerprint knowingly (this makes a new study).",
        )


def freeze(
    study: Study, paths: CampaignPaths, launcher: Launcher, progress: Progress, rental: Rental | None = None,
    acknowledge_reuse: bool = False, setup_started_at: str | None = None,
) -> dict[str, Any]:
    """Check every input and write the frozen campaign description. Returns campaign.json."""
    where = str(study.path)
    progress("checking corpus, tuning corpus and model fingerprints")
    _check_fingerprint("corpus", study.corpus.path, study.corpus.fingerprint, where)
    _check_fingerprint("tuning", study.tuning.path, study.tuning.fingerprint, where)
    _check_fingerprint("model", study.model.path, study.model.fingerprint, where)
    corpus = read_corpus(study.corpus.path)
    tuning = read_corpus(study.tuning.path)
    check_disjoint(corpus, tuning, where)
    check_labels([r.label for r in (*corpus, *tuning)], study.model.path, f"{where}, corpus and tuning labels")
    if len(tuning) < study.warmup.inputs:
        raise UserError(
            f"the warm-up needs {study.warmup.inputs} inputs but the tuning corpus has {len(tuning)}",
            f"{where}, key warmup.inputs",
            "Lower warmup.inputs or add tuning data.",
        )
    progress(f"counting tokens of {len(corpus)} inputs with the model's tokenizer")
    lengths = token_lengths(study.model.path, [r.text for r in corpus])
    variants = study.variants()
    slots = rotated_schedule(variants, study.campaign.repetitions)

    paths.root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(study.path, paths.study)
    catalog_source = study.costing.catalog or default_catalog_path()
    if not Path(catalog_source).is_file():
        raise UserError("the plan catalog named by the study is not found", f"{study.path}, key costing.catalog",
                        "Fix the path, or remove [costing] to use the shipped dated snapshot.")
    load_catalog(Path(catalog_source))  # a broken catalog is refused now, not after the campaign
    shutil.copyfile(catalog_source, paths.root / FROZEN_CATALOG)
    with open(paths.corpus_index, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "label", "n_tokens", "length_bucket"])
        for record, n_tokens in zip(corpus, lengths, strict=False):
            bucket = bucket_for(n_tokens, study.length_buckets) if study.length_buckets else ""
            writer.writerow([record.id, record.label, n_tokens, bucket])
    with open(paths.schedule, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["order_index", "trial_id", "variant_id", "repetition"])
        for slot in slots:
            writer.writerow([slot.order_index, slot.trial_id, slot.variant_id, slot.repetition])
    content_fp = content_fingerprint(corpus)
    description: dict[str, Any] = {
        "schema_version": CAMPAIGN_SCHEMA_VERSION,
        "campaign_id": uuid.uuid4().hex,
        "created_at": now_iso(),
        "setup_started_at": setup_started_at,
        "isocost_version": __version__,
        "raw_schema_version": RAW_SCHEMA_VERSION,
        "study_name": study.name,
        "study_path": str(study.path),
        "study_sha256": study.sha256,
        "question": study.question,
        "corpus": {
            "path": str(study.corpus.path),
            "fingerprint": study.corpus.fingerprint,
            "content_fingerprint": content_fp,
            "inputs": len(corpus),
            "index_sha256": fingerprint_path(paths.corpus_index),
        },
        "tuning": {"path": str(study.tuning.path), "fingerprint": study.tuning.fingerprint, "inputs": len(tuning)},
        "model": {"path": str(study.model.path), "fingerprint": study.model.fingerprint},
        "warmup": study.warmup.to_dict(),
        "warmup_texts": [r.text for r in tuning[: study.warmup.inputs]],
        "warmup_ids": [r.id for r in tuning[: study.warmup.inputs]],
        "variants": [v.to_dict() for v in variants],
        "repetitions": study.campaign.repetitions,
        "order": study.campaign.order,
        "launcher": launcher.describe(),
        "host": {"hostname": os.uname().nodename, "cpu_count": os.cpu_count()},
        "rental": rental.to_dict() if rental is not None else None,
        "catalog": {"snapshot": FROZEN_CATALOG, "source": str(catalog_source),
                    "sha256": fingerprint_path(paths.root / FROZEN_CATALOG)},
        "empty_reasons": {} if rental is not None else {
            "rental": "no --gpu given to `isocost run`: the plan this host is rented under is unknown"
        },
    }
    reused = check_and_record(study, content_fp, description["campaign_id"], paths.root, acknowledge_reuse)
    description["seen_corpus_reuse"] = reused
    write_json_atomic(paths.campaign, description)
    return description




# -- running --------------------------------------------------------------------------------


def run_campaign(
    study_path: Path,
    out: Path,
    launcher: Launcher,
    *,
    resume: bool = False,
    progress: Progress = lambda message: None,
    rental: Rental | None = None,
    acknowledge_seen_corpus: bool = False,
    allowed_root_list: tuple[str, ...] = (),
) -> CampaignOutcome:
    """Run (or resume) a campaign; returns when every slot has a final row."""
    study = load_study(study_path)
    roots = allowed_roots(allowed_root_list)
    for path in (study.path, study.corpus.path, study.tuning.path, study.model.path, study.costing.catalog):
        if path is not None:
            check_allowed_root(path, roots)
    paths = CampaignPaths(out)
    if resume and not paths.campaign.exists():
        raise UserError("nothing to resume: no campaign.json", str(out), "Run without --resume to start one.")
    if not resume and out.exists() and any(p.name != LOCK_NAME for p in out.iterdir()):
        if paths.campaign.exists():
            raise UserError(
                "the results directory already holds a campaign",
                str(out),
                "Use --resume to continue it, or choose another --out.",
            )
        raise UserError(
            "the results directory is not empty and holds no campaign",
            str(out),
            "Choose a new or empty --out directory.",
        )
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    with writer_lock(out):
        if not resume and paths.campaign.exists():  # another run started it while we waited for the lock
            raise UserError("the results directory already holds a campaign", str(out),
                            "Use --resume to continue it, or choose another --out.")
        if resume:
            description = _check_resume(study, paths, launcher, rental)
            log_event(paths, "resume")
            progress(f"resuming campaign {description['campaign_id']} in {out}")
            side = quarantine_partial(paths.raw)
            if side is not None:
                progress(f"raw.csv ended in a row cut while it was written: its bytes are kept in {side.name}; "
                         "that trial is recorded again from its directory")
        else:
            try:
                started = log_event(paths, "setup_start")
                description = freeze(study, paths, launcher, progress, rental, acknowledge_seen_corpus, started)
            except BaseException:
                _undo_refused_start(out, created)
                raise
            log_event(paths, "setup_end")
        return _run_slots(study, paths, description, launcher, progress)


def _check_resume(study: Study, paths: CampaignPaths, launcher: Launcher, rental: Rental | None) -> dict[str, Any]:
    """The campaign to resume, refused if the study, launcher, image or rental changed."""
    out = paths.root
    description = load_campaign(out)
    if description["study_sha256"] != study.sha256:
        raise UserError(
            f"the study changed since this campaign started ({description['study_sha256']} at start, "
            f"{study.sha256} now)",
            str(study.path),
            "Thresholds and variants are fixed before timing: restore the study, or start a new "
            "campaign in another --out (a changed threshold also needs a new independent evaluation set).",
        )
    started_with = description.get("launcher", {})
    now = launcher.describe()
    for key in ("kind", "image_id"):
        if started_with.get(key, "") != now.get(key, ""):
            raise UserError(
                f"this campaign started with launcher {started_with.get('kind')} image "
                f"{started_with.get('image_id') or '(none)'}, not {now.get('kind')} image "
                f"{now.get('image_id') or '(none)'}",
                str(out),
                "Resume with the same launcher and image (--launcher, --image), or start a new campaign: "
                "trials of one configuration never mix software stacks.",
            )
    if rental is not None and description.get("rental") != rental.to_dict():
        raise UserError(
            f"this campaign was started with rental {description.get('rental')}, not {rental.to_dict()}",
            str(out),
            "Resume without --gpu/--lots, or start a new campaign for another host.",
        )
    return description


def _undo_refused_start(out: Path, created: bool) -> None:
    """A start refused before campaign.json exists leaves --out as it was: absent, or empty.

    Only what this start wrote is removed (the folder was checked empty before); a lock file
    (a name starting with '.') is left to its owner.
    """
    if created and not any(child.name.startswith(".") for child in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)
        return
    for child in out.iterdir():
        if child.name.startswith("."):
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _run_slots(
    study: Study, paths: CampaignPaths, description: dict[str, Any], launcher: Launcher, progress: Progress
) -> CampaignOutcome:
    variants = {v["variant_id"]: Variant.from_dict(v) for v in description["variants"]}
    slots = rotated_schedule(tuple(variants.values()), description["repetitions"])
    reference = load_reference(paths.root, study)
    snapshots = {"corpus": _stat_snapshot(study.corpus.path), "model": _stat_snapshot(study.model.path)}
    rows = read_raw(paths.raw)
    written = 0
    for slot in slots:
        attempts = {row["trial_id"]: row for row in rows if _attempt_of(row["trial_id"], slot) is not None}
        if any(not is_host_stopped(row) for row in attempts.values()):
            continue  # this pass already has its final row; failures are never silently rerun
        attempt = 1
        while paths.trial_dir(attempt_trial_id(slot, attempt)).exists():
            trial_id = attempt_trial_id(slot, attempt)
            if trial_id not in attempts:
                # The host stopped while this trial ran: record what it left, once.
                row = _orphan_row(study, paths, reference, slot, attempt)
                if row is None:
                    break  # created but never launched, and removed: this attempt number is free again
                append_row(paths.raw, row)
                written += 1
                rows.append(dict(zip(RAW_COLUMNS, row.cells(), strict=False)))
                attempts[trial_id] = rows[-1]
                progress(f"[{slot.order_index}/{len(slots)}] {trial_id}: recorded as "
                         f"{row.values['status']} (found on resume)")
            attempt += 1
        if any(not is_host_stopped(row) for row in attempts.values()):
            continue
        _recheck_inputs(study, snapshots)
        row = _run_one(study, paths, description, reference, slot, attempt, variants[slot.variant_id],
                       launcher, progress, len(slots))
        append_row(paths.raw, row)
        written += 1
        rows.append(dict(zip(RAW_COLUMNS, row.cells(), strict=False)))
        stop_if_no_gpu(rows, len(slots), paths)
    log_event(paths, "trials_end")
    return CampaignOutcome(root=paths.root, rows_written=written, rows_total=len(rows), slots_total=len(slots))


def stop_if_no_gpu(rows: list[dict[str, str]], n_slots: int, paths: CampaignPaths) -> None:
    """Stop a GPU campaign early, its rows kept, when every trial so far (at least two) found no GPU (or a
    torch build without the study's GPU stack): the other trials would only burn rented time the same way."""
    def no_gpu(row: dict[str, str]) -> bool:
        return row["status"] == "refused" and (NO_GPU_ERROR in row["notes"] or WRONG_BUILD_ERROR in row["notes"])

    if len(rows) < min(2, n_slots) or not all(no_gpu(r) for r in rows):
        return
    why = next(p for p in rows[-1]["notes"].split(" | ") if NO_GPU_ERROR in p or WRONG_BUILD_ERROR in p)
    raise UserError(
        f"every trial so far ({len(rows)} of {n_slots}) found no GPU, so the campaign stops here (rows kept in "
        f"raw.csv): {why}",
        str(paths.raw),
        "Check the host first: isocost hosts check --host local=local --stack cuda (or rocm) must show a container "
        "that sees the GPU; then run the study again (new --out), or --resume to run only the passes left.",
    )


def _attempt_of(trial_id: str, slot: Slot) -> int | None:
    if trial_id == slot.trial_id:
        return 1
    prefix = slot.trial_id + "-a"
    if trial_id.startswith(prefix) and trial_id[len(prefix):].isdigit():
        return int(trial_id[len(prefix):])
    return None


def _recheck_inputs(study: Study, snapshots: dict[str, list[tuple[str, int, int]]]) -> None:
    """Refuse to start another trial if the corpus or model changed on disk."""
    for kind, ref in (("corpus", study.corpus), ("model", study.model)):
        if _stat_snapshot(ref.path) != snapshots[kind]:
            _check_fingerprint(kind, ref.path, ref.fingerprint, f"{study.path} (checked before the next trial)")
            snapshots[kind] = _stat_snapshot(ref.path)


def _spec(
    study: Study, description: dict[str, Any], slot: Slot, attempt: int, variant: Variant,
    launcher: Launcher, trial_paths: TrialPaths,
) -> TrialSpec:
    corpus_view, model_view, _ = launcher.trial_view(trial_paths)
    image_ref, image_id, image_digest = launcher.image_fields()
    return TrialSpec(
        trial_id=attempt_trial_id(slot, attempt),
        campaign_id=description["campaign_id"],
        study_sha256=description["study_sha256"],
        variant=variant,
        repetition=slot.repetition,
        order_index=slot.order_index,
        attempt=attempt,
        corpus_path=corpus_view,
        corpus_fingerprint=study.corpus.fingerprint,
        model_path=model_view,
        model_fingerprint=study.model.fingerprint,
        warmup=study.warmup,
        warmup_texts=tuple(description["warmup_texts"]),
        launcher=launcher.name,
        image_ref=image_ref,
        image_id=image_id,
        image_digest=image_digest,
        timeout_s=study.campaign.trial_timeout_s,
    )


def _run_one(
    study: Study, paths: CampaignPaths, description: dict[str, Any], reference: Any, slot: Slot,
    attempt: int, variant: Variant, launcher: Launcher, progress: Progress, n_slots: int,
) -> RawRow:
    trial_id = attempt_trial_id(slot, attempt)
    trial_dir = paths.trial_dir(trial_id)
    trial_dir.mkdir(parents=True, exist_ok=False)
    trial_paths = TrialPaths(trial_dir=trial_dir, corpus=study.corpus.path, model=study.model.path)
    spec = _spec(study, description, slot, attempt, variant, launcher, trial_paths)
    spec = dataclasses.replace(spec, **trial_inputs(paths.corpus_index, variant))
    # The start event comes before spec.json: a trial with a spec (one --resume records) has its start event.
    log_event(paths, "trial_start", trial_id=trial_id)
    write_json_atomic(trial_dir / "spec.json", spec.to_dict())
    progress(f"[{slot.order_index}/{n_slots}] {trial_id}: running ({variant.variant_id}, "
             f"repetition {slot.repetition})")
    interrupted: HostInterrupt | None = None
    try:
        result = launcher.run(trial_paths, study.campaign.trial_timeout_s)
    except HostInterrupt as exc:
        interrupted = exc
        result = exc.result
    log_event(paths, "trial_end", trial_id=trial_id)
    row = gather_trial(spec, trial_dir, result, reference, study)
    if interrupted is not None:
        append_row(paths.raw, row)
        raise KeyboardInterrupt from None
    values = row.values
    shown = f"{values['pass_s']:.2f} s" if isinstance(values.get("pass_s"), float) else "no pass time"
    if isinstance(values.get("device_busy_share"), float):  # the first thing a GPU user needs to see
        shown += f" (device busy {values['device_busy_share']:.0%} of it)"
    if values.get("pass_compilations"):
        shown += f", RECOMPILED {values['pass_compilations']}x inside the pass"
    progress(f"[{slot.order_index}/{n_slots}] {trial_id}: {values['status']}, {shown}, "
             f"{values['quality_verdict']}")
    return row


def _orphan_row(study: Study, paths: CampaignPaths, reference: Any, slot: Slot, attempt: int) -> RawRow | None:
    trial_id = attempt_trial_id(slot, attempt)
    trial_dir = paths.trial_dir(trial_id)
    spec_path = trial_dir / "spec.json"
    if not spec_path.exists():
        shutil.rmtree(trial_dir)  # created but never launched: nothing ran, nothing to keep
        return None
    spec = TrialSpec.from_dict(read_json(spec_path))
    _stop_leftover(trial_dir)
    status, _ = read_status(trial_dir)
    # A trial that wrote its status ended by itself (unless the host had stopped it: status interrupted): its
    # row is final and its pass never runs again. Otherwise the host stopped (or died) while it ran: the row is
    # kept and the pass runs again. The two notes must never share the host-stop marker.
    finished = status is not None and status.status != "interrupted"
    crashed = not finished and status is None and _log_shows_error(trial_dir / "trial.log")
    note = ("the trial ended by itself after the host CLI had gone; recorded from its directory on --resume"
            if finished else f"{HOST_STOP_NOTE} before recording this trial; found on --resume")
    result = LaunchResult(exit_code=None, interrupted=not finished and not crashed, notes=(note,))
    return gather_trial(spec, trial_dir, result, reference, study)


def _stop_leftover(trial_dir: Path) -> None:
    """If the trial outlived the host CLI, stop it before recording it.

    A container is found by the id in launcher.json. A trial process is found by its command line
    (``runner.trial`` and this trial's spec.json), so one whose host died before launcher.json was
    written is stopped too; the call returns once it is gone, so it writes nothing after its row.
    """
    pid_file = trial_dir / "launcher.json"
    if pid_file.exists():
        try:
            record = read_json(pid_file)
        except (UserError, ValueError, TypeError):
            record = {}
        container_id = record.get("container_id") if isinstance(record, dict) else None
        if container_id:
            _remove_leftover_container(str(container_id), trial_dir)
            return
    for pid in _trial_processes(trial_dir):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        _wait_gone(pid)


def _trial_processes(trial_dir: Path) -> list[int]:
    """Processes on this machine running the trial of ``trial_dir`` (empty where there is no /proc)."""
    spec = (trial_dir / "spec.json").resolve()
    found = []
    try:
        entries = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            args = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            if "runner.trial" not in args or int(entry.name) == os.getpid():
                continue
            cwd = Path(os.readlink(entry / "cwd"))  # the trial's relative paths are relative to its cwd
        except OSError:
            continue
        if any(arg.endswith("spec.json") and (cwd / arg).resolve() == spec for arg in args):
            found.append(int(entry.name))
    return found


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Until the killed process has exited (or is a zombie waiting for its new parent to reap it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def _log_shows_error(path: Path) -> bool:
    """Did the trial die of an exception (its traceback is in the log) rather than a kill?"""
    try:
        tail = path.read_bytes()[-4096:].decode("utf-8", "replace")
    except OSError:
        return False
    return "Traceback (most recent call last)" in tail


def _remove_leftover_container(container_id: str, trial_dir: Path) -> None:
    """A trial container that outlived the host CLI: keep its logs, then stop and remove it (best effort)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        container = client.containers.get(container_id)
        with open(trial_dir / "trial.log", "ab") as log:
            log.write(container.logs(stdout=True, stderr=True))
        container.remove(force=True)  # kills it if running; also works on a created, never started one
    except Exception:  # the engine may be gone, or the container already removed  # noqa: BLE001
        pass
