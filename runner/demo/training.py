"""Asking for the demo classifier: the training request (its own training split, scored on the tuning split), the
quality minimum.

The classifier head is trained in a fresh process (``python -m
runner.trial.demo_train REQUEST.json HEAD.json``): torch and transformers are
imported there only, so the host side of isocost never imports them. This
module writes the request (model paths, seed, labels, training and tuning rows, held-out
ids: the tuning split), streams the child's progress lines, turns a failure into one
``UserError`` and reads back the head record. The study's quality minimum is
derived from the held-out accuracy that record reports.

Example::

    head = train_classifier(model_src, selection.training, selection.tuning, labels, out_dir / "model", 0, print)
    minimum = quality_minimum(Fraction(head["heldout"]["correct"], head["heldout"]["texts"]))
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.jsonio import write_json_atomic
from protocol.io.safe_write import write_handle
from protocol.records import codec
from runner.demo.selection import DemoText

MINIMUM_MARGIN = Fraction(5, 100)
_REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
#: What the head's held-out score is measured on.
HELDOUT = "the whole tuning split (the head is trained on its own training split, disjoint from it)"


def training_request(
    model_src: Path, training: Sequence[DemoText], tuning: Sequence[DemoText], labels: Sequence[str],
    model_out: Path, seed: int,
) -> dict[str, Any]:
    """The JSON request ``runner.trial.demo_train`` reads (its module docstring lists the keys): the head is
    trained on ``training`` and scored on ``tuning``, which it never sees."""
    return {
        "model_src": str(model_src),
        "model_out": str(model_out),
        "seed": seed,
        "labels": list(labels),
        "rows": [codec.to_dict(row) for row in (*training, *tuning)],
        "heldout": sorted(row.id for row in tuning),
        "heldout_split": HELDOUT,
    }


def train_classifier(
    model_src: Path,
    training: Sequence[DemoText],
    tuning: Sequence[DemoText],
    labels: Sequence[str],
    model_out: Path,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Train the classifier head in a fresh process (``runner.trial.demo_train``); its record.

    torch and transformers are imported there only: the host side of isocost
    never imports them. The process's progress lines are passed to ``progress``.
    """
    request = training_request(model_src, training, tuning, labels, model_out, seed)
    with tempfile.TemporaryDirectory(prefix="isocost-demo-train-") as scratch:
        request_path, head_path = Path(scratch) / "request.json", Path(scratch) / "head.json"
        write_json_atomic(request_path, request)
        command = [sys.executable, "-m", "runner.trial.demo_train", str(request_path), str(head_path)]
        returncode, errors = _run_streaming(command, Path(scratch) / "stderr.txt", progress)
        if returncode != 0 or not head_path.is_file():
            last = (errors.strip().splitlines() or ["no message"])[-1]
            raise UserError(
                f"training the demo classifier failed (exit {returncode}): {last[:300]}",
                "isocost demo prepare",
                "Check that torch and transformers are installed: make setup.",
            )
        head: dict[str, Any] = json.loads(head_path.read_text(encoding="utf-8"))
    return head


def _run_streaming(command: Sequence[str], log_path: Path, progress: Callable[[str], None]) -> tuple[int, str]:
    """Run ``command`` offline with this checkout importable; stdout lines to ``progress``; (exit code, stderr)."""
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPOSITORY_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    with write_handle(log_path, log_path.parent) as log, subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=log, text=True, env=env
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            progress(line.rstrip("\n"))
    return child.returncode, log_path.read_text(encoding="utf-8", errors="replace")


def quality_minimum(accuracy: Fraction) -> str:
    """Floor to 2 decimals of (accuracy - margin), as text (``"0.87"``), never below 0."""
    hundredths = max(0, math.floor((accuracy - MINIMUM_MARGIN) * 100))
    return f"{hundredths // 100}.{hundredths % 100:02d}"
