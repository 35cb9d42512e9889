"""``trials/<id>/launcher.json``: what the launcher recorded of one trial, in its kind's own record.

Every launcher kind owns its record (``KIND.record`` of its package, :mod:`runner.launch.launcher`): a frozen
dataclass of optional fields plus ``kind``, the key every file carries at its top level, so a reader knows
whose record it is. The built-in records are :class:`runner.launch.kinds.process.launcher.ProcessRecord`,
:class:`runner.launch.daemon.containers.DockerRecord` (local and remote engines) and
:class:`runner.launch.kinds.slurm.record.SlurmRecord`. The launchers build the record as a dict while the trial
runs and write it through their record at each step (:func:`write_launcher_file`), so a key their record does
not declare is a bug, caught where it is written.

History of ``schema_version``: 1: no ``schema_version`` key; 2: the key on every file, one record for every
kind; 3: the ``kind`` key, each kind its own record. Versions 1 and 2 are still read: their kind is the first
kind (in listing order) whose record declares every key of the file; a file no record covers is refused
with the key no kind writes.

Example::

    read_launcher_file(trial_dir).container_id  # a DockerRecord; "" when none was recorded
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.jsonio import read_json
from protocol.records import codec
from protocol.records.codec import VERSION_KEY, Schema
from runner.launch.launcher import LAUNCHERS_ENV, launcher_kinds

LAUNCHER_FILE = "launcher.json"
LAUNCHER_SCHEMA_VERSION = 3
KIND_KEY = "kind"
_LEGACY = (1, 2)


def launcher_schema(kind: str) -> Schema:
    """The codec schema of one kind's record (the same file name and versions for every kind)."""

    def check(record: Any) -> str:
        return "" if record.kind == kind else f"key 'kind' is {record.kind!r}, this record is {kind!r}'s"

    return Schema(LAUNCHER_FILE, LAUNCHER_SCHEMA_VERSION, (*_LEGACY, LAUNCHER_SCHEMA_VERSION), unversioned=1,
                  check=check)


def write_launcher_file(trial_dir: Path, record: dict[str, Any], record_type: type) -> None:
    """Write the launcher's record of the trial (a dict of ``record_type``'s keys) as launcher.json."""
    typed: Any = codec.from_dict(record_type, record, f"{trial_dir / LAUNCHER_FILE} (as the launcher built it)")
    codec.write_record(trial_dir / LAUNCHER_FILE, typed)


def save_record(trial_dir: Path, record: dict[str, Any], record_type: type) -> None:
    """Write launcher.json; a full disk must not lose the trial's row (the failure goes into its notes)."""
    record.pop("not_saved", None)
    try:
        write_launcher_file(trial_dir, record, record_type)
    except OSError as exc:
        record["not_saved"] = f"launcher.json not written: {exc.strerror}"


def read_launcher_file(trial_dir: Path) -> Any | None:
    """The trial's launcher.json as its kind's record, None when absent; UserError naming the file and the key
    when it is not one (or names a kind this isocost does not know)."""
    path = trial_dir / LAUNCHER_FILE
    if not path.exists():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        return codec.read_record(path, _first_record())  # the codec's own message: not an object
    kinds = launcher_kinds()
    name = data.get(KIND_KEY)
    if name is None and data.get(VERSION_KEY, 1) in _LEGACY:
        name = _legacy_kind(data, kinds)
        data = {**data, KIND_KEY: name}
    if not isinstance(name, str) or name not in kinds:
        raise UserError(f"{LAUNCHER_FILE} names launcher kind {str(name)[:80]!r}, which this isocost does not know",
                        str(path), f"Add the folder of that launcher's package to {LAUNCHERS_ENV} "
                                   "(docs/launchers.md), or read it with the isocost that wrote it.")
    return codec.from_dict(kinds[name].record, data, str(path))


def record_keys(record_type: type) -> set[str]:
    return {f.name for f in fields(record_type)}


def _legacy_kind(data: dict[str, Any], kinds: dict[str, Any]) -> str:
    """The kind of a version 1 or 2 file: the first whose record declares every key (else the first kind's,
    which then names the unknown key)."""
    keys = set(data) - {VERSION_KEY}
    for name, kind in kinds.items():
        if keys <= record_keys(kind.record):
            return str(name)
    return str(next(iter(kinds)))


def _first_record() -> type:
    return next(iter(launcher_kinds().values())).record
