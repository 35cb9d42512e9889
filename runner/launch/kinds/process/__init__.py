"""The ``process`` launcher kind: each trial a fresh Python process on this host
(:mod:`runner.launch.kinds.process.launcher`).

Chosen by ``--launcher process``, and by ``auto`` as the last resort (with a notice that says why no
container runs the trials). It replays any trial as a local process, reported as exact only when the
originals ran as processes too.

Example::

    KIND.choose(request).launcher.name   # "process"
"""

from __future__ import annotations

from typing import Any

from protocol.errors import UserError
from runner.launch.kinds.process.launcher import ProcessLauncher, ProcessRecord
from runner.launch.launcher import ChoiceRequest, Launcher, LauncherChoice, LauncherKind, ReplayRequest


def _choose(request: ChoiceRequest) -> LauncherChoice:
    if request.image:
        raise UserError("--image needs a container launcher", "--launcher process",
                        "Drop --image, or use --launcher docker.")
    return LauncherChoice(ProcessLauncher(), "trials run as local processes (--launcher process): no container "
                                             "image, so no image digest in the manifests")


def _auto(request: ChoiceRequest) -> LauncherChoice:
    """The last resort of ``auto``: the notice says why the kinds asked before could not run the study."""
    if not request.declined:
        return _choose(request)
    first = request.declined[0]
    return LauncherChoice(ProcessLauncher(), f"{first.reason}: trials run as local processes, without an image "
                                             f"digest ({first.hint})")


def _replay(request: ReplayRequest) -> tuple[Launcher, dict[str, Any]]:
    exact = request.original == "process"
    note = "" if exact else (f"the original trials ran with launcher {request.original!r} (image "
                             f"{', '.join(request.images())}); this replay ran them as local processes "
                             "(--launcher process): not an exact replay")
    return ProcessLauncher(), {"kind": "process", "original": request.original, "exact": exact, "image": "",
                               "note": note}


KIND = LauncherKind(
    name="process",
    help="each trial a fresh Python process on this host (no container, so no image digest)",
    choose=_choose,
    replay=_replay,
    record=ProcessRecord,
    auto=_auto,
    auto_order=1000,
    order=10,
    hosts="--host runs trials in containers on each host's engine",
    scenarios=("offline", "server"),
)
