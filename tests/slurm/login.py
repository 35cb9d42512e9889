"""A login node for the test cluster: Debian's sshd on 127.0.0.1 only, with the cluster's SLURM_CONF.

What ``--slurm-login ssh://USER@HOST`` reaches on a real cluster, made on this machine: sshd with
its own host key and config (``SetEnv SLURM_CONF=…`` gives every session the test cluster), keys
only, root's key in a file of this directory (``AuthorizedKeysFile``: root's own ~/.ssh is never
touched), and an ssh client config that knows the host key. The same user on both sides, as a
user and their login node share a uid on the cluster's file system. Needs root and sshd
(``bash .ci/multihost-setup.sh`` installs it).

Example::

    login = start_login(Path("/tmp/sl/login"), cluster)
    SlurmCommands(login.url, ssh_config=login.ssh_config).nodes()
    stop_login(login)
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import Cluster, SetupMissing, free_port  # noqa: E402
from procutil import send_signal, wait_gone  # noqa: E402

SSHD = "/usr/sbin/sshd"


@dataclass
class Login:
    root: Path
    port: int
    pid: int = 0

    @property
    def url(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"


def start_login(root: Path, cluster: Cluster) -> Login:
    """sshd on 127.0.0.1 with the cluster's SLURM_CONF; returns once a command runs through it (bounded)."""
    if not Path(SSHD).exists() or shutil.which("ssh-keygen") is None:
        raise SetupMissing("sshd is not installed; run `bash .ci/multihost-setup.sh`")
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    login = Login(root=root, port=free_port())
    for key in (root / "host_key", root / "client_key"):
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text(), encoding="utf-8")
    (root / "authorized_keys").chmod(0o600)
    (root / "sshd_config").write_text("\n".join([
        "ListenAddress 127.0.0.1", f"Port {login.port}", f"HostKey {root / 'host_key'}",
        f"PidFile {root / 'sshd.pid'}", "AllowUsers root", "PermitRootLogin prohibit-password",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PubkeyAuthentication yes", "UsePAM no", "X11Forwarding no",
        "StrictModes no",  # the key file lies under /tmp (mode 1777); it is this directory's own, mode 0600
        "AllowTcpForwarding no", f"SetEnv SLURM_CONF={cluster.conf}", "LogLevel VERBOSE", "",
    ]), encoding="utf-8")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    log = open(root / "sshd.log", "ab")  # noqa: SIM115  (kept open by the daemon)
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    login.pid = process.pid
    key_type, key_text = (root / "host_key.pub").read_text().split()[:2]
    (root / "known_hosts").write_text(f"[127.0.0.1]:{login.port} {key_type} {key_text}\n", encoding="utf-8")
    login.ssh_config.write_text("\n".join([
        "Host 127.0.0.1", f"  IdentityFile {root / 'client_key'}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {root / 'known_hosts'}", "  StrictHostKeyChecking yes", "  BatchMode yes", "",
    ]), encoding="utf-8")
    try:
        _wait(login, process)
    except BaseException:
        stop_login(login)
        raise
    return login


def _wait(login: Login, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    said = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupMissing(f"sshd exited ({process.returncode}); see {login.root / 'sshd.log'}")
        try:
            socket.create_connection(("127.0.0.1", login.port), timeout=1).close()
        except OSError:
            time.sleep(0.2)
            continue
        done = subprocess.run(["ssh", "-F", str(login.ssh_config), "-p", str(login.port), "root@127.0.0.1",
                               "printenv SLURM_CONF"], capture_output=True, text=True, timeout=30, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return
        said = (done.stderr or done.stdout).strip()
        time.sleep(0.3)
    raise SetupMissing(f"no command ran through the test sshd within 30 s: {said}")


def stop_login(login: Login) -> None:
    send_signal(login.pid, signal.SIGTERM)
    if not wait_gone(login.pid, 10):
        send_signal(login.pid, signal.SIGKILL)
        wait_gone(login.pid, 10)
    login.pid = 0

