"""Process launcher: each trial in a fresh Python interpreter on this host.

Its kind (name, choice, replay) is :mod:`runner.launch.kinds.process`; its launcher.json record is
:class:`ProcessRecord`: the ``pid`` and ``command`` of the trial's process (written for forensics; a leftover
process is found by its command line, never by this pid).

Example::

    ProcessLauncher().run(TrialPaths(trial_dir, corpus, model), timeout_s=600.0)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from protocol.errors import UserError
from protocol.io.safe_write import write_binary
from protocol.records.codec import OMIT_NONE, Schema, read_record
from protocol.records.stages import TrialSpec
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.kinds.process.interpreter import (
    missing_modules,
    missing_pythons,
    missing_scenario_modules,
    trial_python,
    wrong_builds,
)
from runner.launch.launcher import HostInterrupt, LauncherBase, LaunchResult, TrialPaths
from runner.launch.launcher_file import launcher_schema, write_launcher_file
from runner.trial.measure import clock

if TYPE_CHECKING:
    from protocol.study.load import Study

#: Environment variables a trial may inherit; everything else is dropped.
ENV_ALLOW = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ISOCOST_FAULT_INJECT",
    "ISOCOST_TASKS_PATH",  # your own tasks' folders (protocol.tasks): the trial finds its task's half there too
    "ISOCOST_ENGINES_PATH",  # your own engines' folders (protocol.engines): the trial finds its engine's half there
    "ISOCOST_ENGINE_CACHE",  # where an engine keeps what it builds at load (the onnxruntime engine's exports)
)

#: Offline by construction: nothing may be fetched from a hub during a trial.
ENV_FIXED = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONHASHSEED": "0",
    "PYTHONUNBUFFERED": "1",
}

_KILL_GRACE_S = 10.0
#: Seconds a SIGKILLed group gets to be gone: a process holding gigabytes (vLLM's engine core) takes seconds to
#: exit on a loaded machine, and the launcher returns only once nothing of the trial still runs.
_EXIT_WAIT_S = 60.0


def _kept() -> Any:
    return field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class ProcessRecord:
    """The process launcher's launcher.json: the trial's process id and command line."""

    kind: str = "process"
    pid: int | None = _kept()
    command: tuple[str, ...] | None = _kept()
    CODEC: ClassVar[Schema] = launcher_schema("process")


def trial_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {key: os.environ[key] for key in ENV_ALLOW if key in os.environ}
    env.update(ENV_FIXED)
    # The trial must import this checkout's runner/protocol, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root
    env.update(extra or {})
    return env


class ProcessLauncher(LauncherBase):
    """Runs each trial in a new process group, with this interpreter or the one its engine names
    (:mod:`runner.launch.kinds.process.interpreter`)."""

    name = "process"

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python
        self._current: subprocess.Popen[bytes] | None = None

    def describe(self) -> dict[str, str]:
        return {
            "kind": self.name,
            "python": self.python,
            "notice": "trials ran as local processes, not containers: no image digest is recorded",
        }

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        return str(paths.corpus), str(paths.model), str(paths.trial_dir)

    def image_fields(self) -> tuple[str, str, str]:
        return "", "", ""

    def preflight(self, study: Study, out: Path) -> str:
        """An engine whose trials run with an interpreter of their own (``runner.launch.kinds.process.interpreter``):
        refused when that interpreter is missing, or lacks a module its engine or the study's scenario needs; otherwise
        a line naming it."""
        engines = {variant.engine for variant in study.variants()}
        errors = self.engine_problems(engines) or self.scenario_problems(study) or self.build_problems(study)
        if errors:
            raise errors[0]
        own = {name: trial_python(name, self.python) for name in sorted(engines)}
        return "; ".join(f"engine {name} runs its trials with {python}" for name, python in own.items()
                         if python != self.python)

    def engine_problems(self, engines: set[str]) -> list[UserError]:
        """What keeps these engines' trials from starting here: a missing interpreter, else a missing module."""
        return missing_pythons(engines) or missing_modules(engines, self.python)

    def scenario_problems(self, study: Study) -> list[UserError]:
        """What keeps a server study's trials from serving here: an interpreter they run with that lacks the
        modules the scenario needs (:data:`protocol.study.traffic.SERVING_REQUIRES`, MLPerf LoadGen)."""
        from protocol.study.traffic import SERVING_INSTALL, SERVING_REQUIRES

        if getattr(study, "traffic", None) is None:
            return []
        return missing_scenario_modules({variant.engine for variant in study.variants()}, self.python,
                                        SERVING_REQUIRES, "a server study's trials", SERVING_INSTALL)

    def build_problems(self, study: Study) -> list[UserError]:
        """A GPU stack whose trial interpreter's torch is another build: every trial would refuse it."""
        return wrong_builds(study.variants(), self.python)

    def python_for(self, paths: TrialPaths) -> str:
        """The interpreter of this trial: its engine's own (the spec names the engine), else this launcher's."""
        try:
            engine = read_record(paths.trial_dir / "spec.json", TrialSpec).variant.engine
        except (OSError, ValueError, UserError):
            return self.python  # the trial itself reports the unreadable spec
        return trial_python(engine, self.python)

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        python = self.python_for(paths)
        command = [python, "-m", "runner.trial", str(paths.trial_dir / "spec.json"), str(paths.trial_dir)]
        start = clock()
        timed_out = interrupted = False
        with write_binary(paths.log, paths.log.parent, append=True) as log:
            proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=trial_env(), start_new_session=True
            )
            self._current = proc
            notes = []
            try:
                try:
                    write_launcher_file(paths.trial_dir, {"pid": proc.pid, "command": command}, ProcessRecord)
                except OSError as exc:  # forensics only: a leftover trial is found by its command line
                    notes.append(f"launcher.json not written: {exc.strerror}")
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._stop(proc)
            except KeyboardInterrupt:
                interrupted = True
                self._stop(proc)
            except BaseException:
                self._stop(proc)  # never leave a trial running behind a host error
                raise
            finally:
                self._current = None
                if _stop_group(proc.pid):
                    notes.append("stopped what the trial left running in its process group (an engine's "
                                 "processes outliving it)")
        wall = clock() - start
        if timed_out:
            notes.append(f"killed by the host at the trial time limit ({timeout_s:g} s)")
        if interrupted:
            notes.append(f"{HOST_STOP_NOTE} this trial (Ctrl-C or SIGTERM)")
        result = LaunchResult(
            exit_code=proc.returncode,
            timed_out=timed_out,
            interrupted=interrupted,
            wall_s=wall,
            notes=tuple(notes),
        )
        if interrupted:
            raise HostInterrupt(result)
        return result

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM the trial's process group so it can write its status, then SIGKILL."""
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + _KILL_GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _stop_group(pgid: int) -> bool:
    """Once the trial (its process group's leader) is gone, stop every process still in its group: SIGTERM, then SIGKILL
    what outlives the grace, and wait (:data:`_EXIT_WAIT_S` at most) until the killed ones are gone. An engine's
    processes (vLLM's engine core and worker) are the trial's children and outlive a trial killed from outside (the OOM
    killer, a crash), which cannot close them itself. True when something was left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return False  # nothing left in the group (the usual case)
    deadline = time.monotonic() + _KILL_GRACE_S
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + _EXIT_WAIT_S
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.05)
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie, waiting for a parent to reap it, does not)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
