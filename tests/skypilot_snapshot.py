"""Where the real SkyPilot catalog snapshot (2026-12-03) is: ``../shared/data/skypilot-catalog`` beside the clone.

The snapshot is read-only test data with no licence of its own (its README): it is never copied into the repository.
Tests that need it skip with the reason when it is absent (``ISOCOST_SHARED_DIR`` names another shared/ folder,
and only it).
Its files are checked against the sha256 its README records, so a test never runs on edited prices.

Example: ``@requires_snapshot`` on a test; ``SNAPSHOT / "lambda" / "vms.csv"``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RELATIVE = Path("data") / "skypilot-catalog" / "catalogs" / "v7"
SHA256 = {
    "lambda/vms.csv": "6db151005077cd16a3f1885c56afa93ebb0421b0f12b9717c840a47fdf8347b0",
    "runpod/vms.csv": "6b14c34275ad56bfd119426b16d9fc36ed8a37f8f457ad713487a4ca21f6ff01",
    "common/metadata.csv": "a6bdc392ca252b57b69ecbb986728483f17df62f570173fb4bfdd3a9b6ca6f7d",
}
COMMITS = {"lambda": "11580132cea293395776b033c8533714d42abb4e", "runpod": "0727c2bd9e77f91cb1377127c5f793a28cf01384"}
TAKEN = "2026-12-03"


def _find() -> Path | None:
    named = os.environ.get("ISOCOST_SHARED_DIR")
    candidates = [Path(named)] if named else [REPO.parent / "shared", REPO.parent.parent / "shared"]
    for shared in candidates:
        folder = shared / RELATIVE
        if all((folder / name).is_file() for name in SHA256):
            return folder
    return None


SNAPSHOT = _find()
requires_snapshot = pytest.mark.skipif(SNAPSHOT is None, reason="the SkyPilot snapshot ../shared/data/skypilot-catalog "
                                       "is not beside this clone (set ISOCOST_SHARED_DIR to its shared/ folder)")


def check_snapshot() -> Path:
    """The snapshot folder, its files checked against the README's sha256 (an edited snapshot fails, never skips)."""
    assert SNAPSHOT is not None
    for name, digest in SHA256.items():
        assert hashlib.sha256((SNAPSHOT / name).read_bytes()).hexdigest() == digest, f"{name} was edited"
    return SNAPSHOT
