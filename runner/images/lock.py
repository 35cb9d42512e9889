"""``images/images.lock``: one record per stack of the image last built (and pushed) for it.

Sorted JSON with a ``schema_version``: the image ID, the repo digest once pushed, the base and
its digest, the build arguments, the git revision, the build time and the size
(:class:`ImageRecord`). ``ISOCOST_IMAGES_LOCK`` points elsewhere (tests, CI).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.jsonio import read_json, write_json_atomic

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

    @property
    def image_ref(self) -> str:
        """What to run: the repo digest once pushed, the image ID before (both exact)."""
        return self.repo_digest or self.image_id

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["image_ref"] = self.image_ref
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImageRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def read_lock(path: Path) -> dict[str, ImageRecord]:
    """Stack → record; an absent file is an empty lock."""
    if not path.exists():
        return {}
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema_version") != LOCK_SCHEMA_VERSION:
        raise UserError(
            f"images lock has schema_version {data.get('schema_version') if isinstance(data, dict) else None!r}, "
            f"this isocost reads {LOCK_SCHEMA_VERSION}",
            str(path),
            "Rebuild the images with `isocost images build`, or use the isocost version that wrote it.",
        )
    return {stack: ImageRecord.from_dict(entry) for stack, entry in sorted(data.get("images", {}).items())}


def write_lock(path: Path, records: dict[str, ImageRecord]) -> None:
    write_json_atomic(path, {
        "schema_version": LOCK_SCHEMA_VERSION,
        "about": "image_id = sha256 of the image config (Image ID, local only); repo_digest = REPO@sha256 of the "
                 "registry manifest (after push/pull; what another host pulls). image_ref = repo_digest or image_id.",
        "images": {stack: records[stack].to_dict() for stack in sorted(records)},
    })


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


