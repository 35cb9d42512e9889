"""Read and extract tar archives made by someone else, trusting nothing in them.

``tarfile.extractall`` is never called. Every member is checked before a byte
of it is written:

- its name: relative, no ``..`` or ``.`` component (a leading ``./``, as
  ``tar -C DIR .`` writes, is dropped), no empty component, no backslash, NUL
  or control character, bounded length and depth;
- its type: regular files and directories only. Symbolic links, hard links
  (all of them, wherever they point), character and block devices, FIFOs,
  sparse and contiguous files are refused. Sparse means every tar format of it: old-GNU and GNU
  type ``S`` headers, and the PAX formats 0.0, 0.1 and 1.0, which look like regular files but
  carry ``GNU.sparse.*`` keys (a few hundred bytes that would expand to gigabytes of holes);
- duplicates: a second member with the same name (which would silently replace
  the first, the one a verifier may have read), or a member below a name that
  is a file, is refused;
- the archive's size: at most ``max_members`` members and ``max_total_bytes``
  of declared content (a decompression bomb stops at the bound). Members, total
  size and depth are counted from the headers of the whole archive before a
  single file is written (every extraction reads the archive twice: headers, then content);
- the standard library's ``filter="data"`` rules (``tarfile.data_filter``) run
  on top of these checks.

Files are created with ``O_EXCL | O_NOFOLLOW`` and mode 0644, directories
0755, under a destination that must be new or empty; what is written is
hashed on the way, so a caller can compare it with a manifest.

Example::

    digests = safe_extract(Path("bundle.tar.gz"), Path("out/"))
    digests["BUNDLE.json"].sha256   # 'sha256:…'
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from protocol.errors import UserError

#: Defaults: generous for a real model (several GiB) and thousands of trials, finite for a bomb.
DEFAULT_MAX_MEMBERS = 200_000
DEFAULT_MAX_TOTAL_BYTES = 64 * 2**30
DEFAULT_MAX_NAME_CHARS = 1024
DEFAULT_MAX_DEPTH = 32

_CHUNK_BYTES = 1 << 20
_FILE_MODE = 0o644
_DIR_MODE = 0o755
_TYPE_NAMES = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
    tarfile.GNUTYPE_SPARSE: "a sparse file",
}


#: What a hostile header can make ``tarfile`` raise while it parses (bad numbers in pax keys, bad
#: encodings, a sparse map that does not add up): each is an unreadable archive, never a traceback.
_CORRUPT = (tarfile.TarError, OSError, EOFError, zlib.error, ValueError, IndexError, KeyError, OverflowError,
            RecursionError)

#: ``tarfile.data_filter`` (Python >= 3.11.4); our own checks above are the same or stricter without it.
_DATA_FILTER = getattr(tarfile, "data_filter", None)


class ArchiveError(UserError):
    """The archive cannot be read (not a tar.gz, truncated, corrupt)."""


class UnsafeArchive(ArchiveError):
    """The archive holds something that must never be extracted."""


@dataclass(frozen=True)
class ExtractLimits:
    max_members: int = DEFAULT_MAX_MEMBERS
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES
    max_name_chars: int = DEFAULT_MAX_NAME_CHARS
    max_depth: int = DEFAULT_MAX_DEPTH


#: The bounds used when a caller names none.
DEFAULT_LIMITS = ExtractLimits()


@dataclass(frozen=True)
class FileDigest:
    """One regular file of an archive: its name, ``sha256:<hex>`` and size."""

    name: str
    sha256: str
    size_bytes: int


def check_member_name(name: str, *, is_dir: bool = False, limits: ExtractLimits = DEFAULT_LIMITS) -> str:
    """Return the member's normalised name (no trailing '/') or raise :class:`UnsafeArchive`."""
    shown = repr(name)[:200]
    if not isinstance(name, str) or not name:
        raise UnsafeArchive("an archive member has an empty name", "archive", "Do not use this archive.")
    if len(name) > limits.max_name_chars:
        raise UnsafeArchive(f"member name longer than {limits.max_name_chars} characters", shown,
                            "Do not use this archive.")
    if any(ord(c) < 32 or ord(c) == 127 for c in name) or "\\" in name:
        raise UnsafeArchive("member name holds a control character, NUL or backslash", shown,
                            "Do not use this archive.")
    if name.startswith("/") or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
        raise UnsafeArchive("absolute member path", shown, "Do not use this archive: it writes outside its folder.")
    text = name[:-1] if is_dir and name.endswith("/") else name
    while text.startswith("./"):  # `tar -C DIR .` writes ./name: the same relative name
        text = text[2:]
    if is_dir and text in ("", "."):
        return ""  # the archive's own top folder: nothing to create
    parts = text.split("/")
    if ".." in parts:
        raise UnsafeArchive("member path climbs out with '..'", shown,
                            "Do not use this archive: it writes outside its folder.")
    if any(part in ("", ".") for part in parts):
        raise UnsafeArchive("member path has an empty or '.' component", shown, "Do not use this archive.")
    if len(parts) > limits.max_depth:
        raise UnsafeArchive(f"member path deeper than {limits.max_depth} levels", shown, "Do not use this archive.")
    return text


class _Guard:
    """Applies every per-member rule, in archive order, with running totals."""

    def __init__(self, limits: ExtractLimits) -> None:
        self.limits = limits
        self.members = 0
        self.total_bytes = 0
        self.kinds: dict[str, str] = {}  # normalised name -> "file" | "dir"

    def check(self, member: tarfile.TarInfo) -> str:
        self.members += 1
        if self.members > self.limits.max_members:
            raise UnsafeArchive(f"the archive has more than {self.limits.max_members} members", "archive",
                                "Do not use this archive (or raise the bound if you trust its origin).")
        if _is_sparse(member):
            raise UnsafeArchive("member is a sparse file; only regular files and directories are accepted",
                                repr(member.name)[:200], "Do not use this archive.")
        if member.type in _TYPE_NAMES or not (member.isreg() or member.isdir()):
            kind = _TYPE_NAMES.get(member.type, f"a member of tar type {member.type!r}")
            raise UnsafeArchive(f"member is {kind}; only regular files and directories are accepted",
                                repr(member.name)[:200], "Do not use this archive.")
        name = check_member_name(member.name, is_dir=member.isdir(), limits=self.limits)
        if not name:
            return name  # "./": the destination itself
        if member.isreg():
            if member.size < 0:
                raise UnsafeArchive("member has a negative size", repr(name), "Do not use this archive.")
            self.total_bytes += member.size
            if self.total_bytes > self.limits.max_total_bytes:
                raise UnsafeArchive(
                    f"the archive expands to more than {self.limits.max_total_bytes} bytes", "archive",
                    "Do not use this archive (or raise the bound if you trust its origin).",
                )
        kind = "dir" if member.isdir() else "file"
        previous = self.kinds.get(name)
        if previous is not None and not (previous == "dir" and kind == "dir"):
            raise UnsafeArchive("the archive holds this name twice (the second would replace the first)",
                                repr(name), "Do not use this archive.")
        parts = name.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if self.kinds.get(parent) == "file":
                raise UnsafeArchive(f"member lies below {parent!r}, which is a file", repr(name),
                                    "Do not use this archive.")
            self.kinds.setdefault(parent, "dir")
        self.kinds[name] = kind
        return name


def _is_sparse(member: tarfile.TarInfo) -> bool:
    """Sparse in any tar format: a type ``S`` header, or PAX ``GNU.sparse.*`` keys (0.0, 0.1, 1.0)."""
    return (member.type == tarfile.GNUTYPE_SPARSE or getattr(member, "sparse", None) is not None
            or any(key.startswith("GNU.sparse.") for key in member.pax_headers))


def _open(path: Path) -> tarfile.TarFile:
    if not path.is_file():
        raise ArchiveError("archive not found (or not a regular file)", str(path), "Check the path.")
    try:
        return tarfile.open(path, mode="r|*")
    except _CORRUPT as exc:
        raise ArchiveError(f"not a readable tar archive: {exc}", str(path), "Check that it is a .tar.gz bundle.") \
            from None


def scan(path: Path, limits: ExtractLimits = DEFAULT_LIMITS) -> list[str]:
    """Check every member header without writing anything; return the normalised names in order."""
    guard = _Guard(limits)
    names: list[str] = []
    tar = _open(path)
    try:
        for member in _members(tar, path):
            name = guard.check(member)
            if name:
                names.append(name)
    finally:
        tar.close()
    return names


def _members(tar: tarfile.TarFile, path: Path) -> Any:
    iterator = iter(tar)
    while True:
        try:
            member = next(iterator)
        except StopIteration:
            return
        except _CORRUPT as exc:
            raise ArchiveError(f"the archive is corrupt or truncated: {exc}", str(path),
                               "Fetch the bundle again; compare its sha256 with the sender's.") from None
        yield member


def read_archive(
    path: Path,
    *,
    dest: Path | None = None,
    select: Callable[[str], bool] = lambda name: True,
    limits: ExtractLimits = DEFAULT_LIMITS,
) -> dict[str, FileDigest]:
    """Stream through the archive once: check every member, hash every file, write the selected ones.

    With ``dest`` None nothing is written (a pure verification pass). Otherwise ``dest`` must already exist and be
    empty; selected files are created below it, and only after every header of the archive passed :func:`scan` (members,
    total size, depth, types, names). Returns the digests of every regular file, by normalised name.
    """
    if dest is not None:
        scan(path, limits)
    return _read(path, dest, select, limits)


def _read(path: Path, dest: Path | None, select: Callable[[str], bool], limits: ExtractLimits) \
        -> dict[str, FileDigest]:
    guard = _Guard(limits)
    digests: dict[str, FileDigest] = {}
    real_dest = Path(os.path.realpath(dest)) if dest is not None else None
    tar = _open(path)
    try:
        for member in _members(tar, path):
            name = guard.check(member)
            if not name:
                continue
            write = real_dest is not None and select(name)
            if write and real_dest is not None and _DATA_FILTER is not None:
                try:
                    _DATA_FILTER(member, str(real_dest))
                except tarfile.FilterError as exc:
                    raise UnsafeArchive(f"refused by the 'data' extraction filter: {exc}", repr(name),
                                        "Do not use this archive.") from None
            if member.isdir():
                if write and real_dest is not None:
                    _make_dirs(real_dest, name)
                continue
            try:
                source = tar.extractfile(member)
            except _CORRUPT as exc:
                raise ArchiveError(f"member unreadable: {exc}", repr(name), "Fetch the bundle again.") from None
            if source is None:  # not a regular file after all
                raise UnsafeArchive("member has no readable content", repr(name), "Do not use this archive.")
            sink = _create_file(real_dest, name) if write and real_dest is not None else None
            digests[name] = _copy(source, sink, member.size, name, path)
    finally:
        tar.close()
    return digests


def safe_extract(path: Path, dest: Path, limits: ExtractLimits = DEFAULT_LIMITS) -> dict[str, FileDigest]:
    """Check the whole archive first, then extract it into ``dest`` (new or empty).

    On any error, what was extracted is removed (and ``dest`` too if this call made it).
    """
    scan(path, limits)
    created = not dest.exists()
    if not created and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError("the extraction folder exists and is not empty", str(dest), "Choose a new folder.")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        return _read(path, dest, lambda name: True, limits)  # scanned above
    except BaseException:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        else:
            for child in dest.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise


def _inside(root: Path, target: Path) -> None:
    real = Path(os.path.realpath(target))
    if real != root and root not in real.parents:
        raise UnsafeArchive("member would land outside the extraction folder", str(target), "Do not use this archive.")


def _make_dirs(root: Path, name: str) -> Path:
    current = root
    for part in name.split("/"):
        current = current / part
        if current.is_symlink():
            raise UnsafeArchive("a symbolic link is in the way", str(current), "Extract into a new, empty folder.")
        if not current.exists():
            current.mkdir(mode=_DIR_MODE)
        elif not current.is_dir():
            raise UnsafeArchive("a file is in the way of a folder", str(current), "Extract into a new, empty folder.")
        _inside(root, current)
    return current


def _create_file(root: Path, name: str) -> IO[bytes]:
    parent_name, _, leaf = name.rpartition("/")
    parent = _make_dirs(root, parent_name) if parent_name else root
    target = parent / leaf
    _inside(root, parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, _FILE_MODE)
    except FileExistsError:
        raise UnsafeArchive("the file already exists in the extraction folder", str(target),
                            "Extract into a new, empty folder.") from None
    os.fchmod(fd, _FILE_MODE)  # whatever the umask or the archive says
    return os.fdopen(fd, "wb")


def _copy(source: IO[bytes], sink: IO[bytes] | None, size: int, name: str, path: Path) -> FileDigest:
    digest = hashlib.sha256()
    remaining = size
    try:
        while remaining > 0:
            try:
                chunk = source.read(min(_CHUNK_BYTES, remaining))
            except _CORRUPT as exc:
                raise ArchiveError(f"the archive is corrupt or truncated inside this member: {exc}", repr(name),
                                   "Fetch the bundle again.") from None
            if not chunk:
                raise ArchiveError("the archive ends inside this member", repr(name), "Fetch the bundle again.")
            digest.update(chunk)
            if sink is not None:
                sink.write(chunk)
            remaining -= len(chunk)
    finally:
        if sink is not None:
            sink.close()
    return FileDigest(name=name, sha256="sha256:" + digest.hexdigest(), size_bytes=size)
