"""Benchmark 6: the runner's measured sentence-embedding pass against a bare hand-written loop.

The bare loop is what a careful engineer writes to embed a corpus: read the JSONL corpus, tokenize every text
once (truncation at max_length, no padding), then per batch pad to the longest input, run ``AutoModel`` under
``torch.inference_mode``, mean-pool the last hidden states over the attention mask in float32, L2-normalise, and
bring the vectors to the host; nothing written. The runner side is a real ``runner.trial.run.Trial`` of a
sentence-embedding spec (load, warm-up, measured pass writing ``vectors.f32`` per batch, then the queries outside
``pass_s``), its own ``pass_s``. Both run in ONE fresh process, set up like a trial, in ABBA order, on the wall
clock and then with the measured pass's clock switched to ``time.process_time`` (as benchmark 1 does). Both
sides' vectors are compared, so the two loops are known to do the same work. Target: runner throughput at least
0.99 × the bare loop's.
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

from benchmarks.common import ROOT, Row, Spread, fmt_ratio, fmt_s, paired_verdict, runner_pass, worker_result

TARGET_RATIO = 0.99


class BareEncoder:
    """The bare loop (no isocost code): AutoModel, the same pooling, inputs and batches as the runner's pass."""

    def __init__(self, model_path: str, max_length: int, torch: Any) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.torch, self.max_length = torch, max_length
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_path, local_files_only=True, attn_implementation="sdpa").eval()

    def _embed(self, encoded: Any, start: int, stop: int) -> Any:
        torch = self.torch
        batch = self.tokenizer.pad({key: values[start:stop] for key, values in encoded.items()}, padding="longest",
                                   return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state.float()
            mask = batch["attention_mask"].to(hidden.dtype).unsqueeze(-1)
            vectors = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            vectors = torch.nn.functional.normalize(vectors, p=2.0, dim=1)
        return vectors.cpu().numpy()

    def warm_up(self, texts: list[str], runs: int, batch_size: int) -> None:
        for _ in range(runs):
            for start in range(0, len(texts), batch_size):
                chunk = texts[start:start + batch_size]
                self._embed(self.tokenizer(chunk, truncation=True, max_length=self.max_length, padding=False), 0,
                            len(chunk))

    def timed_pass(self, corpus_path: str, batch_size: int, clock: Any) -> tuple[float, Any]:
        import numpy as np

        start = clock()
        with open(corpus_path, encoding="utf-8") as handle:
            texts = [json.loads(line)["text"] for line in handle if line.strip()]
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length, padding=False)
        vectors = [self._embed(encoded, i, i + batch_size) for i in range(0, len(texts), batch_size)]
        seconds = clock() - start
        return seconds, np.concatenate(vectors)


def make_spec(root: Path, inputs: int, threads: int) -> Path:
    """A sentence-embedding trial spec over the demo embedding study's first ``inputs`` bodies (its encoder,
    its first queries), written into ``root``."""
    from benchmarks.workspace import demo_dir
    from protocol.io.fingerprint import fingerprint_path
    from protocol.records.codec import write_record
    from protocol.records.stages import TrialSpec
    from protocol.study.load import load_study

    study_file = demo_dir() / "embed.toml"
    if not study_file.exists():
        raise FileNotFoundError(f"{study_file} not found: run `make demo` (isocost demo prepare) first")
    study = load_study(study_file)
    lines = [line for line in study.corpus.path.read_text(encoding="utf-8").splitlines() if line.strip()][:inputs]
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    variant = next(v for v in study.variants() if v.variant_id == "batch_size=8")
    variant = dataclasses.replace(variant, threads=threads)
    tuning = [json.loads(line)["text"] for line in study.tuning.path.read_text(encoding="utf-8").splitlines()]
    options = dict(study.task_options)
    options["queries"] = {**options["queries"], "items": options["queries"]["items"][:16]}
    spec = TrialSpec(trial_id="bench-embed", campaign_id="bench", study_sha256=study.sha256, variant=variant,
                     repetition=1, order_index=1, attempt=1, corpus_path=str(corpus),
                     corpus_fingerprint=fingerprint_path(corpus), model_path=str(study.model.path),
                     model_fingerprint=study.model.fingerprint, warmup=study.warmup,
                     warmup_texts=tuple(tuning[: study.warmup.inputs]), launcher="process", task=study.task,
                     task_options=options)
    write_record(root / "spec.json", spec)
    return root / "spec.json"


def run(inputs: int = 24, pairs: int = 5, threads: int = 1, progress: Any = print,
        timeout_s: float | None = None) -> list[Row]:
    from runner.launch.kinds.process.launcher import trial_env

    title = (f"embedding measured pass vs bare AutoModel loop (batch_size=8, mean pooling, threads={threads}, "
             f"{inputs} article bodies, {pairs} pairs in one fresh process)")
    target = f"≥ {TARGET_RATIO} × bare"
    with tempfile.TemporaryDirectory(prefix="isocost-bench-embed-pass-") as tmp:
        out = Path(tmp)
        try:
            spec = make_spec(out / "inputs", inputs, threads)
        except FileNotFoundError as exc:
            return [Row(key="6", title=title, target=target, reason=str(exc))]
        env = {**trial_env(), "PYTHONPATH": str(ROOT)}
        progress(f"  {pairs} + {pairs} interleaved pairs (wall, then CPU time) in one fresh process")
        result, why = worker_result([sys.executable, "-m", "benchmarks.embedding_pass", str(spec), str(out),
                                     str(pairs)], out / "embedding-pass.json", env, timeout_s)
    if why:
        return [Row(key="6", title=title, target=target, reason=why)]
    return [_row(mode, [p for p in result if p["clock"] == mode], title, target) for mode in ("wall", "cpu")]


def _row(mode: str, pairs: list[dict[str, Any]], title: str, target: str) -> Row:
    runner_s, bare_s, ratio, met, why = paired_verdict(pairs, "same_vectors", "vectors", TARGET_RATIO)
    same = all(p["same_vectors"] for p in pairs)
    unit = "s" if mode == "wall" else "CPU s"
    return Row(key="6" if mode == "wall" else "6c", title=title if mode == "wall" else title + ", CPU time",
               measured=fmt_s(Spread(tuple(runner_s))).replace(" s", f" {unit}", 1) + " runner pass_s",
               baseline=fmt_s(Spread(tuple(bare_s))).replace(" s", f" {unit}", 1) + " bare loop",
               ratio=f"{fmt_ratio(ratio)} runner/bare throughput", target=target, met=met, reason=why,
               details={"clock": mode, "pairs": pairs, "ratio_bare_over_runner": ratio.to_dict(),
                        "identical_vectors": same, "order": "ABBA"})


# -- inside the worker process -------------------------------------------------------------------


def worker(spec_path: Path, out: Path, pairs: int) -> int:
    import numpy as np

    import runner.trial.measured_pass as pass_module
    from benchmarks.overhead import _set_up
    from protocol.records.codec import read_record
    from protocol.records.stages import TrialSpec
    from protocol.tasks.embedding.vector_file import read_vectors
    from runner.trial.torch_settings import apply_determinism

    spec = read_record(spec_path, TrialSpec)
    torch = _set_up(spec, out)
    if torch is None:
        return 1
    results = []
    for mode, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
        pass_module.clock = clock  # type: ignore[assignment]
        for index in range(pairs):
            record: dict[str, Any] = {"clock": mode, "pair": index + 1, "load_average": list(os.getloadavg())}
            for side in (("runner", "bare") if index % 2 == 0 else ("bare", "runner")):
                gc.collect()
                if side == "runner":
                    trial_dir = out / f"runner-{mode}-{index}"
                    record["runner_pass_s"] = runner_pass(spec, trial_dir).state.phases["pass_s"]
                    runner_vectors = read_vectors(trial_dir / "vectors.f32", trial_dir / "vector_ids.jsonl").vectors
                else:
                    torch.set_num_threads(spec.variant.threads)
                    torch.manual_seed(spec.variant.seed)
                    apply_determinism(torch, spec.variant)
                    bare = BareEncoder(spec.model_path, spec.variant.max_length, torch)
                    bare.warm_up(list(spec.warmup_texts), spec.warmup.runs, spec.variant.batch_size)
                    record["bare_s"], bare_vectors = bare.timed_pass(spec.corpus_path, spec.variant.batch_size, clock)
                    del bare
            record["same_vectors"] = bool(np.allclose(runner_vectors, bare_vectors, atol=1e-6))
            results.append(record)
            print(f"{mode} pair {index + 1}: runner {record['runner_pass_s']:.3f} s, bare {record['bare_s']:.3f} s",
                  flush=True)
    pass_module.clock = time.perf_counter  # type: ignore[assignment]
    (out / "embedding-pass.json").write_text(json.dumps(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
