"""Append-only JSON-lines files (``events.jsonl``, ``rentals.jsonl``, the evaluations ledger): read every line or
refuse, append one line under a lock, keep a cut last line.

Every line is a JSON object on its own line. A reader never skips a line: a line that is not a JSON object
(or has a key twice) is an error naming the file and the line. A last line without its line end was cut
while it was written (the writer stopped): the reader reports it (:attr:`LogRead.cut`), the commands that
read the file refuse it by name, and the next writer moves its bytes, unchanged, into ``NAME.partial-N``
before appending (:func:`quarantine_cut`), as ``--resume`` does for a cut raw row.

A chained log (``chained=True``) carries in every line a ``chain_sha256``: the sha256 of the previous line's
digest (``genesis`` for the first line), a newline, and the line's other keys as canonical JSON (sorted keys,
no spaces). An edited, removed, inserted or reordered line breaks the chain at that line. As for ``raw.csv``,
whoever rewrites a line AND every digest after it makes a valid chain: the SHA-256 of a bundle made earlier
catches that.

Example::

    append_line(root / "rentals.jsonl", {"gpu": "rtx-4090", "lots": 2}, root=root, chained=True, genesis=g)
    read_log(root / "rentals.jsonl", "rentals.jsonl", chained=True, genesis=g).entries
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from protocol.errors import UserError
from protocol.io.jsonio import DuplicateKeyError, loads_unique
from protocol.io.safe_read import file_kind
from protocol.io.safe_write import append_whole, check_writable_target, open_append, open_fd
from protocol.records import codec

T = TypeVar("T")

CHAIN_KEY = "chain_sha256"
#: A log larger than this is not a log isocost wrote (a campaign writes a few lines per trial).
MAX_LOG_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class LogRead:
    """What a read of an append-only log found: its whole lines, and the bytes of a cut last line if any."""

    entries: tuple[dict[str, Any], ...]
    cut: bytes  # b"" when the file ends with a line end
    cut_line: int  # the cut line's number (0 when none)
    intact_bytes: int
    last_digest: str  # what the next line of a chained log chains to


def canonical(entry: dict[str, Any]) -> str:
    """The text a chain digest is taken over: the entry without its digest, sorted keys, no spaces."""
    return json.dumps({k: v for k, v in entry.items() if k != CHAIN_KEY}, sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))


def line_digest(previous: str, entry: dict[str, Any]) -> str:
    return hashlib.sha256(f"{previous}\n{canonical(entry)}".encode()).hexdigest()


def _read_bytes(path: Path, what: str, fix: str = "") -> bytes | None:
    """The file's bytes, None when absent; a directory, FIFO or device is refused by name, never opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"{what} cannot be read: {exc.strerror}", str(path),
                        fix or "Check the path and its permissions.") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} is {file_kind(info.st_mode)}, not a regular file", str(path),
                        "isocost writes it as a file of JSON lines: move what is there away.")
    if info.st_size > MAX_LOG_BYTES:
        raise UserError(f"{what} is {info.st_size} bytes, more than the {MAX_LOG_BYTES} an isocost log reaches",
                        str(path), "It was not written by isocost: restore it from a backup or bundle.")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UserError(f"{what} cannot be read: {exc.strerror}", str(path), "Check the path and its permissions.") \
            from None


def read_log(path: Path, what: str, *, chained: bool = False, genesis: str = "", verify: bool = True,
             fix: str = "") -> LogRead:
    """Every whole line of the log, checked; a cut last line is returned, not raised (see the module docstring).

    ``verify=False`` (forensics): chain digests are not compared. ``fix`` is how the file is restored.
    """
    fix = fix or f"{what} is append-only: restore it from a backup or bundle."
    data = _read_bytes(path, what, fix)
    if data is None:
        return LogRead((), b"", 0, 0, genesis)
    lines = data.split(b"\n")
    cut = lines.pop()  # after the last line end: b"" for a clean file
    entries: list[dict[str, Any]] = []
    previous = genesis
    for number, raw in enumerate(lines, start=1):
        entry = _parse(raw, what, f"{path}, line {number}", fix)
        if chained:
            expected = line_digest(previous, entry)
            if verify and entry.get(CHAIN_KEY) != expected:
                said = str(entry.get(CHAIN_KEY) or "none")[:16]
                raise UserError(f"{what} line {number} does not match its chain digest ({said}…, the lines before "
                                f"it give {expected[:16]}…)", f"{path}, line {number}", fix)
            previous = expected if verify else str(entry.get(CHAIN_KEY, ""))
        entries.append(entry)
    return LogRead(tuple(entries), cut, len(lines) + 1 if cut else 0, len(data) - len(cut), previous)


def _parse(raw: bytes, what: str, where: str, fix: str) -> dict[str, Any]:
    try:
        entry = loads_unique(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{what} has a line that is not UTF-8", where, fix) from None
    except DuplicateKeyError as exc:
        raise UserError(f"{what} has a line with a {str(exc)[:120]}", where, fix) from None
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UserError(f"{what} has a line that is not a JSON object ({reason[:120]})", where, fix) from None
    if not isinstance(entry, dict):
        raise UserError(f"{what} has a line that is not a JSON object", where, fix)
    return entry


def log_records(read: LogRead, cls: type[T], path: Path, fix: str = "") -> tuple[T, ...]:
    """Every whole line of a read log as a record (:mod:`protocol.records.codec`; the chain digest is the log's, not the
    record's): UserError naming the line and the key of the first that is not one."""
    return tuple(codec.from_dict(cls, {k: v for k, v in entry.items() if k != CHAIN_KEY}, f"{path}, line {number}",
                                 fix=fix) for number, entry in enumerate(read.entries, start=1))


def require_whole(read: LogRead, path: Path, what: str, fix: str) -> None:
    """Refuse a log that ends in a cut line, naming it (``fix``: which command keeps its bytes and goes on)."""
    if read.cut:
        raise UserError(f"{what} ends in line {read.cut_line}, cut while it was written ({len(read.cut)} bytes "
                        f"from byte {read.intact_bytes}, no line end): what it recorded is unknown",
                        f"{path}, line {read.cut_line}", fix)


def quarantine_cut(path: Path, root: Path | None = None, fix: str = "") -> Path | None:
    """Move a cut last line, byte for byte, into ``NAME.partial-N`` and cut the log back to its whole lines;
    returns that file (None: nothing was cut). The caller holds the log's lock."""
    data = _read_bytes(path, path.name, fix)
    if not data or data.endswith(b"\n"):
        return None
    cut = data[data.rfind(b"\n") + 1:]
    number = 1
    while path.with_name(f"{path.name}.partial-{number}").exists():
        number += 1
    side = path.with_name(f"{path.name}.partial-{number}")
    fd = open_fd(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root)
    try:
        os.write(fd, cut)
        os.fsync(fd)
    finally:
        os.close(fd)
    check_writable_target(path, root)
    fd = open_fd(path, os.O_WRONLY, root)
    try:
        os.ftruncate(fd, len(data) - len(cut))
        os.fsync(fd)
    finally:
        os.close(fd)
    return side


def append_line(path: Path, entry: dict[str, Any], *, root: Path | None = None, chained: bool = False,
                genesis: str = "", what: str = "", fix: str = "") -> tuple[dict[str, Any], Path | None]:
    """Append ``entry`` as one line (fsynced), under an exclusive lock on the file; a cut last line is first kept
    in ``NAME.partial-N``. Returns the entry as written (with its ``chain_sha256`` when chained) and the file
    the cut bytes went to (None when there were none)."""
    what = what or path.name
    fd = open_append(path, root, fix)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        side = quarantine_cut(path, root, fix)
        written = dict(entry)
        if chained:
            last = read_log(path, what, chained=True, genesis=genesis, fix=fix).last_digest
            written[CHAIN_KEY] = line_digest(last, written)
        data = (json.dumps(written, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            append_whole(fd, data)  # never leaves a cut line behind when the write itself fails
        except OSError as exc:
            raise UserError(f"could not append to {what}: {exc.strerror}", str(path),
                            "The file is intact up to its previous line. Free space (or fix the disk) and run "
                            "the command again.") from None
    finally:
        os.close(fd)  # releases the lock
    return written, side
