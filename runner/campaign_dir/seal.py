"""The trial files a verdict, a summary or a decision reads, sealed in the trial's chained raw row.

When a trial ends, the host hashes each file of :data:`SEALED_FILES` in its directory, and each output file of
the study's task (``predictions.jsonl`` for classification; see :mod:`protocol.tasks`; a server study's serving
files too: :func:`sealed_outputs`), and writes the sha256s
into the trial's row of ``raw.csv``: one column per fixed file (an empty cell, with its reason, when the trial
wrote no such file), and ``outputs_sha256`` for the task's outputs, ``name=sha256`` for each file written,
joined by ``;`` (empty when the trial wrote none). The row is chained (:mod:`runner.campaign_dir.raw_table`),
so the hashes cannot be changed without breaking the chain, and every reading command compares each file
with its row before reading it (:class:`~runner.campaign_dir.checks.CampaignChecks`): three predicted labels
changed in one ``predictions.jsonl``, or 300,000 s added to a set-up time in one ``status.json``, are refused
by name.

What is not sealed, and why: a serving trial's ``mlperf_log_accuracy.json`` (empty: the run is in performance
mode) and ``mlperf_log_trace.json`` (LoadGen's own per-sample times, read by no report: ``queries.jsonl``, sealed,
holds the harness's); ``trial.log`` (the trial's own output, read by no verdict: its last line is
copied into the row's notes when the trial wrote no status) and ``launcher.json`` (what the launcher recorded:
a container's id and a Slurm trial's jobs, which ``--resume`` uses to stop a leftover trial, a process's id
and command; read by no report).

Example::

    seal_values(Path("results/quick/trials/001-r1-batch_size-1"), ("predictions.jsonl",))
    # {"spec_sha256": "9f…", "manifest_sha256": "…", "status_sha256": "…",
    #  "outputs_sha256": "predictions.jsonl=…", "batches_sha256": "…"}
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: raw.csv column → the fixed trial file whose sha256 it holds.
SEALED_FILES: dict[str, str] = {
    "spec_sha256": "spec.json",
    "manifest_sha256": "manifest.json",
    "status_sha256": "status.json",
    "batches_sha256": "batches.jsonl",
}
#: The column holding the task's output files, ``name=sha256;…``.
OUTPUTS_COLUMN = "outputs_sha256"
SEAL_COLUMNS = (*SEALED_FILES, OUTPUTS_COLUMN)
_CHUNK = 1 << 20
_NOT_A_FILE = "not-a-regular-file"


def file_sha256(path: Path) -> str | None:
    """The sha256 of a regular file's bytes (hex); None when absent. A link, directory or device in its place is
    not a file the trial wrote: it hashes to a marker that no row holds, so the check names it."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return _NOT_A_FILE
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def outputs_cell(trial_dir: Path, output_files: Sequence[str]) -> str | None:
    """``name=sha256;…`` of the task's output files the trial wrote (None: it wrote none)."""
    present = [(name, file_sha256(trial_dir / name)) for name in output_files]
    parts = [f"{name}={sha}" for name, sha in present if sha is not None]
    return ";".join(parts) or None


def parse_outputs_cell(cell: str) -> dict[str, str]:
    """The file → sha256 map of an ``outputs_sha256`` cell (a part that is not ``name=sha256`` reads as "")."""
    found: dict[str, str] = {}
    for part in filter(None, cell.split(";")):
        name, _, sha = part.partition("=")
        found[name] = sha
    return found


def sealed_outputs(study: Any) -> tuple[str, ...]:
    """The files of ``outputs_sha256`` for a study: its task's outputs, and a server study's serving files
    (:data:`protocol.study.traffic.SERVING_FILES`: the answers, the per-query times, LoadGen's summary and detail)."""
    from protocol.study.traffic import SERVING_FILES
    from protocol.tasks import study_task

    return study_task(study).output_files + (SERVING_FILES if getattr(study, "traffic", None) is not None else ())


def seal_values(trial_dir: Path, output_files: Sequence[str]) -> dict[str, str | None]:
    """The seal cells of one ended trial: column → sha256, None where the trial wrote no such file."""
    values: dict[str, str | None] = {column: file_sha256(trial_dir / name) for column, name in SEALED_FILES.items()}
    values[OUTPUTS_COLUMN] = outputs_cell(trial_dir, output_files)
    return values


def seal_reasons(values: Mapping[str, str | None], output_files: Sequence[str]) -> dict[str, str]:
    """Why a seal cell is empty: the trial wrote no such file."""
    reasons = {column: f"the trial wrote no {SEALED_FILES[column]}" for column in SEALED_FILES
               if values.get(column) is None}
    if values.get(OUTPUTS_COLUMN) is None:
        reasons[OUTPUTS_COLUMN] = f"the trial wrote none of its outputs ({', '.join(output_files)})"
    return reasons


def seal_findings(trial_dir: Path, recorded: Mapping[str, str],
                  output_files: Sequence[str] | None) -> list[tuple[str, str]]:
    """(file name, what differs) for each sealed file that is not the one its row recorded. ``output_files``: the
    task's output files (None when the study cannot be read: the files the row names are checked)."""
    found = []
    expected = {SEALED_FILES[column]: (column, recorded.get(column, "")) for column in SEALED_FILES}
    named = parse_outputs_cell(recorded.get(OUTPUTS_COLUMN, ""))
    for name in sorted({*named, *(output_files or ())}, key=lambda n: (n not in (output_files or ()), n)):
        expected[name] = (OUTPUTS_COLUMN, named.get(name, ""))
    for name, (column, said) in expected.items():
        actual = file_sha256(trial_dir / name) if "/" not in name and name not in ("", ".", "..") else _NOT_A_FILE
        message = _difference(actual, said, column)
        if message:
            found.append((name, message))
    return found


def _difference(actual: str | None, said: str, column: str) -> str:
    if actual == (said or None):
        return ""
    if actual is None:
        return f"missing; raw.csv column {column} sealed it as {said[:16]}…"
    if not said:
        return f"present, but raw.csv column {column} says the trial wrote none"
    if actual == _NOT_A_FILE:
        return "not a regular file (a link, directory or device is in its place)"
    return f"changed after the trial: it hashes to {actual[:16]}…, raw.csv column {column} sealed {said[:16]}…"
