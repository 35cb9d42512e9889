"""A Slurm job as Slurm reports it, and what its final state means for the trial's row.

``scontrol -o show job ID`` gives one line of ``Key=Value`` words (a value may hold spaces); it
knows finished jobs for ``MinJobAge``; ``sacct -P`` answers later where accounting exists. The
final states map onto the host's account of a trial (:class:`JobEnd`):

| state | row |
|---|---|
| COMPLETED, FAILED | the trial's own status, with the exit code |
| OUT_OF_MEMORY | ``oom`` |
| TIMEOUT, DEADLINE | ``timeout`` (Slurm's limit: coarse, so isocost keeps its own) |
| CANCELLED | ``interrupted`` (by isocost: its timeout or Ctrl-C; by anyone else: said in the notes) |
| NODE_FAIL, PREEMPTED, BOOT_FAIL | the host was lost: ``interrupted``, host-stop note; the campaign stops |

(after a lost host, ``--resume`` runs that pass again.)

Example::

    info = parse_scontrol_job("JobId=7 JobName=isocost-ab12 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 …")
    job_end(info).exit_code   # 3
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

#: States after which the job will not run again (with --no-requeue).
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "OUT_OF_MEMORY", "TIMEOUT", "CANCELLED", "NODE_FAIL", "PREEMPTED",
                          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
#: States of a job that has not started (waiting in the queue, or its nodes booting).
QUEUED_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
#: Final states that mean the host (the node, or our hold on it) was lost, not the trial.
LOST_STATES = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    name: str
    state: str  # the first word of JobState (sacct's "CANCELLED by 0" is CANCELLED)
    reason: str
    exit_code: str  # "code:signal"
    submit_time: str
    start_time: str
    end_time: str
    node: str

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_STATES

    @classmethod
    def from_sacct(cls, line: str) -> JobInfo:
        """One ``sacct -X -P -n -o JobID,JobName,State,ExitCode,Submit,Start,End,NodeList,Reason`` line."""
        cells = (line.split("|") + [""] * 9)[:9]
        job_id, name, state, exit_code, submit, start, end, node, reason = cells
        return cls(job_id=job_id, name=name, state=(state.split() or [""])[0], reason=reason, exit_code=exit_code,
                   submit_time=submit, start_time=start, end_time=end, node=node)


def parse_scontrol_job(line: str) -> JobInfo:
    """One line of ``scontrol -o show job``: each value runs up to the next ``Key=``."""
    marks = [(m.group(1), m.start(1), m.end()) for m in _KEY.finditer(line)]
    fields: dict[str, str] = {}
    for index, (key, _, value_start) in enumerate(marks):
        value_end = marks[index + 1][1] if index + 1 < len(marks) else len(line)
        fields.setdefault(key, line[value_start:value_end].strip())
    node = fields.get("BatchHost") or fields.get("NodeList", "")
    return JobInfo(job_id=fields.get("JobId", ""), name=fields.get("JobName", ""),
                   state=(fields.get("JobState", "").split() or [""])[0], reason=fields.get("Reason", ""),
                   exit_code=fields.get("ExitCode", ""), submit_time=fields.get("SubmitTime", ""),
                   start_time=fields.get("StartTime", ""), end_time=fields.get("EndTime", ""),
                   node="" if node in ("(null)", "None assigned") else node)


def exit_status(exit_code: str) -> int | None:
    """``code:signal`` → the exit code, or ``-signal`` when a signal ended it (as a process's returncode)."""
    code, _, signal = exit_code.partition(":")
    if not code.isdigit():
        return None
    if signal.isdigit() and int(signal):
        return -int(signal)
    return int(code)


def slurm_seconds_between(first: str, second: str) -> float | None:
    """Seconds between two of Slurm's timestamps (``2026-12-01T21:40:54``, the cluster's local time)."""
    try:
        a, b = datetime.fromisoformat(first), datetime.fromisoformat(second)
    except ValueError:
        return None
    return (b - a).total_seconds()


def iso_seconds_between(first: str, second: str) -> float | None:
    """Seconds between two ISO-8601 instants with offsets (the host's submit stamp and the job's start stamp)."""
    try:
        a, b = datetime.fromisoformat(first), datetime.fromisoformat(second)
    except ValueError:
        return None
    if a.tzinfo is None or b.tzinfo is None:
        return None
    return (b.astimezone(UTC) - a.astimezone(UTC)).total_seconds()


@dataclass(frozen=True)
class JobEnd:
    """What a final job state means for the trial: the launch result's flags and a note."""

    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool = False
    interrupted: bool = False
    lost: bool = False
    note: str = ""


def job_end(info: JobInfo, *, cancelled_by_us: str = "") -> JobEnd:
    """The trial's end as Slurm saw it. ``cancelled_by_us``: "timeout" or "interrupt" when isocost cancelled it."""
    code = exit_status(info.exit_code)
    said = (f"Slurm job {info.job_id} ended {info.state} (exit code {info.exit_code or '?'}, "
            f"reason {info.reason or '?'})")
    if info.state in LOST_STATES:
        return JobEnd(code, interrupted=True, lost=True,
                      note=f"{said}: the node was lost to the trial ({_LOST_WHY[info.state]})")
    if cancelled_by_us == "timeout":  # TERM at isocost's limit: the trial may exit by itself (FAILED) or be CANCELLED
        return JobEnd(code, timed_out=True, note=f"{said}: stopped by isocost at the trial time limit")
    if cancelled_by_us == "interrupt":
        return JobEnd(code, interrupted=True, note=f"{said}: stopped by isocost (Ctrl-C or SIGTERM)")
    if info.state == "OUT_OF_MEMORY":
        return JobEnd(code, oom_killed=True, note=f"{said}: Slurm's memory limit")
    if info.state in ("TIMEOUT", "DEADLINE"):
        return JobEnd(code, timed_out=True, note=f"{said}: Slurm's own time limit ended it")
    if info.state == "CANCELLED":
        return JobEnd(code, interrupted=code is None or code < 0,
                      note=f"{said}: cancelled outside isocost (scancel, or an operator)")
    if info.state in ("COMPLETED", "FAILED"):
        return JobEnd(code, note="" if info.state == "COMPLETED" else said)
    return JobEnd(code, note=f"{said}: not a state isocost knows, kept as it is")


_LOST_WHY = {
    "NODE_FAIL": "the node failed or was set down while the job ran",
    "PREEMPTED": "a job of higher priority took the node",
    "BOOT_FAIL": "the node failed to boot for the job",
}
