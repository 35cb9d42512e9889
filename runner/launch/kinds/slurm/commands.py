"""Slurm's own commands (sbatch, scontrol, scancel, squeue, sinfo), on this machine or on a login node over ssh.

Every command is an argument list; over ssh it is joined with ``shlex.join`` into the one command
line ssh hands to the login node's shell, so a value never splits or expands there. The batch
script goes to ``sbatch`` on its standard input. Every call is bounded (``timeout_s``). A
missing command (no Slurm here, or none on the login node) and an unreachable login node are
UserErrors that say what to do.

Example::

    slurm = SlurmCommands()                               # or SlurmCommands("ssh://me@login.example.org")
    job_id = slurm.submit(["--job-name=isocost-ab12"], "#!/bin/bash\\necho hello\\n")
    slurm.job(job_id).state                               # "PENDING", "RUNNING", "COMPLETED" …
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from protocol.errors import UserError
from runner.launch.kinds.slurm.jobs import JobInfo, parse_scontrol_job

#: How long one Slurm command may take before it counts as not answering.
COMMAND_TIMEOUT_S = 60.0
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
_USER = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Answer:
    code: int
    out: str
    err: str

    @property
    def said(self) -> str:
        """What the command said (its error output, else its output), on one line."""
        text = (self.err or self.out).strip().replace("\n", " | ")
        return text[:400]


@dataclass(frozen=True)
class NodeRow:
    """One node of one partition, as ``sinfo -N`` lists it."""

    node: str
    partition: str
    default: bool  # the cluster's default partition
    available: str  # the partition's state: up, down, drain, inact
    gres: tuple[str, ...]  # e.g. ("gpu:a100:4",), socket affinity "(S:0-1)" left out
    state: str  # the node's state: idle, mixed, allocated, down, drained…
    memory_mb: int | None = None  # the node's RealMemory in MB (sinfo %m); None: not listed
    cpus: int | None = None  # the node's CPUs (sinfo %c); None: not listed


class SlurmCommands:
    """Runs Slurm's commands here, or through ``ssh`` on a login node (``ssh://USER@HOST[:PORT]``)."""

    def __init__(self, login: str = "", ssh_config: Path | None = None, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        self.login = login
        self.timeout_s = timeout_s
        self._ssh = ssh_prefix(login, ssh_config) if login else []

    @property
    def where(self) -> str:
        return f"login node {self.login}" if self.login else "this machine"

    def run(self, argv: list[str], stdin: str | None = None, timeout_s: float | None = None) -> Answer:
        """One command; UserError when it does not exist there or the login node does not answer."""
        command = [*self._ssh, shlex.join(argv)] if self._ssh else argv
        try:
            done = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False,
                                  timeout=timeout_s or self.timeout_s)
        except FileNotFoundError:
            tool = command[0]
            fix = ("Install OpenSSH's client." if tool == "ssh" else "Run isocost on the cluster's login node (where "
                   "sbatch is), or reach one with --slurm-login ssh://USER@HOST.")
            where = "this machine" if tool == "ssh" else self.where
            raise UserError(f"{tool} is not installed on {where}", "--launcher slurm", fix) from None
        except subprocess.TimeoutExpired:
            raise UserError(f"{argv[0]} did not answer within {timeout_s or self.timeout_s:g} s on {self.where}",
                            "--launcher slurm",
                            "Check that slurmctld answers (scontrol ping), then try again.") from None
        answer = Answer(done.returncode, done.stdout, done.stderr)
        if self._ssh and done.returncode == 255:
            raise UserError(f"the login node does not answer through ssh: {answer.said}", self.login,
                            "Check the address and that a key logs in without a password (BatchMode=yes).")
        if done.returncode == 127 and ("not found" in answer.said or not answer.said):
            raise UserError(f"{argv[0]} is not installed on {self.where}", "--launcher slurm",
                            "Run isocost where Slurm's client commands are (the cluster's login node).")
        return answer

    def submit(self, args: list[str], script: str) -> str:
        """``sbatch --parsable --no-requeue ARGS`` with the script on stdin; the job id."""
        answer = self.run(["sbatch", "--parsable", "--no-requeue", *args], stdin=script)
        job_id = answer.out.strip().split(";", 1)[0]
        if answer.code != 0 or not job_id.isdigit():
            raise UserError(f"sbatch refused the job: {answer.said}", "--launcher slurm",
                            "Fix the --slurm-* option it names (partition, account, QOS, GRES, time), or ask the "
                            "cluster's admins what it means.")
        return job_id

    def job(self, job_id: str) -> JobInfo | None:
        """The job as scontrol reports it (sacct where scontrol has forgotten it); None when neither knows it."""
        answer = self.run(["scontrol", "-o", "show", "job", job_id])
        if answer.code == 0 and answer.out.strip():
            return parse_scontrol_job(answer.out.strip().splitlines()[0])
        accounted = self.run(["sacct", "-j", job_id, "-X", "-P", "-n", "-o",
                              "JobID,JobName,State,ExitCode,Submit,Start,End,NodeList,Reason"])
        if accounted.code == 0 and accounted.out.strip():
            return JobInfo.from_sacct(accounted.out.strip().splitlines()[0])
        return None

    def cancel(self, job_id: str, signal: str = "") -> Answer:
        """``scancel JOB`` (TERM, then KILL after KillWait), or only ``--signal=SIG --full`` to the whole job."""
        args = ["scancel", *([f"--signal={signal}", "--full"] if signal else []), job_id]
        return self.run(args)

    def lane_jobs(self, lane: str) -> list[str]:
        """Ids of the pending or running jobs of a lane (job name)."""
        answer = self.run(["squeue", "-h", "-n", lane, "-o", "%i"])
        return [word for word in answer.out.split() if word.isdigit()] if answer.code == 0 else []

    def nodes(self) -> list[NodeRow]:
        """Every node of every partition with the partition's availability, the node's GRES and state (sinfo)."""
        answer = self.run(["sinfo", "-h", "-N", "-o", "%N|%P|%a|%G|%T|%m|%c"])
        if answer.code != 0:
            raise UserError(f"sinfo failed on {self.where}: {answer.said}", "--launcher slurm",
                            "Check that slurmctld answers (scontrol ping) and SLURM_CONF names the cluster.")
        rows = []
        for line in answer.out.splitlines():
            parts = line.strip().split("|")
            if len(parts) not in (5, 7):
                continue
            node, partition, available, gres, state = parts[:5]
            memory, cpus = (parts[5:] or ["", ""])
            kinds = tuple(g for g in re.sub(r"\(.*?\)", "", gres).split(",") if g)
            rows.append(NodeRow(node, partition.rstrip("*"), partition.endswith("*"), available, kinds,
                                state.rstrip("*~#!%$@^-"), _count(memory), _count(cpus)))
        return rows


def _count(text: str) -> int | None:
    """A whole number sinfo printed (``1000``, ``1000+`` for a range's lower bound), or None."""
    text = text.strip().rstrip("+")
    return int(text) if text.isdigit() else None


def ssh_prefix(login: str, ssh_config: Path | None = None) -> list[str]:
    """``ssh … USER@HOST`` for a login node given as ``ssh://USER@HOST[:PORT]`` (checked)."""
    try:  # a stray bracket: urllib's ValueError, in words that differ between Python releases
        parts = urlsplit(login)
        port = parts.port
    except ValueError:
        raise UserError(f"{login!r} is not a login node address", "--slurm-login",
                        "Use ssh://USER@HOST[:PORT] (an IPv6 address in brackets: ssh://USER@[2001:db8::1]).") \
            from None
    host, user = parts.hostname or "", parts.username or ""
    if (parts.scheme != "ssh" or not _HOST.match(host) or (user and not _USER.match(user))
            or parts.path not in ("", "/") or parts.query or parts.password):
        raise UserError(f"{login!r} is not a login node address", "--slurm-login", "Use ssh://USER@HOST[:PORT].")
    prefix = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
    if ssh_config is not None:
        prefix += ["-F", str(ssh_config)]
    if port:
        prefix += ["-p", str(port)]
    return [*prefix, "--", f"{user}@{host}" if user else host]
