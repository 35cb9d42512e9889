"""A test fixture launcher, added by its own files alone: ``cwd-process`` runs each trial as a fresh process
whose working directory is the trial's folder (``python -m runner.trial spec.json .``).

It is found the way a user's own launcher is: its folder (``tests/launchers``) in ``ISOCOST_LAUNCHERS``
(docs/launchers.md). It owns its name, one option (``--cwd-process-python``), its launcher.json record
(:class:`CwdProcessRecord`: pid, command and working directory), its choice (never by ``auto``), its replay
(as itself, exact only for trials that ran with it) and, through :class:`runner.launch.base.LauncherBase`,
the default leftover stop (a ``runner.trial`` process found by its command line and working directory).

Example::

    ISOCOST_LAUNCHERS=tests/launchers isocost run study.toml --out out --launcher cwd-process
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from protocol.codec import OMIT_NONE, Schema
from protocol.errors import UserError
from runner.launch.base import HostInterrupt, LauncherBase, LaunchResult, TrialPaths
from runner.launch.kind import ChoiceRequest, LauncherChoice, LauncherKind, LauncherOption, ReplayRequest
from runner.launch.launcher_file import launcher_schema, write_launcher_file
from runner.launch.process import trial_env

NAME = "cwd-process"


@dataclass(frozen=True)
class CwdProcessRecord:
    """This kind's launcher.json."""

    kind: str = NAME
    pid: int | None = field(default=None, metadata=OMIT_NONE)
    command: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)
    cwd: str | None = field(default=None, metadata=OMIT_NONE)
    CODEC: ClassVar[Schema] = launcher_schema(NAME)


class CwdProcessLauncher(LauncherBase):
    """Each trial a fresh process started in its own trial folder, with paths relative to it."""

    name = NAME

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    def describe(self) -> dict[str, str]:
        return {"kind": self.name, "python": self.python,
                "notice": "trials ran as local processes in their own folders: no image digest is recorded"}

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        trial_dir = paths.trial_dir.resolve()
        command = [self.python, "-m", "runner.trial", "spec.json", "."]
        with (trial_dir / "trial.log").open("ab") as log:
            proc = subprocess.Popen(command, cwd=trial_dir, stdout=log, stderr=subprocess.STDOUT,
                                    env=trial_env(), start_new_session=True)
            write_launcher_file(trial_dir, {"pid": proc.pid, "command": command, "cwd": str(trial_dir)},
                                CwdProcessRecord)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return LaunchResult(exit_code=proc.returncode, timed_out=True)
            except KeyboardInterrupt:
                proc.kill()
                proc.wait()
                raise HostInterrupt(LaunchResult(exit_code=proc.returncode, interrupted=True)) from None
        return LaunchResult(exit_code=proc.returncode)


def _choose(request: ChoiceRequest) -> LauncherChoice:
    if request.image:
        raise UserError("--image needs a container launcher", f"--launcher {NAME}", "Drop --image.")
    python = str(request.options.get("python") or sys.executable)
    return LauncherChoice(CwdProcessLauncher(python), f"trials run as local processes in their own folders "
                                                      f"(--launcher {NAME}): no image digest in the manifests")


def _replay(request: ReplayRequest) -> tuple[CwdProcessLauncher, dict[str, Any]]:
    exact = request.original == NAME
    note = "" if exact else f"the original trials ran with launcher {request.original!r}: not an exact replay"
    return CwdProcessLauncher(), {"kind": NAME, "original": request.original, "exact": exact, "image": "",
                                  "note": note}


KIND = LauncherKind(
    name=NAME,
    help="each trial a fresh process started in its trial folder (a test fixture: tests/launchers)",
    choose=_choose,
    replay=_replay,
    record=CwdProcessRecord,
    options=(LauncherOption("python", "PATH", "The interpreter that runs each trial (default: this one)."),),
    order=900,
    hosts=f"--host drives Docker engines; --launcher {NAME} runs on this machine only",
)
