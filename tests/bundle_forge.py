"""Forge a bundle the way anyone can: read its members, change some, and pack them again with BUNDLE.json's hashes
recomputed, so that only a re-derivation (not the manifest's hashes) can tell (tests of ``isocost verify``).

Example::

    files = bundle_members(bundle)
    files["campaign/decision.json"] = forged
    repack(files, tmp_path / "forged.tar.gz")
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from protocol.io.fingerprint import sha256_bytes
from runner.bundle.pack import PackedFile, write_deterministic_tar
from runner.bundle.records import MANIFEST_NAME


def bundle_members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def repack(files: dict[str, bytes], output: Path) -> Path:
    """A bundle of ``files`` whose BUNDLE.json lists their recomputed hashes."""
    manifest = json.loads(files[MANIFEST_NAME])
    manifest["files"] = [{"path": name, "sha256": sha256_bytes(data), "size_bytes": len(data)}
                         for name, data in sorted(files.items()) if name != MANIFEST_NAME]
    files = {**files, MANIFEST_NAME: json.dumps(manifest).encode()}
    names = [MANIFEST_NAME, *sorted(n for n in files if n != MANIFEST_NAME)]
    write_deterministic_tar(output, [PackedFile(name, data=files[name]) for name in names])
    return output
