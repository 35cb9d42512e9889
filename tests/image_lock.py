"""One lock on the local engine's ``cpu`` image, for tests running on several xdist workers at once.

tests/docker/test_replay_by_digest.py removes the image (to pull it back by its registry digest) and checks that
it is gone; a test on another worker that builds the image or starts a container from it meanwhile would fail, or
make that check fail. So a test that uses the image holds this lock shared (an ``flock`` on a file in the temp
directory, shared by every worker on the machine), the test that removes it holds it exclusively, and a fixture
that builds the image holds it shared while it builds. tests/conftest.py takes it around each test
(:func:`mode_for`); a session or module fixture that builds the image wraps its build in :func:`held`.

Example::

    with image_lock.held("shared"):
        image = build_image("cpu", base, lock_path=lock)
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

#: The fixtures that hand a test the local engine's ``cpu`` image (tests/docker, tests/slurm, tests/faults,
#: tests/multihost conftests).
IMAGE_FIXTURES = frozenset({"cpu_image", "fault_image", "pushed_image"})
#: A test module that removes the image says so: ``REMOVES_CPU_IMAGE = True``.
REMOVES_ATTRIBUTE = "REMOVES_CPU_IMAGE"
LOCK_PATH = Path(tempfile.gettempdir()) / "isocost-tests-cpu-image.lock"


def mode_for(module: ModuleType | None, fixturenames: Sequence[str]) -> str | None:
    """``exclusive`` for a test of a module that removes the image, ``shared`` for one that uses it, else None."""
    if module is not None and getattr(module, REMOVES_ATTRIBUTE, False):
        return "exclusive"
    return "shared" if IMAGE_FIXTURES & set(fixturenames) else None


@contextmanager
def held(mode: str) -> Iterator[None]:
    """Hold the lock ``shared`` or ``exclusive`` (waiting, without a bound, for the other kind to be released)."""
    descriptor = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        yield
    finally:
        os.close(descriptor)  # releases the lock
