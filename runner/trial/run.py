"""One trial: verify inputs, load, warm up, run the measured pass, write the outputs.

``main`` is ``python -m runner.trial SPEC.json OUT_DIR``; :class:`Trial` holds what the trial
has measured so far, so that every ending (ok, refused, oom, error, interrupted) writes a complete
``status.json``. The phases, in order: ``verify_s`` (fingerprints), ``imports_s`` (torch and
transformers, and the settings of ``runner.trial.torch_settings``), ``load_s``, ``warmup_s``,
``pass_s`` (``runner.trial.measured_pass``, which documents the measured boundary; for a server study
``runner.trial.serving.trial_pass``: MLPerf LoadGen's Server scenario instead), ``write_s``
(the pass's writes plus the after-pass work: the task's own, such as embedding the queries, the
truncation count, which tokenizes the corpus again without truncation, and the final manifest).

Bucket assignment: the host copies each input's ``length_bucket`` from the campaign's
``corpus_index.csv`` into the spec (``input_buckets``), so a batch's buckets are exactly the
quality subgroups (bucketed by the untruncated token count, upper bounds inclusive). A study
without ``[[length_buckets]]`` puts every input in bucket ``"all"``.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.io.fingerprint import fingerprint_path
from protocol.records.codec import from_dict, read_record, to_dict, write_record
from protocol.records.manifest import MANIFEST_FILE, MANIFEST_SCHEMA_VERSION, Manifest
from protocol.records.stages import MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus
from runner.trial.batches import shaped_batches
from runner.trial.faults import FAULT_ENV, FaultInjector, is_oom
from runner.trial.measure import PhaseTimer, clock, descendants_peak_rss, peak_rss_bytes
from runner.trial.state import PassContext, TrialState
from runner.trial.torch_settings import (
    Refusal,
    apply_cudnn,
    apply_determinism,
    check_backend,
    determinism_record,
    numerics_settings,
)

if TYPE_CHECKING:
    from runner.trial.engines.base import TrialEngine
    from runner.trial.tasks.base import TaskModel

PROCESS_START_S = clock()

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 3

DEVICE_MEMORY_FIELDS = ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes", "device_used_max_bytes",
                        "device_total_bytes")


class Interrupted(Exception):
    """SIGTERM/SIGINT arrived during the trial."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _on_signal(signum: int, frame: Any) -> None:
    # Once: a second TERM (a scheduler signals every process of a job, then signals again before its KILL)
    # must not interrupt the status the first one makes the trial write.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(f"received signal {signal.Signals(signum).name}")


class Trial:
    """One trial's state: what it has measured so far, so that every ending writes a complete status."""

    def __init__(self, spec: TrialSpec, out_dir: Path) -> None:
        self.spec = spec
        self.out = out_dir
        self.variant = spec.variant
        #: What the trial has measured so far: status.json's figures (its pass fills them too).
        self.state = TrialState()
        self.started_at = _now()
        self.manifest: dict[str, Any] = {}
        self.fault = FaultInjector()
        self.torch: Any = None
        #: The variant's engine and the model it loaded (closed by close_engine, after the status is written).
        self.engine: TrialEngine | None = None
        self.model: TaskModel | None = None

    # -- outputs ---------------------------------------------------------------------------

    def write_status(self, status: str, error: str = "") -> None:
        state = self.state
        state.phases["trial_s"] = clock() - PROCESS_START_S
        record = TrialStatus(
            trial_id=self.spec.trial_id,
            status=status,
            completed=state.completed,
            expected=state.expected,
            phases=PhaseTimes(**{k: state.phases.get(k) for k in PhaseTimes.__dataclass_fields__}),
            memory=MemoryPeaks(**{k: state.memory.get(k) for k in MemoryPeaks.__dataclass_fields__}),
            truncated_count=state.truncated,
            oom_events=state.oom_events,
            error=error,
            empty_reasons=self._empty_reasons(status),
            started_at=self.started_at,
            ended_at=_now(),
            gpu_energy_j=state.gpu_energy_j,
            cpu_energy_j=state.cpu_energy_j,
            gpu_energy_reason=self._energy_reason(state.gpu_energy_j, state.gpu_energy_reason, status),
            cpu_energy_reason=self._energy_reason(state.cpu_energy_j, state.cpu_energy_reason, status),
            pass_compilations=state.pass_compilations,
        )
        write_record(self.out / "status.json", record)

    def _empty_reasons(self, status: str) -> dict[str, str]:
        """Why each empty status field is empty: the reasons recorded so far, else where the trial ended."""
        state = self.state
        reasons = dict(state.reasons)
        for name in PhaseTimes.__dataclass_fields__:
            if state.phases.get(name) is None and name not in reasons:
                reasons[name] = f"not reached: trial ended with status {status}"
        for name in MemoryPeaks.__dataclass_fields__:
            if state.memory.get(name) is None and name not in reasons:
                reasons[name] = f"not measured: trial ended with status {status}"
        if state.pass_compilations is None and "pass_compilations" not in reasons:
            reasons["pass_compilations"] = ("not counted: the variant does not use torch.compile" if
                                            not self.variant.compile else
                                            f"not counted: trial ended with status {status}")
        if state.truncated is None and "truncated_count" not in reasons:
            reasons["truncated_count"] = f"not counted: trial ended with status {status}"
        return reasons

    @staticmethod
    def _energy_reason(joules: float | None, reason: str, status: str) -> str:
        if joules is not None:
            return ""
        return reason or f"not measured: the measured pass did not complete (status {status})"

    def write_manifest(self) -> None:
        """manifest.json as far as the trial got, through its record (:class:`protocol.records.manifest.Manifest`)."""
        write_record(self.out / MANIFEST_FILE, from_dict(Manifest, self.manifest))

    # -- stages ----------------------------------------------------------------------------
    def verify(self) -> str:
        """Check the corpus and model fingerprints before anything else. Returns '' or why not."""
        with PhaseTimer() as timer:
            problems = []
            for kind, path, expected in (
                ("corpus", self.spec.corpus_path, self.spec.corpus_fingerprint),
                ("model", self.spec.model_path, self.spec.model_fingerprint),
            ):
                try:
                    actual = fingerprint_path(Path(path))
                except OSError as exc:
                    problems.append(f"{kind} not readable at {path}: {exc}")
                    continue
                if actual != expected:
                    problems.append(f"{kind} fingerprint {actual} differs from the study's {expected}")
        self.state.phases["verify_s"] = timer.elapsed_s
        return "; ".join(problems)

    def base_manifest(self) -> None:
        spec = self.spec
        image_reason = "" if spec.image_id else f"launcher {spec.launcher!r} runs no container image"
        self.manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "trial_id": spec.trial_id,
            "campaign_id": spec.campaign_id,
            "study_sha256": spec.study_sha256,
            "variant": to_dict(spec.variant),
            "repetition": spec.repetition,
            "order_index": spec.order_index,
            "attempt": spec.attempt,
            "corpus_fingerprint": spec.corpus_fingerprint,
            "model_fingerprint": spec.model_fingerprint,
            "launcher": spec.launcher,
            "image_ref": spec.image_ref or None,
            "image_id": spec.image_id or None,
            "image_digest": spec.image_digest or None,
            "warmup": to_dict(spec.warmup),
            "fault_injection": os.environ.get(FAULT_ENV) or None,
            "started_at": self.started_at,
            "empty_reasons": {},
        }
        if image_reason:
            for key in ("image_ref", "image_id", "image_digest"):
                self.manifest["empty_reasons"][key] = image_reason
        elif not spec.image_digest:
            self.manifest["empty_reasons"]["image_digest"] = (
                "image has no repo digest yet (built locally, never pushed or pulled)"
            )
        from runner.trial.env import cpu_facts

        self.manifest["host"] = cpu_facts()

    def setup_torch(self) -> None:
        variant = self.variant
        if variant.device == "cuda" and variant.deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        # imports_s: importing the framework AND applying the determinism settings (see
        # runner.trial.torch_settings: Inductor's deterministic mode only for a variant that compiles).
        with PhaseTimer() as timer:
            import torch
            import transformers  # noqa: F401

            torch.set_num_threads(variant.threads)
            torch.manual_seed(variant.seed)
            deterministic_api = apply_determinism(torch, variant)
        self.state.phases["imports_s"] = timer.elapsed_s
        self.torch = torch
        check_backend(torch, variant.stack, variant.device)
        apply_cudnn(torch, variant)
        from runner.trial.env import device_facts, software_facts

        facts, reasons = device_facts(torch, variant.device)
        self.manifest["software"] = software_facts(torch)
        self.manifest["device"] = facts
        self.manifest["empty_reasons"].update(reasons)
        self.manifest["determinism"], reasons = determinism_record(torch, variant, deterministic_api)
        self.manifest["empty_reasons"].update(reasons)
        self.manifest["numerics"] = numerics_settings(torch, variant.device)
        self.write_manifest()

    def sync(self) -> None:
        if self.variant.device == "cuda":
            self.torch.cuda.synchronize()

    def run(self) -> int:
        """Load, warm up, probe the attention kernels, run the measured pass, count truncations. The engine is
        closed by :meth:`close_engine` after the status is written (``execute``), whatever happened."""
        from runner.trial.engines import trial_engine

        try:
            self.engine = trial_engine(self.variant.engine)
        except ModuleNotFoundError as exc:
            raise Refusal(_missing_module(self.variant.engine, exc)) from None
        self.engine.log_dir = self.out
        if self.spec.traffic is not None and (missing := missing_loadgen()):
            raise Refusal(missing)  # before the load: an image without LoadGen costs no model load
        self.model = model = self.load_model(self.engine)
        self.warm_up(model)
        self.probe_attention(model)
        compiled_before = self._compilations()
        records = self._pass(model)
        if compiled_before is not None:
            self.state.pass_compilations = (self._compilations() or 0) - compiled_before
        self.after_pass(model, [r.text for r in records])
        return EXIT_OK

    def close_engine(self) -> None:
        """Stop what the engine started (workers, servers): once, after status.json is written, so that a slow
        stop never costs the trial its status when the launcher kills it at its grace's end."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close(self.model)

    def _pass(self, model: TaskModel) -> tuple[Any, ...]:
        """The offline measured pass, or, for a server study (the spec has ``traffic``), the serving run."""
        context = PassContext(self.spec, self.out, self.torch, self.fault, self.manifest.get("device", {}), self.state)
        if self.spec.traffic is None:
            from runner.trial.measured_pass import MeasuredPass

            return MeasuredPass(context, model).run()
        from runner.trial.serving.trial_pass import ServingPass

        serving = ServingPass(context, model)
        records = serving.run()
        self.manifest["serving"] = serving.block
        self.write_manifest()
        return records

    def load_model(self, engine: TrialEngine) -> TaskModel:
        """The task's model loaded by the variant's engine (load time); what the engine really runs is read back
        into the manifest, and a setting it does not run as declared refuses the trial."""
        from runner.trial.engines.base import EngineRefused, settings_differences
        from runner.trial.tasks import trial_task

        task = trial_task(self.spec.task)
        with PhaseTimer(self.sync) as timer:
            try:
                model = engine.load(task, Path(self.spec.model_path), self.variant, self.torch,
                                    self.spec.task_options, self.spec.engine_settings)
            except EngineRefused as exc:
                raise Refusal(f"engine {engine.name}: {exc}") from None
            except ModuleNotFoundError as exc:
                raise Refusal(_missing_module(engine.name, exc)) from None
        self.state.phases["load_s"] = timer.elapsed_s
        self.manifest["model"] = model.describe()
        read_back = engine.readback(model)
        self.manifest["engine"] = read_back
        self.write_manifest()
        changed = settings_differences(self.spec.engine_settings, read_back.get("settings", {}))
        if changed:
            raise Refusal(f"engine {engine.name} does not run the study's settings: {'; '.join(changed)}")
        return model

    def warm_up(self, model: TaskModel) -> None:
        """The tuning texts at the variant's batch size, then the measured pass's own padded shapes (longest,
        shortest, last batch) built from tuning tokens, so allocator growth, lazy kernel loading and (with
        compile) every recompilation land here, not in pass_s."""
        batch_size = self.variant.batch_size
        with PhaseTimer(self.sync) as timer:
            texts = list(self.spec.warmup_texts)
            shaped = shaped_batches(model.tokenize(texts), self.spec.warmup_shapes)
            for _ in range(self.spec.warmup.runs):
                for start in range(0, len(texts), batch_size):
                    model.predict(texts[start : start + batch_size])
                for features in shaped:
                    model.predict_encoded(features)
        self.state.phases["warmup_s"] = timer.elapsed_s
        self.manifest["warmup_shapes"] = [list(shape) for shape in self.spec.warmup_shapes]

    def probe_attention(self, model: TaskModel) -> None:
        """One more forward, outside warmup_s and pass_s: tuning texts at the variant's batch size, padded like
        the pass's batches (the attention kernel can depend on whether a padding mask is present)."""
        from runner.trial.model import attention_ops

        texts = list(self.spec.warmup_texts)[: self.variant.batch_size]
        ops, why = attention_ops(model, model.tokenize(texts))
        self.manifest["attention_ops"] = ops
        if why:
            self.manifest["empty_reasons"]["attention_ops"] = why
        self.write_manifest()

    def after_pass(self, model: TaskModel, texts: list[str]) -> None:
        """Device peaks (or why none), peak RSS, then the truncation count and the final manifest (in write_s)."""
        variant = self.variant
        if variant.device == "cuda":
            self._record_device_peaks()
        else:
            self.state.reasons["gpu_pass_s"] = "CPU trial: no GPU events"
            for key in DEVICE_MEMORY_FIELDS:
                self.state.reasons[key] = "CPU trial: no GPU, so no device memory counters"
        self.state.memory["peak_rss_bytes"] = peak_rss_bytes()
        if isinstance(self.manifest.get("engine"), dict):  # the engine's own processes (vLLM's core and workers)
            self.manifest["engine"]["processes"] = descendants_peak_rss()
        with PhaseTimer() as timer:
            self.manifest.update(model.finish_pass(self.out))  # the task's after-pass work (an embedding's queries)
            lengths = model.untruncated_lengths(texts)
            self.state.truncated = sum(1 for n in lengths if n > variant.max_length)
            self.manifest["truncation"] = {
                "max_length": variant.max_length,
                "truncated_count": self.state.truncated,
                "inputs": len(texts),
            }
            self.manifest["pass_order"] = "corpus" if variant.length_grouping == "none" else "sorted-by-length"
            self.manifest["ended_at"] = _now()
            self.write_manifest()
        self.state.phases["write_s"] = self.state.pass_write_s + (timer.elapsed_s or 0.0)

    def _record_device_peaks(self) -> None:
        """Allocated and reserved peaks (this process, since the reset after the warm-up, or since the start
        when the trial ended before it), kept apart; also called for a trial that ends in an error or oom."""
        torch = self.torch
        if self.variant.device != "cuda" or torch is None or not torch.cuda.is_available():
            return
        try:
            self.state.memory["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
            self.state.memory["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
            self.state.sample_device_memory(torch, self.variant.device)
        except Exception as exc:  # the device may be in a bad state after a failure  # noqa: BLE001
            for key in DEVICE_MEMORY_FIELDS:
                if self.state.memory.get(key) is None:
                    self.state.reasons.setdefault(key, f"not readable after the failure: {type(exc).__name__}: {exc}")
        if not self.state.peaks_reset:
            for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
                self.state.reasons.setdefault(key, "peak since the trial started: it ended before the measured pass")

    def _compilations(self) -> int | None:
        """Graphs torch.compile (dynamo) has compiled so far in this process; None without compile."""
        if not self.variant.compile:
            return None
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.trial SPEC.json OUT_DIR", file=sys.stderr)
        return 2
    spec = read_record(Path(argv[0]), TrialSpec)
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    return execute(Trial(spec, out))


def missing_loadgen() -> str:
    """Why this environment cannot serve a server study (no MLPerf LoadGen), or "" when it can."""
    import importlib.util

    from protocol.study.traffic import SERVING_REQUIRES

    missing = [module for module in SERVING_REQUIRES if importlib.util.find_spec(module) is None]
    if not missing:
        return ""
    return (f"a server study needs the Python module {', '.join(missing)} (mlcommons-loadgen), which this trial's "
            "environment lacks: an image built before the CPU image gained it (rebuild: isocost images build "
            "--stack cpu), or an interpreter without the serving extra (pip install '.[serving]'); docs/serving.md")


def _missing_module(engine: str, exc: ModuleNotFoundError) -> str:
    return (f"engine {engine} needs the Python module {exc.name or exc}, which this trial's environment lacks "
            "(an image or interpreter without the engine: docs/engines.md)")


def execute(trial: Trial) -> int:
    """Every stage of one trial, and a complete ``status.json`` for every ending; returns the exit status.

    ``main`` runs it in the trial's own process; ``runner.trial.selfcheck`` runs it in-process, on the
    same code path, for the checks of ``isocost selfcheck``.
    """
    try:
        trial.base_manifest()
        trial.write_manifest()
        problem = trial.verify()
        if problem:
            trial.write_status("refused", problem)
            print(f"refused: {problem}", file=sys.stderr)
            return EXIT_REFUSED
        trial.setup_torch()
        code = trial.run()
        trial.write_status("ok")
        return code
    except Interrupted as exc:
        trial.write_status("interrupted", str(exc))
        return EXIT_FAILED
    except Refusal as exc:
        trial.write_status("refused", str(exc))
        print(f"refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except BaseException as exc:  # every failure must leave a status behind
        traceback.print_exc()
        status = "oom" if is_oom(exc) else "error"
        trial._record_device_peaks()
        trial.write_status(status, f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED
    finally:
        trial.close_engine()
