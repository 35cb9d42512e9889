"""Hosts as configuration: which Docker daemons a multi-host campaign runs on, and under which plan.

A host is a name, a Docker engine URL and, optionally, its stack, the plan it is rented under
and a few connection settings. From the command line::

    isocost run STUDY --out OUT --host local=local --host b200=ssh://ubuntu@203.0.113.7:22

or from a hosts file (TOML, ``--hosts-file``), which can also say the stack and the rental::

    schema_version = 1

    [[host]]
    name = "rtx4090"                       # letters, digits, '.', '_' and '-'; the results folder
    url = "ssh://ubuntu@198.51.100.4"      # or "local", or "unix:///run/docker.sock"
    stack = "cuda"                         # cpu, cuda or rocm; must be the study's
    ssh_config = "ssh/rented.conf"         # optional: an ssh client config (relative to this file)
    reconnect_s = 60                       # optional: how long a silent engine is waited for
    rental = { gpu = "rtx-4090", lots = 1 }  # optional: the plan, matched against the catalog

``local`` is just another host: the engine of DOCKER_HOST (or the default socket).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.costing.plans import MAX_LOTS
from protocol.errors import UserError
from protocol.io.names import check_gpu_name
from protocol.io.safe_read import read_text
from protocol.records import codec
from protocol.records.stages import Rental
from runner.launch.daemon.address import DaemonAddress, parse_daemon_url

HOSTS_FILE_SCHEMA_VERSION = 1
#: A hosts file lists a few hosts; a larger file is refused before it is parsed.
MAX_HOSTS_FILE_BYTES = 2**20
MAX_RECONNECT_S = 86400.0
STACKS = ("cpu", "cuda", "rocm")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_RESERVED = {"hosts.json", "trials"}
_HOST_KEYS = {"name", "url", "stack", "ssh_config", "reconnect_s", "rental"}
_RENTAL_KEYS = {"gpu", "lots"}


@dataclass(frozen=True)
class HostSpec:
    """One host of a multi-host campaign."""

    name: str
    url: str
    stack: str = ""  # "" = the study's stack
    rental: Rental | None = None
    ssh_config: Path | None = None
    reconnect_s: float = 60.0

    @property
    def address(self) -> DaemonAddress:
        return DaemonAddress(self.url, ssh_config=self.ssh_config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "stack": self.stack,
            "rental": codec.to_dict(self.rental) if self.rental else None,
            "ssh_config": str(self.ssh_config) if self.ssh_config else "",
            "reconnect_s": self.reconnect_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> HostSpec:
        """The inverse of :meth:`to_dict` (as recorded in hosts.json): checked as a hosts file's host is."""
        return _host({k: v for k, v in data.items() if v not in (None, "")}, where, Path("/"))


def check_name(name: str, where: str) -> str:
    if not _NAME.match(name) or name in _RESERVED:
        raise UserError(f"host name {name!r} cannot name a results folder", where,
                        "Use letters, digits, '.', '_' and '-' (at most 63), starting with a letter or digit.")
    return name


def parse_host_option(text: str) -> HostSpec:
    """``NAME=URL`` from ``--host``."""
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        raise UserError(f"--host {text!r} is not NAME=URL", "--host",
                        "Example: --host b200=ssh://ubuntu@203.0.113.7 (or --host local=local).")
    return HostSpec(name=check_name(name.strip(), "--host"), url=parse_daemon_url(url, f"--host {text}"))


def load_hosts_file(path: Path) -> list[HostSpec]:
    """Read a hosts file (see the module docstring)."""
    where = str(path)
    text = read_text(path, "hosts file", max_bytes=MAX_HOSTS_FILE_BYTES, fix="Check the path given with --hosts-file.")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"not valid TOML: {exc}", where, "Fix the syntax (see docs/hosts.md).") from None
    except RecursionError:
        raise UserError("not valid TOML: nested too deeply", where, "A hosts file is a list of flat tables.") from None
    except ValueError as exc:  # an integer of thousands of digits
        raise UserError(f"not valid TOML: {str(exc)[:120]}", where, "Fix the value.") from None
    if data.get("schema_version") != HOSTS_FILE_SCHEMA_VERSION:
        raise UserError(f"schema_version is {data.get('schema_version')!r}", where,
                        f"Write schema_version = {HOSTS_FILE_SCHEMA_VERSION} at the top.")
    unknown = set(data) - {"schema_version", "host"}
    if unknown:
        raise UserError(f"unknown keys {sorted(unknown)}", where, "Hosts are [[host]] tables.")
    entries = data.get("host")
    if not isinstance(entries, list) or not entries:
        raise UserError("no [[host]] table", where, "Add one [[host]] table per host (name, url).")
    return [_host(entry, f"{where}, [[host]] #{number}", path.parent) for number, entry in enumerate(entries, 1)]


def _host(entry: Any, where: str, base: Path) -> HostSpec:
    if not isinstance(entry, dict):
        raise UserError("a host is a table", where, "Write [[host]] with name and url.")
    unknown = set(entry) - _HOST_KEYS
    if unknown:
        raise UserError(f"unknown keys {sorted(unknown)}", where, f"A host has {', '.join(sorted(_HOST_KEYS))}.")
    name, url = entry.get("name"), entry.get("url")
    if not isinstance(name, str) or not isinstance(url, str):
        raise UserError("name and url are required strings", where, 'Example: name = "b200", url = "ssh://u@h".')
    stack = entry.get("stack", "")
    if stack not in ("", *STACKS):
        raise UserError(f"unknown stack {stack!r}", f"{where}, key stack", f"Use one of: {', '.join(STACKS)}.")
    rental = None
    if "rental" in entry and entry["rental"] is not None:
        table = entry["rental"]
        if not isinstance(table, dict) or set(table) - _RENTAL_KEYS or not isinstance(table.get("gpu"), str):
            raise UserError("rental must be { gpu = \"…\", lots = N }", f"{where}, key rental",
                            'Example: rental = { gpu = "rtx-4090", lots = 1 }.')
        lots = table.get("lots", 1)
        if not isinstance(lots, int) or isinstance(lots, bool) or not 1 <= lots <= MAX_LOTS:
            raise UserError(f"lots must be an integer from 1 to {MAX_LOTS}, not {lots!r}", f"{where}, key rental.lots",
                            "Write the number of lots rented (a B200 lot already holds its cards).")
        rental = Rental(gpu=check_gpu_name(table["gpu"], f"{where}, key rental.gpu"), lots=lots)
    ssh_config = entry.get("ssh_config")
    if ssh_config is not None:
        if not isinstance(ssh_config, str) or not ssh_config or not ssh_config.isprintable() or len(ssh_config) > 4096:
            raise UserError("ssh_config must be a path of printable characters", f"{where}, key ssh_config",
                            "Or leave it out.")
        ssh_config_path = Path(ssh_config).expanduser()
        ssh_config_path = ssh_config_path if ssh_config_path.is_absolute() else (base / ssh_config_path).resolve()
    else:
        ssh_config_path = None
    reconnect_s = entry.get("reconnect_s", 60.0)
    if (not isinstance(reconnect_s, (int, float)) or isinstance(reconnect_s, bool)
            or not 0 <= reconnect_s <= MAX_RECONNECT_S):
        raise UserError(f"reconnect_s must be seconds from 0 to {MAX_RECONNECT_S:g}, not {reconnect_s!r}",
                        f"{where}, key reconnect_s",
                        "Example: reconnect_s = 60.")
    return HostSpec(name=check_name(name, f"{where}, key name"), url=parse_daemon_url(url, f"{where}, key url"),
                    stack=stack, rental=rental, ssh_config=ssh_config_path, reconnect_s=float(reconnect_s))


def merge_hosts(options: tuple[str, ...] | list[str], hosts_file: Path | None) -> list[HostSpec]:
    """``--hosts-file`` hosts, then ``--host`` ones; names must be unique."""
    hosts = load_hosts_file(hosts_file) if hosts_file is not None else []
    hosts += [parse_host_option(text) for text in options]
    seen: dict[str, HostSpec] = {}
    for host in hosts:
        if host.name in seen:
            raise UserError(f"host {host.name!r} is named twice", "--host / --hosts-file",
                            "Give every host its own name: it names its results folder.")
        seen[host.name] = host
    return hosts
