"""``images/images.lock``: one record per stack of the image last built (and pushed) for it.

Sorted JSON with a ``schema_version`` (:class:`ImageLock`, through :mod:`protocol.records.codec`): the image ID,
the repo digest once pushed, the base and its digest, the build arguments, the git revision, the build time
and the size (:class:`ImageRecord`). ``ISOCOST_IMAGES_LOCK`` points elsewhere (tests, CI).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from protocol.errors import UserError
from protocol.records.codec import Schema, read_record, write_record

#: images.lock format. History: 1 (0.1.0): first version.
LOCK_SCHEMA_VERSION = 1


#: Overrides the default ``images/images.lock`` (tests, CI).
LOCK_ENV = "ISOCOST_IMAGES_LOCK"


def default_lock_path(root: Path | None = None) -> Path:
    if os.environ.get(LOCK_ENV):
        return Path(os.environ[LOCK_ENV])
    base = root or Path(__file__).resolve().parents[2]
    return base / "images" / "images.lock"


@dataclass(frozen=True)
class ImageRecord:
    """One built (and maybe pushed) image, as kept in images.lock."""

    stack: str
    tag: str  # local name, e.g. isocost/cpu:0.1.0-3f2c…
    image_id: str  # sha256 of the config JSON (Image ID); local, not pullable
    repo_digest: str  # REPO@sha256:<manifest digest> after a push or pull; "" before
    base: str  # base image reference the build used (the pinned default or --base)
    base_digest: str  # sha256:… of the base (see base_digest_kind)
    base_digest_kind: str  # "repo-digest" (registry manifest) or "image-id" (a local base, never pushed)
    base_override: bool  # True when --base replaced the Dockerfile's pinned default
    build_args: dict[str, str]
    revision: str  # git commit of the sources baked in ("…-dirty" with uncommitted changes)
    requirements_sha256: str  # of requirements.lock
    built_at: str
    build_s: float
    size_bytes: int
    engine: dict[str, str] = field(default_factory=dict)  # version, storage driver, image store
    registry: str = ""
    pushed_at: str = ""
    CODEC: ClassVar[Schema] = Schema("image record", derived=("image_ref",))

    @property
    def image_ref(self) -> str:
        """What to run: the repo digest once pushed, the image ID before (both exact); written beside them."""
        return self.repo_digest or self.image_id


_ABOUT = ("image_id = sha256 of the image config (Image ID, local only); repo_digest = REPO@sha256 of the registry "
          "manifest (after push/pull; what another host pulls). image_ref = repo_digest or image_id.")


@dataclass(frozen=True)
class ImageLock:
    """``images.lock``: stack → the image last built for it."""

    images: dict[str, ImageRecord] = field(default_factory=dict)
    about: str = _ABOUT
    schema_version: int = LOCK_SCHEMA_VERSION
    CODEC: ClassVar[Schema] = Schema("images.lock", LOCK_SCHEMA_VERSION, fix=(
        "Rebuild the images with `isocost images build`, or restore images/images.lock from a backup."))


def read_lock(path: Path) -> dict[str, ImageRecord]:
    """Stack → record; an absent file is an empty lock."""
    return dict(sorted(read_record(path, ImageLock).images.items())) if path.exists() else {}


def write_lock(path: Path, records: dict[str, ImageRecord]) -> None:
    write_record(path, ImageLock(images=dict(records)))


def update_lock(path: Path, record: ImageRecord) -> None:
    records = read_lock(path)
    records[record.stack] = record
    write_lock(path, records)


def locked_image(stack: str, lock_path: Path | None = None) -> ImageRecord | None:
    try:
        return read_lock(lock_path or default_lock_path()).get(stack)
    except UserError:
        return None


def list_images(lock_path: Path | None = None) -> list[ImageRecord]:
    return list(read_lock(lock_path or default_lock_path()).values())


