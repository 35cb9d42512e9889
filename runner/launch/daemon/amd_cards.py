"""Which AMD card a ROCm trial container gets: one render node, found in the host's KFD topology.

ROCm opens ``/dev/kfd`` (shared by every card) and one ``/dev/dri/renderD<minor>`` per card. A container
given only one render node sees only that card, as device 0 (the runtime skips the cards whose node it
cannot open). The amdgpu driver lists the cards in sysfs, one KFD topology node each
(``/sys/class/kfd/kfd/topology/nodes/<n>/``): ``gpu_id`` is 0 for a CPU node, and the node's
``properties`` hold ``drm_render_minor`` and ``unique_id``. ROCm numbers the cards in node order, so
device index ``i`` on the host is the ``i``-th GPU node; ``GPU-<unique_id as 16 hex digits>`` is its
UUID (what ``rocminfo`` prints).

Pure reading and choosing: the caller reads the sysfs files (locally, or by a helper container on a
remote daemon) into :data:`Topology` and turns a missing card into its own error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: Where the amdgpu driver lists the KFD topology (the same path inside a container: sysfs is the host's).
KFD_NODES_DIR = "/sys/class/kfd/kfd/topology/nodes"

#: node name → {"gpu_id": text of the file, "properties": text of the file}, as read.
Topology = dict[str, dict[str, str]]

#: Host variables that choose AMD cards, in the order they are read; none of them reaches the container
#: (inside, the one card given is device 0, and a host index would name another).
ROCM_CHOICE_ENV = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")


@dataclass(frozen=True)
class AmdCard:
    index: int  # ROCm's device index on the host: GPU nodes in node order
    node: int  # the KFD topology node
    render_minor: int
    unique_id: int | None

    @property
    def render_node(self) -> str:
        return f"/dev/dri/renderD{self.render_minor}"

    @property
    def uuid(self) -> str | None:
        return None if not self.unique_id else f"GPU-{self.unique_id:016x}"


def read_topology(nodes_dir: str | Path = KFD_NODES_DIR) -> Topology:
    """The KFD topology files of this machine ({} when there is none or it cannot be read)."""
    found: Topology = {}
    try:
        nodes = sorted(Path(nodes_dir).iterdir())
    except OSError:
        return found
    for node in nodes:
        try:
            found[node.name] = {"gpu_id": (node / "gpu_id").read_text(encoding="ascii", errors="replace"),
                                "properties": (node / "properties").read_text(encoding="ascii", errors="replace")}
        except OSError:
            continue
    return found


def _properties(text: str) -> dict[str, int]:
    """``name value`` lines of a KFD properties file, the values as integers (others skipped)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.strip().partition(" ")
        try:
            found[name] = int(value.strip())
        except ValueError:
            continue
    return found


def list_cards(topology: Topology) -> list[AmdCard]:
    """The GPU nodes with a render node, in ROCm's device order."""
    gpu_nodes = []
    for name, files in topology.items():
        try:
            node, gpu_id = int(name), int(files.get("gpu_id", "0").strip() or 0)
        except ValueError:
            continue
        properties = _properties(files.get("properties", ""))
        if gpu_id and properties.get("drm_render_minor"):
            gpu_nodes.append((node, properties))
    return [AmdCard(index=index, node=node, render_minor=properties["drm_render_minor"],
                    unique_id=properties.get("unique_id") or None)
            for index, (node, properties) in enumerate(sorted(gpu_nodes, key=lambda pair: pair[0]))]


def rocm_device_choice(environ: dict[str, str] | None = None) -> str:
    """The AMD card a trial container gets: the first entry of the host's ``ROCR_VISIBLE_DEVICES``,
    ``HIP_VISIBLE_DEVICES`` or ``GPU_DEVICE_ORDINAL`` (the first one set), an index or a ``GPU-…`` UUID; else card 0."""
    env = os.environ if environ is None else environ
    for name in ROCM_CHOICE_ENV:
        visible = [part.strip() for part in env.get(name, "").split(",") if part.strip()]
        if visible:
            return visible[0]
    return "0"


def choose_card(found: list[AmdCard], choice: str) -> AmdCard | None:
    """The card ``choice`` names (an index or a UUID, as ROCm reads them); None when none matches."""
    if choice.isdigit():
        index = int(choice)
        return found[index] if index < len(found) else None
    wanted = choice.lower()
    return next((card for card in found if card.uuid is not None and card.uuid.lower() == wanted), None)
