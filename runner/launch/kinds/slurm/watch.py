"""One submitted job watched to its end: queued, started, stopped at isocost's own limit or on Ctrl-C, final.

:func:`watch_job` polls ``scontrol`` (every ``poll_s``), logs the ``queue_end`` event when the job
starts, and stops the job itself when it waited in the queue longer than the declared start wait,
ran longer than the trial's time limit (Slurm enforces ``--time`` only every 30 s or so), or the
host CLI is interrupted. Stopping is TERM to the whole job (``scancel --signal=TERM --full``:
the trial writes its status, a container's trap stops it), then, after the grace period,
``scancel`` (TERM, KILL after KillWait). Every wait is bounded.

Example::

    seen = watch_job(slurm, "42", submitted_mono=clock(), timeout_s=900, start_wait_s=3600,
                     on_start=lambda: None)
    seen.info.state, seen.cancelled      # ("COMPLETED", "")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import UserError
from runner.launch.kinds.slurm.commands import SlurmCommands
from runner.launch.kinds.slurm.jobs import JobInfo
from runner.trial.measure import clock

#: After the last stop, how long the job may take to reach a final state (KillWait plus slurmctld's cycle).
FINAL_WAIT_S = 90.0
#: How long scontrol may fail to answer before the cluster counts as lost.
UNANSWERED_S = 120.0


@dataclass(frozen=True)
class Watched:
    info: JobInfo | None  # the final state (None: scontrol no longer knew the job)
    started_mono: float | None  # when the job was first seen started (host clock)
    cancelled: str = ""  # "timeout", "interrupt" or "start-wait" when isocost stopped it
    unanswered: str = ""  # the cluster stopped answering: what it said last
    ended_mono: float = field(default_factory=clock)  # when the end was seen (host clock)


def watch_job(slurm: SlurmCommands, job_id: str, *, submitted_mono: float, timeout_s: float | None,
              start_wait_s: float, on_start: Callable[[], object], poll_s: float = 0.5,
              grace_s: float = 10.0) -> Watched:
    """Until the job is final (see the module docstring); a KeyboardInterrupt stops the job and returns."""
    started: float | None = None
    silent_since: float | None = None
    try:
        while True:
            try:
                info = slurm.job(job_id)
                silent_since = None
            except UserError as exc:
                silent_since = silent_since or clock()
                if clock() - silent_since > UNANSWERED_S:
                    return Watched(None, started, unanswered=exc.message)
                time.sleep(min(poll_s * 4, 5.0))
                continue
            now = clock()
            if info is not None and started is None and (info.final or not info.queued):
                started = now
                on_start()
            if info is not None and info.final:
                return Watched(info, started)
            if info is None:
                return Watched(None, started)
            if started is None and now - submitted_mono > start_wait_s:
                return Watched(stop_job(slurm, job_id, 0.0), None, cancelled="start-wait")
            if started is not None and timeout_s is not None and now - started > timeout_s:
                return Watched(stop_job(slurm, job_id, grace_s), started, cancelled="timeout")
            time.sleep(_poll(now - submitted_mono, poll_s))
    except KeyboardInterrupt:
        return Watched(stop_job(slurm, job_id, grace_s), started, cancelled="interrupt")


def _poll(elapsed_s: float, poll_s: float) -> float:
    """Poll fast while a job is young, then every few seconds (scontrol is the cluster's shared controller)."""
    return poll_s if elapsed_s < 30 else min(poll_s * 6, 5.0)


def stop_job(slurm: SlurmCommands, job_id: str, grace_s: float) -> JobInfo | None:
    """TERM the whole job, wait up to ``grace_s`` for it to end by itself, then scancel; its final state."""
    if grace_s > 0:
        slurm.cancel(job_id, signal="TERM")
        info = wait_final(slurm, job_id, grace_s)
        if info is not None and info.final:
            return info
    slurm.cancel(job_id)
    return wait_final(slurm, job_id, FINAL_WAIT_S)


def wait_final(slurm: SlurmCommands, job_id: str, seconds: float) -> JobInfo | None:
    """The job's state once final, or its last state after ``seconds``."""
    deadline = clock() + seconds
    info = None
    while True:
        try:
            info = slurm.job(job_id)
        except UserError:
            info = None
        if info is None or info.final or clock() >= deadline:
            return info
        time.sleep(0.25)
