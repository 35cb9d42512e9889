"""``images/images.lock`` (runner/images/lock.py) through the record codec: the bytes written, hostile files refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.images.lock import ImageRecord, locked_image, read_lock, update_lock, write_lock

RECORD = ImageRecord(stack="cpu", tag="isocost/cpu:0.1.0-abc", image_id="sha256:" + "1" * 64, repo_digest="",
                     base="debian:bookworm", base_digest="sha256:" + "2" * 64, base_digest_kind="repo-digest",
                     base_override=False, build_args={"BASE": "debian:bookworm"}, revision="abc",
                     requirements_sha256="sha256:3", built_at="2026-12-01T00:00:00+00:00", build_s=12.5,
                     size_bytes=10, engine={"version": "27.5.1"})

#: What isocost 0.1 wrote for RECORD (the keys of the dataclass plus the derived image_ref).
WRITTEN = {
    "about": "image_id = sha256 of the image config (Image ID, local only); repo_digest = REPO@sha256 of the registry "
             "manifest (after push/pull; what another host pulls). image_ref = repo_digest or image_id.",
    "images": {"cpu": {
        "base": "debian:bookworm", "base_digest": "sha256:" + "2" * 64, "base_digest_kind": "repo-digest",
        "base_override": False, "build_args": {"BASE": "debian:bookworm"}, "build_s": 12.5, "built_at":
        "2026-12-01T00:00:00+00:00", "engine": {"version": "27.5.1"}, "image_id": "sha256:" + "1" * 64,
        "image_ref": "sha256:" + "1" * 64, "pushed_at": "", "registry": "", "repo_digest": "", "requirements_sha256":
        "sha256:3", "revision": "abc", "size_bytes": 10, "stack": "cpu", "tag": "isocost/cpu:0.1.0-abc"}},
    "schema_version": 1,
}


def test_the_lock_is_written_as_before_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "images.lock"
    write_lock(path, {"cpu": RECORD})
    assert path.read_text(encoding="utf-8") == json.dumps(WRITTEN, sort_keys=True, indent=2) + "\n"
    assert read_lock(path) == {"cpu": RECORD}
    pushed = dataclasses.replace(RECORD, repo_digest="reg/isocost@sha256:" + "4" * 64)
    update_lock(path, pushed)
    assert read_lock(path)["cpu"].image_ref == pushed.repo_digest  # derived from the digest once pushed
    assert read_lock(tmp_path / "absent.lock") == {}


@pytest.mark.parametrize(("change", "what"), [
    ({"schema_version": 2}, "images.lock has schema_version 2; this isocost reads 1"),
    ({"signed": True}, "unknown key 'signed'"),
    ({"images": {"cpu": {**WRITTEN["images"]["cpu"], "colour": "blue"}}}, "unknown key 'images.cpu.colour'"),
    ({"images": {"cpu": {**WRITTEN["images"]["cpu"], "size_bytes": "10"}}},
     "key 'images.cpu.size_bytes' must be an integer, got '10'"),
    ({"images": ["cpu"]}, "key 'images' must be a JSON object, got a list"),
])
def test_a_hostile_lock_is_refused_naming_the_file_and_key(tmp_path: Path, change: dict, what: str) -> None:
    path = tmp_path / "images.lock"
    path.write_text(json.dumps({**WRITTEN, **change}), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_lock(path)
    assert (caught.value.what, caught.value.where) == (what, str(path))
    assert locked_image("cpu", path) is None  # a run that only looks an image up goes on without it


def test_an_edited_image_ref_is_refused(tmp_path: Path) -> None:
    """image_ref is derived (the repo digest once pushed, else the image ID): a file that says otherwise is edited."""
    path = tmp_path / "images.lock"
    path.write_text(json.dumps({**WRITTEN, "images": {"cpu": {**WRITTEN["images"]["cpu"], "image_ref": "evil"}}}),
                    encoding="utf-8")
    with pytest.raises(UserError, match=r"key 'images.cpu.image_ref' is 'evil', but the record's other keys give "
                                        r"'sha256:1111"):
        read_lock(path)
