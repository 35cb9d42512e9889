"""``OUT/hosts.json``: the record of a multi-host campaign, and reading a multi-host directory.

hosts.json (schema 1) is a :class:`HostsFile` on the record codec: the hosts (:class:`HostEntry`), their
folders, engines, images, inputs and states. :func:`load_hosts_json` reads it (an unknown key, a mistyped
value or another schema_version refused naming the file and the key); :func:`prepare_hosts_record` starts it
(hosts checked, image chosen) or takes it up again on ``--resume``; :class:`HostsRecord` rewrites it
atomically as each host's state changes; :func:`expand_campaign_dirs` turns a multi-host directory into its
hosts' campaign directories.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from protocol.errors import UserError
from protocol.io.jsonio import read_json
from protocol.io.paths import check_safe_name
from protocol.records.codec import Schema, from_dict, write_record
from runner.campaign_dir.raw_format import SEALED_HOSTS_KEY
from runner.hosts.spec import HostSpec

__all__ = ["SEALED_HOSTS_KEY"]  # re-exported: the readers' side of the sealed host list

HOSTS_JSON = "hosts.json"
#: 1: first version (hosts, dirs, engines, images, inputs, states).
HOSTS_SCHEMA_VERSION = 1

#: Final states of a host in hosts.json.
HOST_STATES = ("pending", "running", "complete", "unreachable", "lost", "stopped", "error")


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (the times in hosts.json)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def is_multihost(root: Path) -> bool:
    return (root / HOSTS_JSON).is_file()


def _check_state(entry: HostEntry) -> str:
    return "" if entry.state in HOST_STATES else f"state {entry.state!r} is not one of {', '.join(HOST_STATES)}"


@dataclass(frozen=True)
class HostEntry:
    """One host in hosts.json: its folder (``dir``), its spec (:meth:`HostSpec.to_dict`) and state, and what its
    thread records as it goes (engine, image, inputs, times, rows): a key is written once it is known."""

    name: str
    dir: str
    url: str
    spec: dict[str, Any]
    state: str = "pending"
    reason: str = ""
    started_at: str | None = None
    ended_at: str | None = None
    wall_s: float | None = None
    rows: int | None = None
    slots: int | None = None
    campaign: bool | None = None
    inputs: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None
    image_id: str | None = None
    image_digest: str | None = None
    image_pulled: bool | None = None
    image_s: float | None = None
    traceback: str | None = None
    CODEC: ClassVar[Schema] = Schema("hosts.json host", omit_none=True, check=_check_state)


@dataclass(frozen=True)
class HostsImage:
    """The one image every host runs: ``ref`` (its repo digest where it has one), ``repo_digest`` and ``image_id``
    ("" when unknown), ``how`` it reaches the hosts."""

    ref: str
    repo_digest: str
    image_id: str
    how: str


@dataclass(frozen=True)
class HostsFile:
    """``OUT/hosts.json`` (schema 1). ``resumed_at``, ``ended_at`` and ``wall_s`` are written once known."""

    about: str
    created_at: str
    study_name: str
    study_sha256: str
    stack: str
    image: HostsImage
    hosts: tuple[HostEntry, ...]
    resumed_at: tuple[str, ...] | None = None
    ended_at: str | None = None
    wall_s: float | None = None
    CODEC: ClassVar[Schema] = Schema(HOSTS_JSON, HOSTS_SCHEMA_VERSION, omit_none=True)


def load_hosts_json(root: Path) -> HostsFile:
    """``root``'s hosts.json as a record; UserError naming the file (and the key) when it is not one."""
    path = root / HOSTS_JSON
    data = read_json(path)
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, bool) or version != HOSTS_SCHEMA_VERSION:  # true == 1 in Python, not in a record
        raise UserError(f"hosts.json has schema_version {version!r}",
                        str(path), f"This isocost reads {HOSTS_SCHEMA_VERSION}; use the version that wrote it.")
    hosts = data.get("hosts")
    edited = "It was changed after `isocost run` wrote it: restore it from a backup or bundle."
    if not isinstance(hosts, list) or not all(
            isinstance(h, dict) and isinstance(h.get("name"), str) and isinstance(h.get("dir"), str) for h in hosts):
        raise UserError("hosts.json key hosts is not a list of hosts with a name and a dir", str(path), edited)
    return from_dict(HostsFile, data, str(path), fix=edited)


def expand_campaign_dirs(roots: list[Path]) -> list[Path]:
    """Replace each multi-host directory (``hosts.json``) by its hosts' campaign directories, in order.

    Hosts that never started a campaign (unreachable from the start) have no directory to
    read: :func:`hosts_without_campaign` names them and says why.
    """
    expanded: list[Path] = []
    for root in roots:
        if is_multihost(root) and not (root / "campaign.json").exists():
            record = load_hosts_json(root)
            _check_listed(root, record)
            dirs = [root / h.dir for h in record.hosts if (root / h.dir / "campaign.json").exists()]
            if not dirs:
                raise UserError("no host of this multi-host campaign has started its campaign", str(root),
                                "See hosts.json for each host's state; continue with isocost run --resume.")
            expanded.extend(dirs)
        else:
            expanded.append(root)
    return expanded


def _check_listed(root: Path, record: HostsFile) -> None:
    """Each host's folder is a plain name inside ``root``, and every campaign inside ``root`` is a listed host's:
    a host removed from hosts.json would otherwise drop its campaign from the decision without a word."""
    listed: dict[str, str] = {}
    for host in record.hosts:
        check_safe_name(host.dir, what=f"hosts.json dir of host {host.name[:40]!r}")
        if host.dir in listed:
            _disagrees(root, host, f"gives it the folder {host.dir}/ of host {listed[host.dir][:40]!r}")
        listed[host.dir] = host.name
        _check_host_folder(root, host)
    _check_sealed_hosts(root, record)
    for child in sorted(root.iterdir()):
        if child.is_dir() and (child / "campaign.json").exists() and child.name not in listed:
            raise UserError(f"{child.name}/ holds a campaign that hosts.json lists for no host", str(root / HOSTS_JSON),
                            "hosts.json was edited, or a campaign was moved in: restore hosts.json from a backup or "
                            "bundle, or pass the campaign directories one by one.")


def _check_host_folder(root: Path, host: HostEntry) -> None:
    """What hosts.json says of a host's campaign against its folder: a host recorded as having started one (or as
    complete) has it, a host recorded as having started none has none (an edited note would change the memo)."""
    has_campaign = (root / host.dir / "campaign.json").exists()
    if host.campaign is True and not has_campaign:
        _disagrees(root, host, f"says it started a campaign in {host.dir}/, which holds none")
    if host.state == "complete" and not has_campaign:
        _disagrees(root, host, f"says it is complete, and {host.dir}/ holds no campaign")
    if host.campaign is False and has_campaign:
        _disagrees(root, host, f"says it started no campaign, and {host.dir}/ holds one")


def _check_sealed_hosts(root: Path, record: HostsFile) -> None:
    """hosts.json's host names against the list each started host's campaign.json sealed at the start
    (:data:`SEALED_HOSTS_KEY`, in raw.csv's anchor): a host with no folder, deleted from hosts.json or invented in
    it, would otherwise change the memo's notes with nothing on disk to disagree. A campaign from before the seal
    (no list) is not checked; a malformed campaign.json is named by that campaign's own checks."""
    names = [host.name for host in record.hosts]
    for host in record.hosts:
        path = root / host.dir / "campaign.json"
        try:
            launcher = read_json(path).get("launcher") if path.is_file() else None
        except (UserError, OSError, ValueError, RecursionError, AttributeError):
            continue
        sealed = launcher.get(SEALED_HOSTS_KEY) if isinstance(launcher, dict) else None
        if not isinstance(sealed, list):
            continue
        shown = f"{host.dir}/campaign.json sealed the hosts {', '.join(str(s)[:40] for s in sealed)}"
        for missing in (name for name in sealed if name not in names):
            _refuse_host(root, str(missing), f"does not list it, and {shown} at the start")
        for invented in (name for name in names if name not in sealed):
            _refuse_host(root, invented, f"lists it, and {shown}, without it at the start")


def _disagrees(root: Path, host: HostEntry, what: str) -> None:
    _refuse_host(root, host.name, what)


def _refuse_host(root: Path, name: str, what: str) -> None:
    raise UserError(f"host {name[:40]!r}: hosts.json {what}", str(root / HOSTS_JSON),
                    "hosts.json was edited, or a host's folder was moved or removed: restore them from a backup "
                    "or bundle, or pass the campaign directories one by one.")


def hosts_without_campaign(root: Path) -> list[tuple[str, str, str]]:
    """(host, state, reason) for hosts of a multi-host directory that have no campaign to read; a hosts.json that
    disagrees with the folders is refused naming the host (:func:`_check_listed`)."""
    if not is_multihost(root):
        return []
    record = load_hosts_json(root)
    _check_listed(root, record)
    return [(h.name, h.state, h.reason) for h in record.hosts if not (root / h.dir / "campaign.json").exists()]


class HostsRecord:
    """hosts.json, rewritten atomically whenever a host's state changes (threads share it)."""

    def __init__(self, root: Path, record: HostsFile) -> None:
        self.path = root / HOSTS_JSON
        self.record = record
        self.lock = threading.Lock()

    def host(self, name: str) -> HostEntry:
        return next(entry for entry in self.record.hosts if entry.name == name)

    def update(self, name: str, **fields: Any) -> None:
        """Set ``fields`` (:class:`HostEntry` fields) of host ``name`` and rewrite the file."""
        with self.lock:
            hosts = tuple(dataclasses.replace(entry, **fields) if entry.name == name else entry
                          for entry in self.record.hosts)
            self.record = dataclasses.replace(self.record, hosts=hosts)
            write_record(self.path, self.record)

    def finish(self, **fields: Any) -> None:
        """Set ``fields`` of the campaign (:class:`HostsFile`: ``ended_at``, ``wall_s``) and rewrite the file."""
        with self.lock:
            self.record = dataclasses.replace(self.record, **fields)
            write_record(self.path, self.record)


def prepare_hosts_record(study: Any, out: Path, hosts: list[HostSpec], stack: str, image: str | None,
                         resume: bool, lock_path: Path | None) -> tuple[HostsFile, list[HostSpec]]:
    """New: check the hosts, pick the image, write hosts.json. Resume: the recorded hosts and image."""
    if (out / "campaign.json").exists():
        raise UserError("this results directory holds a single-host campaign", str(out),
                        "Resume it without --host/--hosts-file, or choose another --out.")
    if (out / HOSTS_JSON).exists():
        if not resume:
            raise UserError("the results directory already holds a multi-host campaign", str(out),
                            "Use --resume to continue it, or choose another --out.")
        return _resumed_record(study, out, hosts, image)
    if resume:
        raise UserError("nothing to resume: no hosts.json", str(out), "Run without --resume to start one.")
    return _new_record(study, out, hosts, stack, image, lock_path), hosts


def _resumed_record(study: Any, out: Path, hosts: list[HostSpec],
                    image: str | None) -> tuple[HostsFile, list[HostSpec]]:
    """The recorded hosts (with a new address where one is given) and image of a campaign to resume."""
    path = out / HOSTS_JSON
    data = load_hosts_json(out)
    _check_sealed_hosts(out, data)  # a host deleted from (or invented in) hosts.json is never quietly dropped
    if data.study_sha256 != study.sha256:
        raise UserError(f"the study changed since this campaign started ({data.study_sha256} at start, "
                        f"{study.sha256} now)", str(study.path),
                        "Restore the study, or start a new campaign in another --out.")
    recorded = [HostSpec.from_dict(h.spec, f"{path}, host {h.name}") for h in data.hosts]
    if hosts and sorted(h.name for h in hosts) != sorted(h.name for h in recorded):
        raise UserError(f"this campaign's hosts are {', '.join(h.name for h in recorded)}, not "
                        f"{', '.join(h.name for h in hosts)}", str(path),
                        "Resume without --host/--hosts-file (the recorded hosts are used), or name the same hosts.")
    if hosts:  # a host's address may have changed (new IP): its engine ID is checked on connection
        by_name = {h.name: h for h in hosts}
        recorded = [HostSpec(name=h.name, url=by_name[h.name].url, stack=h.stack, rental=h.rental,
                             ssh_config=by_name[h.name].ssh_config or h.ssh_config, reconnect_s=h.reconnect_s)
                    for h in recorded]
        data = dataclasses.replace(data, hosts=tuple(
            dataclasses.replace(entry, spec=host.to_dict()) for entry, host in zip(data.hosts, recorded, strict=True)))
    if image and image not in (data.image.ref, data.image.repo_digest):
        raise UserError(f"this campaign runs image {data.image.ref}, not {image}", "--image",
                        "Resume with the same image (or without --image): trials never mix images.")
    return dataclasses.replace(data, resumed_at=(*(data.resumed_at or ()), now_iso()), ended_at=None), recorded


def _new_record(study: Any, out: Path, hosts: list[HostSpec], stack: str, image: str | None,
                lock_path: Path | None) -> HostsFile:
    """Check the hosts and the image for a new campaign; write its hosts.json."""
    if out.exists() and any(out.iterdir()):
        raise UserError("the results directory is not empty and holds no campaign", str(out),
                        "Choose a new or empty --out directory.")
    if not hosts:
        raise UserError("no host given", "--host / --hosts-file", "Example: --host local=local --host b=ssh://u@h.")
    wrong = [h.name for h in hosts if h.stack and h.stack != stack]
    if wrong:
        raise UserError(f"host(s) {', '.join(wrong)} run another stack than the study's {stack!r}", "--hosts-file",
                        "One study runs one stack (one image): give those hosts their own study, or fix their stack.")
    image_ref, repo_digest, image_id = _choose_image(study, stack, image, lock_path)
    remote = [h.name for h in hosts if h.address.kind == "ssh"]
    if remote and not repo_digest:
        raise UserError(
            f"hosts {', '.join(remote)} pull the image by digest, and {image_ref} has no repo digest (never pushed)",
            "--image (or images/images.lock)",
            f"Push it once to a registry every host reaches (isocost images push --stack {stack} --registry "
            "HOST:PORT), then run again; or pass --image REPO@sha256:….",
        )
    out.mkdir(parents=True, exist_ok=True)
    record = HostsFile(
        about="one campaign per host, each in its own folder (dir); isocost decide reads this directory",
        created_at=now_iso(), study_name=study.name, study_sha256=study.sha256, stack=stack,
        image=HostsImage(ref=repo_digest or image_ref, repo_digest=repo_digest, image_id=image_id,
                         how="pulled by repo digest on each host (or found there by image ID)"),
        hosts=tuple(HostEntry(name=h.name, dir=h.name, url=h.url, spec=h.to_dict()) for h in hosts),
    )
    write_record(out / HOSTS_JSON, record)
    return record


def _choose_image(study: Any, stack: str, image: str | None, lock_path: Path | None) -> tuple[str, str, str]:
    """(reference, repo digest or '', image ID or '') from --image, the study's [images], or the lock."""
    from runner.images.lock import default_lock_path, locked_image

    record = locked_image(stack, lock_path or default_lock_path())
    ref = image or study.image_for(stack) or (record.image_ref if record is not None else "")
    if not ref:
        raise UserError(f"no {stack} image is known (none in the lock, no --image)", "--image",
                        f"Build and push one (isocost images build --stack {stack}; isocost images push --stack "
                        f"{stack} --registry HOST:PORT) or pass --image REPO@sha256:….")
    if "@sha256:" in ref:
        image_id = record.image_id if record is not None and record.repo_digest == ref else ""
        return ref, ref, image_id
    if record is not None and ref in (record.image_id, record.image_id.removeprefix("sha256:")):
        return record.image_id, record.repo_digest, record.image_id
    return ref, "", ref


