"""Benchmark 6: the runner's measured generation pass against a bare ``model.generate`` loop, and its token count.

A slice of the demo's ``generate`` study (the first inputs of ``corpus-generate.jsonl``, the converted SmolLM2
checkpoint, fewer new tokens) runs in ONE fresh process set up like a trial (as benchmark 1): in ABBA order, the
runner's ``Trial.run()`` (load, warm-up, the measured pass writing ``generations.jsonl`` and ``batches.jsonl``:
top-k per step, prefill and decode times) and a bare loop (its own load and warm-up, the same prompts, left
padding, greedy ``model.generate`` with the same generation config, tokens cut after the end-of-sequence token and
decoded on the host, nothing written). Both sides' token sequences are compared, so they did the same work.

Row 8: ``bare_s / runner pass_s`` per pair (target ≥ 0.99), on the wall clock; row 8c the same pairs again with
the runner's pass clock and the bare loop's switched to ``time.process_time`` (CPU seconds of the process, which
other jobs on a shared machine cannot inflate), as benchmark 1c does; torch runs 1 thread on both sides.
Row 8b: the tokens per second isocost reports
(:func:`protocol.tasks.generation.figures.read_pass_figures`, from ``batches.jsonl``) against tokens counted
independently from ``generations.jsonl`` over the same ``pass_s``: equal in every pass.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Row, Spread, fmt_ratio, fmt_s, paired_verdict, runner_pass, worker_result
from benchmarks.workspace import _set_table_key, demo_dir
from protocol.records import codec

TARGET_RATIO = 0.99


def make_slice(root: Path, inputs: int, max_new_tokens: int) -> Path:
    """The demo's generate study over its first ``inputs`` stories, ``max_new_tokens`` new tokens, in ``root``."""
    from protocol.io.fingerprint import fingerprint_path
    from protocol.study.load import load_study

    source = demo_dir() / "generate.toml"
    if not source.exists():
        raise FileNotFoundError(f"{source} not found: run `make demo` (isocost demo prepare) first")
    demo = load_study(source)
    lines = [line for line in demo.corpus.path.read_text(encoding="utf-8").splitlines() if line.strip()][:inputs]
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus-slice.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = source.read_text(encoding="utf-8")
    for table, key, value in (("corpus", "path", json.dumps(str(corpus))),
                              ("corpus", "fingerprint", json.dumps(fingerprint_path(corpus))),
                              ("tuning", "path", json.dumps(str(demo.tuning.path))),
                              ("model", "path", json.dumps(str(demo.model.path))),
                              ("generation", "max_new_tokens", str(max_new_tokens)),
                              ("base", "threads", "1")):  # as benchmark 1: 2-thread passes swing with load
        text = _set_table_key(text, table, key, value)
    study = root / "study.toml"
    study.write_text(text, encoding="utf-8")
    load_study(study)
    return study


def _spec(study_path: Path, variant_id: str) -> Any:
    from protocol.records.stages import TrialSpec
    from protocol.study.load import load_study
    from protocol.tasks import read_task_corpus, study_task

    study = load_study(study_path)
    variant = next(v for v in study.variants() if v.variant_id == variant_id)
    tuning = read_task_corpus(study.tuning.path, study_task(study))
    return TrialSpec(
        trial_id="bench-generation", campaign_id="bench", study_sha256=study.sha256, variant=variant, repetition=1,
        order_index=1, attempt=1, corpus_path=str(study.corpus.path), corpus_fingerprint=study.corpus.fingerprint,
        model_path=str(study.model.path), model_fingerprint=study.model.fingerprint, warmup=study.warmup,
        warmup_texts=tuple(r.text for r in tuning[: study.warmup.inputs]), launcher="process",
        timeout_s=study.campaign.trial_timeout_s, task=study.task, task_options=dict(study.task_options))


def run(root: Path, inputs: int = 8, max_new_tokens: int = 8, pairs: int = 4, variant_id: str = "batch_size=4",
        progress: Any = print, timeout_s: float | None = None) -> list[Row]:
    from protocol.records.codec import write_record
    from runner.launch.kinds.process.launcher import trial_env

    title = (f"generation pass vs bare model.generate loop ({variant_id}, {inputs} inputs, {max_new_tokens} new "
             f"tokens, {pairs} pairs in one fresh process)")
    spec = _spec(make_slice(root / "slice", inputs, max_new_tokens), variant_id)
    with tempfile.TemporaryDirectory(prefix="isocost-bench-generation-") as tmp:
        out = Path(tmp)
        write_record(out / "spec.json", spec)
        env = {**trial_env(), "PYTHONPATH": str(ROOT)}
        progress(f"  {pairs} interleaved pairs in one fresh process ({variant_id}, {inputs} inputs)")
        result, why = worker_result([sys.executable, "-m", "benchmarks.generation", str(out / "spec.json"),
                                     str(out), str(pairs)], out / "generation.json", env, timeout_s)
    if why:
        return [Row(key="8", title=title, target=f"≥ {TARGET_RATIO} × bare", reason=why)]
    return _rows(result["pairs"], title, spec)


def _ratio_row(mode: str, pairs: list[dict[str, Any]], title: str, spec: Any) -> Row:
    runner_s, bare_s, ratio, met, why = paired_verdict(pairs, "same_tokens", "tokens", TARGET_RATIO)
    unit = "s" if mode == "wall" else "CPU s"
    return Row(key="8" if mode == "wall" else "8c",
               title=title if mode == "wall" else title.replace("generation pass", "generation pass, CPU time"),
               measured=fmt_s(Spread(tuple(runner_s))).replace(" s", f" {unit}", 1) + " runner pass_s",
               baseline=fmt_s(Spread(tuple(bare_s))).replace(" s", f" {unit}", 1) + " bare generate loop",
               ratio=f"{fmt_ratio(ratio)} runner/bare throughput", target=f"≥ {TARGET_RATIO} × bare", met=met,
               reason=why, details={"clock": mode, "pairs": pairs, "order": "ABBA",
                                    "variant": codec.to_dict(spec.variant), "task_options": dict(spec.task_options)})


def _rows(pairs: list[dict[str, Any]], title: str, spec: Any) -> list[Row]:
    return [*(_ratio_row(mode, [p for p in pairs if p["clock"] == mode], title, spec) for mode in ("wall", "cpu")),
            counted_row("8b", "generation", pairs)]


def counted_row(key: str, name: str, pairs: list[dict[str, Any]]) -> Row:
    """The row that checks every pass's reported tokens and tokens/s against those counted from its file."""
    counted = all(p["reported_tokens"] == p["counted_tokens"] and p["reported_tps"] == p["counted_tps"] for p in pairs)
    return Row(key=key, title=f"{name}: tokens/s reported (batches.jsonl) vs counted from generations.jsonl",
               measured=f"{pairs[0]['reported_tps']:.4g} tokens/s reported (pass 1)",
               baseline=f"{pairs[0]['counted_tps']:.4g} tokens/s counted (pass 1)",
               ratio="equal" if counted else "differ", target="equal in every pass", met=counted,
               reason="" if counted else "a pass's reported token count is not the file's",
               details={"reported_tokens": [p["reported_tokens"] for p in pairs],
                        "counted_tokens": [p["counted_tokens"] for p in pairs]})


# -- inside the worker process -------------------------------------------------------------------


class BareGenerator:
    """What a careful engineer writes by hand: the same prompts, left padding, greedy generate, decode."""

    def __init__(self, spec: Any, torch: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        variant, options = spec.variant, spec.task_options
        self.torch, self.options, self.variant = torch, options, variant
        self.tokenizer: Any = AutoTokenizer.from_pretrained(spec.model_path, local_files_only=True)
        self.tokenizer.padding_side = "left"
        model: Any = AutoModelForCausalLM.from_pretrained(spec.model_path, local_files_only=True,
                                                          attn_implementation=variant.attention)
        model.eval()
        model.to(dtype={"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[variant.precision])
        self.model = model.to(torch.device(variant.device))
        self.config = GenerationConfig.from_pretrained(spec.model_path, local_files_only=True)
        self.config.update(do_sample=False, num_beams=1, max_new_tokens=int(options["max_new_tokens"]),
                           temperature=None, top_p=None, top_k=None)
        self.config.max_length = None
        eos = self.config.eos_token_id
        self.eos = set(eos) if isinstance(eos, list) else {eos}

    def prompts(self, texts: list[str]) -> list[str]:
        filled = [self.options["template"].replace("{text}", text) for text in texts]
        if not self.options.get("chat_template"):
            return filled
        return [self.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                   add_generation_prompt=True) for p in filled]

    def generate(self, texts: list[str]) -> list[list[int]]:
        batch = self.tokenizer(self.prompts(texts), padding=True, return_tensors="pt",
                               add_special_tokens=not self.options.get("chat_template"))
        batch = {k: v.to(self.model.device) for k, v in batch.items()}
        with self.torch.inference_mode():
            sequences = self.model.generate(**batch, generation_config=self.config)
        rows = []
        for row in sequences[:, batch["input_ids"].shape[1]:].tolist():
            end = next((i + 1 for i, t in enumerate(row) if t in self.eos), len(row))
            rows.append(row[:end])
            self.tokenizer.decode(row[:end], skip_special_tokens=True)
        return rows

    def timed_pass(self, corpus_path: str, batch_size: int, clock: Any) -> tuple[float, list[list[int]]]:
        start = clock()
        with open(corpus_path, encoding="utf-8") as handle:
            texts = [json.loads(line)["text"] for line in handle if line.strip()]
        tokens: list[list[int]] = []
        for first in range(0, len(texts), batch_size):
            tokens += self.generate(texts[first:first + batch_size])
        return clock() - start, tokens


def _runner(spec: Any, out: Path) -> dict[str, Any]:
    return pass_record(runner_pass(spec, out), out)


def pass_record(trial: Any, out: Path) -> dict[str, Any]:
    """What the runner's side of a pair records from its pass in ``out``: pass_s, the tokens, reported and counted."""
    from protocol.tasks.generation.figures import read_pass_figures

    lines = [json.loads(line) for line in (out / "generations.jsonl").read_text(encoding="utf-8").splitlines()]
    pass_s = trial.state.phases["pass_s"]
    figures = read_pass_figures(out, pass_s)
    counted = sum(len(line["tokens"]) for line in lines)
    return {"runner_pass_s": pass_s, "tokens": [line["tokens"] for line in lines],
            "reported_tokens": figures["generated_tokens"], "reported_tps": figures["output_tokens_per_s"],
            "counted_tokens": counted, "counted_tps": counted / pass_s if pass_s else None}


def worker(spec_path: Path, out: Path, pairs: int) -> int:
    import gc

    from benchmarks.overhead import _set_up
    from protocol.records.codec import read_record
    from protocol.records.stages import TrialSpec
    from runner.trial.torch_settings import apply_determinism

    spec = read_record(spec_path, TrialSpec)
    spec = dataclasses.replace(spec, task_options=dict(spec.task_options))
    torch = _set_up(spec, out)
    if torch is None:
        return 1
    import runner.trial.measured_pass as pass_module

    results = []
    for mode, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
        pass_module.clock = clock  # type: ignore[assignment]
        for index in range(pairs):
            record: dict[str, Any] = {"clock": mode, "pair": index + 1, "load_average": list(os.getloadavg())}
            for side in (("runner", "bare") if index % 2 == 0 else ("bare", "runner")):
                gc.collect()
                if side == "runner":
                    record.update(_runner(spec, out / f"runner-{mode}-{index}"))
                else:
                    apply_determinism(torch, spec.variant)
                    bare = BareGenerator(spec, torch)
                    bare.generate(list(spec.warmup_texts)[: spec.variant.batch_size] or ["warm-up"])
                    record["bare_s"], record["bare_tokens"] = bare.timed_pass(spec.corpus_path,
                                                                              spec.variant.batch_size, clock)
                    del bare
            record["same_tokens"] = record.pop("tokens") == record.pop("bare_tokens")
            results.append(record)
            print(f"{mode} pair {index + 1}: runner {record['runner_pass_s']:.3f}, bare {record['bare_s']:.3f}",
                  flush=True)
    pass_module.clock = time.perf_counter  # type: ignore[assignment]
    (out / "generation.json").write_text(json.dumps({"pairs": results}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
