"""One trial: verify inputs, load, warm up, run the measured pass, write the outputs.

Measured boundary (offline): corpus read, tokenization, host→device
transfer, inference and materialisation of predictions on the host (their JSON
lines included). The incremental writes and flushes of ``predictions.jsonl`` are
timed apart and excluded from ``pass_s``; ``write_s`` is those writes plus the
after-pass work (the truncation count, which tokenizes the corpus again without
truncation, and the final manifest). On a GPU the device is synchronised before the timer
starts and before it stops; ``gpu_pass_s`` is device time: the sum, over the pass's forwards,
of CUDA events recorded just before and after each forward (ROCm builds answer the same calls).

Per-batch record (``batches.jsonl``, one line per measured-pass batch, flushed per batch; its
writes are excluded from ``pass_s`` like the predictions'): ``index``, ``n_inputs``,
``n_tokens`` (token ids fed to the model: after truncation at ``max_length``, before padding),
``inputs_by_bucket`` and ``tokens_by_bucket`` (the same counts per length bucket), ``batch_s``
(host wall time of the batch inside the measured boundary: padding, transfer, forward, results
to the host, JSON lines built; its writes excluded) and ``device_s`` (the CUDA-event time of its
forwards; null on CPU). Bucket assignment: the host copies each input's ``length_bucket`` from the
campaign's ``corpus_index.csv`` into the spec (``input_buckets``), so a batch's buckets are exactly
the quality subgroups (bucketed by the untruncated token count, upper bounds inclusive). A study
without ``[[length_buckets]]`` puts every input in bucket ``"all"``. With ``halve-batch-on-oom`` a
batch retried in halves is still one record (the retry's time included).

Energy (status.json ``gpu_energy_j``/``cpu_energy_j``): counters read right before the pass's start
and right after its end (``runner.trial.energy``); ``None`` with a reason when not readable.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.corpus import read_corpus
from protocol.fingerprint import fingerprint_path
from protocol.jsonio import read_json, write_json_atomic
from protocol.records import NO_GPU_ERROR, WRONG_BUILD_ERROR, MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus
from runner.trial.measure import PhaseTimer, clock, peak_rss_bytes

PROCESS_START_S = clock()

#: Test hook, never set in real campaigns; recorded in the manifest when present.
FAULT_ENV = "ISOCOST_FAULT_INJECT"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 3

#: Bucket name in ``batches.jsonl`` when the study declares no ``[[length_buckets]]``.
NO_BUCKETS = "all"
#: Bucket name for an input the spec's ``input_buckets`` does not list (should not happen).
UNBUCKETED = "unbucketed"

DEVICE_MEMORY_FIELDS = ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes", "device_used_max_bytes",
                        "device_total_bytes")


class Interrupted(Exception):
    """SIGTERM/SIGINT arrived during the trial."""


class Refusal(Exception):
    """The trial will not run here (wrong torch build for the study's stack, no GPU): status ``refused``."""


class SimulatedOOM(MemoryError):
    """Raised by the fault-injection hook to exercise the OOM path."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _on_signal(signum: int, frame: Any) -> None:
    raise Interrupted(f"received signal {signal.Signals(signum).name}")


class Trial:
    def __init__(self, spec: TrialSpec, out_dir: Path) -> None:
        self.spec = spec
        self.out = out_dir
        self.variant = spec.variant
        self.phases: dict[str, float | None] = {}
        self.reasons: dict[str, str] = {}
        self.memory: dict[str, int | None] = {}
        self.completed = 0
        self.expected = 0
        self.truncated: int | None = None
        self.started_at = _now()
        self.manifest: dict[str, Any] = {}
        self.fault = _parse_fault(os.environ.get(FAULT_ENV, ""))
        self.torch: Any = None
        self.oom_events = 0
        self._ballast: bytearray | None = None
        self.gpu_energy_j: float | None = None
        self.cpu_energy_j: float | None = None
        self.gpu_energy_reason = ""
        self.cpu_energy_reason = ""
        self.pass_compilations: int | None = None
        self.peaks_reset = False

    # -- outputs ---------------------------------------------------------------------------

    def write_status(self, status: str, error: str = "") -> None:
        self.phases["trial_s"] = clock() - PROCESS_START_S
        reasons = dict(self.reasons)
        for name in PhaseTimes.__dataclass_fields__:
            if self.phases.get(name) is None and name not in reasons:
                reasons[name] = f"not reached: trial ended with status {status}"
        for name in MemoryPeaks.__dataclass_fields__:
            if self.memory.get(name) is None and name not in reasons:
                reasons[name] = f"not measured: trial ended with status {status}"
        if self.pass_compilations is None and "pass_compilations" not in reasons:
            reasons["pass_compilations"] = ("not counted: the variant does not use torch.compile" if
                                            not self.variant.compile else
                                            f"not counted: trial ended with status {status}")
        if self.truncated is None and "truncated_count" not in reasons:
            reasons["truncated_count"] = f"not counted: trial ended with status {status}"
        record = TrialStatus(
            trial_id=self.spec.trial_id,
            status=status,
            completed=self.completed,
            expected=self.expected,
            phases=PhaseTimes(**{k: self.phases.get(k) for k in PhaseTimes.__dataclass_fields__}),
            memory=MemoryPeaks(**{k: self.memory.get(k) for k in MemoryPeaks.__dataclass_fields__}),
            truncated_count=self.truncated,
            oom_events=self.oom_events,
            error=error,
            empty_reasons=reasons,
            started_at=self.started_at,
            ended_at=_now(),
            gpu_energy_j=self.gpu_energy_j,
            cpu_energy_j=self.cpu_energy_j,
            gpu_energy_reason=self._energy_reason(self.gpu_energy_j, self.gpu_energy_reason, status),
            cpu_energy_reason=self._energy_reason(self.cpu_energy_j, self.cpu_energy_reason, status),
            pass_compilations=self.pass_compilations,
        )
        write_json_atomic(self.out / "status.json", record.to_dict())

    @staticmethod
    def _energy_reason(joules: float | None, reason: str, status: str) -> str:
        if joules is not None:
            return ""
        return reason or f"not measured: the measured pass did not complete (status {status})"

    def write_manifest(self) -> None:
        write_json_atomic(self.out / "manifest.json", self.manifest)

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
        self.phases["verify_s"] = timer.elapsed_s
        return "; ".join(problems)

    def base_manifest(self) -> None:
        spec = self.spec
        image_reason = "" if spec.image_id else f"launcher {spec.launcher!r} runs no container image"
        self.manifest = {
            "schema_version": 1,
            "trial_id": spec.trial_id,
            "campaign_id": spec.campaign_id,
            "study_sha256": spec.study_sha256,
            "variant": spec.variant.to_dict(),
            "repetition": spec.repetition,
            "order_index": spec.order_index,
            "attempt": spec.attempt,
            "corpus_fingerprint": spec.corpus_fingerprint,
            "model_fingerprint": spec.model_fingerprint,
            "launcher": spec.launcher,
            "image_ref": spec.image_ref or None,
            "image_id": spec.image_id or None,
            "image_digest": spec.image_digest or None,
            "warmup": spec.warmup.to_dict(),
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
        # imports_s: importing the framework AND applying the determinism settings (in torch 2.13,
        # use_deterministic_algorithms imports torch._inductor.config: close to a second).
        with PhaseTimer() as timer:
            import torch
            import transformers  # noqa: F401

            torch.set_num_threads(variant.threads)
            torch.manual_seed(variant.seed)
            torch.use_deterministic_algorithms(variant.deterministic, warn_only=False)
        self.phases["imports_s"] = timer.elapsed_s
        self.torch = torch
        check_backend(torch, variant.stack, variant.device)
        if variant.device == "cuda":
            torch.backends.cudnn.deterministic = variant.deterministic
            torch.backends.cudnn.benchmark = False
        from runner.trial.env import device_facts, software_facts

        facts, reasons = device_facts(torch, variant.device)
        self.manifest["software"] = software_facts(torch)
        self.manifest["device"] = facts
        self.manifest["empty_reasons"].update(reasons)
        self.manifest["determinism"] = {
            "seed": variant.seed,
            "use_deterministic_algorithms": variant.deterministic,
            "cudnn_deterministic": variant.deterministic if variant.device == "cuda" else None,
            "cudnn_benchmark": False if variant.device == "cuda" else None,
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            "threads": variant.threads,
            # Read back from torch: what determinism really costs (extra work) in this run.
            "deterministic_algorithms_enabled": bool(torch.are_deterministic_algorithms_enabled()),
            "deterministic_warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
            "fill_uninitialized_memory": _fill_uninitialized_memory(torch),
        }
        self.manifest["numerics"] = numerics_settings(torch, variant.device)
        self.write_manifest()

    def sync(self) -> None:
        if self.variant.device == "cuda":
            self.torch.cuda.synchronize()

    def run(self) -> int:
        from runner.trial.model import Classifier

        torch = self.torch
        variant = self.variant
        with PhaseTimer(self.sync) as timer:
            classifier = Classifier.load(Path(self.spec.model_path), variant, torch)
        self.phases["load_s"] = timer.elapsed_s
        self.manifest["model"] = classifier.describe()
        self.write_manifest()

        # Warm-up: the tuning texts at the variant's batch size, then the measured pass's own padded shapes
        # (longest, shortest, last batch) built from tuning tokens, so allocator growth, lazy kernel loading
        # and (with compile) every recompilation land here, not in pass_s.
        with PhaseTimer(self.sync) as timer:
            texts = list(self.spec.warmup_texts)
            shaped = shaped_batches(classifier.tokenize(texts), self.spec.warmup_shapes)
            for _ in range(self.spec.warmup.runs):
                for start in range(0, len(texts), variant.batch_size):
                    classifier.predict(texts[start : start + variant.batch_size])
                for features in shaped:
                    classifier.predict_encoded(features)
        self.phases["warmup_s"] = timer.elapsed_s
        self.manifest["warmup_shapes"] = [list(shape) for shape in self.spec.warmup_shapes]
        from runner.trial.model import attention_ops

        # One more forward, outside warmup_s and pass_s: tuning texts at the variant's batch size, padded like
        # the pass's batches (the attention kernel can depend on whether a padding mask is present).
        ops, why = attention_ops(classifier, classifier.tokenize(texts[: variant.batch_size]))
        self.manifest["attention_ops"] = ops
        if why:
            self.manifest["empty_reasons"]["attention_ops"] = why
        self.write_manifest()
        compiled_before = self._compilations()

        if variant.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            self.peaks_reset = True
            classifier.forward_events = []
        from runner.trial.energy import NoMeter, RaplMeter
        from runner.trial.env import gpu_energy_meter

        gpu_meter = gpu_energy_meter(self.manifest["device"]) if variant.device == "cuda" else NoMeter(
            "CPU trial: no GPU energy counter")
        cpu_meter = RaplMeter()

        write_s = 0.0
        device_s_total: float | None = 0.0 if variant.device == "cuda" else None
        predictions_path = self.out / "predictions.jsonl"
        with open(predictions_path, "w", encoding="utf-8") as sink, \
                open(self.out / "batches.jsonl", "w", encoding="utf-8") as batch_sink:
            self.sync()
            gpu_meter.start()
            cpu_meter.start()
            pass_start = clock()
            records = read_corpus(Path(self.spec.corpus_path))
            self.expected = len(records)
            encoded = classifier.tokenize([r.text for r in records])
            order = list(range(len(records)))
            if variant.length_grouping == "sort":
                order.sort(key=lambda i: (len(encoded[i]["input_ids"]), i))
            buckets = [self._bucket(r.id) for r in records]

            def run_batch(batch_no: int, index: list[int]) -> float:
                """Predict one batch and write it; returns seconds spent writing."""
                retry = False
                try:
                    self._inject(batch_no, len(index))
                    labels, scores = classifier.predict_encoded([encoded[i] for i in index])
                except BaseException as exc:
                    if variant.resume != "halve-batch-on-oom" or len(index) == 1 or not _is_oom(exc):
                        raise
                    retry = True
                if retry:
                    # A declared resume variant: retry this batch in halves; the time stays in the pass. Out of
                    # the handler, so the failed batch's tensors (held by the traceback) are freed first.
                    self.oom_events += 1
                    if variant.device == "cuda":
                        torch.cuda.empty_cache()
                    half = (len(index) + 1) // 2
                    return run_batch(batch_no, index[:half]) + run_batch(batch_no, index[half:])
                lines = self._corrupt("".join(
                    json.dumps({"id": records[i].id, "label": label, "score": score}) + "\n"
                    for i, label, score in zip(index, labels, scores, strict=True)
                ))
                write_start = clock()
                sink.write(lines)
                sink.flush()
                self.completed += len(index)
                return clock() - write_start

            for batch_no, start in enumerate(range(0, len(order), variant.batch_size)):
                index = order[start : start + variant.batch_size]
                batch_start = clock()
                batch_write_s = run_batch(batch_no, index)
                batch_s = clock() - batch_start - batch_write_s
                device_s = self._drain_forward_events(classifier)
                probe_start = clock()
                self._sample_device_memory()
                write_s += clock() - probe_start  # excluded from pass_s, like the writes
                if device_s_total is not None and device_s is not None:
                    device_s_total += device_s
                line = json.dumps(batch_record(batch_no, index, encoded, buckets, batch_s, device_s)) + "\n"
                write_start = clock()
                batch_sink.write(line)
                batch_sink.flush()
                write_s += batch_write_s + (clock() - write_start)
            self.sync()
            pass_total = clock() - pass_start
            self.gpu_energy_j, self.gpu_energy_reason = gpu_meter.stop()
            self.cpu_energy_j, self.cpu_energy_reason = cpu_meter.stop()
        self.phases["pass_s"] = pass_total - write_s
        if compiled_before is not None:
            self.pass_compilations = (self._compilations() or 0) - compiled_before
        if variant.device == "cuda":
            self.phases["gpu_pass_s"] = device_s_total
            self._record_device_peaks()
        else:
            why = "CPU trial: no GPU, so no device memory counters"
            for key in ("gpu_pass_s",):
                self.reasons[key] = "CPU trial: no GPU events"
            for key in DEVICE_MEMORY_FIELDS:
                self.reasons[key] = why
        self.memory["peak_rss_bytes"] = peak_rss_bytes()

        with PhaseTimer() as timer:
            lengths = classifier.untruncated_lengths([r.text for r in records])
            self.truncated = sum(1 for n in lengths if n > variant.max_length)
            self.manifest["truncation"] = {
                "max_length": variant.max_length,
                "truncated_count": self.truncated,
                "inputs": len(records),
            }
            self.manifest["pass_order"] = "corpus" if variant.length_grouping == "none" else "sorted-by-length"
            self.manifest["ended_at"] = _now()
            self.write_manifest()
        self.phases["write_s"] = write_s + (timer.elapsed_s or 0.0)
        return EXIT_OK

    def _sample_device_memory(self) -> None:
        """Whole-device memory in use (all processes: total − free, ``torch.cuda.mem_get_info``, which CUDA
        and ROCm builds both answer), kept as the largest sample; sampled after each batch."""
        if self.variant.device != "cuda" or self.torch is None:
            return
        free, total = self.torch.cuda.mem_get_info()
        used = int(total) - int(free)
        self.memory["device_total_bytes"] = int(total)
        self.memory["device_used_max_bytes"] = max(used, self.memory.get("device_used_max_bytes") or 0)
        self.memory["device_used_bytes"] = used

    def _record_device_peaks(self) -> None:
        """Allocated and reserved peaks (this process, since the reset after the warm-up, or since the start
        when the trial ended before it), kept apart; also called for a trial that ends in an error or oom."""
        torch = self.torch
        if self.variant.device != "cuda" or torch is None or not torch.cuda.is_available():
            return
        try:
            self.memory["peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
            self.memory["peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved())
            self._sample_device_memory()
        except Exception as exc:  # the device may be in a bad state after a failure  # noqa: BLE001
            for key in DEVICE_MEMORY_FIELDS:
                if self.memory.get(key) is None:
                    self.reasons.setdefault(key, f"not readable after the failure: {type(exc).__name__}: {exc}")
        if not self.peaks_reset:
            for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
                self.reasons.setdefault(key, "peak since the trial started: it ended before the measured pass")

    def _compilations(self) -> int | None:
        """Graphs torch.compile (dynamo) has compiled so far in this process; None without compile."""
        if not self.variant.compile:
            return None
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])

    def _bucket(self, input_id: str) -> str:
        if not self.spec.input_buckets:
            return NO_BUCKETS
        return self.spec.input_buckets.get(input_id, UNBUCKETED)

    def _drain_forward_events(self, classifier: Any) -> float | None:
        """Device seconds of the forwards since the last call (their events are complete: the batch's
        results were copied to the host, which waits for the stream)."""
        events = classifier.forward_events
        if events is None:
            return None
        seconds = sum(start.elapsed_time(stop) for start, stop in events) / 1000.0
        events.clear()
        return seconds

    def _inject(self, batch_no: int, batch_size: int) -> None:
        """Test hook (``ISOCOST_FAULT_INJECT=KIND:VALUE``); recorded in the manifest when set."""
        kind, value = self.fault
        if kind == "sleep-per-batch":
            time.sleep(float(value))
        elif kind == "oom-at-batch" and batch_no >= int(value):
            raise SimulatedOOM(f"simulated out-of-memory at batch {batch_no} ({FAULT_ENV})")
        elif kind == "oom-if-batch-over" and batch_size > int(value):
            raise SimulatedOOM(f"simulated out-of-memory for a batch of {batch_size} > {value} ({FAULT_ENV})")
        elif kind == "hang-at-batch" and batch_no >= int(value):
            while True:
                time.sleep(1)
        elif kind == "allocate-mib" and batch_no == 0:
            self._ballast = bytearray(int(value) * 2**20)  # touches real memory: a container limit kills us

    def _corrupt(self, lines: str) -> str:
        """Test hook: make this trial write a faulty prediction file, as a buggy runner would."""
        kind, value = self.fault
        if kind != "corrupt" or not lines:
            return lines
        if value == "duplicate":
            return lines + lines.splitlines(keepends=True)[0]
        if value == "foreign-id":
            return lines.replace('{"id": "', '{"id": "not-in-corpus-', 1)
        if value == "bad-label":
            item = json.loads(lines.splitlines()[0])
            return lines.replace(json.dumps(item["label"]), '"__no_such_label__"', 1)
        if value == "truncate" and self.completed + lines.count("\n") >= self.expected:
            return lines[: len(lines) - 7]  # the last line is cut short, as by a crash mid-write
        return lines


def detected_backend(torch: Any) -> str:
    """Which build of torch this is: ``rocm`` (HIP), ``cuda`` or ``cpu``."""
    if getattr(torch.version, "hip", None):
        return "rocm"
    return "cuda" if getattr(torch.version, "cuda", None) else "cpu"


def check_backend(torch: Any, stack: str, device: str) -> None:
    """Refuse to run a GPU study on the wrong torch build, or without a GPU (raises :class:`Refusal`)."""
    build = detected_backend(torch)
    if stack in ("cuda", "rocm") and build != stack:
        raise Refusal(f"{WRONG_BUILD_ERROR}: the study's stack is {stack!r} but this torch {torch.__version__} is a "
                      f"{build} build (run it in the {stack} image, or with a {stack} torch)")
    if device == "cuda" and not torch.cuda.is_available():
        raise Refusal(f"{NO_GPU_ERROR}: torch {torch.__version__} ({build} build) sees no GPU "
                      f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                      f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES')!r})")


def _fill_uninitialized_memory(torch: Any) -> bool | None:
    try:
        return bool(torch.utils.deterministic.fill_uninitialized_memory)
    except AttributeError:
        return None


def numerics_settings(torch: Any, device: str) -> dict[str, Any]:
    """Settings that change GPU numbers and speed (TF32, reduced-precision reductions, SDPA kernels)."""
    settings: dict[str, Any] = {"float32_matmul_precision": torch.get_float32_matmul_precision()}
    cuda = torch.backends.cuda
    settings["cuda_matmul_allow_tf32"] = bool(cuda.matmul.allow_tf32)
    settings["cuda_matmul_fp32_precision"] = getattr(cuda.matmul, "fp32_precision", None)  # torch ≥ 2.9 API
    settings["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    settings["cuda_matmul_allow_fp16_reduced_precision_reduction"] = bool(
        cuda.matmul.allow_fp16_reduced_precision_reduction)
    settings["cuda_matmul_allow_bf16_reduced_precision_reduction"] = bool(
        cuda.matmul.allow_bf16_reduced_precision_reduction)
    settings["sdpa_backends_enabled"] = {
        name: bool(getattr(cuda, f"{name}_sdp_enabled")())
        for name in ("flash", "mem_efficient", "math", "cudnn") if hasattr(cuda, f"{name}_sdp_enabled")
    }
    settings["applies_to"] = "GPU kernels" if device == "cuda" else "CPU trial: the TF32/SDPA switches are GPU-only"
    return settings


def shaped_batches(features: list[dict[str, list[int]]], shapes: tuple[tuple[int, int], ...]
                   ) -> list[list[dict[str, list[int]]]]:
    """One warm-up batch per (rows, length) shape, made of tuning tokens: each row keeps its input's first
    and last token (e.g. [CLS] … [SEP]) and repeats its inner tokens to exactly ``length`` ids."""
    if not features:
        return []
    batches = []
    for rows, length in shapes:
        batch = []
        for r in range(rows):
            source = features[r % len(features)]
            ids = source["input_ids"]
            inner = ids[1:-1] or ids[:1]
            body = (inner * (length // len(inner) + 1))[: max(length - 2, 0)]
            new_ids = ([ids[0], *body, ids[-1]] if length >= 2 else ids[:1])[:length]
            row = {key: [values[0]] * length for key, values in source.items() if key != "input_ids"}
            row["input_ids"] = new_ids
            batch.append(row)
        batches.append(batch)
    return batches


def batch_record(batch_no: int, index: list[int], encoded: list[dict[str, list[int]]], buckets: list[str],
                 batch_s: float, device_s: float | None) -> dict[str, Any]:
    """One line of ``batches.jsonl``: tokens are the ids fed to the model after truncation, before padding."""
    inputs_by_bucket: dict[str, int] = {}
    tokens_by_bucket: dict[str, int] = {}
    for i in index:
        n = len(encoded[i]["input_ids"])
        inputs_by_bucket[buckets[i]] = inputs_by_bucket.get(buckets[i], 0) + 1
        tokens_by_bucket[buckets[i]] = tokens_by_bucket.get(buckets[i], 0) + n
    return {
        "index": batch_no,
        "n_inputs": len(index),
        "n_tokens": sum(tokens_by_bucket.values()),
        "inputs_by_bucket": inputs_by_bucket,
        "tokens_by_bucket": tokens_by_bucket,
        "batch_s": batch_s,
        "device_s": device_s,
    }


def _parse_fault(text: str) -> tuple[str, str]:
    kind, _, value = text.partition(":")
    return kind, value


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.trial SPEC.json OUT_DIR", file=sys.stderr)
        return 2
    spec = TrialSpec.from_dict(read_json(Path(argv[0])))
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    trial = Trial(spec, out)
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
        status = "oom" if _is_oom(exc) else "error"
        trial._record_device_peaks()
        trial.write_status(status, f"{type(exc).__name__}: {exc}")
        return EXIT_FAILED
