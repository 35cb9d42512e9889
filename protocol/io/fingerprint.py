"""Content fingerprints: sha256 of files and of directory trees."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from protocol.io.safe_read import UnreadableInput, file_kind, open_binary

_CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    """Return ``sha256:<hex>`` of a regular file's bytes (a FIFO or a device is refused, never read)."""
    digest = hashlib.sha256()
    with open_binary(path, "file to fingerprint") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tree_files(root: Path) -> list[Path]:
    """Regular files under ``root``, sorted by their POSIX relative path.

    Symlinks, FIFOs, sockets and devices are refused (:class:`UnreadableInput`, also a ``ValueError``): a fingerprint
    must describe bytes that are really there, and reading a pipe or a device could hang or never end.
    """
    files: list[Path] = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            raise UnreadableInput(f"symlink in fingerprinted tree: {path}", str(path),
                                  "Copy the file into the folder instead of linking it.")
        if stat.S_ISREG(mode):
            files.append(path)
        elif not stat.S_ISDIR(mode):
            raise UnreadableInput(f"the folder holds {file_kind(mode)}: refused, not read", str(path),
                                  "Remove it: a model folder holds regular files only.")
    return files


def sha256_tree(root: Path) -> str:
    """Return ``sha256:<hex>`` over every file's relative path and content hash.

    The listing is ``<sha256 hex>  <relative posix path>\\n`` per file in sorted
    order, the same text ``sha256sum`` prints, so it can be checked by hand.
    """
    lines = []
    for path in tree_files(root):
        file_hash = sha256_file(path).removeprefix("sha256:")
        lines.append(f"{file_hash}  {path.relative_to(root).as_posix()}\n")
    return sha256_bytes("".join(lines).encode("utf-8"))


def fingerprint_path(path: Path) -> str:
    """Fingerprint a file or a directory (anything else is refused, never read)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UnreadableInput("nothing to fingerprint here", str(path), "Check the path.") from None
    except (OSError, ValueError) as exc:
        raise UnreadableInput(f"cannot be examined: {getattr(exc, 'strerror', None) or exc}", str(path),
                              "Check the path.") from None
    return sha256_tree(path) if stat.S_ISDIR(mode) else sha256_file(path)
