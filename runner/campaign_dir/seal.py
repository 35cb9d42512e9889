"""The trial files a verdict, a summary or a decision reads, sealed in the trial's chained raw row.

When a trial ends, the host hashes each file of :data:`SEALED_FILES` in its directory and writes the sha256
into the trial's row of ``raw.csv`` (an empty cell, with its reason, when the trial wrote no such file).
The row is chained (:mod:`runner.campaign_dir.rawtable`), so the hashes cannot be changed without breaking
the chain, and every reading command compares each file with its row before reading it
(:class:`~runner.campaign_dir.checks.CampaignChecks`): three predicted labels changed in one
``predictions.jsonl``, or 300,000 s added to a set-up time in one ``status.json``, are refused by name.

What is not sealed, and why: ``trial.log`` (the trial's own output, read by no verdict: its last line is
copied into the row's notes when the trial wrote no status) and ``launcher.json`` (the process id and
command a ``--resume`` uses to find a leftover trial; read by no report).

Example::

    seal_values(Path("results/quick/trials/001-r1-batch_size-1"))
    # {"spec_sha256": "9f…", "manifest_sha256": "…", "status_sha256": "…", "predictions_sha256": "…",
    #  "batches_sha256": "…"}
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

#: raw.csv column → the trial file whose sha256 it holds.
SEALED_FILES: dict[str, str] = {
    "spec_sha256": "spec.json",
    "manifest_sha256": "manifest.json",
    "status_sha256": "status.json",
    "predictions_sha256": "predictions.jsonl",
    "batches_sha256": "batches.jsonl",
}
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str | None:
    """The sha256 of a regular file's bytes (hex); None when absent. A link, directory or device in its place is
    not a file the trial wrote: it hashes to a marker that no row holds, so the check names it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return "not-a-regular-file"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def seal_values(trial_dir: Path) -> dict[str, str | None]:
    """The seal cells of one ended trial: column → sha256, None where the trial wrote no such file."""
    return {column: file_sha256(trial_dir / name) for column, name in SEALED_FILES.items()}


def seal_reasons(values: dict[str, str | None]) -> dict[str, str]:
    """Why a seal cell is empty: the trial wrote no such file."""
    return {column: f"the trial wrote no {SEALED_FILES[column]}" for column, value in values.items() if value is None}


def seal_findings(trial_dir: Path, recorded: dict[str, str]) -> list[tuple[str, str]]:
    """(file name, what differs) for each sealed file that is not the one its row recorded."""
    found = []
    for column, name in SEALED_FILES.items():
        actual = file_sha256(trial_dir / name)
        said = recorded.get(column, "")
        if actual == (said or None):
            continue
        if actual is None:
            found.append((name, f"missing; raw.csv column {column} sealed it as {said[:16]}…"))
        elif not said:
            found.append((name, f"present, but raw.csv column {column} says the trial wrote none"))
        elif actual == "not-a-regular-file":
            found.append((name, "not a regular file (a link, directory or device is in its place)"))
        else:
            found.append((name, f"changed after the trial: it hashes to {actual[:16]}…, raw.csv column {column} "
                                f"sealed {said[:16]}…"))
    return found
