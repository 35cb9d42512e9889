"""A second, independent Docker Engine reached through a real OpenSSH server, all on 127.0.0.1.

What a rented host looks like from the laptop, made on this machine:

- ``dockerd`` with its own socket, data root, exec root and pid file, no bridge, no iptables
  (``--bridge none --iptables=false --ip-masq=false``); its socket belongs to a dedicated group;
- Debian's ``sshd`` listening on 127.0.0.1 only, with its own host key, ``PermitUserEnvironment
  yes`` and ``UsePAM no``;
- a dedicated user (in that group, account unlocked with ``usermod -p '*'``) whose
  ``~/.ssh/environment`` sets ``DOCKER_HOST`` to the second engine's socket, so ``ssh USER@HOST
  docker system dial-stdio`` (what the docker SDK runs) reaches the second engine;
- a client key and a known_hosts line for the host key, written into an ssh client config that
  ``isocost`` is given (``ssh_config`` in the hosts file): root's own ~/.ssh is never touched.

Needs root, ``dockerd`` (.ci/docker-setup.sh) and ``sshd`` (.ci/multihost-setup.sh).

As a script, for trying multi-host runs by hand::

    python tests/multihost/loopback.py start /tmp/mh     # prints the host URL and ssh config
    python tests/multihost/loopback.py stop /tmp/mh
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from procutil import alive, cmdline, send_signal, wait_gone  # noqa: E402

USER = os.environ.get("ISOCOST_MH_USER", "isocost-mh")
#: The second engine's images survive between sessions here (a pull of the CPU image is 1.3 GB).
DATA_ROOT = Path(os.environ.get("ISOCOST_MH_DATA_ROOT", "/var/cache/isocost/engine2"))
SSHD = "/usr/sbin/sshd"


@dataclass
class Loopback:
    root: Path  # sockets, pid files, keys, configs, logs (short path: unix sockets are length-limited)
    data_root: Path
    user: str
    port: int
    engine_pid: int = 0
    sshd_pid: int = 0

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def engine_url(self) -> str:
        """The second engine, directly (for the test's own checks, never for isocost)."""
        return f"unix://{self.socket}"

    @property
    def url(self) -> str:
        """The second engine through ssh, as a user would name a rented host."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    def save(self) -> None:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.root / "loopback.json").write_text(json.dumps(data, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, root: Path) -> Loopback:
        data = json.loads((root / "loopback.json").read_text(encoding="utf-8"))
        return cls(root=Path(data["root"]), data_root=Path(data["data_root"]), user=data["user"],
                   port=int(data["port"]), engine_pid=int(data["engine_pid"]), sshd_pid=int(data["sshd_pid"]))


class SetupMissing(Exception):
    """Something the loopback host needs is not installed (the tests skip, or fail in CI)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, timeout=120)


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise SetupMissing("the loopback host needs root (a user, a dockerd and an sshd are started)")
    for tool in ("dockerd", "docker", "ssh", "ssh-keygen", "useradd", "usermod"):
        if shutil.which(tool) is None:
            raise SetupMissing(f"{tool} is not installed; run `bash .ci/docker-setup.sh` and "
                               "`bash .ci/multihost-setup.sh`")
    if not Path(SSHD).exists():
        raise SetupMissing("sshd is not installed; run `bash .ci/multihost-setup.sh`")
    try:
        import paramiko  # noqa: F401  (the docker SDK refuses ssh:// without it)
    except ImportError:
        raise SetupMissing("paramiko is not installed (the docker SDK needs it for ssh://); "
                           "run `bash .ci/multihost-setup.sh`") from None


def ensure_user(user: str = USER) -> pwd.struct_passwd:
    """The dedicated ssh user and its group (which will own the second engine's socket)."""
    try:
        grp.getgrnam(user)
    except KeyError:
        _run("groupadd", "--system", user)
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        _run("useradd", "--system", "--create-home", "--gid", user, "--shell", "/bin/sh", user)
        entry = pwd.getpwnam(user)
    # A locked account ('!' in the shadow file) is refused by sshd even with a valid key.
    _run("usermod", "-p", "*", user)
    return entry


def start(root: Path, *, data_root: Path = DATA_ROOT, user: str = USER, port: int | None = None) -> Loopback:
    """Start the second engine and the ssh server; return once `docker info` answers through ssh."""
    check_prerequisites()
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    data_root.mkdir(parents=True, exist_ok=True)
    account = ensure_user(user)
    box = Loopback(root=root, data_root=data_root, user=user, port=port or free_port())
    try:
        _start_engine(box)
        _start_sshd(box, account)
        box.save()
        _wait_through_ssh(box)
    except BaseException:
        stop(box)
        raise
    return box


def _start_engine(box: Loopback) -> None:
    exec_root = box.root / "exec"
    exec_root.mkdir(exist_ok=True)
    # Engine 20.10 takes its ID from a trust key, /etc/docker/key.json by default: shared with the
    # first engine on this machine. Its own key gives it its own ID, as a separate host would have.
    config = box.root / "daemon.json"
    config.write_text(json.dumps({"deprecated-key-path": str(box.data_root / "key.json")}), encoding="utf-8")
    log = open(box.root / "dockerd.log", "ab")  # noqa: SIM115  (kept open by the daemon)
    process = subprocess.Popen(
        ["dockerd", "--host", box.engine_url, "--data-root", str(box.data_root), "--exec-root", str(exec_root),
         "--pidfile", str(box.root / "docker.pid"), "--bridge", "none", "--iptables=false", "--ip-masq=false",
         "--group", box.user, "--config-file", str(config)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    box.engine_pid = process.pid
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupMissing(f"the second dockerd exited ({process.returncode}); see {box.root / 'dockerd.log'}: "
                               + _tail(box.root / "dockerd.log"))
        answer = _run("docker", "-H", box.engine_url, "version", "--format", "{{.Server.Version}}", check=False)
        if answer.returncode == 0:
            return
        time.sleep(0.5)
    raise SetupMissing(f"the second dockerd did not answer within 60 s: {_tail(box.root / 'dockerd.log')}")


def _start_sshd(box: Loopback, account: pwd.struct_passwd) -> None:
    home = Path(account.pw_dir)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    host_key = box.root / "ssh_host_ed25519_key"
    client_key = box.root / "client_ed25519"
    for key in (host_key, client_key):
        if not key.exists():
            _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"isocost loopback {key.name}", "-f", str(key))
    (ssh_dir / "authorized_keys").write_text((client_key.with_suffix(".pub")).read_text(), encoding="utf-8")
    (ssh_dir / "environment").write_text(f"DOCKER_HOST={box.engine_url}\n", encoding="utf-8")
    for path in (ssh_dir, ssh_dir / "authorized_keys", ssh_dir / "environment"):
        os.chown(path, account.pw_uid, account.pw_gid)
    (ssh_dir / "authorized_keys").chmod(0o600)
    (ssh_dir / "environment").chmod(0o600)
    config = box.root / "sshd_config"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1",
        f"Port {box.port}",
        f"HostKey {host_key}",
        f"PidFile {box.root / 'sshd.pid'}",
        f"AllowUsers {box.user}",
        "PermitRootLogin no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "PermitUserEnvironment yes",
        "UsePAM no",
        "StrictModes yes",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "ClientAliveInterval 5",
        "ClientAliveCountMax 3",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
        "LogLevel VERBOSE",
        "",
    ]), encoding="utf-8")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = open(box.root / "sshd.log", "ab")  # noqa: SIM115
    # -D: stay in the foreground (we own the process); -e: log to stderr (our log file).
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    box.sshd_pid = process.pid
    known = box.root / "known_hosts"
    key_type, key_text = host_key.with_suffix(".pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{box.port} {key_type} {key_text}\n", encoding="utf-8")
    box.ssh_config.write_text("\n".join([
        "Host 127.0.0.1",
        f"  IdentityFile {client_key}",
        "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {known}",
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        "",
    ]), encoding="utf-8")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupMissing(f"sshd exited ({process.returncode}): {_tail(box.root / 'sshd.log')}")
        try:
            socket.create_connection(("127.0.0.1", box.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SetupMissing(f"sshd did not listen on 127.0.0.1:{box.port}: {_tail(box.root / 'sshd.log')}")


def _wait_through_ssh(box: Loopback) -> None:
    last = ""
    for _ in range(20):
        done = _run("ssh", "-F", str(box.ssh_config), "-p", str(box.port), f"{box.user}@127.0.0.1",
                    "docker", "version", "--format", "{{.Server.Version}}", check=False)
        if done.returncode == 0:
            return
        last = (done.stderr or done.stdout).strip()
        time.sleep(0.5)
    raise SetupMissing(f"`docker version` through ssh fails: {last} (sshd log: {_tail(box.root / 'sshd.log')})")


def kill_engine(box: Loopback) -> None:
    """SIGKILL the second dockerd, as a crash would (its containers are left to `stop`)."""
    send_signal(box.engine_pid, signal.SIGKILL)
    wait_gone(box.engine_pid, 10)


def drop_ssh_connections(box: Loopback) -> int:
    """Cut every open ssh connection (SIGKILL the sshd processes serving them); the server stays up."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == box.sshd_pid:
            children.append(int(stat.parent.name))
    for pid in children:
        send_signal(pid, signal.SIGKILL)
    return len(children)


def restart_engine(box: Loopback) -> None:
    _start_engine(box)
    box.save()


def stop(box: Loopback) -> None:
    """Stop sshd and the second engine and its containers; keep the engine's data root (image cache)."""
    send_signal(box.sshd_pid, signal.SIGTERM)
    wait_gone(box.sshd_pid, 10)
    if box.engine_pid and not alive(box.engine_pid):
        # Killed by a test: start it again so that it can stop its left-over containers and
        # its containerd properly (a restarted engine kills what it finds running).
        try:
            _start_engine(box)
        except SetupMissing:
            pass
    if box.engine_pid and alive(box.engine_pid):
        listed = _run("docker", "-H", box.engine_url, "ps", "-aq", check=False).stdout.split()
        if listed:
            _run("docker", "-H", box.engine_url, "rm", "-f", *listed, check=False)
        volumes = _run("docker", "-H", box.engine_url, "volume", "ls", "-q", check=False).stdout.split()
        if volumes:
            _run("docker", "-H", box.engine_url, "volume", "rm", "-f", *volumes, check=False)
        send_signal(box.engine_pid, signal.SIGTERM)
        wait_gone(box.engine_pid, 30)
    send_signal(box.engine_pid, signal.SIGKILL)
    containerd_pid = box.root / "exec" / "containerd" / "containerd.pid"
    if containerd_pid.exists():
        try:
            pid = int(containerd_pid.read_text().strip() or 0)
        except ValueError:
            pid = 0
        if pid and alive(pid) and "containerd" in cmdline(pid):
            send_signal(pid, signal.SIGTERM)
            wait_gone(pid, 10)
    subprocess.run(["umount", "-R", str(box.root / "exec")], capture_output=True, check=False)







def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " / ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__)
        return 2
    root = Path(argv[1]).resolve()
    if argv[0] == "start":
        box = start(root)
        print(f"host URL:   {box.url}\nssh config: {box.ssh_config}\nengine:     {box.engine_url}")
        return 0
    stop(Loopback.load(root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
