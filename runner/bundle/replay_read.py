"""An ``isocost replay`` directory read back as configurations to compare: the reruns of a bundle on another host.

``isocost replay BUNDLE`` writes ``replay.json`` (each rerun compared with the bundle's original by id under the
study's replay rule, and the sha256 of its output files) beside ``trials/<id>/`` (the reruns) and ``bundle/``
(the verified bundle, its campaign in ``bundle/campaign``). ``isocost compare`` and ``isocost decide`` read such a
directory as the campaign it replayed plus one configuration per replayed variant, compared by id with the one
reference like every other configuration (:mod:`protocol.decision.agreement`).

Example::

    campaign_id, configs = replay_configurations(Path("quick.replay-20261201T2300Z"), study)
    configs[0].configuration_id      # "batch_size=1 replayed in quick.replay-20261201T2300Z"
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.codec import read_record
from protocol.decision.agreement import ConfigurationOutputs
from protocol.errors import UserError
from protocol.tasks import study_task
from runner.bundle.records import ReplayReport
from runner.campaign_dir.seal import outputs_cell

REPLAY_JSON = "replay.json"


def is_replay_dir(path: Path) -> bool:
    return (path / REPLAY_JSON).is_file() and not (path / "campaign.json").exists()


def replayed_campaign(replay_dir: Path) -> Path:
    """The campaign a replay directory replayed: the one inside its verified bundle."""
    return replay_dir / "bundle" / "campaign"



def replay_configurations(replay_dir: Path, study: Any) -> tuple[str, list[ConfigurationOutputs]]:
    """What an ``isocost replay`` directory adds to a comparison: the campaign id it replayed, and one
    configuration per replayed variant (its accepted reruns; each rerun's files checked against the sha256
    replay.json recorded for them)."""
    path = replay_dir / "replay.json"
    report = read_record(path, ReplayReport)
    if report.study_sha256 != study.sha256:
        raise UserError("the replay is of a bundle of another study", str(path),
                        "Compare a replay with campaigns of the study it replayed.")
    task = study_task(study)
    by_variant: dict[str, ConfigurationOutputs] = {}
    for trial in report.trials:
        trial_dir = replay_dir / "trials" / trial.trial_id
        if not trial.replay_accepted:
            continue
        if (outputs_cell(trial_dir, task.output_files) or "") != trial.outputs_sha256:
            raise UserError(f"the replayed outputs of {trial.trial_id} are not those replay.json recorded",
                            str(trial_dir), "They were changed after the replay: replay the bundle again.")
        variant = trial.variant_id
        name = f"{variant} replayed in {replay_dir.name}"
        known = by_variant.get(variant) or ConfigurationOutputs(name, variant, [], [], [], str(replay_dir))
        by_variant[variant] = ConfigurationOutputs(
            name, variant, [*known.metrics, trial.replay_metric], [*known.outputs, task.read_pass(trial_dir)],
            [*known.trial_ids, trial.trial_id], str(replay_dir))
    return report.campaign_id, list(by_variant.values())


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
