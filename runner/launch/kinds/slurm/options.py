"""The Slurm launcher's options, checked before anything is submitted.

:class:`SlurmOptions` holds what ``isocost run --launcher slurm`` is given: the partition,
account and QOS, the GPUs of each trial (``--slurm-gres gpu[:TYPE][:N]`` or ``--slurm-gpus
[TYPE:]N``), the job time limit, extra ``sbatch`` arguments, the runtime inside the job
(``process``, ``docker`` or ``pyxis``), the shared directory, the login node (``ssh://…``), a
pinned node and how long a job may wait in the queue before it counts as never started.

Extra sbatch arguments are refused when they would break a rule of the campaign: one row per
attempt (``--requeue``), one lane in schedule order (``--job-name``, ``--dependency``,
``--array``), one node (``--nodes``, ``--nodelist``), the output kept in ``trial.log``
(``--output``, ``--error``), the trial's fixed environment (``--export``), or what a dedicated
option sets (``--partition``, ``--gres``, ``--time`` …). Only arguments known to be harmless pass.

Example::

    options = SlurmOptions.from_values({"partition": "debug", "gres": "gpu:a100:1", "shared": "/scratch/me"})
    options.sbatch_args(node="gpu07")   # ['--partition=debug', '--gres=gpu:a100:1', …, '--nodelist=gpu07']
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from runner.launch.launcher import LauncherOption

RUNTIMES = ("process", "docker", "pyxis")
#: How long a trial job may stay PENDING before the launcher cancels it (seconds).
DEFAULT_START_WAIT_S = 3600.0
#: Added to the study's trial time limit for Slurm's own --time (set-up and collection inside the job).
TIME_MARGIN_S = 300.0

OPTIONS: tuple[LauncherOption, ...] = (
    LauncherOption("partition", "NAME", "Slurm partition of every job (default: the cluster's default)."),
    LauncherOption("account", "NAME", "Slurm account the jobs are charged to."),
    LauncherOption("qos", "NAME", "Slurm QOS of the jobs."),
    LauncherOption("gres", "GRES", "GPUs per trial as generic resources: gpu[:TYPE][:N] (e.g. gpu:a100:1)."),
    LauncherOption("gpus", "[TYPE:]N", "GPUs per trial as --gpus (e.g. h100:1); instead of --slurm-gres."),
    LauncherOption("time", "TIME", "Slurm time limit of each job (minutes, or D-HH:MM:SS; default: the study's "
                                   "trial_timeout_s plus 5 minutes). isocost keeps its own trial timeout."),
    LauncherOption("arg", "ARG", "An extra sbatch argument in --name[=value] form (repeatable); arguments that "
                                 "would break the campaign's rules (--requeue, --job-name, --nodes, --output…) "
                                 "are refused.", multiple=True),
    LauncherOption("runtime", "RUNTIME", "What runs inside each job: process (the trial runner in the cluster's "
                                         "Python), docker (the image by digest on the node's engine) or pyxis "
                                         "(srun --container-image). Default: process."),
    LauncherOption("shared", "DIR", "A directory this machine and the compute nodes share: --out must be inside "
                                    "it; inputs outside it are copied into it (checked by fingerprint)."),
    LauncherOption("login", "ssh://USER@HOST[:PORT]", "Run sbatch/scontrol/scancel on this login node through ssh "
                                                      "(default: here)."),
    LauncherOption("node", "NAME", "Pin the campaign to this node (default: the node the pre-flight job gets)."),
    LauncherOption("start-wait", "SECONDS", "How long a job may wait in the queue before it counts as never "
                                            "started (default 3600).", kind="float"),
    LauncherOption("python", "PATH", "The Python on the compute nodes that has isocost's trial runner (process "
                                     "runtime; default: this interpreter, which the nodes must see)."),
)

#: Extra sbatch arguments known to leave every rule intact (long names, without the leading dashes).
ALLOWED_ARGS = frozenset({
    "mem", "mem-per-cpu", "mem-per-gpu", "cpus-per-task", "cpus-per-gpu", "constraint", "exclusive",
    "reservation", "nice", "mail-type", "mail-user", "comment", "exclude", "tmp", "licenses", "wckey",
    "priority", "hint", "gres-flags", "cores-per-socket", "sockets-per-node", "threads-per-core", "mincpus",
    "core-spec", "cluster-constraint", "prefer", "network", "power", "mcs-label",
})
#: Arguments refused, and why (the rule they would break).
REFUSED_ARGS: dict[str, str] = {
    "requeue": "a requeued job is a second attempt under the same id: one row per attempt needs --no-requeue",
    "no-requeue": "isocost always passes --no-requeue",
    "job-name": "the job name is the campaign's lane (one trial at a time, in schedule order)",
    "dependency": "the lane is --dependency=singleton on the campaign's job name",
    "array": "each attempt is one job",
    "nodes": "a campaign runs on one node",
    "nodelist": "the campaign's node is pinned by the launcher; use --slurm-node",
    "output": "the job's output is kept in the trial's trial.log",
    "error": "the job's output is kept in the trial's trial.log",
    "open-mode": "the job's output is appended to the trial's trial.log",
    "export": "the trial's environment is fixed by isocost",
    "export-file": "the trial's environment is fixed by isocost",
    "wrap": "the job script is isocost's",
    "parsable": "isocost always passes --parsable",
    "hold": "a held job never starts",
    "begin": "a delayed start is queue time no trial asked for",
    "wait": "isocost waits for the job itself",
    "test-only": "the job would never run",
    "ntasks": "a trial is one task",
    "ntasks-per-node": "a trial is one task",
    "signal": "the job is stopped with TERM, then KILL, by Slurm and isocost",
    "uid": "the job runs as the submitting user", "gid": "the job runs as the submitting user",
    "chdir": "the job works in its trial directory",
    "partition": "use --slurm-partition", "account": "use --slurm-account", "qos": "use --slurm-qos",
    "time": "use --slurm-time", "gres": "use --slurm-gres", "gpus": "use --slurm-gpus",
    "gpus-per-node": "use --slurm-gpus", "gpus-per-task": "use --slurm-gpus", "gpus-per-socket": "use --slurm-gpus",
}

_NAME = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_GRES = re.compile(r"^gpu(?::(?P<type>[A-Za-z][A-Za-z0-9_.-]{0,63}))?(?::(?P<count>[0-9]{1,3}))?$")
_GPUS = re.compile(r"^(?:(?P<type>[A-Za-z][A-Za-z0-9_.-]{0,63}):)?(?P<count>[0-9]{1,3})$")
_TIME = re.compile(r"^(?:(?P<d>\d{1,3})-)?(?P<a>\d{1,5})(?::(?P<b>\d{1,2}))?(?::(?P<c>\d{1,2}))?$")


@dataclass(frozen=True)
class GpuRequest:
    """The GPUs each trial asks for: how (``gres`` or ``gpus``), which type ("" any) and how many."""

    how: str  # "gres", "gpus" or "" (no GPU asked for)
    type: str = ""
    count: int = 0

    def sbatch_arg(self) -> list[str]:
        if not self.how:
            return []
        if self.how == "gres":
            return [f"--gres=gpu{':' + self.type if self.type else ''}:{self.count}"]
        return [f"--gpus={self.type + ':' if self.type else ''}{self.count}"]

    def text(self) -> str:
        return self.sbatch_arg()[0].lstrip("-") if self.how else "none"


@dataclass(frozen=True)
class SlurmOptions:
    """Everything the Slurm launcher was given, validated (see the module docstring)."""

    partition: str = ""
    account: str = ""
    qos: str = ""
    gpu: GpuRequest = GpuRequest("")
    time: str = ""
    extra: tuple[str, ...] = ()
    runtime: str = "process"
    shared: Path | None = None
    login: str = ""
    node: str = ""
    start_wait_s: float = DEFAULT_START_WAIT_S
    python: str = ""
    schema_version: int = 1

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> SlurmOptions:
        """Options from the CLI's values by option name (``partition``, ``gres``, ``arg`` …); UserError on bad input."""
        unknown = set(values) - {o.name.replace("-", "_") for o in OPTIONS} - {o.name for o in OPTIONS}
        if unknown:
            raise UserError(f"unknown Slurm option(s) {sorted(unknown)}", "--launcher slurm",
                            "See isocost run --help for the --slurm-* options.")
        get = {key.replace("-", "_"): value for key, value in values.items() if value not in (None, "", ())}
        runtime = str(get.get("runtime", "process"))
        if runtime not in RUNTIMES:
            raise UserError(f"unknown Slurm runtime {runtime!r}", "--slurm-runtime",
                            f"Use one of {', '.join(RUNTIMES)}.")
        for key in ("partition", "account", "qos", "node"):
            if key in get and not _NAME.match(str(get[key])):
                raise UserError(f"{get[key]!r} is not a Slurm {key} name", f"--slurm-{key}",
                                "Use letters, digits, '.', '_', '+' or '-' (as sinfo/sacctmgr show it).")
        start_wait = float(get.get("start_wait", DEFAULT_START_WAIT_S))
        if not math.isfinite(start_wait) or not 1 <= start_wait <= 30 * 86400:
            raise UserError(f"start wait {start_wait:g} s is out of bounds", "--slurm-start-wait",
                            "Give 1 to 2592000 seconds.")
        shared = Path(str(get["shared"])).expanduser() if "shared" in get else None
        login = str(get.get("login", ""))
        if login and not login.startswith("ssh://"):
            raise UserError(f"login node {login!r} is not an ssh:// address", "--slurm-login",
                            "Use ssh://USER@HOST[:PORT], or leave it out to run sbatch here.")
        return cls(partition=str(get.get("partition", "")), account=str(get.get("account", "")),
                   qos=str(get.get("qos", "")), gpu=gpu_request(get.get("gres"), get.get("gpus")),
                   time=check_time(str(get["time"])) if "time" in get else "",
                   extra=check_extra_args(tuple(str(a) for a in get.get("arg", ()))), runtime=runtime,
                   shared=shared, login=login, node=str(get.get("node", "")), start_wait_s=start_wait,
                   python=str(get.get("python", "")))

    def time_limit(self, trial_timeout_s: float | None) -> str:
        """Slurm's --time: as given (refused when shorter than the study's own limit), or that limit plus a margin."""
        if self.time:
            if trial_timeout_s is not None and time_seconds(self.time) < trial_timeout_s:
                raise UserError(f"Slurm time limit {self.time} ({time_seconds(self.time):g} s) is shorter than the "
                                f"study's trial_timeout_s ({trial_timeout_s:g} s)", "--slurm-time",
                                "Give at least the study's trial time limit: isocost stops a trial at its own "
                                "limit, Slurm's would end it sooner and coarsely.")
            return self.time
        if trial_timeout_s is None:
            return ""
        return str(math.ceil((trial_timeout_s + TIME_MARGIN_S) / 60))

    def sbatch_args(self, *, node: str = "", time_limit: str = "") -> list[str]:
        """The options every trial job gets from these settings (the lane, output and script are added apart)."""
        args = [f"--partition={self.partition}"] if self.partition else []
        args += [f"--account={self.account}"] if self.account else []
        args += [f"--qos={self.qos}"] if self.qos else []
        args += self.gpu.sbatch_arg()
        args += [f"--time={time_limit}"] if time_limit else []
        args += [f"--nodelist={node}"] if node else []
        return args + list(self.extra)

    def facts(self) -> dict[str, str]:
        """What campaign.json records of these options."""
        return {"partition": self.partition or "(default)", "account": self.account, "qos": self.qos,
                "gpus_per_trial": self.gpu.text(), "time_limit": self.time, "extra_sbatch_args": " ".join(self.extra),
                "runtime": self.runtime, "shared_dir": str(self.shared or ""), "login": self.login,
                "start_wait_s": f"{self.start_wait_s:g}"}


def gpu_request(gres: Any, gpus: Any) -> GpuRequest:
    """``--slurm-gres gpu[:TYPE][:N]`` or ``--slurm-gpus [TYPE:]N`` (not both); none: no GPU asked for."""
    if gres and gpus:
        raise UserError("both --slurm-gres and --slurm-gpus are given", "--slurm-gres",
                        "Ask for the GPUs one way: --slurm-gres gpu:TYPE:1 or --slurm-gpus TYPE:1.")
    if gres:
        match = _GRES.match(str(gres))
        if not match:
            raise UserError(f"malformed GRES {gres!r}", "--slurm-gres",
                            "Use gpu, gpu:N or gpu:TYPE:N (e.g. gpu:a100:1), as sinfo -o %G lists them.")
        return _counted("gres", match.group("type") or "", match.group("count"))
    if gpus:
        match = _GPUS.match(str(gpus))
        if not match:
            raise UserError(f"malformed GPU request {gpus!r}", "--slurm-gpus", "Use N or TYPE:N (e.g. h100:1).")
        return _counted("gpus", match.group("type") or "", match.group("count"))
    return GpuRequest("")


def _counted(how: str, kind: str, count_text: str | None) -> GpuRequest:
    count = int(count_text) if count_text else 1
    if count < 1:
        raise UserError(f"a trial asks for {count} GPUs", f"--slurm-{how}", "Ask for at least 1.")
    return GpuRequest(how, kind, count)


def check_time(text: str) -> str:
    """A Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS), as given."""
    if not _TIME.match(text) or time_seconds(text) <= 0:
        raise UserError(f"malformed Slurm time limit {text!r}", "--slurm-time",
                        "Use minutes (90), HH:MM:SS (01:30:00) or D-HH:MM:SS (1-00:00:00).")
    return text


def time_seconds(text: str) -> float:
    """Seconds in a Slurm time limit. Example: ``time_seconds("1-02:00:00") == 93600``."""
    match = _TIME.match(text)
    if not match:
        return 0.0
    days = int(match.group("d") or 0)
    parts = [int(p) for p in (match.group("a"), match.group("b"), match.group("c")) if p is not None]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return float(days * 86400 + hours * 3600 + minutes * 60 + seconds)
    if len(parts) == 1:
        return float(parts[0] * 60)  # minutes
    if len(parts) == 2:
        return float(parts[0] * 60 + parts[1])  # MM:SS
    return float(parts[0] * 3600 + parts[1] * 60 + parts[2])


def check_extra_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """Extra sbatch arguments: each one token ``--name[=value]``, known to be harmless; UserError naming the rule."""
    for arg in args:
        if any(ch in arg for ch in "\n\r\0"):
            raise UserError(f"sbatch argument {arg!r} holds a line break or NUL", "--slurm-arg", "Remove it.")
        if not arg.startswith("--"):
            raise UserError(f"sbatch argument {arg!r} is not in --name[=value] form", "--slurm-arg",
                            "Give the long form with its value after '=' (e.g. --slurm-arg=--mem=8G).")
        name = arg[2:].split("=", 1)[0]
        if name in REFUSED_ARGS:
            raise UserError(f"sbatch argument {arg!r} is refused: {REFUSED_ARGS[name]}", "--slurm-arg",
                            "Leave it out; the campaign's rules are in docs/slurm.md.")
        if name not in ALLOWED_ARGS:
            raise UserError(f"sbatch argument {arg!r} is not known to keep the campaign's rules", "--slurm-arg",
                            f"Allowed: {', '.join('--' + a for a in sorted(ALLOWED_ARGS))}.")
    return args
