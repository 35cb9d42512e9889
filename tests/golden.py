"""The golden 1.0 campaign and bundle of ``tests/data``: the files every isocost 1.x must read.

``tests/data/golden_campaign`` is a real campaign on the tiny workspace (tests/workspace.py: the real MiniLM
encoder with a seeded 2-label head, 12 inputs, batch sizes 1 and 4, 3 repetitions, the process launcher), summarized;
``tests/data/golden_bundle.tar.gz`` is ``isocost bundle`` of it. Both were written once, by isocost 1.0.0, and are
kept byte for byte: a 1.x that cannot read them (summarize, validate, decide, verify, bundle verify:
tests/cli/test_golden_formats.py) breaks the promise of docs/formats.md. Record them again only for a new major
version (``python tests/golden.py``; then ``python tests/cli/test_golden_outputs.py`` records what decide prints).

Example::

    python tests/golden.py          # about a minute: a real run, then summarize and bundle
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
CAMPAIGN = DATA / "golden_campaign"
BUNDLE = DATA / "golden_bundle.tar.gz"
#: The bundle's created_at (2026-12-03T00:00:00Z), so that recording it again gives the same bytes.
SOURCE_DATE_EPOCH = "1796256000"


def _isocost(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "runner.cli", *args], env=env, check=True, cwd=REPO)


def record() -> None:
    """Run the tiny campaign, summarize it, and bundle it into tests/data (replacing what is there)."""
    sys.path.insert(0, str(TESTS))
    from workspace import build_tiny_model, write_workspace

    with tempfile.TemporaryDirectory(prefix="isocost-golden-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ISOCOST_HOME": str(Path(tmp) / "home")}
        model = build_tiny_model(Path(tmp) / "tiny-model")
        study = write_workspace(Path(tmp) / "ws", model, repetitions=3, batches="[1, 4]")
        out = Path(tmp) / "out"
        _isocost("run", str(study), "--out", str(out), env=env)
        (out / ".lock").unlink(missing_ok=True)  # the writer lock: no format, nothing reads it
        shutil.rmtree(CAMPAIGN, ignore_errors=True)
        shutil.copytree(out, CAMPAIGN)
    # Summarized and bundled once the workspace is gone, as every test sees the campaign (no model to estimate from).
    with tempfile.TemporaryDirectory(prefix="isocost-golden-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "ISOCOST_HOME": str(Path(tmp) / "home"),
               "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        _isocost("summarize", str(CAMPAIGN), env=env)
        BUNDLE.unlink(missing_ok=True)
        _isocost("bundle", str(CAMPAIGN), "-o", str(BUNDLE), env=env)

if __name__ == "__main__":
    record()
