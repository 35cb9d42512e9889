"""What a projection and the energy figures read from each trial directory beyond raw.csv.

A trial's ``batches.jsonl`` (one :class:`protocol.costing.batch_fit.Batch` per
line), the set-up phases and energy counters of its ``status.json``, gathered
as a :class:`TrialRecord`; and :func:`energy_figures`, joules per input and per
validated corpus over the accepted passes (shown beside the cost, never in it).

Example: ``trial_record(trial_dir, status).setup_s`` is imports + load + warm-up from status.json.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.costing.batch_fit import Batch
from protocol.errors import UserError
from protocol.io.jsonio import loads_unique
from protocol.records.codec import to_dict
from protocol.records.domains import COUNT, SECONDS
from protocol.records.stages import TrialStatus

BATCHES_FILE = "batches.jsonl"
_SETUP_PHASES = ("imports_s", "load_s", "warmup_s")


def read_batches(path: Path) -> tuple[Batch, ...]:
    """Read a trial's ``batches.jsonl``; a malformed line is an error naming the file and line.

    Example: a line ``{"index": 0, "n_inputs": 2, "n_tokens": 10, "inputs_by_bucket": {"short": 2},
    "tokens_by_bucket": {"short": 10}, "batch_s": 0.5, "device_s": null}`` gives one :class:`Batch`.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no per-batch record", str(path),
                        "The trial predates batches.jsonl: rerun the campaign to project a job.") from None
    batches = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = loads_unique(line)  # a key named twice is refused, never the last value silently
            batch = Batch(
                index=_int(data["index"]),
                n_inputs=_int(data["n_inputs"]),
                n_tokens=_int(data["n_tokens"]),
                inputs_by_bucket={str(k): _int(v) for k, v in dict(data["inputs_by_bucket"]).items()},
                tokens_by_bucket={str(k): _int(v) for k, v in dict(data["tokens_by_bucket"]).items()},
                batch_s=_seconds(data["batch_s"]),
                device_s=None if data.get("device_s") is None else _seconds(data["device_s"]),
                generated_tokens=None if data.get("generated_tokens") is None else _int(data["generated_tokens"]),
            )
        except (KeyError, TypeError, ValueError, RecursionError) as exc:  # DuplicateKeyError is a ValueError
            raise UserError(f"malformed per-batch record ({type(exc).__name__}: {exc})", where,
                            "Restore batches.jsonl from the results bundle.") from None
        batches.append(batch)
    return tuple(batches)


def setup_seconds(status: dict[str, Any]) -> float | None:
    """Imports + load + warm-up from a trial's status.json ``phases`` (``None`` if one is missing).

    Example: ``setup_seconds({"phases": {"imports_s": 2.0, "load_s": 1.0, "warmup_s": 0.5}}) == 3.5``.
    """
    phases = status.get("phases")
    if not isinstance(phases, dict):
        return None
    values = [phases.get(name) for name in _SETUP_PHASES]
    if any(not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v) or v < 0 for v in values):
        return None
    return float(sum(values))  # type: ignore[arg-type]


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or COUNT.problem(value):
        raise ValueError(f"expected a whole number {COUNT.words()}, got {value!r}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or SECONDS.problem(value):
        raise ValueError(f"expected seconds {SECONDS.words()}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class TrialRecord:
    """Per-trial files beyond raw.csv: the per-batch record, set-up phases, energy counters.

    ``batches`` is ``None`` with ``batches_reason`` when the trial wrote no ``batches.jsonl``.
    """

    batches: tuple[Batch, ...] | None
    batches_reason: str = ""
    setup_s: float | None = None
    gpu_energy_j: float | None = None
    cpu_energy_j: float | None = None
    gpu_energy_reason: str = "status.json records no gpu_energy_j"
    cpu_energy_reason: str = "status.json records no cpu_energy_j"


def energy_fields(status: dict[str, Any]) -> dict[str, Any]:
    """The energy counters of a trial's status.json, each ``None`` with its reason when not a count of joules.

    Example: ``energy_fields({"gpu_energy_j": None, "gpu_energy_reason": "CPU trial"})["gpu_energy_reason"]``
    is ``"CPU trial"``.
    """
    energy: dict[str, Any] = {}
    for kind in ("gpu", "cpu"):
        value = status.get(f"{kind}_energy_j")
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        energy[f"{kind}_energy_j"] = float(value) if ok and value is not None else None
        reason = str(status.get(f"{kind}_energy_reason") or "")
        if not ok:
            reason = reason or (f"status.json records no {kind}_energy_j" if value is None
                                else f"status.json {kind}_energy_j is not a count of joules: {value!r}")
        energy[f"{kind}_energy_reason"] = "" if ok else reason
    return energy


def trial_record(trial_dir: Path, status: TrialStatus | None) -> TrialRecord:
    """Read one trial's ``batches.jsonl``; the set-up and energy fields of its status (None: it wrote none)."""
    path = trial_dir / BATCHES_FILE
    batches: tuple[Batch, ...] | None = read_batches(path) if path.exists() else None
    fields = to_dict(status) if status is not None else {}
    return TrialRecord(
        batches=batches,
        batches_reason="" if batches is not None else f"no {BATCHES_FILE} in {trial_dir} (the trial predates it)",
        setup_s=setup_seconds(fields),
        **energy_fields(fields),
    )


def energy_figures(records: Sequence[TrialRecord], corpus_inputs: int, corpus_inputs_job: int | None) -> \
        dict[str, Any]:
    """Joules per input and per validated corpus, GPU and CPU apart; empty with the reason when unread.

    The median over the accepted passes' counters, divided by the corpus's inputs; per validated corpus
    of the job when one is declared (``corpus_inputs_job`` inputs, linear), else of the measured corpus.
    Never money: shown beside the cost, never in it.

    Example: passes of 100 J and 120 J over 10 inputs: ``gpu_j_per_input == 11.0``.
    """
    size = corpus_inputs_job if corpus_inputs_job is not None else corpus_inputs
    figures: dict[str, Any] = {"per_corpus_inputs": size}
    for kind in ("gpu", "cpu"):
        values = [getattr(r, f"{kind}_energy_j") for r in records]
        known = [v for v in values if v is not None]
        if known and len(known) == len(values) and corpus_inputs > 0:
            per_input = statistics.median(known) / corpus_inputs
            figures[f"{kind}_j_per_input"] = per_input
            figures[f"{kind}_j_per_validated_corpus"] = per_input * size
            figures[f"{kind}_reason"] = ""
        else:
            reasons = sorted({getattr(r, f"{kind}_energy_reason") for r in records} - {""})
            figures[f"{kind}_j_per_input"] = None
            figures[f"{kind}_j_per_validated_corpus"] = None
            figures[f"{kind}_reason"] = "; ".join(reasons) or "no accepted pass"
    return figures


