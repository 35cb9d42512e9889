"""Debian packages an image installs from hashed files: ``images/<stack>/debs.lock`` and its ``debs/`` folder.

A stack whose image needs a system library its base lacks (the ``cpu-vllm`` image: ``libnuma1``, which
``vllm._C`` links) names it in ``debs.lock``: one line per package, ``NAME VERSION sha256:HEX`` of its ``.deb``.
:func:`ensure_debs` fetches each file on the host (``apt-get download NAME=VERSION``, into the wheelhouse's
``debs/``) and refuses one whose hash differs, so the image installs them with ``dpkg -i`` and its build needs
no network. A stack without the file needs none.

Example::

    ensure_debs("cpu-vllm")   # [Path(".../images/cpu-vllm/wheels/debs/libnuma1_2.0.16-1_amd64.deb")]
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import UserError
from runner.images.requirements import sha256_of
from runner.images.stacks import Progress, quiet, repo_root, wheelhouse_path

_LINE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]*)\s+(?P<version>[A-Za-z0-9.+:~-]+)\s+(?P<sha>sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class LockedDeb:
    name: str
    version: str
    sha256: str  # "sha256:<hex>" of the .deb file


def debs_lock_path(stack: str, root: Path) -> Path:
    return root / "images" / stack / "debs.lock"


def parse_debs_lock(text: str, where: str = "debs.lock") -> tuple[LockedDeb, ...]:
    """``NAME VERSION sha256:HEX`` per line; ``#`` starts a comment. A malformed line is a UserError."""
    debs: list[LockedDeb] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            raise UserError(f"line {number} is not `NAME VERSION sha256:HEX`: {raw.strip()!r}", where,
                            "Write one Debian package per line, e.g. `libnuma1 2.0.16-1 sha256:…`.")
        debs.append(LockedDeb(match["name"], match["version"], match["sha"]))
    return tuple(debs)


def ensure_debs(stack: str, *, root: Path | None = None, progress: Progress = quiet) -> list[Path]:
    """The ``.deb`` files ``debs.lock`` pins, fetched if missing and checked by hash; [] without a debs.lock."""
    root = repo_root(root)
    lock = debs_lock_path(stack, root)
    if not lock.exists():
        return []
    folder = wheelhouse_path(stack, root) / "debs"
    folder.mkdir(parents=True, exist_ok=True)
    locked = parse_debs_lock(lock.read_text(encoding="utf-8"), str(lock))
    return [_one_deb(deb, folder, lock, progress) for deb in locked]


def _one_deb(deb: LockedDeb, folder: Path, lock: Path, progress: Progress) -> Path:
    def matching() -> Path | None:
        return next((path for path in sorted(folder.glob(f"{deb.name}_*.deb")) if sha256_of(path) == deb.sha256),
                    None)

    path = matching()
    if path is not None:
        return path
    progress(f"downloading {deb.name}={deb.version} (apt-get download) into {folder}")
    try:
        done = subprocess.run(["apt-get", "download", f"{deb.name}={deb.version}"], cwd=folder, capture_output=True,
                              text=True, check=False)
    except FileNotFoundError:
        fix = f"Put {deb.name}_{deb.version}_amd64.deb (sha256 {deb.sha256}) in {folder}."
        raise UserError(f"{deb.name} {deb.version} is not in {folder}, and this host has no apt-get to fetch it",
                        str(lock), fix) from None
    path = matching()
    if path is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise UserError(f"no {deb.name} {deb.version} file with the locked hash {deb.sha256} in {folder}"
                        + (f" (apt-get: {' '.join(tail)})" if tail else ""), str(lock),
                        "Check the host's apt sources (Debian bookworm), or update debs.lock knowingly.")
    return path
