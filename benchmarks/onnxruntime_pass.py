"""Benchmark 10: an ONNX Runtime classification pass run by isocost against a bare ``InferenceSession.run`` loop.

The runner side is a real ``runner.trial.run.Trial`` of the demo slice's ``batch_size=8`` variant with
``engine = "onnxruntime"`` (load = the export, from the cache after the first; warm-up; the measured pass writing
``predictions.jsonl``), its own ``pass_s``. The bare side is what a careful engineer writes by hand around the same
exported graph: an ``InferenceSession`` on the same ``model.onnx`` with the same provider, optimisation level and
threads; read the JSONL corpus, tokenize every text once (truncation at max_length, no padding), per batch pad to
the longest input, ``session.run``, softmax and arg-max in numpy; nothing written. Both run in ONE fresh process
set up like a trial, in ABBA order, on the wall clock and then with the measured pass's clock switched to
``time.process_time`` (as benchmarks 1 and 6 do). Both sides' labels are compared (and their scores, within
1e-6), so the two loops are known to do the same work. Target: isocost's throughput at least 0.99 × the bare loop's.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bare_loop import BareLoop
from benchmarks.common import ROOT, Row, Spread, fmt_ratio, fmt_s, paired_verdict, worker_result
from benchmarks.workspace import Workspace, trial_spec

TARGET_RATIO = 0.99
VARIANT = "batch_size=8"
SETTINGS = {"provider": "CPUExecutionProvider", "graph_optimization": "all", "intra_op_threads": 0}


class BareSession(BareLoop):
    """The bare loop (no isocost code): a tokenizer and an ``InferenceSession`` on the exported graph."""

    def __init__(self, model_path: str, graph: str, max_length: int, threads: int) -> None:
        import onnxruntime as ort
        from transformers import AutoConfig, AutoTokenizer

        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self.session = ort.InferenceSession(graph, sess_options=options, providers=["CPUExecutionProvider"])
        self.inputs = [item.name for item in self.session.get_inputs()]
        config = AutoConfig.from_pretrained(model_path, local_files_only=True)
        self.id2label = {int(k): str(v) for k, v in config.id2label.items()}

    def _predict(self, encoded: Any, start: int, stop: int) -> tuple[list[str], list[float]]:
        import numpy as np

        padded = self.tokenizer.pad({key: values[start:stop] for key, values in encoded.items()},
                                    padding="longest", return_tensors="np")
        logits = self.session.run(None, {name: padded[name].astype(np.int64) for name in self.inputs})[0]
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs = shifted / shifted.sum(axis=-1, keepdims=True)
        return [self.id2label[int(i)] for i in probs.argmax(axis=-1)], [float(s) for s in probs.max(axis=-1)]


def run(workspace: Workspace, pairs: int = 5, progress: Any = print, timeout_s: float | None = None) -> list[Row]:
    from protocol.records.codec import write_record
    from runner.launch.kinds.process.launcher import trial_env

    study = workspace.study()
    variant = next(v for v in study.variants() if v.variant_id == VARIANT)
    variant = dataclasses.replace(variant, engine="onnxruntime")
    title = (f"ONNX Runtime classification pass vs bare InferenceSession.run loop ({VARIANT}, threads="
             f"{variant.threads}, {workspace.inputs} inputs, {pairs} pairs in one fresh process)")
    target = f"≥ {TARGET_RATIO} × bare"
    with tempfile.TemporaryDirectory(prefix="isocost-bench-onnxruntime-") as tmp:
        out = Path(tmp)
        spec = dataclasses.replace(trial_spec(study, variant, "bench-onnxruntime"), engine_settings=dict(SETTINGS))
        write_record(out / "spec.json", spec)
        env = {**trial_env(), "PYTHONPATH": str(ROOT), "ISOCOST_ENGINE_CACHE": str(out / "engine-cache")}
        progress(f"  {pairs} + {pairs} interleaved pairs (wall, then CPU time) in one fresh process")
        result, why = worker_result([sys.executable, "-m", "benchmarks.onnxruntime_pass", str(out / "spec.json"),
                                     str(out), str(pairs)], out / "onnxruntime-pass.json", env, timeout_s)
    if why:
        return [Row(key="10", title=title, target=target, reason=why)]
    return [_row(mode, [p for p in result["pairs"] if p["clock"] == mode], title, target, result["export"])
            for mode in ("wall", "cpu")]


def _row(mode: str, pairs: list[dict[str, Any]], title: str, target: str, export: dict[str, Any]) -> Row:
    runner_s, bare_s, ratio, met, why = paired_verdict(pairs, "same_outputs", "outputs", TARGET_RATIO)
    same = all(p["same_outputs"] for p in pairs)
    unit = "s" if mode == "wall" else "CPU s"
    # The fastest pass of each side: what the code costs when the machine's other load interferes least.
    best = min(bare_s) / min(runner_s)
    return Row(key="10" if mode == "wall" else "10c", title=title if mode == "wall" else title + ", CPU time",
               measured=fmt_s(Spread(tuple(runner_s))).replace(" s", f" {unit}", 1) + " runner pass_s",
               baseline=fmt_s(Spread(tuple(bare_s))).replace(" s", f" {unit}", 1) + " bare loop",
               ratio=f"{fmt_ratio(ratio)} runner/bare throughput (min over min {best:.3f})", target=target, met=met,
               reason=why, details={"clock": mode, "pairs": pairs, "ratio_bare_over_runner": ratio.to_dict(),
                                    "min_over_min": best, "identical_outputs": same, "order": "ABBA",
                                    "export": export})


# -- inside the worker process -------------------------------------------------------------------


def _runner_side(spec: Any, trial_dir: Path) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    from benchmarks.common import classified, runner_pass

    trial = runner_pass(spec, trial_dir)
    return dict(trial.state.phases), classified(trial_dir), dict(trial.manifest.get("engine", {}))


def _same(runner: list[Any], bare: list[Any]) -> bool:
    return len(runner) == len(bare) and all(
        a[0] == b[0] and a[1] == b[1] and abs(a[2] - b[2]) <= 1e-6 for a, b in zip(runner, bare, strict=True))


def worker(spec_path: Path, out: Path, pairs: int) -> int:
    import runner.trial.measured_pass as pass_module
    from benchmarks.overhead import _set_up
    from protocol.records.codec import read_record
    from protocol.records.stages import TrialSpec

    spec = read_record(spec_path, TrialSpec)
    if _set_up(spec, out) is None:
        return 1
    _, _, engine = _runner_side(spec, out / "export-once")  # the export, cached for every pass after it
    graph = str(Path(engine["export"]["cache_dir"]) / "model.onnx")
    results = []
    for mode, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
        pass_module.clock = clock  # type: ignore[assignment]
        for index in range(pairs):
            record: dict[str, Any] = {"clock": mode, "pair": index + 1, "load_average": list(os.getloadavg())}
            for side in (("runner", "bare") if index % 2 == 0 else ("bare", "runner")):
                gc.collect()
                if side == "runner":
                    phases, runner_out, _ = _runner_side(spec, out / f"runner-{mode}-{index}")
                    record.update(runner_pass_s=phases["pass_s"], runner_load_s=phases["load_s"])
                else:
                    bare = BareSession(spec.model_path, graph, spec.variant.max_length, spec.variant.threads)
                    bare.warm_up(list(spec.warmup_texts), spec.warmup.runs, spec.variant.batch_size)
                    record["bare_s"], bare_out = bare.timed_pass(spec.corpus_path, spec.variant.batch_size, clock=clock)
                    del bare
            record["same_outputs"] = _same(runner_out, bare_out)
            results.append(record)
            print(f"{mode} pair {index + 1}: runner {record['runner_pass_s']:.3f} s, bare {record['bare_s']:.3f} s",
                  flush=True)
    pass_module.clock = time.perf_counter  # type: ignore[assignment]
    (out / "onnxruntime-pass.json").write_text(json.dumps({"pairs": results, "export": engine}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
