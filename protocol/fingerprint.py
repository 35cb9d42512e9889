"""Content fingerprints: sha256 of files and of directory trees."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    """Return ``sha256:<hex>`` of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tree_files(root: Path) -> list[Path]:
    """Regular files under ``root``, sorted by their POSIX relative path.

    Symlinks are refused: a fingerprint must describe bytes that are really there.
    """
    files: list[Path] = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        if path.is_symlink():
            raise ValueError(f"symlink in fingerprinted tree: {path}")
        if path.is_file():
            files.append(path)
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
    """Fingerprint a file or a directory."""
    return sha256_tree(path) if path.is_dir() else sha256_file(path)
