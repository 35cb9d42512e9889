"""Gather one trial: its status, its separately stored predictions, its verdict → one raw row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.records.raw_record import RawRecord
from protocol.records.stages import MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus, Variant, format_reasons
from protocol.records.stages import read_status as read_trial_status
from protocol.study.load import Study
from protocol.study.shapes import warmup_shapes
from protocol.tasks import study_task
from protocol.tasks.pass_check import PassCheck
from runner.campaign_dir.layout import read_csv_rows
from runner.campaign_dir.seal import seal_reasons, seal_values, sealed_outputs
from runner.launch.launcher import LaunchResult, placement_values


def load_reference(root: Path, study: Study) -> Any:
    """What the study's task checks each pass against, from the frozen ``corpus_index.csv``."""
    path = root / "corpus_index.csv"
    if not path.exists():
        raise UserError("corpus_index.csv missing", str(root), "Was this campaign started by `isocost run`?")
    return study_task(study).reference(read_csv_rows(path), study)


def trial_inputs(corpus_index: Path, variant: Variant) -> dict[str, Any]:
    """What a trial spec needs from ``corpus_index.csv``: each input's length bucket (empty when the
    study declares none) and the measured pass's shapes for the warm-up."""
    rows = read_csv_rows(corpus_index)
    buckets = {row["id"]: row["length_bucket"] for row in rows}
    shapes = warmup_shapes([int(row["n_tokens"]) for row in rows], variant.batch_size, variant.padding,
                           variant.max_length, variant.length_grouping)
    return {"input_buckets": buckets if any(buckets.values()) else {}, "warmup_shapes": shapes}


def read_status(trial_dir: Path) -> tuple[TrialStatus | None, str]:
    """The trial's status, or None and why: none written, or one that is not a status this isocost reads."""
    try:
        status = read_trial_status(trial_dir)
    except UserError as exc:
        return None, f"status.json unreadable: {exc}"
    return status, "" if status is not None else "the trial wrote no status.json"


def decide_status(status: TrialStatus | None, result: LaunchResult) -> str:
    """The host's final word on how the trial ended (outside evidence wins over the trial's)."""
    if result.timed_out:
        return "timeout"
    if result.oom_killed:
        return "oom"
    if status is not None:
        if status.status == "ok" and result.exit_code not in (0, None):
            return "error"
        return status.status
    if result.interrupted:
        return "interrupted"
    if result.exit_code is not None and result.exit_code < 0:
        return "interrupted"  # killed by a signal before it could write its status
    if result.exit_code in (137, 143):
        return "interrupted"
    return "error"


def gather_trial(spec: TrialSpec, trial_dir: Path, result: LaunchResult, reference: Any, study: Study) -> RawRecord:
    """The raw row of one ended trial: the host's final status, the re-derived verdict, every measure, and
    for each empty cell its reason."""
    status, status_problem = read_status(trial_dir)
    final = decide_status(status, result)
    task = study_task(study)
    check = task.check_pass(task.read_pass(trial_dir), reference, study)
    phases = status.phases if status is not None else PhaseTimes()
    memory = status.memory if status is not None else MemoryPeaks()
    values: dict[str, Any] = {
        **_outcome_values(spec, trial_dir / task.output_files[0], final, check, status),
        **_measured_values(phases, memory, status, result, final),
        **_launch_values(spec, result),
        "notes": _notes(trial_dir, result, status, status_problem, check, final, task.output_files[0]),
    }
    placement, placement_reasons = placement_values(spec.launcher, result)  # Slurm: queue_s, node, job_id…
    values.update(placement)
    sealed = sealed_outputs(study)  # the task's outputs, and a server study's serving files
    seals = seal_values(trial_dir, sealed)  # last: the files as the verdict above read them
    values.update(seals)
    reasons = {**placement_reasons, **_empty_reasons(spec, status, status_problem, phases, final, check, result)}
    reasons.update(seal_reasons(seals, sealed))
    if values["device_busy_share"] is None:
        reasons["device_busy_share"] = ("CPU trial: no device time" if spec.variant.device == "cpu" else
                                        "needs both gpu_pass_s and pass_s")
    if values["started_at"] is None:
        reasons["started_at"] = reasons["ended_at"] = "no status from the trial"
    if values["rate_qps"] is None:
        reasons["rate_qps"] = "offline study: no target rate"
    # Every empty cell carries its reason.
    for name, value in values.items():
        if value is None and name not in reasons:
            reasons[name] = f"not available (status {final})"
    values["empty_reasons"] = format_reasons({k: v for k, v in reasons.items() if values.get(k) is None})
    return RawRecord.from_values(values)


def _outcome_values(spec: TrialSpec, outputs: Path, final: str, check: PassCheck,
                    status: TrialStatus | None) -> dict[str, Any]:
    """Which pass this was and how it ended: ids, status, verdict, the variant's configuration (``outputs``: the
    task's first output file, as ``predictions_path`` names it)."""
    return {
        "trial_id": spec.trial_id,
        "variant_id": spec.variant.variant_id,
        "repetition": spec.repetition,
        "order_index": spec.order_index,
        "attempt": spec.attempt,
        "status": final,
        "expected_ids": check.expected_ids,
        "observed_ids": check.observed_ids,
        "ids_match": check.ids_match,
        "corpus_accepted": final == "ok" and check.accepted,
        "completed": status.completed if status is not None else check.observed_ids,
        "metric": check.metric,
        "metric_value": check.metric_value,
        "quality_verdict": f"rejected: status {final}" if final != "ok" else check.verdict,
        **spec.variant.config(),
        "engine": spec.variant.engine,
        "rate_qps": spec.variant.rate_qps,
        "predictions_path": str(outputs.relative_to(outputs.parents[2])),
    }


def _measured_values(phases: PhaseTimes, memory: MemoryPeaks, status: TrialStatus | None, result: LaunchResult,
                     final: str) -> dict[str, Any]:
    """What the trial measured (a pass time only for a completed pass) and the host's launch overhead."""
    overhead = None
    if result.wall_s is not None and phases.trial_s is not None:
        overhead = max(result.wall_s - phases.trial_s, 0.0)
    return {
        "pass_s": phases.pass_s if final == "ok" else None,
        "verify_s": phases.verify_s,
        "imports_s": phases.imports_s,
        "load_s": phases.load_s,
        "warmup_s": phases.warmup_s,
        "gpu_pass_s": phases.gpu_pass_s,
        "write_s": phases.write_s,
        "trial_s": phases.trial_s,
        "launch_overhead_s": overhead,
        "peak_rss_bytes": memory.peak_rss_bytes,
        "peak_allocated_bytes": memory.peak_allocated_bytes,
        "peak_reserved_bytes": memory.peak_reserved_bytes,
        "device_used_bytes": memory.device_used_bytes,
        "truncated_count": status.truncated_count if status is not None else None,
        "oom_events": status.oom_events if status is not None else None,
        "started_at": status.started_at if status is not None else None,
        "ended_at": status.ended_at if status is not None else None,
        "device_busy_share": _share(phases.gpu_pass_s, phases.pass_s),
        "pass_compilations": status.pass_compilations if status is not None else None,
        "gpu_energy_j": status.gpu_energy_j if status is not None else None,
        "cpu_energy_j": status.cpu_energy_j if status is not None else None,
        "device_used_max_bytes": memory.device_used_max_bytes,
    }


def _launch_values(spec: TrialSpec, result: LaunchResult) -> dict[str, Any]:
    return {
        "launcher": spec.launcher,
        "image_id": result.image_id or spec.image_id or None,
        "image_digest": result.image_digest or spec.image_digest or None,
        "exit_code": result.exit_code,
    }


def _notes(trial_dir: Path, result: LaunchResult, status: TrialStatus | None, status_problem: str,
           check: PassCheck, final: str, outputs: str = "predictions.jsonl") -> str:
    notes: list[str] = list(result.notes)
    if status_problem:
        notes.append(status_problem)
        last = _last_log_line(trial_dir / "trial.log")
        if last:
            notes.append(f"last log line: {last}")
    if status is not None and status.error:
        notes.append(f"trial error: {status.error}")
    if result.exit_code not in (0, None):
        notes.append(f"exit code {result.exit_code}")
    if not check.accepted and final == "ok":
        notes.append(check.verdict)
    notes.append(f"predictions: {trial_dir / outputs}")
    if status is not None and status.pass_compilations:
        notes.append(f"recompiled during the measured pass: {status.pass_compilations} torch.compile "
                     "graph(s) compiled inside pass_s (the warm-up did not cover that shape)")
    return " | ".join(notes)


def _empty_reasons(spec: TrialSpec, status: TrialStatus | None, status_problem: str, phases: PhaseTimes,
                   final: str, check: PassCheck, result: LaunchResult) -> dict[str, str]:
    """Why a cell is empty, by column (later reasons win: the most specific is set last)."""
    reasons: dict[str, str] = {}
    if status is not None:
        reasons.update(status.empty_reasons)
    else:
        for name in list(PhaseTimes.__dataclass_fields__) + list(MemoryPeaks.__dataclass_fields__):
            reasons[name] = f"no status from the trial ({status_problem})"
        reasons["truncated_count"] = reasons["pass_s"]
    if final != "ok" and phases.pass_s is None:
        reasons["pass_s"] = f"pass not completed (status {final})"
    elif final != "ok":
        reasons["pass_s"] = f"status {final}: a pass time is only reported for completed passes"
    if check.metric_value is None:
        reasons["metric_value"] = "not computed: " + "; ".join(check.reasons)
    if result.wall_s is None or phases.trial_s is None:
        reasons["launch_overhead_s"] = "needs both the host's wall time and the trial's own clock"
    if not (result.image_id or spec.image_id):
        reasons["image_id"] = f"launcher {spec.launcher!r} runs no container image"
    if not (result.image_digest or spec.image_digest):
        reasons["image_digest"] = reasons.get("image_id") or "image never pushed or pulled: no repo digest"
    if result.exit_code is None:
        reasons["exit_code"] = "exit code not observed by this host CLI"
    if status is not None:
        for kind in ("gpu", "cpu"):
            why = getattr(status, f"{kind}_energy_reason")
            if why:
                reasons[f"{kind}_energy_j"] = why
    return reasons


def _share(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


def _last_log_line(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(handle.tell() - 4096, 0))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
