"""A real one-node Slurm cluster under a scratch directory: munged, slurmctld and slurmd as our children.

What a GPU cluster's login node sees, made on this machine (Debian's Slurm 22.05 and munge;
every configuration line comes from ../shared/facts/slurm.md):

- ``munged`` with its own key (1,024 random bytes, mode 0400) and socket (its directory 0755);
- ``slurmctld -D -i`` and ``slurmd -D -N NODE``, free ports, state, spool, pid and log files under
  the scratch directory, ``proctrack/linuxproc`` and ``task/none`` (nothing left in cgroups);
- one node with two fake GPUs (character devices ``c 1 3``, the same device as /dev/null),
  typed ``alpha`` (card 0) and ``beta`` (card 1) in gres.conf, so that ``--gres=gpu:1`` takes
  either and ``--gres=gpu:beta:1`` only the second;
- two partitions on that node: ``debug`` (the default) and ``other``.

Clients reach it through ``SLURM_CONF`` (:attr:`Cluster.env`). Every wait is bounded; :func:`stop`
ends exactly the daemons this module started (by pid), never others.

As a script, for trying the Slurm launcher by hand::

    python tests/slurm/cluster.py start /tmp/sl      # prints the SLURM_CONF line to export
    python tests/slurm/cluster.py stop /tmp/sl
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from procutil import alive, send_signal, wait_gone  # noqa: E402

NODE = "node1"
GPU_TYPES = ("alpha", "beta")
DAEMONS = ("munged", "slurmctld", "slurmd")
#: Packages the cluster needs (``.ci/run`` installs them when missing).
PACKAGES = "slurmctld slurmd slurm-client munge"


class SetupMissing(Exception):
    """Slurm or munge is not installed, or this is not root: the tests skip (or fail in CI)."""


@dataclass
class Cluster:
    root: Path
    node: str = NODE
    ctld_port: int = 0
    slurmd_port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    bring_up_s: float = 0.0

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def save(self) -> None:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.root / "cluster.json").write_text(json.dumps(data, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, root: Path) -> Cluster:
        data = json.loads((root / "cluster.json").read_text(encoding="utf-8"))
        return cls(root=Path(data["root"]), node=data["node"], ctld_port=int(data["ctld_port"]),
                   slurmd_port=int(data["slurmd_port"]), pids={k: int(v) for k, v in data["pids"].items()},
                   bring_up_s=float(data["bring_up_s"]))

    def scontrol(self, *args: str, check: bool = True) -> str:
        """``scontrol ARGS`` against this cluster (the tests' own checks and node-loss)."""
        result = subprocess.run(["scontrol", *args], env={**os.environ, **self.env}, capture_output=True,
                                text=True, timeout=30, check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"scontrol {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def node_state(self) -> str:
        out = self.scontrol("-o", "show", "node", self.node)
        for word in out.split():
            if word.startswith("State="):
                return word.removeprefix("State=")
        return ""

    @staticmethod
    def usable(state: str) -> bool:
        """Up and taking jobs: IDLE, MIXED or ALLOCATED, without DRAIN, DOWN, FAIL or NOT_RESPONDING flags."""
        words = state.split("+")
        return words[0] in ("IDLE", "MIXED", "ALLOCATED") and not set(words[1:]) & {"DRAIN", "DOWN", "FAIL",
                                                                                     "NOT_RESPONDING"}

    def set_node(self, state: str, reason: str = "isocost test") -> None:
        """``state``: down, drain or resume (what an operator or a node failure does). A node that came back by
        itself (ReturnToService=2) refuses resume: not an error here."""
        args = ["update", f"nodename={self.node}", f"state={state}"]
        args += [f"reason={reason}"] if state != "resume" else []
        result = subprocess.run(["scontrol", *args], env={**os.environ, **self.env}, capture_output=True, text=True,
                                timeout=30, check=False)
        if result.returncode != 0 and not (state == "resume" and self.usable(self.node_state())):
            raise RuntimeError(f"scontrol {' '.join(args)}: {result.stderr.strip()}")

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            state = self.node_state()
            if self.usable(state):
                return
            time.sleep(0.2)
        raise SetupMissing(f"node {self.node} did not come up within {timeout_s:g} s (state {state or '?'}); "
                           f"see {self.root / 'log'}")

    def cancel_all(self) -> None:
        """Cancel every job of the cluster (between tests) and wait, bounded, until none runs."""
        env = {**os.environ, **self.env}
        subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=env, capture_output=True,
                       timeout=30, check=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True,
                                 timeout=30, check=False).stdout
            if not out.strip():
                return
            time.sleep(0.2)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise SetupMissing("the test cluster needs root (slurmd runs jobs as their users)")
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue", "sinfo"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            raise SetupMissing(f"{tool} is not installed; run `apt-get install -y --no-install-recommends "
                               f"{PACKAGES}`")


def _binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def slurm_conf(cluster: Cluster, hostname: str) -> str:
    root = cluster.root
    gres = ",".join(f"gpu:{kind}:1" for kind in GPU_TYPES)
    return "\n".join([
        "ClusterName=isocost-test",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        f"SlurmctldPort={cluster.ctld_port}",
        f"SlurmdPort={cluster.slurmd_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge' / 'munge.socket'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        "ReturnToService=2",
        "KillWait=2",
        "MinJobAge=3600",
        "MailProg=/bin/true",
        f"NodeName={cluster.node} NodeHostname={hostname} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 "
        f"Gres={gres} State=UNKNOWN",
        f"PartitionName=debug Nodes={cluster.node} Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName=other Nodes={cluster.node} MaxTime=INFINITE State=UP",
        "",
    ])


def _write_config(cluster: Cluster) -> None:
    root = cluster.root
    for name in ("etc", "state", "spool", "run", "log", "munge", "dev"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o755)  # munged refuses a socket directory of mode 0700
    hostname = socket.gethostname()
    cluster.conf.write_text(slurm_conf(cluster, hostname), encoding="utf-8")
    devices = []
    for index, kind in enumerate(GPU_TYPES):
        device = root / "dev" / f"nvidia{index}"
        if not device.exists():
            os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # a character device: the same as /dev/null
        devices.append(f"NodeName={cluster.node} Name=gpu Type={kind} File={device}")
    (root / "etc" / "gres.conf").write_text("\n".join(["AutoDetect=off", *devices, ""]), encoding="utf-8")
    key = root / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o400)


def _spawn(cluster: Cluster, name: str, args: list[str]) -> None:
    log = open(cluster.root / "log" / f"{name}.out", "ab")  # noqa: SIM115  (kept open by the daemon)
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, env={**os.environ, **cluster.env})
    cluster.pids[name] = process.pid


def start(root: Path) -> Cluster:
    """Start munged, slurmctld and slurmd; return once the node is idle (bounded, about a second here)."""
    check_prerequisites()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    cluster = Cluster(root=root, ctld_port=free_port(), slurmd_port=free_port())
    _write_config(cluster)
    began = time.monotonic()
    munge = root / "munge"
    try:
        _spawn(cluster, "munged", [_binary("munged"), "-F", "--force", f"--key-file={munge / 'munge.key'}",
                                   f"--socket={munge / 'munge.socket'}", f"--pid-file={munge / 'munged.pid'}",
                                   f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={munge / 'seed'}"])
        _wait_for(lambda: (munge / "munge.socket").exists(), 30, "munged did not open its socket", cluster)
        _spawn(cluster, "slurmctld", [_binary("slurmctld"), "-D", "-i", "-f", str(cluster.conf)])
        _spawn(cluster, "slurmd", [_binary("slurmd"), "-D", "-N", cluster.node, "-f", str(cluster.conf)])
        cluster.save()
        _wait_for(lambda: _answers(cluster), 60, "slurmctld did not answer", cluster)
        cluster.wait_idle()
    except BaseException:
        stop(cluster)
        raise
    cluster.bring_up_s = time.monotonic() - began
    cluster.save()
    return cluster


def _answers(cluster: Cluster) -> bool:
    result = subprocess.run(["scontrol", "ping"], env={**os.environ, **cluster.env}, capture_output=True,
                            text=True, timeout=30, check=False)
    return "UP" in result.stdout


def _wait_for(ready: object, timeout_s: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, pid in cluster.pids.items():
            if not alive(pid):
                raise SetupMissing(f"{name} exited; see {cluster.root / 'log'}: {_tail(cluster, name)}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise SetupMissing(f"{what} within {timeout_s:g} s; see {cluster.root / 'log'}")


def _tail(cluster: Cluster, name: str) -> str:
    for path in (cluster.root / "log" / f"{name}.log", cluster.root / "log" / f"{name}.out"):
        try:
            lines = path.read_text(errors="replace").strip().splitlines()
        except OSError:
            continue
        if lines:
            return lines[-1][:300]
    return ""


def stop(cluster: Cluster) -> None:
    """End the jobs, then the daemons this module started (slurmd, slurmctld, munged), each by its pid."""
    if cluster.pids.get("slurmctld") and alive(cluster.pids["slurmctld"]):
        try:
            cluster.cancel_all()
        except (OSError, subprocess.SubprocessError):
            pass
    for name in reversed(DAEMONS):
        pid = cluster.pids.get(name, 0)
        send_signal(pid, signal.SIGTERM)
        if not wait_gone(pid, 20):
            send_signal(pid, signal.SIGKILL)
            wait_gone(pid, 10)
    cluster.pids = {}
    if (cluster.root / "cluster.json").exists():
        cluster.save()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: cluster.py start|stop DIR", file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    if argv[0] == "start":
        cluster = start(root)
        print(f"node {cluster.node} idle {cluster.bring_up_s:.1f} s after the daemons started")
        print(f"export SLURM_CONF={cluster.conf}")
        return 0
    stop(Cluster.load(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
