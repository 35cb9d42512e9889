"""A trial container that outlived the host CLI: the docker kind's ``stop_leftover``.

The container is found by the id in launcher.json and by the trial-directory label every trial
container carries, so one created just before the host died (launcher.json not yet written) is
removed too; a ``runner.trial`` process of the trial is stopped as any launcher's is
(:mod:`runner.launch.leftover`).

Example::

    stop_leftover(Path("results/quick/trials/0002-r1-batch_size=4"))
"""

from __future__ import annotations

from pathlib import Path

from protocol.errors import UserError
from runner.launch import leftover
from runner.launch.daemon.containers import remove_leftover_containers
from runner.launch.launcher_file import read_launcher_file


def stop_leftover(trial_dir: Path) -> None:
    """If the trial outlived the host CLI, stop it before recording it (its container, else its process).

    The call returns once the trial is gone, so it writes nothing after its row.
    """
    container_id = _recorded_container(trial_dir)
    if container_id:
        remove_leftover_containers(trial_dir, container_id)
        return
    if not leftover.stop_leftover(trial_dir):
        remove_leftover_containers(trial_dir)  # best effort: finds nothing where no daemon answers


def _recorded_container(trial_dir: Path) -> str:
    """The container id the launcher wrote to launcher.json ("" when there is none)."""
    try:
        record = read_launcher_file(trial_dir)
    except UserError:  # the container is still found by the trial-directory label
        return ""
    return str(getattr(record, "container_id", None) or "")  # a container launcher's record names it
