"""A private, second Docker Engine on this machine, for the fault case that restarts an engine.

The machine's own dockerd serves other tests and CI, so it is never restarted. This one is
started like the multi-host loopback engine (``tests/multihost/loopback.py``): its own unix
socket, exec root and pid file, ``--bridge none --iptables=false --ip-masq=false``, reached
directly through its socket (no ssh). Its data root persists between runs
(``$ISOCOST_FAULTS_ENGINE_ROOT``, default ``/var/cache/isocost/engine-faults``) so that the CPU
image is transferred once; a lock file keeps two suites from sharing it at the same time.

The CPU image gets there by ``docker save | docker load`` through the SDK (about 20 s for the
1.3 GB image on a 2-core machine, once per image). Nothing is tagged or pushed on the main
engine: a push would give the main engine's image a repo digest that other tests, and the
rows of campaigns run there, would then see.

As a script, for trying it by hand::

    python tests/faults/private_engine.py start /tmp/fe      # prints the socket
    python tests/faults/private_engine.py stop /tmp/fe
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: shared helpers
from procutil import alive, cmdline, send_signal, wait_gone  # noqa: E402

DATA_ROOT = Path(os.environ.get("ISOCOST_FAULTS_ENGINE_ROOT", "/var/cache/isocost/engine-faults"))


class EngineUnavailable(Exception):
    """The private engine cannot be started here (the case is reported as not run, with this reason)."""


@dataclass
class PrivateEngine:
    root: Path  # socket, exec root, pid file, log (a short path: unix sockets are length-limited)
    data_root: Path = DATA_ROOT
    pid: int = 0
    _lock: IO[str] | None = field(default=None, repr=False)

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"

    def client(self, timeout_s: int = 60) -> Any:
        import docker

        return docker.DockerClient(base_url=self.url, timeout=timeout_s)

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        if os.geteuid() != 0:
            raise EngineUnavailable("a second dockerd needs root")
        if shutil.which("dockerd") is None:
            raise EngineUnavailable("dockerd is not installed (bash .ci/docker-setup.sh installs it)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_root.mkdir(parents=True, exist_ok=True)
        if self._lock is None:
            self._lock = open(self.data_root.parent / f".{self.data_root.name}.lock", "w")  # noqa: SIM115
            fcntl.flock(self._lock, fcntl.LOCK_EX)  # another suite using this data root: wait for it
        self._start_daemon()

    def _start_daemon(self) -> None:
        exec_root = self.root / "exec"
        exec_root.mkdir(exist_ok=True)
        # Engine 20.10 takes its ID from /etc/docker/key.json unless told otherwise: its own key.
        config = self.root / "daemon.json"
        config.write_text(json.dumps({"deprecated-key-path": str(self.data_root / "key.json")}), encoding="utf-8")
        with open(self.log, "ab") as log:
            process = subprocess.Popen(
                ["dockerd", "--host", self.url, "--data-root", str(self.data_root), "--exec-root", str(exec_root),
                 "--pidfile", str(self.root / "docker.pid"), "--bridge", "none", "--iptables=false",
                 "--ip-masq=false", "--config-file", str(config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        self.pid = process.pid
        self._process = process
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EngineUnavailable(f"the private dockerd exited ({process.returncode}): {_tail(self.log)}")
            if self.answers():
                return
            time.sleep(0.3)
        raise EngineUnavailable(f"the private dockerd did not answer within 60 s: {_tail(self.log)}")

    def answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            client = self.client(timeout_s=3)
            try:
                client.ping()
            finally:
                client.close()
            return True
        except Exception:  # noqa: BLE001  (not answering, whatever the way)
            return False

    def stop_daemon(self, grace_s: float = 60) -> None:
        """SIGTERM, as ``systemctl stop docker`` does: the engine stops its containers, then exits."""
        send_signal(self.pid, signal.SIGTERM)
        if not wait_gone(self.pid, grace_s):
            send_signal(self.pid, signal.SIGKILL)
            wait_gone(self.pid, 10)
        if getattr(self, "_process", None) is not None:
            self._process.wait(timeout=10)

    def restart(self) -> None:
        """What ``systemctl restart docker`` does: stop (containers are stopped with it), start again."""
        self.stop_daemon()
        self._start_daemon()

    def stop(self) -> None:
        """Remove every container, stop the engine and its containerd; keep the data root (image cache)."""
        try:
            if self.pid and alive(self.pid) and self.answers():
                client = self.client()
                try:
                    for container in client.containers.list(all=True):
                        try:
                            container.remove(force=True)
                        except Exception:  # noqa: BLE001
                            pass
                finally:
                    client.close()
            if self.pid:
                self.stop_daemon(grace_s=30)
            containerd_pid = self.root / "exec" / "containerd" / "containerd.pid"
            if containerd_pid.exists():
                try:
                    pid = int(containerd_pid.read_text().strip() or 0)
                except ValueError:
                    pid = 0
                if pid and alive(pid) and "containerd" in cmdline(pid):
                    send_signal(pid, signal.SIGTERM)
                    wait_gone(pid, 10)
            subprocess.run(["umount", "-R", str(self.root / "exec")], capture_output=True, check=False)
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    # -- the image -------------------------------------------------------------------------------

    def ensure_image(self, main: Any, image_id: str, progress: Any = lambda message: None) -> str:
        """Make the main engine's image ``image_id`` present here; returns how it got here."""
        import docker.errors

        client = self.client(timeout_s=900)
        try:
            try:
                client.images.get(image_id)
                return "already in the private engine's data root"
            except docker.errors.ImageNotFound:
                pass
            progress("docker save | docker load of the CPU image into the private engine")
            start = time.monotonic()
            client.images.load(main.images.get(image_id).save(chunk_size=4 << 20))
            client.images.get(image_id)  # the same image ID: the launcher checks it like any other
            how = f"docker save | docker load ({time.monotonic() - start:.0f} s)"
            # Images of earlier checkouts: drop them (their shared layers stay with this one).
            for image in client.images.list():
                if image.id != image_id:
                    try:
                        client.images.remove(image.id, force=True)
                    except docker.errors.APIError:
                        pass
            return how
        finally:
            client.close()







def _tail(path: Path, lines: int = 6) -> str:
    try:
        return " / ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(__doc__)
        return 2
    root = Path(argv[1]).resolve()
    engine = PrivateEngine(root)
    if argv[0] == "start":
        engine.start()
        (root / "engine.pid").write_text(str(engine.pid))
        print(f"private engine: {engine.url} (pid {engine.pid}, data root {engine.data_root})")
        if engine._lock is not None:  # the script exits: another start may take the data root after it
            engine._lock.close()
        return 0
    engine.pid = int((root / "engine.pid").read_text())
    engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
