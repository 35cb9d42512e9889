"""GPU access per stack: the container options that give a trial its GPU, checked before any trial.

NVIDIA through a device request for one card (the host's first ``CUDA_VISIBLE_DEVICES``, else
card 0); AMD through /dev/kfd and the one render node of the chosen card (the host's first
``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` entry, else card 0, found in the KFD topology:
:mod:`runner.launch.daemon.amd_cards`) with those nodes' numeric groups and ``seccomp=unconfined``. The
nodes' groups and the topology are read on the daemon's own host: from sysfs and the nodes when
local, by a short helper container when remote. A host without the stack gets a UserError that
names what it lacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from protocol.engines import device_stack
from protocol.errors import UserError
from runner.launch.daemon.amd_cards import (
    KFD_NODES_DIR,
    ROCM_CHOICE_ENV,
    AmdCard,
    Topology,
    choose_card,
    list_cards,
    read_topology,
    rocm_device_choice,
)
from runner.launch.daemon.client import docker_sdk, is_local_daemon, short_error

#: Read inside a helper container that was given the host's GPU device nodes: their numeric groups, and the
#: KFD topology files (sysfs is the host's) that say which render node is which card. Plain python3, not
#: amd_cards.read_topology: it must run in any trial image, including one built before that module existed.
GID_SCRIPT = (
    "import glob, json, os\n"
    "nodes = ['/dev/kfd', *sorted(glob.glob('/dev/dri/*'))]\n"
    "gids = {n: os.stat(n).st_gid for n in nodes if os.path.exists(n) and not os.path.isdir(n)}\n"
    "topology = {}\n"
    f"for d in sorted(glob.glob('{KFD_NODES_DIR}/*')):\n"
    "    try:\n"
    "        topology[os.path.basename(d)] = {f: open(os.path.join(d, f)).read() for f in ('gpu_id', 'properties')}\n"
    "    except OSError:\n"
    "        pass\n"
    "print(json.dumps({'gids': gids, 'topology': topology}))\n"
)


def cuda_device_choice() -> str:
    """The one NVIDIA card a trial container gets: the first of the host's ``CUDA_VISIBLE_DEVICES``
    (an index or a ``GPU-…`` UUID), else card 0. Inside the container it is the only card (index 0)."""
    visible = [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return visible[0] if visible else "0"


def gpu_options(stack: str, client: Any, *, image_ref: str = "", user: str = "") -> dict[str, Any]:
    """Container options that give the trial its GPU; a UserError naming what the host lacks.

    ``image_ref`` and ``user`` are needed for a remote ROCm daemon: a short helper container of that
    image reads the numeric groups of ``/dev/kfd`` and ``/dev/dri/*`` on that host.
    """
    if device_stack(stack) == "cpu":  # an engine's own CPU image (cpu-vllm) too
        return {}
    local = is_local_daemon(client)
    if stack == "cuda":
        docker = docker_sdk()
        runtimes = client.info().get("Runtimes") or {}
        hook = shutil.which("nvidia-container-runtime-hook") if local else None
        if "nvidia" not in runtimes and not hook:
            raise UserError(
                "the cuda stack needs NVIDIA GPUs inside containers, and this engine has no NVIDIA Container "
                f"Toolkit (docker info lists runtimes {sorted(runtimes)}, no 'nvidia'; no "
                "nvidia-container-runtime-hook on PATH)",
                "stack cuda, --launcher docker",
                "Install the NVIDIA Container Toolkit and configure dockerd (nvidia-ctk runtime configure "
                "--runtime=docker, then restart dockerd), or run on a host with NVIDIA GPUs.",
            )
        device = cuda_device_choice()
        return {
            "device_requests": [docker.types.DeviceRequest(device_ids=[device], capabilities=[["gpu"]])],
            "environment": {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
            # The container sees exactly the requested card: a host index passed through would name another.
            "drop_environment": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
            "gpu_devices": [device],
        }
    if stack == "rocm":
        return _rocm_options(client, local, image_ref, user)
    raise UserError(f"unknown stack {stack!r}", "study [base] stack", "Use cpu, cuda or rocm.")


def _rocm_options(client: Any, local: bool, image_ref: str, user: str) -> dict[str, Any]:
    """/dev/kfd and the chosen card's render node, with their numeric groups (see the module's text)."""
    kfd, dri = Path("/dev/kfd"), Path("/dev/dri")
    if local and not kfd.exists():
        raise UserError(
            "the rocm stack needs /dev/kfd, and this host has none (the amdgpu kernel driver is not loaded, "
            "or there is no AMD GPU)",
            "stack rocm, --launcher docker",
            "Install amdgpu-dkms on the host (containers share its kernel driver) and reboot, or run on a "
            "host with an AMD Instinct/Radeon GPU supported by ROCm.",
        )
    if local and not dri.is_dir():
        raise UserError("the rocm stack needs /dev/dri, and this host has none", "stack rocm",
                        "Check the amdgpu driver on the host.")
    # Groups by number, from the device nodes themselves (on the daemon's host): names like "render"
    # may not exist in the image's /etc/group, and a name's id need not match the host's.
    if local:
        topology = read_topology()
        names = ["/dev/kfd", *sorted(f"/dev/dri/{p.name}" for p in dri.iterdir() if not p.is_dir())]
        gids = {name: Path(name).stat().st_gid for name in names}
    else:
        gids, topology = remote_device_facts(client, image_ref, user)
    choice = rocm_device_choice()
    card = _chosen_card(topology, choice, "this host" if local else "the remote host")
    if card.render_node not in gids:
        raise UserError(f"the KFD topology names {card.render_node} for AMD card {choice}, and there is no such "
                        "device node", "stack rocm", "Check the amdgpu driver on that host (ls -l /dev/dri).")
    nodes = ["/dev/kfd", card.render_node]
    return {
        "devices": [f"{node}:{node}:rwm" for node in nodes],
        "group_add": [str(g) for g in sorted({gids[node] for node in nodes})],
        "security_opt": ["seccomp=unconfined"],
        # The container sees exactly this card, as device 0: a host index passed through would name another.
        "drop_environment": ROCM_CHOICE_ENV,
        "gpu_devices": [f"{choice} ({card.render_node})"],
    }


def _chosen_card(topology: Topology, choice: str, where: str) -> AmdCard:
    found = list_cards(topology)
    if not found:
        raise UserError(f"{where} lists no AMD GPU in its KFD topology ({KFD_NODES_DIR}: "
                        f"{len(topology)} node(s), none a GPU with a render node)", "stack rocm",
                        "Check the amdgpu driver (ls /sys/class/kfd/kfd/topology/nodes; rocminfo), or run on a "
                        "host with an AMD GPU supported by ROCm.")
    card = choose_card(found, choice)
    if card is None:
        named = ", ".join(f"{c.index} ({c.uuid or 'no UUID'}, {c.render_node})" for c in found)
        raise UserError(f"AMD card {choice!r} (the host's first ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES "
                        f"entry) is not on {where}, which has {named}", "stack rocm",
                        "Set ROCR_VISIBLE_DEVICES to one of those indices or UUIDs, or unset it for card 0.")
    return card


def remote_device_facts(client: Any, image_ref: str, user: str) -> tuple[dict[str, int], Topology]:
    """Numeric group of each AMD GPU device node on the daemon's host, and that host's KFD topology, read by
    a short helper container.

    The helper gets the nodes as devices (the daemon creates them with the host's owner and group),
    runs as the trial's user with no network, a read-only root and no capabilities, and prints JSON.
    """
    where = "stack rocm, remote engine"
    if not image_ref:
        raise UserError("the rocm stack on a remote engine needs the trial image to read the GPU groups", where,
                        "Resolve the image first (this is a bug in the caller).")
    docker = docker_sdk()
    try:
        helper = client.containers.create(
            image=image_ref, name=f"isocost-gpu-groups-{uuid.uuid4().hex[:8]}", entrypoint=["python3"],
            command=["-c", GID_SCRIPT], user=user or None,
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            devices=["/dev/kfd:/dev/kfd:r", "/dev/dri:/dev/dri:r"], pids_limit=16, detach=True,
            labels={"org.isocost.kind": "gpu-groups"},
        )
    except docker.errors.DockerException as exc:
        raise UserError(f"the engine could not give a container /dev/kfd and /dev/dri: {short_error(exc)}", where,
                        "Check the amdgpu driver on that host (ls -l /dev/kfd /dev/dri), or run on a host with "
                        "an AMD GPU supported by ROCm.") from None
    try:
        helper.start()
        code = int(helper.wait(timeout=120).get("StatusCode", -1))
        out = helper.logs(stdout=True, stderr=False).decode("utf-8", "replace").strip().splitlines()
        facts = json.loads(out[-1]) if code == 0 and out else {}
        gids = {str(k): int(v) for k, v in facts.get("gids", {}).items()}
        topology = {str(node): {str(k): str(v) for k, v in files.items()}
                    for node, files in facts.get("topology", {}).items()}
    except (docker.errors.DockerException, ValueError, IndexError, AttributeError) as exc:
        raise UserError(f"could not read the GPU device groups on the remote host: {short_error(exc)}", where,
                        "Check the amdgpu driver on that host (ls -ln /dev/kfd /dev/dri).") from None
    finally:
        with contextlib.suppress(Exception):  # best effort: the helper is labelled for later cleanup
            helper.remove(force=True)
    if "/dev/kfd" not in gids:
        raise UserError(f"the remote host has no readable /dev/kfd (helper saw {sorted(gids) or 'nothing'})", where,
                        "Install amdgpu-dkms on that host and reboot, or run on a host with an AMD GPU.")
    return gids, topology

