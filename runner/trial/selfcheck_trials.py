"""The trial checks of ``isocost selfcheck``: real trials of the model, through the trial's own code.

Each trial is a :class:`runner.trial.run.Trial` run by :func:`runner.trial.run.execute`, the function
``python -m runner.trial`` runs, in this process (one import of torch for all of them), writing the
files a campaign's trial writes under ``OUT/trials/<name>/``. The warm-up check records the padded
shape of every forward (a thin wrapper around the model) and compares the pass's with the shapes the
host predicts (``protocol.study.shapes``); the numerics check compares fp16 and bf16 predictions with fp32
by id (``protocol.tasks.classification.compare_predictions``); the compile check counts recompilations inside
the pass. The OOM trial is written here and run by the host in a fresh process
(``runner.selfcheck.host``), as a campaign runs it.

Example::

    ctx.workload = prepare_workload(ctx.out, None, None, 24, "random")
    check_warmup(ctx).verdict   # 'PASS'
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.records.codec import to_dict, write_record
from protocol.records.manifest import Manifest, read_manifest
from protocol.records.selfcheck import MIN_PRECISION_AGREEMENT, OOM_BATCH_SIZE, Check, failed, passed, skipped
from protocol.records.stages import TrialSpec, TrialStatus, Variant, WarmupRule, read_status
from protocol.study.shapes import pass_shapes, warmup_shapes
from protocol.tasks.classification import compare_predictions
from protocol.tasks.classification.predictions import parse_predictions
from runner.trial.run import Trial, execute
from runner.trial.selfcheck_device import Context


class _ShapeRecorder:
    """Stands in for the model: notes each forward's padded (rows, length) under the trial's phase."""

    def __init__(self, model: Any, trial: ShapeTrial) -> None:
        self._model = model
        self._trial = trial

    def __call__(self, **batch: Any) -> Any:
        self._trial.shapes[self._trial.phase].append(tuple(int(n) for n in batch["input_ids"].shape))
        return self._model(**batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class ShapeTrial(Trial):
    """A trial that records the shape of every forward: warm-up, attention probe, measured pass."""

    def __init__(self, spec: TrialSpec, out_dir: Path) -> None:
        super().__init__(spec, out_dir)
        self.phase = "warmup"
        self.shapes: dict[str, list[tuple[int, ...]]] = {"warmup": [], "probe": [], "pass": []}

    def load_model(self, engine: Any) -> Any:
        loaded = super().load_model(engine)
        if not self.variant.compile:
            loaded.model = _ShapeRecorder(loaded.model, self)  # type: ignore[attr-defined]  # a Classifier's module
        return loaded

    def probe_attention(self, model: Any) -> None:
        self.phase = "probe"
        super().probe_attention(model)
        self.phase = "pass"


@dataclass
class TrialRun:
    """One finished in-process trial: its exit status and the files it wrote."""

    name: str
    directory: Path
    code: int
    status: TrialStatus | None  # None: the trial wrote no status.json
    manifest: Manifest | None  # None: the trial wrote none
    shapes: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)

    @property
    def problem(self) -> str:
        if self.code == 0 and self.status is not None and self.status.status == "ok":
            return ""
        if self.status is None:
            return f"trial {self.name} wrote no status.json (exit {self.code})"
        return f"trial {self.name} ended {self.status.status} (exit {self.code}): {self.status.error}"


def base_variant(ctx: Context, **fields: Any) -> Variant:
    """The demo study's base variant on this device (fp32, sdpa, longest padding, deterministic)."""
    threads = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    variant = Variant(variant_id="selfcheck", stack=ctx.device, device="cuda" if ctx.gpu else "cpu",
                      precision="fp32", quantization="none", compile=False, attention="sdpa",
                      batch_size=32 if ctx.gpu else 8, padding="longest", max_length=256, length_grouping="none",
                      resume="none", threads=threads, seed=0, deterministic=True)
    return dataclasses.replace(variant, **fields)


def trial_spec(ctx: Context, name: str, **fields: Any) -> TrialSpec:
    """A trial spec over the workload, with the warm-up shapes the host would compute."""
    workload = ctx.workload
    variant = base_variant(ctx, variant_id=name, **fields)
    shapes = warmup_shapes(list(workload.token_counts), variant.batch_size, variant.padding, variant.max_length,
                           variant.length_grouping)
    return TrialSpec(trial_id=name, campaign_id="selfcheck", study_sha256="", variant=variant, repetition=1,
                     order_index=1, attempt=1, corpus_path=str(workload.corpus_path),
                     corpus_fingerprint=workload.corpus_fingerprint, model_path=str(workload.model_dir),
                     model_fingerprint=workload.model_fingerprint, warmup=WarmupRule("tuning", 8, 1, "warmup"),
                     warmup_texts=workload.warmup_texts, launcher="in-process (isocost selfcheck)",
                     warmup_shapes=shapes)


def run_trial(ctx: Context, spec: TrialSpec) -> TrialRun:
    """Run one trial in this process through ``execute``; determinism is reset afterwards for the next check."""
    directory = ctx.out / "trials" / spec.trial_id
    directory.mkdir(parents=True, exist_ok=True)
    write_record(directory / "spec.json", spec)
    trial = ShapeTrial(spec, directory)
    try:
        code = execute(trial)
    finally:
        ctx.torch.set_deterministic_debug_mode("default")
    status = read_status(directory)
    manifest = read_manifest(directory)
    return TrialRun(spec.trial_id, directory, code, status, manifest, trial.shapes)


def _status(run: TrialRun) -> TrialStatus:
    """The status of a run whose ``problem`` is empty (it ended ok, so it wrote one)."""
    if run.status is None:
        raise RuntimeError(f"trial {run.name} has no status.json: check run.problem first")
    return run.status


def _phases(run: TrialRun) -> dict[str, Any]:
    return to_dict(_status(run).phases)


def _extremes(shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The measured pass's longest, shortest and last batch shapes (as ``protocol.study.shapes.warmup_shapes``
    picks)."""
    if not shapes:
        return []
    picked = [max(shapes, key=lambda s: (s[1], s[0])), min(shapes, key=lambda s: (s[1], -s[0])), shapes[-1]]
    return list(dict.fromkeys(picked))


def check_warmup(ctx: Context) -> Check:
    """A real fp32 trial: the pass's shapes are the host's prediction, and the warm-up ran the pass's
    longest, shortest and last; on a GPU the device time of its forwards sits inside the pass."""
    spec = trial_spec(ctx, "fp32")
    run = run_trial(ctx, spec)
    if run.problem:
        return failed("warmup", "", run.problem)
    ctx.reference = run.directory / "predictions.jsonl"
    ctx.reference_numerics = (run.manifest.numerics if run.manifest else None) or {}
    variant = spec.variant
    predicted = pass_shapes(list(ctx.workload.token_counts), variant.batch_size, variant.padding, variant.max_length,
                            variant.length_grouping)
    measured = [tuple(s) for s in run.shapes["pass"]]
    warmed = set(run.shapes["warmup"])
    needed = _extremes(measured)
    missing = [s for s in needed if s not in warmed]
    covered = sum(1 for s in set(measured) if s in warmed)
    phases = _phases(run)
    figure = (f"{len(measured)} pass batches, {len(set(measured))} shapes ({covered} of them run in the warm-up, "
              f"among them the longest, shortest and last: {', '.join(f'{r}x{n}' for r, n in needed)}); "
              f"pass {phases['pass_s']:.3f} s")
    problems = []
    if measured != [tuple(s) for s in predicted]:
        problems.append(f"the pass ran shapes {measured[:6]}… but the host predicts {predicted[:6]}…")
    if missing:
        problems.append(f"the warm-up did not run the pass's shapes {missing}")
    if ctx.gpu:
        gpu_s = phases.get("gpu_pass_s")
        figure += f", device {gpu_s:.3f} s ({gpu_s / phases['pass_s']:.0%} busy)" if gpu_s is not None else ""
        if gpu_s is None or not 0 < gpu_s <= phases["pass_s"]:
            problems.append(f"device time {gpu_s} is not inside the pass ({phases['pass_s']} s)")
    details = {"pass_shapes": measured, "warmup_shapes": sorted(warmed), "phases": phases,
               "memory": to_dict(_status(run).memory)}
    if problems:
        return failed("warmup", figure, "; ".join(problems), **details)
    return passed("warmup", figure, **details)


def _precisions(ctx: Context) -> tuple[list[str], list[str]]:
    """The half precisions to compare with fp32 here, and why the others are not."""
    runs, notes = [], []
    if ctx.gpu:
        runs.append("fp16")
    else:
        notes.append("fp16 not run: GPU-only (refused on a CPU)")
    if ctx.gpu and not ctx.torch.cuda.is_bf16_supported():
        notes.append("bf16 not run: this GPU has no bf16 support")
    else:
        runs.append("bf16")
    return runs, notes


def _matmul_setting(numerics: dict[str, Any]) -> str:
    return (f"float32_matmul_precision {numerics.get('float32_matmul_precision')}, TF32 matmul "
            f"{'on' if numerics.get('cuda_matmul_allow_tf32') else 'off'}, cuDNN TF32 "
            f"{'on' if numerics.get('cudnn_allow_tf32') else 'off'}")


def check_numerics(ctx: Context) -> Check:
    """fp16 and bf16 trials against the fp32 trial, label by id (at least MIN_PRECISION_AGREEMENT with a real
    model; with the random encoder the trials must complete, every id compared); the TF32 settings."""
    if ctx.reference is None:
        return skipped("numerics", "no fp32 reference: the warm-up check did not complete")
    reference = parse_predictions(ctx.reference)
    runs, notes = _precisions(ctx)
    judged = ctx.workload.source != "random"  # a random encoder's labels mean nothing: only completeness counts
    parts, problems, details = [], [], {"numerics": ctx.reference_numerics}
    for precision in runs:
        run = run_trial(ctx, trial_spec(ctx, precision, precision=precision))
        if run.problem:
            problems.append(run.problem)
            continue
        agreement = compare_predictions(parse_predictions(run.directory / "predictions.jsonl"), reference)
        details[precision] = dataclasses.asdict(agreement)
        if agreement.agreement is None:
            problems.append(f"{precision}: predictions not comparable with fp32's (ids differ)")
            continue
        same = round(agreement.agreement * len(reference.ids))
        parts.append(f"{precision} agrees with fp32 on {same}/{len(reference.ids)} ids "
                     f"(max score delta {agreement.max_score_delta:.1e})")
        if judged and agreement.agreement < MIN_PRECISION_AGREEMENT:
            problems.append(f"{precision} agrees on {agreement.agreement:.4f} < {MIN_PRECISION_AGREEMENT}")
    if not judged:
        notes.append(f"random weights: agreement reported, not judged (near-ties are the rule; pass --model to "
                     f"judge it against {MIN_PRECISION_AGREEMENT})")
    details["agreement_judged"] = judged
    figure = "; ".join(parts + notes + [_matmul_setting(ctx.reference_numerics)])
    if problems:
        return failed("numerics", figure, "; ".join(problems), **details)
    if not parts:
        return skipped("numerics", "; ".join(notes), figure, **details)
    return passed("numerics", figure, **details)


def check_compile(ctx: Context) -> Check:
    """With torch.compile, the warm-up absorbs every (re)compilation: none inside the measured pass."""
    if not ctx.gpu:
        return skipped("compile", "CPU: torch.compile is checked on GPUs only (on a CPU it needs a C++ "
                                  "toolchain and minutes of compilation)")
    run = run_trial(ctx, trial_spec(ctx, "compile", compile=True))
    if run.problem:
        return failed("compile", "", run.problem)
    compiled = _status(run).pass_compilations
    phases = _phases(run)
    figure = (f"{compiled} compilations inside the pass; warm-up {phases['warmup_s']:.1f} s, pass "
              f"{phases['pass_s']:.3f} s")
    if compiled != 0:
        return failed("compile", figure, "the warm-up did not cover the pass's shapes: recompilation was timed")
    return passed("compile", figure, phases=phases)


def write_oom_trial(ctx: Context) -> Path:
    """The OOM trial's spec (``OUT/trials/oom/spec.json``), for the host to run in a fresh process."""
    spec = dataclasses.replace(trial_spec(ctx, "oom", batch_size=OOM_BATCH_SIZE), launcher="process")
    directory = ctx.out / "trials" / "oom"
    directory.mkdir(parents=True, exist_ok=True)
    write_record(directory / "spec.json", spec)
    return directory
