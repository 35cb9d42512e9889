"""A campaign: freeze the study, run every planned trial in rotated order, keep every attempt.

Each trial runs in a fresh process or container through a :class:`Launcher`.
Its row is appended to ``raw.csv`` (and fsynced) the moment it ends, so a
crash of the host loses at most the trial that was running, and ``--resume``
finds that trial and records it before running the slot again
(:mod:`runner.campaign.resume`). Freezing the inputs is :mod:`runner.campaign.freeze`.

Example::

    outcome = run_campaign(Path("study.toml"), Path("results/quick"), ProcessLauncher(), progress=print)
    outcome.rows_total, outcome.slots_total
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.names import check_gpu_name
from protocol.io.paths import allowed_roots, check_allowed_root
from protocol.io.safe_write import make_dirs
from protocol.records.codec import to_dict, write_record
from protocol.records.raw_record import RawRecord
from protocol.records.stages import NO_GPU_ERROR, WRONG_BUILD_ERROR, CampaignRecord, Rental, TrialSpec, Variant
from protocol.study.load import Study, load_study
from protocol.study.schedule import Slot, attempt_trial_id, rotated_schedule
from runner.campaign.freeze import check_fingerprint, freeze, stat_snapshot
from runner.campaign.gather import gather_trial, load_reference, trial_inputs
from runner.campaign.resume import attempt_of, check_resume, record_orphan
from runner.campaign_dir.layout import LOCK_NAME, CampaignPaths, log_event, read_rows, writer_lock
from runner.campaign_dir.raw_table import append_row, is_host_stopped, quarantine_partial
from runner.launch.launcher import HostInterrupt, Launcher, TrialPaths

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CampaignOutcome:
    root: Path
    rows_written: int
    rows_total: int
    slots_total: int


def run_campaign(
    study_path: Path | Study,
    out: Path,
    launcher: Launcher,
    *,
    resume: bool = False,
    progress: Progress = lambda message: None,
    rental: Rental | None = None,
    acknowledge_seen_corpus: bool = False,
    allowed_root_list: tuple[str, ...] = (),
    ledger_dir: Path | None = None,
    campaign_hosts: tuple[str, ...] = (),
) -> CampaignOutcome:
    """Run (or resume) a campaign; returns when every slot has a final row. ``study_path``: the study, parsed
    once by the caller (``isocost run``), or its file. ``ledger_dir``: where the seen-corpus ledger is (default:
    runner.campaign.seen.ledger_path's). ``campaign_hosts``: every host of a multi-host run, sealed at the start."""
    study = study_path if isinstance(study_path, Study) else load_study(study_path)
    roots = allowed_roots(allowed_root_list)
    for path in (study.path, study.corpus.path, study.tuning.path, study.model.path, study.costing.catalog):
        if path is not None:
            check_allowed_root(path, roots)
    paths = CampaignPaths(out)
    check_out(paths, resume)
    created = not out.exists()
    make_dirs(out, fix="Choose a writable --out directory.")
    with writer_lock(out):
        if not resume and paths.campaign.exists():  # another run started it while we waited for the lock
            raise UserError("the results directory already holds a campaign", str(out),
                            "Use --resume to continue it, or choose another --out.")
        if resume:
            campaign = check_resume(study, paths, launcher, rental)
            log_event(paths, "resume")
            progress(f"resuming campaign {campaign.campaign_id} in {out}")
            for line in launcher.recover_leftovers(out):
                progress(f"left over from the last run: {line}")
            _say(progress, launcher.preflight(study, out))
            side = quarantine_partial(paths.raw)
            if side is not None:
                progress(f"raw.csv ended in a row cut while it was written: its bytes are kept in {side.name}; "
                         "that trial is recorded again from its directory")
        else:
            try:
                started = log_event(paths, "setup_start")
                _say(progress, launcher.preflight(study, out))  # before anything is frozen: a refusal leaves --out
                campaign = freeze(study, paths, launcher, progress, rental, acknowledge_seen_corpus, started,
                                  ledger_dir, campaign_hosts)
            except BaseException:
                _undo_refused_start(out, created)
                raise
            log_event(paths, "setup_end")
        return _run_slots(study, paths, campaign, launcher, progress)


def _say(progress: Progress, line: str) -> None:
    if line:
        progress(line)


def rental_from_options(gpu: str | None, lots: int | None) -> Rental | None:
    """``run --gpu G --lots N`` as the rental campaign.json records (``check`` refuses the same options)."""
    if lots is not None and gpu is None:
        raise UserError("--lots needs --gpu", "isocost run", "Name the rented GPU type with --gpu.")
    return Rental(gpu=check_gpu_name(gpu, "--gpu"), lots=lots or 1) if gpu is not None else None


def check_out(paths: CampaignPaths, resume: bool) -> None:
    """--out must hold the campaign to resume, or be new or empty for a new one."""
    out = paths.root
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
    study: Study, paths: CampaignPaths, campaign: CampaignRecord, launcher: Launcher, progress: Progress
) -> CampaignOutcome:
    variants = {v.variant_id: v for v in campaign.variants}
    slots = rotated_schedule(campaign.variants, campaign.repetitions)
    reference = load_reference(paths.root, study)
    snapshots = {"corpus": stat_snapshot(study.corpus.path), "model": stat_snapshot(study.model.path)}
    rows = read_rows(paths.raw)
    written = 0
    for slot in slots:
        attempts = {row.trial_id: row for row in rows if attempt_of(row.trial_id, slot) is not None}
        if any(not is_host_stopped(row) for row in attempts.values()):
            continue  # this pass already has its final row; failures are never silently rerun
        attempt = 1
        while paths.trial_dir(attempt_trial_id(slot, attempt)).exists():
            trial_id = attempt_trial_id(slot, attempt)
            if trial_id not in attempts:
                # The host stopped while this trial ran: record what it left, once.
                row = record_orphan(study, paths, reference, slot, attempt, launcher)
                if row is None:
                    break  # created but never launched, and removed: this attempt number is free again
                append_row(paths.raw, row)
                written += 1
                rows.append(row)
                attempts[trial_id] = row
                progress(f"[{slot.order_index}/{len(slots)}] {trial_id}: recorded as {row.status} (found on resume)")
            attempt += 1
        if any(not is_host_stopped(row) for row in attempts.values()):
            continue
        _recheck_inputs(study, snapshots)
        row = _run_one(study, paths, campaign, reference, slot, attempt, variants[slot.variant_id],
                       launcher, progress, len(slots))
        append_row(paths.raw, row)
        written += 1
        rows.append(row)
        stop_if_no_gpu(rows, len(slots), paths)
    log_event(paths, "trials_end")
    return CampaignOutcome(root=paths.root, rows_written=written, rows_total=len(rows), slots_total=len(slots))


def stop_if_no_gpu(rows: Sequence[RawRecord], n_slots: int, paths: CampaignPaths) -> None:
    """Stop a GPU campaign early, its rows kept, when every trial so far (at least two) found no GPU (or a
    torch build without the study's GPU stack): the other trials would only burn rented time the same way."""
    def no_gpu(row: RawRecord) -> bool:
        return row.status == "refused" and (NO_GPU_ERROR in row.notes or WRONG_BUILD_ERROR in row.notes)

    if len(rows) < min(2, n_slots) or not all(no_gpu(r) for r in rows):
        return
    why = next(p for p in rows[-1].notes.split(" | ") if NO_GPU_ERROR in p or WRONG_BUILD_ERROR in p)
    raise UserError(
        f"every trial so far ({len(rows)} of {n_slots}) found no GPU, so the campaign stops here (rows kept in "
        f"raw.csv): {why}",
        str(paths.raw),
        "Check the host first: isocost hosts check --host local=local --stack cuda (or rocm) must show a container "
        "that sees the GPU; then run the study again (new --out), or --resume to run only the passes left.",
    )


def _recheck_inputs(study: Study, snapshots: dict[str, list[tuple[str, int, int]]]) -> None:
    """Refuse to start another trial if the corpus or model changed on disk."""
    for kind, ref in (("corpus", study.corpus), ("model", study.model)):
        if stat_snapshot(ref.path) != snapshots[kind]:
            check_fingerprint(kind, ref.path, ref.fingerprint, f"{study.path} (checked before the next trial)")
            snapshots[kind] = stat_snapshot(ref.path)


def _spec(
    study: Study, campaign: CampaignRecord, slot: Slot, attempt: int, variant: Variant,
    launcher: Launcher, trial_paths: TrialPaths,
) -> TrialSpec:
    corpus_view, model_view, _ = launcher.trial_view(trial_paths)
    image_ref, image_id, image_digest = launcher.image_fields()
    return TrialSpec(
        trial_id=attempt_trial_id(slot, attempt),
        campaign_id=campaign.campaign_id,
        study_sha256=campaign.study_sha256,
        variant=variant,
        repetition=slot.repetition,
        order_index=slot.order_index,
        attempt=attempt,
        corpus_path=corpus_view,
        corpus_fingerprint=study.corpus.fingerprint,
        model_path=model_view,
        model_fingerprint=study.model.fingerprint,
        warmup=study.warmup,
        warmup_texts=campaign.warmup_texts,
        launcher=launcher.name,
        image_ref=image_ref,
        image_id=image_id,
        image_digest=image_digest,
        timeout_s=study.campaign.trial_timeout_s,
        task=study.task,
        task_options=dict(study.task_options),
        engine_settings=study.settings_of(variant.engine),
        traffic=to_dict(study.traffic) if study.traffic is not None else None,
    )


def _run_one(
    study: Study, paths: CampaignPaths, campaign: CampaignRecord, reference: Any, slot: Slot,
    attempt: int, variant: Variant, launcher: Launcher, progress: Progress, n_slots: int,
) -> RawRecord:
    trial_id = attempt_trial_id(slot, attempt)
    trial_dir = paths.trial_dir(trial_id)
    make_dirs(trial_dir.parent, paths.root)  # trials/ itself is never a link
    trial_dir.mkdir(exist_ok=False)
    trial_paths = TrialPaths(trial_dir=trial_dir, corpus=study.corpus.path, model=study.model.path)
    spec = _spec(study, campaign, slot, attempt, variant, launcher, trial_paths)
    spec = dataclasses.replace(spec, **trial_inputs(paths.corpus_index, variant))
    # The start event comes before spec.json: a trial with a spec (one --resume records) has its start event.
    log_event(paths, "trial_start", trial_id=trial_id)
    write_record(trial_dir / "spec.json", spec, paths.root)
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
    progress(f"[{slot.order_index}/{n_slots}] {trial_id}: {row.status}, {_shown(row)}, {row.quality_verdict}")
    return row


def _shown(row: RawRecord) -> str:
    """The pass time of a finished trial, as the progress line shows it."""
    shown = f"{row.pass_s:.2f} s" if isinstance(row.pass_s, float) else "no pass time"
    if isinstance(row.device_busy_share, float):  # the first thing a GPU user needs to see
        shown += f" (device busy {row.device_busy_share:.0%} of it)"
    if row.pass_compilations:
        shown += f", RECOMPILED {row.pass_compilations}x inside the pass"
    return shown
