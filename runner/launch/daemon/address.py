"""Reaching a Docker daemon by URL: ``local``, ``unix:///….sock`` or ``ssh://user@host[:port]``.

An ``ssh://`` daemon is reached the way ``DOCKER_HOST=ssh://…`` and docker contexts reach it: the
``ssh`` client runs ``docker system dial-stdio`` on the host and the API travels over its
standard streams. The user's own ssh set-up (keys, agent, ~/.ssh/config, jump hosts) applies.
We add, per connection:

- ``-F FILE`` when the host names an ssh client config of its own;
- ``BatchMode=yes`` (never a password prompt in a worker thread), ``ConnectTimeout``, and
  ``ServerAliveInterval``/``CountMax`` so that a dropped link ends the connection instead of
  hanging a read forever;
- connection reuse (one ``ssh`` process serves many API calls, as the paramiko transport does);
- a diagnosis when the daemon does not answer: the same ``ssh`` command is run once more with its
  error output captured ("Permission denied (publickey)", "Connection refused", "Cannot connect
  to the Docker daemon…"), so the user sees why.

The docker SDK demands ``paramiko`` for any ``ssh://`` URL even when it shells out to ``ssh``;
isocost depends on ``docker[ssh]`` for that reason.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from protocol.errors import UserError
from runner.launch.daemon.client import docker_sdk, short_error

#: What the SDK is told before the daemon's own API version is read (docker 7 supports >= 1.24).
_BOOT_API_VERSION = "1.24"
DIAL_COMMAND = "docker system dial-stdio"


@dataclass(frozen=True)
class DaemonAddress:
    """Where a daemon is: ``local`` (DOCKER_HOST or the default socket), a unix socket, or ssh."""

    url: str
    ssh_config: Path | None = None
    connect_timeout_s: int = 10
    alive_interval_s: int = 5
    alive_count: int = 3

    @property
    def kind(self) -> str:
        if self.url == "local":
            return "local"
        return urlsplit(self.url).scheme

    def ssh_target(self) -> tuple[str, str, str]:
        """(user, host, port) of an ssh:// URL; user and port may be empty."""
        parts = urlsplit(self.url)
        return parts.username or "", parts.hostname or "", str(parts.port or "")

    def ssh_options(self) -> list[str]:
        options = []
        if self.ssh_config is not None:
            options += ["-F", str(self.ssh_config)]
        options += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout_s}",
                    "-o", f"ServerAliveInterval={self.alive_interval_s}",
                    "-o", f"ServerAliveCountMax={self.alive_count}"]
        return options

    def ssh_command(self, remote: str) -> list[str]:
        user, host, port = self.ssh_target()
        args = ["ssh", *self.ssh_options()]
        if user:
            args += ["-l", user]
        if port:
            args += ["-p", port]
        return [*args, "--", host, remote]


#: An ssh host: a DNS name or ssh_config alias (letters, digits, '-', '_', dots between labels), or an IP address.
_HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                        r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$")
#: An ssh user: what useradd accepts (and what an ssh -l argument can safely be).
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
MAX_URL_CHARS = 2048
#: The shape of an ssh URL's netloc: [user@](host | [address])[:port], nothing before or after.
_NETLOC = re.compile(r"^(?:[^@\[\]]*@)?(?:[^@:\[\]]+|\[[^@\[\]]+\])(?::[0-9]*)?$")


def parse_daemon_url(url: str, where: str) -> str:
    """Check a daemon URL; return it normalised. ``local`` means DOCKER_HOST or the default socket.

    Every malformed URL is a :class:`UserError` naming it: an unclosed IPv6 bracket, a port outside
    1..65535, a host or user that is not a plain name (``-oProxyCommand=…``, a space), a control
    character, a lone surrogate from undecodable bytes.
    """
    url = url.strip()
    if url in ("local", ""):
        return "local"
    if len(url) > MAX_URL_CHARS:
        raise UserError(f"the engine URL is longer than {MAX_URL_CHARS} characters", where, "Write a short URL.")
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise UserError(f"{url!r} holds a control character or NUL", where, "Write the URL on one plain line.")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in url):
        raise UserError(f"{url!a} holds bytes that are not text", where, "Write the URL in plain UTF-8.")
    if not url.isprintable():
        raise UserError(f"{url!a} holds a character that is not printable", where, "Write the URL on one plain line.")
    parts = _split(url, where)
    if parts.scheme == "unix" and parts.path:
        return url
    if parts.scheme == "ssh":
        return _ssh_url(url, parts, where)
    if parts.scheme in ("tcp", "http", "https"):
        raise UserError(f"{url!r}: isocost reaches remote Docker daemons through ssh only", where,
                        "Use ssh://USER@HOST[:PORT] (Docker Engine's own remote access over SSH); an open TCP "
                        "socket gives root on the host to anyone who reaches it.")
    raise UserError(f"{url!r} is not an engine URL", where, "Use local, unix:///PATH/docker.sock or ssh://USER@HOST.")


_BRACKETS_FIX = "Write ssh://USER@HOST[:PORT], an IPv6 address in brackets: ssh://USER@[2001:db8::1]:22."


def _split(url: str, where: str) -> SplitResult:
    """``urlsplit``, its refusals in our words: which brackets urllib refuses, and how it says so, differs between
    Python releases (3.11.2 refuses ``[::1]]`` as "Invalid IPv6 URL", later ones check the address in brackets)."""
    try:
        return urlsplit(url)
    except ValueError:
        pass
    netloc = re.split(r"[/?#]", url.partition("://")[2], maxsplit=1)[0]
    bracketed = re.fullmatch(r"(?:[^@\[\]]*@)?\[([^@\[\]]+)\](?::[0-9]*)?", netloc)
    if bracketed and not _is_ipv6(bracketed[1]):
        raise UserError(f"{url!r} names {bracketed[1]!r} in brackets, not an IPv6 address", where,
                        "Write an IPv6 address in brackets, e.g. ssh://USER@[2001:db8::1]:22.")
    raise UserError(f"{url!r} is not USER@HOST[:PORT]: a bracket is unclosed or stray", where, _BRACKETS_FIX)


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _ssh_url(url: str, parts: SplitResult, where: str) -> str:
    """``ssh://USER@HOST[:PORT]`` checked part by part; the normalised URL."""
    if not parts.hostname:
        raise UserError(f"{url!r} names no host", where, "Write ssh://USER@HOST[:PORT].")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password:
        raise UserError(f"{url!r} has a path, query or password", where,
                        "Write ssh://USER@HOST[:PORT]; keys come from ssh (agent, ~/.ssh/config, ssh_config).")
    try:
        port = parts.port
    except ValueError:
        raise UserError(f"{url!r} has an invalid port", where, "Write ssh://USER@HOST:PORT.") from None
    if port is not None and not 1 <= port <= 65535:
        raise UserError(f"{url!r} has port {port}, outside 1..65535", where, "Write ssh://USER@HOST:PORT.")
    if parts.username is not None and not _USER_NAME.fullmatch(parts.username):
        raise UserError(f"{url!r} names the user {parts.username!r}, not a plain user name", where,
                        "Write ssh://USER@HOST with USER of letters, digits, '.', '_' and '-' (or leave it to "
                        "~/.ssh/config).")
    host = parts.hostname
    if not _NETLOC.fullmatch(parts.netloc):
        raise UserError(f"{url!r} is not USER@HOST[:PORT]", where, _BRACKETS_FIX)
    if "[" in parts.netloc:
        if not _is_ipv6(host):
            raise UserError(f"{url!r} names {host!r} in brackets, not an IPv6 address", where,
                            "Write an IPv6 address in brackets, e.g. ssh://USER@[2001:db8::1]:22.")
    elif not _HOST_NAME.fullmatch(host):
        raise UserError(f"{url!r} names the host {host!r}, not a host name or address", where,
                        "Write ssh://USER@HOST with HOST a DNS name, an ssh_config alias or an IP address.")
    return f"ssh://{parts.netloc}"


# -- the ssh transport -----------------------------------------------------------------------------


def _transport_classes() -> tuple[Any, Any, Any, Any]:
    try:
        from docker.transport.sshconn import SSHConnection, SSHConnectionPool, SSHHTTPAdapter, SSHSocket
    except ImportError:
        raise UserError(
            "the docker SDK cannot reach ssh:// daemons: paramiko is not installed (the SDK imports it even "
            "when it shells out to ssh)",
            "--host ssh://…",
            "pip install 'docker[ssh]>=7' (or paramiko), or reinstall isocost.",
        ) from None
    return SSHConnection, SSHConnectionPool, SSHHTTPAdapter, SSHSocket


class _KeepOpen:
    """The response reader over ssh's stdout: closing it (http.client does, after each response)
    must not close the pipe, or the connection could serve only one API call."""

    def __init__(self, stream: Any, channel: Any) -> None:
        self._stream = stream
        self.channel = channel
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """End an ``ssh … dial-stdio`` process: close its stdin, terminate (kill if it lingers), close its stdout."""
    try:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
    except OSError:
        pass
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    try:
        if proc.stdout:
            proc.stdout.close()
    except OSError:
        pass


def _socket_class(address: DaemonAddress, SSHSocket: Any) -> Any:
    class OptionsSocket(SSHSocket):  # type: ignore[misc, valid-type]
        """``ssh OPTIONS -- HOST docker system dial-stdio``; quiet, and reaped when closed."""

        def connect(self, **kwargs: Any) -> None:
            self.proc = subprocess.Popen(
                address.ssh_command(DIAL_COMMAND),
                env={k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "SSL_CERT_FILE")},
                stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C on the CLI must not kill the connections under it
            )

        def fileno(self) -> int:
            # urllib3 polls this to see whether a pooled connection was dropped: the pipe from ssh
            # is readable between responses only when ssh has exited (EOF), which is exactly that.
            if self.proc is not None and self.proc.stdout is not None and not self.proc.stdout.closed:
                return int(self.proc.stdout.fileno())
            return int(super().fileno())

        def makefile(self, mode: str, *args: Any, **kwargs: Any) -> Any:
            if self.proc is None:
                self.connect()
            return _KeepOpen(self.proc.stdout, self)

        def close(self) -> None:
            socket.socket.close(self)
            if self.proc is not None:
                _reap(self.proc)

    return OptionsSocket


def _pool_class(SSHConnection: Any, SSHConnectionPool: Any, socket_class: Any) -> Any:
    class OptionsConnection(SSHConnection):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            sock = socket_class(self.ssh_host)
            sock.settimeout(self.timeout)
            sock.connect()
            self.sock = sock

    class OptionsPool(SSHConnectionPool):  # type: ignore[misc, valid-type]
        def _new_conn(self) -> Any:
            return OptionsConnection(None, self.timeout, self.ssh_host)

    return OptionsPool


def _make_adapter(address: DaemonAddress, timeout_s: int, max_pool_size: int) -> Any:
    """The SDK's ssh adapter, with our ssh options, one pooled ``ssh`` process per connection."""
    SSHConnection, SSHConnectionPool, SSHHTTPAdapter, SSHSocket = _transport_classes()
    pool_class = _pool_class(SSHConnection, SSHConnectionPool, _socket_class(address, SSHSocket))

    class OptionsAdapter(SSHHTTPAdapter):  # type: ignore[misc, valid-type]
        """One pool for the daemon (the SDK's shell-out path makes a new ssh process per call)."""

        def __init__(self) -> None:
            super().__init__(address.url, timeout_s, max_pool_size=max_pool_size, shell_out=True)
            self._pool: Any = None
            self._pool_lock = threading.Lock()

        def get_connection(self, url: Any, proxies: Any = None) -> Any:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = pool_class(None, timeout=self.timeout, maxsize=self.max_pool_size, host=self.ssh_host)
                return self._pool

        def get_connection_with_tls_context(self, request: Any, verify: Any, proxies: Any = None,
                                            cert: Any = None) -> Any:
            return self.get_connection(request.url, proxies)

        def close(self) -> None:
            with self._pool_lock:
                if self._pool is not None:
                    self._pool.close()
                    self._pool = None
            super().close()

    return OptionsAdapter()


def connect(address: DaemonAddress, *, timeout_s: int = 600) -> Any:
    """A docker SDK client for the daemon at ``address``; a UserError saying why if it does not answer."""
    docker = docker_sdk()
    try:
        if address.kind == "local":
            client = docker.from_env(timeout=timeout_s)
        elif address.kind == "unix":
            client = docker.DockerClient(base_url=address.url, timeout=timeout_s)
        else:
            _transport_classes()
            client = docker.DockerClient(base_url=address.url, use_ssh_client=True, timeout=timeout_s,
                                         version=_BOOT_API_VERSION)
            adapter = _make_adapter(address, timeout_s, max_pool_size=4)
            client.api.mount("http+docker://ssh", adapter)
            client.api._custom_adapter = adapter
            client.api._version = str(client.api.version(api_version=False)["ApiVersion"])
        client.ping()
    except UserError:
        raise
    except Exception as exc:  # the SDK raises several unrelated types when a daemon half-answers
        raise UserError(
            f"the Docker engine at {address.url} does not answer ({diagnose(address) or short_error(exc)})",
            address.url,
            fix_for(address),
        ) from None
    return client


def fix_for(address: DaemonAddress) -> str:
    if address.kind == "ssh":
        command = " ".join(shlex.quote(a) for a in address.ssh_command("docker version"))
        return (f"Check that `{command}` works from this machine (key, known_hosts, the user's access to the "
                "engine's socket), or leave this host out.")
    return "Start dockerd there, or leave this host out."


def diagnose(address: DaemonAddress, timeout_s: float = 30) -> str:
    """Why an ssh daemon does not answer, in ssh's or docker's own words ('' when it does answer)."""
    if address.kind != "ssh":
        return ""
    try:
        done = subprocess.run(address.ssh_command("docker version --format '{{.Server.Version}}'"),
                              capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"ssh did not finish within {timeout_s:g} s"
    except OSError as exc:
        return f"cannot run ssh: {exc.strerror}"
    if done.returncode == 0:
        return ""
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return "; ".join(lines[-2:])[:300] or f"ssh exited with status {done.returncode}"
