"""``trials/<id>/launcher.json``: what the launcher recorded of one trial, typed (:class:`LauncherFile`).

One record for every kind; each kind writes its own keys, the others are not written:

- process: ``pid`` and ``command`` of the trial's process (written for forensics; a leftover process is
  found by its command line, never by this pid);
- docker (and remote, which adds ``host``, ``host_url``, ``engine_id``, ``volume``, ``transfer``):
  ``image_ref``, ``image_id``, ``user``, ``limits``, ``times``, ``container_id``, ``container_name``,
  ``state``, ``outcome``, ``error``, ``not_saved``;
- slurm: ``lane``, ``runtime``, ``pinned_node``, ``pinned_gpus``, ``jobs`` (one object per submitted job),
  ``error``.

The launchers build the record as a dict while the trial runs and write it through this record at each
step (:func:`write_launcher_file`), so a key no record declares is a bug, caught where it is written.

History of ``schema_version``: 1: no ``schema_version`` key (still read); 2: the key on every file.

Example::

    read_launcher_file(trial_dir).container_id  # "" when none was recorded
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from protocol import codec
from protocol.codec import OMIT_NONE, Schema

LAUNCHER_FILE = "launcher.json"
LAUNCHER_SCHEMA_VERSION = 2


def _kept(**kwargs: Any) -> Any:
    return field(default=None, metadata=OMIT_NONE, **kwargs)


@dataclass(frozen=True)
class LauncherFile:
    """One trial's launcher.json (see the module docstring); a key the launcher did not write is None."""

    pid: int | None = _kept()
    command: tuple[str, ...] | None = _kept()
    image_ref: str | None = _kept()
    image_id: str | None = _kept()
    user: str | None = _kept()
    limits: dict[str, Any] | None = _kept()
    times: dict[str, str] | None = _kept()
    container_id: str | None = _kept()
    container_name: str | None = _kept()
    state: dict[str, Any] | None = _kept()
    outcome: dict[str, Any] | None = _kept()
    error: str | None = _kept()
    not_saved: str | None = _kept()
    host: str | None = _kept()
    host_url: str | None = _kept()
    engine_id: str | None = _kept()
    volume: str | None = _kept()
    transfer: dict[str, Any] | None = _kept()
    lane: str | None = _kept()
    runtime: str | None = _kept()
    pinned_node: Any = _kept()
    pinned_gpus: Any = _kept()
    jobs: tuple[dict[str, Any], ...] | None = _kept()
    CODEC: ClassVar[Schema] = Schema(LAUNCHER_FILE, LAUNCHER_SCHEMA_VERSION, (1, LAUNCHER_SCHEMA_VERSION),
                                     unversioned=1)


def write_launcher_file(trial_dir: Path, record: dict[str, Any]) -> None:
    """Write the launcher's record of the trial (a dict of :class:`LauncherFile`'s keys) as launcher.json."""
    typed = codec.from_dict(LauncherFile, record, f"{trial_dir / LAUNCHER_FILE} (as the launcher built it)")
    codec.write_record(trial_dir / LAUNCHER_FILE, typed)


def read_launcher_file(trial_dir: Path) -> LauncherFile | None:
    """The trial's launcher.json, None when absent; UserError naming the file and the key when it is not one."""
    path = trial_dir / LAUNCHER_FILE
    if not path.exists():
        return None
    return codec.read_record(path, LauncherFile)
