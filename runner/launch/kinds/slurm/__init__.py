"""The ``slurm`` launcher kind: each trial attempt one ``sbatch --parsable --no-requeue`` job on a pinned node.

Chosen only by ``--launcher slurm`` with its ``--slurm-*`` options (``options.py``: the cluster options and what
they refuse). ``commands.py`` runs sbatch, scontrol, scancel and sinfo, here or over ssh; ``jobs.py`` reads a job's
state; ``script.py`` writes the batch script of each runtime (process, docker, pyxis); ``preflight.py`` checks before
any trial; ``launcher.py`` (:class:`SlurmLauncher`) is the launcher's whole life, ``record.py`` its launcher.json. A
replay never goes through Slurm: it runs here, as a process or in the exact image.

Example::

    KIND.options[0].name   # "partition" (--slurm-partition)
"""

from __future__ import annotations

from typing import Any

from protocol.errors import UserError
from runner.launch.daemon.limits import engines_shm_size, study_limits
from runner.launch.kinds.slurm.launcher import SlurmLauncher
from runner.launch.kinds.slurm.options import OPTIONS, SlurmOptions
from runner.launch.kinds.slurm.record import SlurmRecord
from runner.launch.launcher import ChoiceRequest, Launcher, LauncherChoice, LauncherKind, ReplayRequest


def _choose(request: ChoiceRequest) -> LauncherChoice:
    options = SlurmOptions.from_values(request.options)
    study = request.study
    stack = request.stack()
    image = request.image or study.image_for(stack) or ""
    if not image and options.runtime != "process":
        record = request.locked(stack)
        image = (record.repo_digest or (record.image_id if options.runtime == "docker" else "")) if record else ""
    limits = study_limits(study.campaign)
    launcher = SlurmLauncher(options, stack=stack, image=image, trial_timeout_s=study.campaign.trial_timeout_s,
                             mem_limit=limits.mem_limit or "", shm_size=engines_shm_size(study.variants()) or "")
    return LauncherChoice(launcher, "")


def _replay(request: ReplayRequest) -> tuple[Launcher, dict[str, Any]]:
    raise UserError("a replay does not go through Slurm: the original trials ran as Slurm jobs on their pinned node",
                    "--launcher", "Replay them here with --launcher docker (the same image by digest) or --launcher "
                                  "process (reported as not exact).")


KIND = LauncherKind(
    name="slurm",
    help="each trial one Slurm job on a pinned node (the --slurm-* options; docs/slurm.md)",
    choose=_choose,
    replay=_replay,
    record=SlurmRecord,
    options=OPTIONS,
    order=30,
    replay_choice=False,
    hosts="--host drives Docker engines; a Slurm cluster is one --launcher slurm campaign",
    requires="ISOCOST_REQUIRE_SLURM",
    scenarios=("offline", "server"),  # the serving trial runs inside the job (LoadGen in the trial's Python)
)
