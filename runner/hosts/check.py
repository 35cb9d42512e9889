"""Checking hosts without running anything: who answers at each engine, and can it run the stack.

:func:`check_hosts` connects to every host at once and reads ``docker info``; for a GPU stack it
checks the GPU plumbing and, when an image is known, runs the GPU probe (:mod:`runner.hosts.gpucheck`).
``isocost hosts check`` prints the result.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from runner.hosts.spec import HostSpec
from runner.launch.daemon.address import connect
from runner.launch.daemon.client import daemon_identity


@dataclass(frozen=True)
class HostCheck:
    """What one host's check found."""

    name: str
    url: str
    identity: dict[str, Any]  # empty when the engine did not answer
    problem: str  # "" when the host is usable
    gpu: str = ""  # the GPU pre-flight's one line (probe answer, or why it was not probed)


def _check_stack(client: Any, stack: str, image: str, require_gpu: bool, lock_path: Path | None) -> tuple[str, str]:
    """(problem, gpu line) for one engine and stack; raises UserError for missing GPU plumbing."""
    from runner.hosts.gpucheck import judge, run_probe
    from runner.images.lock import locked_image
    from runner.launch.daemon.client import is_local_daemon, resolve_image
    from runner.launch.daemon.gpu import gpu_options

    if stack == "cpu":
        gpu_options(stack, client)
        return "", ""
    if stack == "cuda" or is_local_daemon(client):
        gpu_options(stack, client)  # fast: the Container Toolkit / device nodes, before any image is touched
    record = locked_image(stack, lock_path)
    ref = image or (record.image_ref if record is not None else "")
    if not ref:
        why = (f"no {stack} image known to probe the GPU with (build one: isocost images build --stack {stack}; "
               "or pass --image)")
        return (why, "") if require_gpu else ("", f"GPU not probed: {why}")
    resolved = resolve_image(client, ref, prefer_digest=record.repo_digest if record is not None and not image else "")
    user = f"{resolved.uid}:{resolved.uid}"
    gpu = gpu_options(stack, client, image_ref=resolved.ref, user=user)
    result = judge(run_probe(client, resolved.ref, user, gpu), stack)
    return ("" if result.ok else result.summary), result.summary


def check_hosts(hosts: list[HostSpec], stack: str = "", *, image: str = "", require_gpu: bool = False,
                lock_path: Path | None = None) -> list[HostCheck]:
    """Connect to every host at once; read who answers (docker info) and whether it can run the stack.

    For a GPU stack, when an image is known (``image``, else ``images/images.lock``), one tiny container of it must see
    the GPU (:mod:`runner.hosts.gpucheck`); with ``require_gpu`` a host that could not be probed is unusable too.
    """
    found: dict[str, HostCheck] = {}

    def one(host: HostSpec) -> None:
        identity: dict[str, Any] = {}
        problem = gpu_line = ""
        client = None
        try:
            client = connect(host.address, timeout_s=60)
            identity = daemon_identity(client)
            wanted = host.stack or stack
            if wanted:
                problem, gpu_line = _check_stack(client, wanted, image, require_gpu, lock_path)
        except UserError as exc:
            problem = exc.message
        except Exception as exc:  # an engine answering in a way we do not know
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            if client is not None:
                client.close()
        found[host.name] = HostCheck(host.name, host.url, identity, problem, gpu_line)

    threads = [threading.Thread(target=one, args=(host,), daemon=True) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [found[h.name] for h in hosts]


