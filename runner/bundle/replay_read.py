"""An ``isocost replay`` directory read back as configurations to compare: the reruns of a bundle on another host.

``isocost replay BUNDLE`` writes ``replay.json`` (each rerun compared with the bundle's original by id under the
study's replay rule, and the sha256 of its output files; a reader re-derives the comparison from the files, since
anyone can recompute a sha256) beside ``trials/<id>/`` (the reruns) and ``bundle/``
(the verified bundle, its campaign in ``bundle/campaign``). ``isocost compare`` and ``isocost decide`` read such a
directory as the campaign it replayed plus one configuration per replayed variant, compared by id with the one
reference like every other configuration (:mod:`protocol.decision.agreement`).

Example::

    campaign_id, configs = replay_configurations(Path("quick.replay-20261201T2300Z"), study)
    configs[0].configuration_id      # "batch_size=1 replayed in quick.replay-20261201T2300Z"
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from protocol.decision.agreement import ConfigurationOutputs
from protocol.errors import UserError
from protocol.io.fingerprint import sha256_file
from protocol.io.paths import check_safe_name
from protocol.records.codec import read_record
from protocol.records.stages import read_status
from protocol.tasks import study_task
from runner.bundle.compare import rerun_figures
from runner.bundle.records import ReplayReport, TrialReplay
from runner.campaign_dir.layout import read_csv_rows
from runner.campaign_dir.seal import outputs_cell

REPLAY_JSON = "replay.json"


def is_replay_dir(path: Path) -> bool:
    return (path / REPLAY_JSON).is_file() and not (path / "campaign.json").exists()


def replayed_campaign(replay_dir: Path) -> Path:
    """The campaign a replay directory replayed: the one inside its verified bundle."""
    return replay_dir / "bundle" / "campaign"



def replay_configurations(replay_dir: Path, study: Any) -> tuple[str, list[ConfigurationOutputs]]:
    """What an ``isocost replay`` directory adds to a comparison: the campaign id it replayed, and one
    configuration per replayed variant (its accepted reruns). replay.json is derived, so nothing in it is taken on
    trust: each rerun's files are checked against the sha256 it recorded for them, and what it recorded of each
    rerun (accepted, metric, agreement with the original, match) is re-derived from the rerun's files, the
    replayed bundle's original and its frozen corpus index (:func:`rederived_differences`)."""
    path = replay_dir / "replay.json"
    report = read_record(path, ReplayReport)
    if report.study_sha256 != study.sha256:
        raise UserError("the replay is of a bundle of another study", str(path),
                        "Compare a replay with campaigns of the study it replayed.")
    task = study_task(study)
    campaign_root = replayed_campaign(replay_dir)
    reference = task.reference(read_csv_rows(campaign_root / "corpus_index.csv"), study)
    by_variant: dict[str, ConfigurationOutputs] = {}
    for trial in report.trials:
        trial_dir = replay_dir / "trials" / check_safe_name(trial.trial_id, what="trial id", where=str(path))
        if (outputs_cell(trial_dir, task.output_files) or "") != trial.outputs_sha256:
            raise UserError(f"the replayed outputs of {trial.trial_id} are not those replay.json recorded",
                            str(trial_dir), "They were changed after the replay: replay the bundle again.")
        manifest = trial_dir / "manifest.json"
        if (sha256_file(manifest) if manifest.is_file() else "") != trial.manifest_sha256:
            raise UserError(f"the manifest.json of {trial.trial_id} is not the one replay.json recorded (it says "
                            "whether the test-only fault hook was set)", str(manifest),
                            "It was changed after the replay: replay the bundle again.")
        differences = rederived_differences(trial, trial_dir, campaign_root / "trials" / trial.trial_id, task,
                                            study, reference)
        if differences:
            raise UserError(f"replay.json does not follow from the replayed files of {trial.trial_id}: "
                            + "; ".join(differences[:3]), str(path),
                            "replay.json or the reruns were changed after the replay (a recomputed outputs_sha256 "
                            "does not make them agree): replay the bundle again.")
        if not trial.replay_accepted:
            continue
        variant = trial.variant_id
        name = f"{variant} replayed in {replay_dir.name}"
        known = by_variant.get(variant) or ConfigurationOutputs(name, variant, [], [], [], str(replay_dir))
        by_variant[variant] = ConfigurationOutputs(
            name, variant, [*known.metrics, trial.replay_metric], [*known.outputs, task.read_pass(trial_dir)],
            [*known.trial_ids, trial.trial_id], str(replay_dir))
    return report.campaign_id, list(by_variant.values())


def rederived_differences(trial: TrialReplay, trial_dir: Path, original_dir: Path, task: Any, study: Any,
                          reference: Any) -> list[str]:
    """What replay.json records of ``trial`` that its files do not give (empty: it follows from them): the rerun's
    status against its status.json, then every figure :func:`runner.bundle.compare.rerun_figures` derives."""
    status = read_status(trial_dir)
    found = status.status if status is not None else "none"
    problems = [] if trial.status != "ok" or found == "ok" else [f"status ok, its status.json says {found}"]
    figures = rerun_figures(task, study, reference, trial_dir, original_dir, trial.status)
    for key, value in figures.items():
        recorded = getattr(trial, key)
        if recorded != value and not (_number(recorded) and _number(value) and math.isclose(recorded, value)):
            problems.append(f"{key} {recorded!r}, its files give {value!r}")
    return problems


def _number(value: Any) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def refuse_replay_reference(reference: Path | None, command: str) -> None:
    """``--reference`` must be a campaign: a replay's reruns are compared WITH the reference, never are it."""
    if reference is not None and is_replay_dir(reference):
        raise UserError(
            "--reference names a replay directory: a replay is compared with the reference, it cannot be the "
            "reference itself", str(reference),
            f"Name the campaign it replayed ({replayed_campaign(reference)}) or another campaign directory given "
            f"to isocost {command}.")


def split_replays(dirs: list[Path]) -> tuple[list[Path], list[Path]]:
    """The campaign directories and the replay directories among ``dirs``; a replay brings the campaign it
    replayed (from its bundle) unless that campaign is given too."""
    from runner.campaign_dir.layout import load_record

    replays = [d for d in dirs if is_replay_dir(d)]
    campaigns = [d for d in dirs if d not in replays]
    known = {load_record(d).campaign_id for d in campaigns if (d / "campaign.json").is_file()}
    for replay in replays:
        original = replayed_campaign(replay)
        if not (original / "campaign.json").is_file():
            raise UserError("the replay directory holds no replayed campaign (bundle/campaign)", str(replay),
                            "Pass the --out of `isocost replay`.")
        if load_record(original).campaign_id not in known:
            campaigns.append(original)
            known.add(load_record(original).campaign_id)
    if not campaigns:
        raise UserError("no campaign directory given", "DIRS", "Pass campaign directories (and replay directories).")
    return campaigns, replays


def replays_loader(replays: list[Path]) -> Any:
    """What ``run_decide``/``run_compare`` call with the study: every replay's configurations."""
    def load(study: Any) -> list[ConfigurationOutputs]:
        return [config for replay in replays for config in replay_configurations(replay, study)[1]]

    return load
