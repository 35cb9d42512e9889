"""Resuming a campaign: the same study, launcher, image and rental, and the trials the host left behind.

:func:`check_resume` refuses a resume that would mix configurations (a changed study, another
launcher or image, another rental). :func:`record_orphan` turns a trial directory without a row
(the host stopped or died while it ran) into its row, once, after stopping the trial if it still
runs (the launcher's ``stop_leftover``: its kind's leftover, a process, a container or a Slurm job).

Example::

    record = check_resume(study, CampaignPaths(out), launcher, rental=None)
    row = record_orphan(study, CampaignPaths(out), reference, slot, 1, launcher)   # None: never launched
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.records.codec import read_record, to_dict
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord, Rental, TrialSpec
from protocol.study.load import Study
from protocol.study.schedule import Slot, attempt_trial_id
from runner.campaign.gather import gather_trial, read_status
from runner.campaign_dir.layout import CampaignPaths, load_record
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.launcher import Launcher, LaunchResult
from runner.launch.leftover import log_shows_error


def check_resume(study: Study, paths: CampaignPaths, launcher: Launcher, rental: Rental | None) -> CampaignRecord:
    """The campaign to resume, refused if the study, launcher, image or rental changed."""
    out = paths.root
    campaign = load_record(out)
    if campaign.study_sha256 != study.sha256:
        raise UserError(
            f"the study changed since this campaign started ({campaign.study_sha256} at start, "
            f"{study.sha256} now)",
            str(study.path),
            "Thresholds and variants are fixed before timing: restore the study, or start a new "
            "campaign in another --out (a changed threshold also needs a new independent evaluation set).",
        )
    _check_launcher(campaign.launcher, launcher, out)
    if rental is not None and campaign.rental != rental:
        recorded = to_dict(campaign.rental) if campaign.rental is not None else None
        raise UserError(
            f"this campaign was started with rental {recorded}, not {to_dict(rental)}",
            str(out),
            "Resume without --gpu/--lots, or start a new campaign for another host.",
        )
    return campaign


def _check_launcher(started_with: Mapping[str, str], launcher: Launcher, out: Path) -> None:
    """The launcher's identity (kind, image; for Slurm its runtime and node…) as the campaign recorded it."""
    if started_with.get("kind", "") == launcher.resume_identity().get("kind", ""):
        launcher.adopt(started_with)  # what the campaign pinned when it started (a Slurm node)
    now = launcher.resume_identity()
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
    for key in sorted(set(now) - {"kind", "image_id"}):
        if started_with.get(key, "") != now[key]:
            raise UserError(
                f"this campaign started with launcher {started_with.get('kind')} {key} "
                f"{started_with.get(key) or '(none)'}, not {now[key] or '(none)'}",
                str(out),
                f"Resume with the same {key} (the launcher's options), or start a new campaign: trials of one "
                "configuration never mix hardware or software.",
            )


def attempt_of(trial_id: str, slot: Slot) -> int | None:
    """The attempt number ``trial_id`` is of ``slot`` (1 for the slot's own id), None when it is another slot's."""
    if trial_id == slot.trial_id:
        return 1
    prefix = slot.trial_id + "-a"
    if trial_id.startswith(prefix) and trial_id[len(prefix):].isdigit():
        return int(trial_id[len(prefix):])
    return None


def record_orphan(study: Study, paths: CampaignPaths, reference: Any, slot: Slot,
                  attempt: int, launcher: Launcher) -> RawRecord | None:
    """The row of a trial the host left unrecorded; None (and its directory removed) when it never launched.

    The trial is stopped first by ``launcher`` (the campaign's kind)."""
    trial_id = attempt_trial_id(slot, attempt)
    trial_dir = paths.trial_dir(trial_id)
    spec_path = trial_dir / "spec.json"
    if not spec_path.exists():
        shutil.rmtree(trial_dir)  # created but never launched: nothing ran, nothing to keep
        return None
    spec = read_record(spec_path, TrialSpec)
    seen = launcher.stop_leftover(trial_dir)
    status, _ = read_status(trial_dir)
    # A trial that wrote its status ended by itself (unless the host had stopped it: status interrupted): its
    # row is final and its pass never runs again. Otherwise the host stopped (or died) while it ran: the row is
    # kept and the pass runs again. The two notes must never share the host-stop marker.
    finished = status is not None and status.status != "interrupted"
    crashed = not finished and status is None and log_shows_error(trial_dir / "trial.log")
    note = ("the trial ended by itself after the host CLI had gone; recorded from its directory on --resume"
            if finished else f"{HOST_STOP_NOTE} before recording this trial; found on --resume")
    result = LaunchResult(exit_code=seen.exit_code if seen else None, interrupted=not finished and not crashed,
                          notes=(note, *(seen.notes if seen else ())), placement=seen.placement if seen else None)
    return gather_trial(spec, trial_dir, result, reference, study)
