"""Read a file a user (or a stranger) named, without trusting what it is or what it holds.

Every reader of user input goes through here, so that no input ends in a traceback or a hang:

- the path is ``os.stat``-ed first (symlinks followed: a link is judged by what it points at)
  and must be a regular file: a directory, FIFO, socket or character/block device is refused
  with what it is, never opened, so a named pipe or ``/dev/zero`` cannot hang or flood a read;
- it is opened with ``O_NONBLOCK | O_NOCTTY`` and checked again with ``fstat`` on the open
  descriptor (a file swapped for a FIFO between the two checks is still refused);
- at most ``max_bytes`` are read: a larger file is refused with the bound;
- text is strict UTF-8; a leading byte-order mark is accepted and dropped (it is not part of
  the content); invalid bytes (lone surrogates included: they are invalid UTF-8) are an error
  naming the line and the byte.

An output file a trial wrote (``predictions.jsonl``, ``generations.jsonl``) is read line by line with
:func:`decoded_lines`: a line of invalid UTF-8 is a malformed line, named, never U+FFFD in an id or a text.

Errors are :class:`UnreadableInput`, a :class:`~protocol.errors.UserError` that is also a
``ValueError`` (older callers catch that). Pure standard library.

Example::

    text = read_text(Path("study.toml"), "study file", max_bytes=MAX_STUDY_BYTES)
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from protocol.errors import UserError

BOM = b"\xef\xbb\xbf"

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class UnreadableInput(UserError, ValueError):
    """A named input that is not a readable regular file, too large, or not UTF-8 text."""


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words ("a regular file", "a FIFO (named pipe)", …)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def check_regular(path: Path, what: str, fix: str = "") -> os.stat_result:
    """``os.stat`` the path (following links) and refuse anything but a regular file, without opening it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UnreadableInput(f"{what} not found", str(path), fix or "Check the path.") from None
    except (OSError, ValueError) as exc:  # ELOOP (a link loop), EACCES, ENAMETOOLONG, an embedded NUL
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UnreadableInput(f"{what} cannot be examined: {reason}", str(path), fix or "Check the path.") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnreadableInput(f"{what} is {file_kind(info.st_mode)}, not a regular file: refused, not read",
                              str(path), fix or "Name a regular file.")
    return info


def open_binary(path: Path, what: str, fix: str = "") -> BinaryIO:
    """Open a regular file for reading: checked before opening, opened non-blocking, checked again."""
    check_regular(path, what, fix)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableInput(f"{what} cannot be opened: {exc.strerror or exc}", str(path),
                              fix or "Check the path and its permissions.") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableInput(f"{what} is {file_kind(mode)}, not a regular file: refused, not read", str(path),
                                  fix or "Name a regular file.")
        return io.open(fd, "rb", closefd=True)  # noqa: UP020 - from a descriptor, not a path
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, what: str, *, max_bytes: int, fix: str = "") -> bytes:
    """The whole file, refused when larger than ``max_bytes``."""
    with open_binary(path, what, fix) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise UnreadableInput(f"{what} cannot be read: {exc.strerror or exc}", str(path),
                                  fix or "Check the file.") from None
    if len(data) > max_bytes:
        raise UnreadableInput(f"{what} is larger than {max_bytes} bytes", str(path),
                              fix or f"A {what} is at most {max_bytes} bytes.")
    return data


def decode_text(data: bytes, what: str, where: str) -> str:
    """Strict UTF-8, a leading BOM accepted; an invalid byte is named by line and byte offset."""
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start:exc.end].hex()
        raise UnreadableInput(f"{what} is not UTF-8 text: invalid byte(s) 0x{bad} ({exc.reason})",
                              f"{where}, line {line}, byte {column}",
                              "Save it as UTF-8 (a lone surrogate is not valid UTF-8 either).") from None


def read_text(path: Path, what: str, *, max_bytes: int, fix: str = "") -> str:
    """The file as strict UTF-8 text (BOM dropped), at most ``max_bytes``."""
    return decode_text(read_bytes(path, what, max_bytes=max_bytes, fix=fix), what, str(path))


def check_encodable(text: str, what: str, where: str) -> str:
    """Refuse a string that cannot be written as UTF-8 (a lone surrogate from a JSON ``\\ud800`` escape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UnreadableInput(f"{what} holds a lone surrogate ({text[exc.start:exc.end]!a}), not text",
                              where, "Fix the escape: a surrogate must be half of a pair.") from None
    return text


def invalid_utf8_lines(data: bytes) -> list[int]:
    """The 1-based numbers of the lines of ``data`` that are not valid UTF-8 (empty when the whole is)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return []
    bad = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(number)
    return bad


#: What an invalid line is read as (:func:`decoded_lines`): not JSON, so every reader counts it malformed.
INVALID_LINE = "\x00"


def decoded_lines(data: bytes) -> tuple[str, frozenset[int]]:
    """``data`` as text, each line that is not valid UTF-8 replaced by :data:`INVALID_LINE` (never by U+FFFD
    characters a reader would take for what the trial wrote), and the numbers of those lines."""
    try:
        return data.decode("utf-8"), frozenset()  # the usual case: decoded once
    except UnicodeDecodeError:
        bad = invalid_utf8_lines(data)
    lines = data.split(b"\n")
    for number in bad:
        lines[number - 1] = INVALID_LINE.encode()
    return b"\n".join(lines).decode("utf-8"), frozenset(bad)


def name_invalid_lines(errors: Sequence[str], bad: frozenset[int]) -> list[str]:
    """``errors`` with the one a reader gave each invalid line (:func:`decoded_lines`) said as what it is."""
    if not bad:
        return list(errors)
    return [f"{error.split(':')[0]}: not valid UTF-8" if error.startswith("line ") and
            error.split(":")[0].removeprefix("line ").isdigit() and
            int(error.split(":")[0].removeprefix("line ")) in bad else error for error in errors]
