"""Paths and names that come from files a user (or a stranger) wrote.

Two guards, both pure functions:

- :func:`check_allowed_root`: a path must lie under one of the allowed roots
  (``ISOCOST_ALLOWED_ROOTS``, ``os.pathsep``-separated, or ``--allowed-root``).
  Symlinks are followed before the check, so a link inside a root that points
  outside it is refused. No roots configured means no restriction.
- :func:`check_safe_name`: a name used as ONE path component (a trial id from a
  bundle, a variant slug) must match ``^[A-Za-z0-9._-]+$`` and not be ``.`` or
  ``..``.

Example::

    roots = allowed_roots(["/data/studies"])           # plus ISOCOST_ALLOWED_ROOTS
    check_allowed_root(Path("/data/studies/q.toml"), roots)   # returns the resolved path
    check_allowed_root(Path("/etc/passwd"), roots)            # raises UserError
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from protocol.errors import UserError

#: Environment variable naming the directories isocost may read studies and inputs from.
ALLOWED_ROOTS_ENV = "ISOCOST_ALLOWED_ROOTS"

#: One path component: letters, digits, '.', '_' and '-'.
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
MAX_NAME_CHARS = 200


def allowed_roots(cli_roots: Iterable[str | Path] = (), environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """The allowed roots: ``--allowed-root`` values plus ``ISOCOST_ALLOWED_ROOTS``, resolved, in order.

    An empty result means "no restriction configured".
    """
    env = os.environ if environ is None else environ
    raw: list[str] = [str(r) for r in cli_roots]
    raw += [part for part in env.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if part.strip()]
    roots: list[Path] = []
    for text in raw:
        if "\x00" in text:
            raise UserError("an allowed root contains a NUL byte", ALLOWED_ROOTS_ENV, "Fix the value.")
        root = Path(text).expanduser().resolve()
        if root not in roots:
            roots.append(root)
    return tuple(roots)


def is_within(path: Path, root: Path) -> bool:
    """True if ``path`` is ``root`` or lies below it (both already resolved)."""
    return path == root or root in path.parents


def check_allowed_root(path: Path | str, roots: Iterable[Path], *, what: str = "path", where: str = "") -> Path:
    """Return ``path`` resolved (symlinks followed) if it lies under one of ``roots``.

    ``roots`` empty: no restriction, the resolved path is returned. Otherwise a
    :class:`UserError` names the path, the roots and how to allow it.
    """
    text = str(path)
    if "\x00" in text:
        raise UserError(f"the {what} contains a NUL byte", where or repr(text), "Use a plain file path.")
    resolved = Path(text).expanduser().resolve()
    root_list = [Path(r).resolve() for r in roots]
    if not root_list or any(is_within(resolved, root) for root in root_list):
        return resolved
    shown = ", ".join(str(r) for r in root_list)
    raise UserError(
        f"the {what} {resolved} is outside the allowed roots ({shown})",
        where or text,
        f"Move it under an allowed root, or allow its directory with --allowed-root or {ALLOWED_ROOTS_ENV}.",
    )


def check_safe_name(name: object, *, what: str = "name", where: str = "") -> str:
    """Return ``name`` if it is safe as one path component, else raise :class:`UserError`."""
    if (
        not isinstance(name, str)
        or len(name) > MAX_NAME_CHARS
        or not SAFE_NAME.fullmatch(name)  # fullmatch: "$" alone accepts a final newline
        or set(name) == {"."}
    ):
        raise UserError(
            f"{what} {name!r} is not a safe name",
            where or what,
            f"It must be 1 to {MAX_NAME_CHARS} characters of letters, digits, '.', '_' or '-', and not only dots.",
        )
    return name
