"""Bind mounts of this machine's paths: what the container's user may read, and the trial directory it may write.

The local Docker launcher mounts the corpus and the model read-only and the trial directory
writable. Inputs its (non-root) user could not read are refused before any trial
(:func:`check_readable`); as root, the host CLI lends the trial directory, and only it, to that
user for the trial (:func:`lend_trial_dir`) and takes it back afterwards (:func:`return_trial_dir`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from protocol.errors import UserError


def unreadable_for(path: Path, uid: int, gids: set[int]) -> list[Path]:
    """Paths under ``path`` that ``uid`` (with ``gids``) could not read (files) or enter (directories)."""
    items = [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]
    bad = []
    for item in items:
        stat = item.stat()
        need = 0o5 if item.is_dir() else 0o4
        if stat.st_uid == uid:
            bits = (stat.st_mode >> 6) & 0o7
        elif stat.st_gid in gids:
            bits = (stat.st_mode >> 3) & 0o7
        else:
            bits = stat.st_mode & 0o7
        if bits & need != need:
            bad.append(item)
    return bad


def check_readable(corpus: Path, model: Path, user: str, extra_groups: Iterable[str] = ()) -> None:
    """A UserError when the container's ``user`` (uid:gid, plus ``extra_groups``) cannot read an input."""
    uid_text, _, gid_text = user.partition(":")
    uid = int(uid_text) if uid_text.isdigit() else -1
    gids = {int(g) for g in (gid_text, *extra_groups) if str(g).isdigit()}
    bad = [*unreadable_for(corpus, uid, gids), *unreadable_for(model, uid, gids)]
    if bad:
        first = bad[0].stat()
        raise UserError(
            f"{len(bad)} input path(s) are not readable by the trial container's user {user}, e.g. "
            f"{bad[0]} (mode {first.st_mode & 0o777:04o}, owner {first.st_uid}:{first.st_gid})",
            "--launcher docker",
            f"Make the inputs readable (chmod -R a+rX {model} {corpus}; modes are not part of the "
            "fingerprint, and the container mounts them read-only), or run isocost as their owner.",
        )


def lend_trial_dir(trial_dir: Path, user: str) -> tuple[int, int]:
    """Hand the trial directory (only it) to the container's ``user``; returns its owner before."""
    stat = trial_dir.stat()
    uid, _, gid = user.partition(":")
    os.chown(trial_dir, int(uid), int(gid or uid))
    return stat.st_uid, stat.st_gid


def return_trial_dir(trial_dir: Path, owner: tuple[int, int] | None) -> None:
    """Give the trial directory and what the container wrote back to its owner."""
    if owner is None:
        return
    for path in [trial_dir, *trial_dir.rglob("*")]:
        with contextlib.suppress(OSError):
            os.chown(path, *owner, follow_symlinks=False)
