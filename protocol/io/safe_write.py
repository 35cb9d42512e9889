"""Write or append a file without following a symbolic link: every file isocost writes goes through here.

A directory the user names (``--out DIR``, ``--ledger DIR``, the campaign directory ``DIR``, the folder of
``-o FILE``) is taken as given: it may itself be a link, to a disk of the user's choosing. Below it nothing is
followed. The file written, and every directory between ``root`` and it, must not be a symbolic link; a
link there is refused, never written through (a link planted in a campaign directory could otherwise make
``isocost rental`` append to a system file). What is in the way is named:

- a symbolic link: refused (``O_NOFOLLOW`` on the file, ``lstat`` on each directory below ``root``);
- a hard link (a regular file with more than one name, ``st_nlink > 1``): refused, checked before the open
  and again on the open descriptor; a hard link to a file outside is that file, and an append would land there;
- a directory, FIFO, socket or device where a file belongs: refused without opening it for writing;
- a path that cannot be written (permissions, a read-only disk, a missing folder): ``Error:`` naming the
  path and the flag that changes it (``fix``), never a traceback.

Atomic writes (:func:`write_text_atomic`) write a temporary file beside the target and rename it over the
target, so a reader sees the old file or the whole new one. Appends (:func:`open_append`) return a
descriptor opened ``O_APPEND | O_NOFOLLOW`` on a regular file. Pure standard library: used by the host and
by the trial.

Example::

    write_text_atomic(root / "summary.md", text, root=root)       # refuses root/summary.md being a link
    with append_handle(root / "rentals.jsonl", root=root) as handle:
        handle.write(line)
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from protocol.errors import UserError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_FILE_MODE = 0o644
_CHUNK = 1 << 20
_LINK_FIX = ("isocost never writes through a symbolic link (it could point outside the directory). Remove the "
             "link, or name the real path.")


HARD_LINK_FIX = ("isocost never writes or packs a file that has other names (a hard link: it may be a file outside "
                 "the campaign). Make it a file of its own (cp FILE FILE.copy && mv FILE.copy FILE), or remove it.")


class UnwritablePath(UserError, OSError):
    """A path isocost was asked to write that is a link, not a regular file, or cannot be written."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # absent (a file where a folder above it belongs is named when the folder is made)
    except (OSError, ValueError) as exc:
        raise _unwritable(path, exc, "") from None


def _unwritable(path: Path, exc: BaseException, fix: str) -> UnwritablePath:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return UnwritablePath(f"cannot write {path.name or path}: {reason}", str(path),
                          fix or "Choose a writable location (check its permissions and free space).")


def check_writable_target(path: Path, root: Path | None = None, fix: str = "") -> None:
    """Refuse ``path`` if it, or a directory between ``root`` and it, is a symbolic link; or if it exists and is
    not a regular file. ``root`` None: only the file itself is checked."""
    path = Path(path)
    if root is not None:
        check_directories(path.parent, root, fix)
    info = _lstat(path)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnwritablePath(f"{path.name} is a symbolic link", str(path), fix or _LINK_FIX)
    if not stat.S_ISREG(info.st_mode):
        raise UnwritablePath(f"{path.name} is {_kind(info.st_mode)}, where isocost writes a file", str(path),
                             fix or "Move it away; isocost writes a regular file there.")
    refuse_hard_link(path, info)


def refuse_hard_link(path: Path, info: os.stat_result) -> None:
    """Refuse a regular file with more than one name: a hard link is the same file as one outside the directory
    perhaps, and writing (or packing) it would write (or pack) that file."""
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise UnwritablePath(f"{Path(path).name} has {info.st_nlink} hard links", str(path), HARD_LINK_FIX)


def check_directories(directory: Path, root: Path, fix: str = "") -> None:
    """Every directory from below ``root`` down to ``directory`` (inclusive) exists as a real directory or not at
    all; a symbolic link or a file among them is refused. ``directory`` outside ``root``: nothing is checked."""
    directory, root = Path(directory), Path(root)
    try:
        relative = directory.relative_to(root)
    except ValueError:
        return
    current = root
    for part in relative.parts:
        current = current / part
        info = _lstat(current)
        if info is None:
            return  # the rest will be created by isocost
        if stat.S_ISLNK(info.st_mode):
            raise UnwritablePath(f"{current.name} is a symbolic link", str(current), fix or _LINK_FIX)
        if not stat.S_ISDIR(info.st_mode):
            raise UnwritablePath(f"{current.name} is {_kind(info.st_mode)}, where isocost needs a directory",
                                 str(current), fix or "Move it away.")


def make_dirs(directory: Path, root: Path | None = None, fix: str = "") -> Path:
    """``mkdir -p`` that refuses a symbolic link (or a file) among the directories below ``root``."""
    directory = Path(directory)
    if root is not None:
        check_directories(directory, root, fix)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UnwritablePath(f"cannot write in {directory.name}: it (or a folder above it) exists and is not a "
                             "directory", str(directory), fix or "Move it away.") from None
    except (OSError, ValueError) as exc:
        raise _unwritable(directory, exc, fix) from None
    if root is not None:
        check_directories(directory, root, fix)  # nothing swapped in while it was made
    return directory


def open_fd(path: Path, flags: int, root: Path | None = None, fix: str = "") -> int:
    """``os.open`` for writing with ``O_NOFOLLOW``; refuses a link, a non-regular file and unwritable paths."""
    path = Path(path)
    check_writable_target(path, root, fix)
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, _FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnwritablePath(f"{path.name} is a symbolic link", str(path), fix or _LINK_FIX) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise UnwritablePath(f"{path.name} is not a regular file", str(path), fix or "Move it away.") from None
        raise _unwritable(path, exc, fix) from None
    except ValueError as exc:  # an embedded NUL
        raise _unwritable(path, exc, fix) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnwritablePath(f"{path.name} is {_kind(info.st_mode)}, where isocost writes a file", str(path),
                             fix or "Move it away.")
    if info.st_nlink > 1:  # linked between the check and the open
        os.close(fd)
        refuse_hard_link(path, info)
    os.set_blocking(fd, True)
    return fd


def open_append(path: Path, root: Path | None = None, fix: str = "") -> int:
    """A descriptor appending to the regular file ``path`` (created if absent), never through a link."""
    return open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, root, fix)


def append_whole(fd: int, data: bytes) -> None:
    """Append ``data`` to the descriptor and fsync; when the write fails (a full disk), cut the file back to
    the size it had, so no partial line or row is left behind, and raise the OSError."""
    size = os.fstat(fd).st_size
    try:
        done = 0
        while done < len(data):
            done += os.write(fd, data[done:])
        os.fsync(fd)
    except OSError:
        os.ftruncate(fd, size)
        raise


@contextmanager
def append_handle(path: Path, root: Path | None = None, fix: str = "") -> Iterator[IO[str]]:
    """A text handle appending to ``path`` (UTF-8), flushed and fsynced when the block ends."""
    fd = open_append(path, root, fix)
    with os.fdopen(fd, "a", encoding="utf-8", newline="") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def write_handle(path: Path, root: Path | None = None, fix: str = "", *, append: bool = False) -> Iterator[IO[str]]:
    """A UTF-8 text handle writing ``path`` from the start (truncated; appended to with ``append``), never through
    a link; ``\\n`` line ends are written as they are."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = open_fd(path, flags, root, fix)
    with os.fdopen(fd, "a" if append else "w", encoding="utf-8", newline="") as handle:
        yield handle


@contextmanager
def write_binary(path: Path, root: Path | None = None, fix: str = "", *, append: bool = False) -> Iterator[IO[bytes]]:
    """:func:`write_handle` in bytes."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = open_fd(path, flags, root, fix)
    with os.fdopen(fd, "ab" if append else "wb") as handle:
        yield handle


def _atomic(path: Path, fill: Callable[[IO[bytes]], object], root: Path | None, fix: str) -> None:
    """Write a temporary file beside ``path`` with ``fill``, fsync it, and rename it over ``path``: a reader sees
    the old file or the whole new one; never through a link, every failure an :class:`UnwritablePath`."""
    path = Path(path)
    make_dirs(path.parent, root, fix) if root is not None else _make_parent(path, fix)
    check_writable_target(path, root, fix)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp")
    except (OSError, ValueError) as exc:
        raise _unwritable(path, exc, fix) from None
    try:
        os.fchmod(fd, _FILE_MODE)  # mkstemp makes 0600; results are meant to be read (and bundled)
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        check_writable_target(path, root, fix)  # nothing swapped in meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        if isinstance(exc, UserError):
            raise
        raise _unwritable(path, exc, fix) from None
    except BaseException:
        _remove(tmp)
        raise


def write_bytes_atomic(path: Path, data: bytes, root: Path | None = None, fix: str = "") -> None:
    """Write ``data`` so that a reader sees either the old file or the whole new one; never through a link."""
    _atomic(path, lambda handle: handle.write(data), root, fix)


def write_text_atomic(path: Path, text: str, root: Path | None = None, fix: str = "") -> None:
    """:func:`write_bytes_atomic` of UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"), root, fix)


def copy_file(source: Path, target: Path, root: Path | None = None, fix: str = "") -> None:
    """Copy ``source`` (read as given) to ``target`` atomically, in chunks, never writing through a link."""
    try:
        handle = open(source, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise UserError(f"cannot read {Path(source).name}: {reason}", str(source), "Check the path.") from None
    with handle:
        _atomic(Path(target), lambda sink: shutil.copyfileobj(handle, sink, _CHUNK), root, fix)


def _make_parent(path: Path, fix: str) -> None:
    make_dirs(path.parent, fix=fix)


def _remove(tmp: str) -> None:
    with suppress(OSError):
        os.unlink(tmp)
