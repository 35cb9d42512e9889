"""Benchmark 11: a vLLM generation pass run by isocost against a bare ``LLM.generate`` loop, and its token count.

The demo's ``generate`` study (its stories, SmolLM2, 16 new tokens, top-5) with ``engine = "vllm"`` (fp32, eager,
``max_num_seqs = 8``, ``max_model_len = 512``) runs in ONE fresh process of ``.venv-vllm``'s interpreter (vllm is
not in ``.venv``; the interpreter the process launcher would give the trial,
:mod:`runner.launch.kinds.process.interpreter`).
The engine is started ONCE, by isocost's own trial engine (``Trial.load_model``: the 35-55 s start-up is load time
for both sides alike), then warmed up; both sides then drive that same ``vllm.LLM``, so their engine settings are
identical by construction. In ABBA order per pair:

- the runner: a fresh ``Trial``'s measured pass (``MeasuredPass``: corpus read, isocost's prompts, one
  ``LLM.enqueue`` per batch and the engine stepped to completion, the rows materialised), its own ``pass_s``;
- the bare loop, what a careful engineer writes by hand: read the JSONL corpus, the same template and chat
  template through the tokenizer, per batch ``llm.generate`` of the token prompts with the same greedy
  ``SamplingParams``, then each row's tokens, text and top-k log-probabilities materialised; nothing written.

Both sides' token sequences are compared (same work). Row 11 is ``bare_s / runner pass_s`` per pair on the wall
clock (target ≥ 0.99); row 11c the same on the CPU seconds of the process TREE (this process plus vLLM's engine
core and worker, from ``/proc``: the trial process alone does little of the work, so ``process_time`` would say
nothing). Row 11b: the output tokens per second isocost reports (from ``batches.jsonl``) against tokens counted
from ``generations.jsonl`` over the same ``pass_s``: equal in every pass. Without ``.venv-vllm`` the rows are
empty with the reason, never a zero.
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

from benchmarks.common import ROOT, Row, Spread, fmt_ratio, fmt_s, paired_verdict, worker_result

TARGET_RATIO = 0.99
VARIANT = "batch_size=8"
SETTINGS = {"max_num_seqs": 8, "max_model_len": 512}
TITLE = "vLLM generation pass vs bare LLM.generate loop"


def run(root: Path, inputs: int = 24, max_new_tokens: int = 16, pairs: int = 6, progress: Any = print,
        timeout_s: float | None = None) -> list[Row]:
    from benchmarks.generation import _spec, make_slice
    from protocol.engines.vllm import ENGINE
    from protocol.records.codec import write_record
    from runner.launch.kinds.process.interpreter import own_python
    from runner.launch.kinds.process.launcher import trial_env

    title = (f"{TITLE} ({VARIANT}, fp32, {inputs} inputs, {max_new_tokens} new tokens, {pairs} pairs per clock "
             "in one fresh process, one engine)")
    target = f"≥ {TARGET_RATIO} × bare"
    python = own_python("vllm")
    if not Path(python).exists():
        reason = f"not run: no vLLM environment at {python} (make vllm builds it)"
        return [Row(key=key, title=title, target=target, reason=reason) for key in ("11", "11b")]
    study = make_slice(root / "slice", inputs, max_new_tokens)
    spec = _spec(study, "batch_size=4")
    variant = dataclasses.replace(spec.variant, engine="vllm", batch_size=8)
    settings = {**{key.key.rsplit(".", 1)[-1]: key.value for key in ENGINE.settings}, **SETTINGS}
    spec = dataclasses.replace(spec, variant=variant, engine_settings=settings, trial_id="bench-vllm")
    with tempfile.TemporaryDirectory(prefix="isocost-bench-vllm-") as tmp:
        out = Path(tmp)
        write_record(out / "spec.json", spec)
        env = {**trial_env(), "PYTHONPATH": str(ROOT)}
        progress(f"  one vLLM engine start, then {pairs} + {pairs} interleaved pairs (wall, then process-tree CPU) "
                 f"with {python}")
        result, why = worker_result([python, "-m", "benchmarks.vllm_pass", str(out / "spec.json"), str(out),
                                     str(pairs)], out / "vllm-pass.json", env, timeout_s)
    if why:
        return [Row(key="11", title=title, target=target, reason=why)]
    return _rows(result, title, target)


def _rows(result: dict[str, Any], title: str, target: str) -> list[Row]:
    from benchmarks.generation import counted_row

    pairs = result["pairs"]
    rows = [_ratio_row(mode, [p for p in pairs if p["clock"] == mode], title, target, result)
            for mode in ("wall", "cpu")]
    return [*rows, counted_row("11b", "vLLM generation", pairs)]


def _ratio_row(mode: str, pairs: list[dict[str, Any]], title: str, target: str, result: dict[str, Any]) -> Row:
    runner_s, bare_s, ratio, met, why = paired_verdict(pairs, "same_tokens", "tokens", TARGET_RATIO)
    unit = "s" if mode == "wall" else "CPU s (process tree)"
    best = min(bare_s) / min(runner_s)
    return Row(key="11" if mode == "wall" else "11c",
               title=title if mode == "wall" else title + ", CPU time of the process tree",
               measured=fmt_s(Spread(tuple(runner_s))).replace(" s", f" {unit}", 1) + " runner pass_s",
               baseline=fmt_s(Spread(tuple(bare_s))).replace(" s", f" {unit}", 1) + " bare generate loop",
               ratio=f"{fmt_ratio(ratio)} runner/bare throughput (min over min {best:.3f})", target=target, met=met,
               reason=why, details={"clock": mode, "pairs": pairs, "order": "ABBA", "min_over_min": best,
                                    "load_s": result["load_s"], "engine": result["engine"]})


# -- inside the worker process (.venv-vllm) --------------------------------------------------------


def tree_cpu_s() -> float:
    """CPU seconds (user + system) of this process and every live descendant, from ``/proc`` (clock ticks)."""
    from protocol.engines.vllm.trial.engine import _children

    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in (os.getpid(), *_children(os.getpid())):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


class BareLoop:
    """The bare loop around the same ``vllm.LLM``: the tokenizer's chat template, ``llm.generate``, rows."""

    def __init__(self, spec: Any, llm: Any) -> None:
        from transformers import AutoTokenizer
        from vllm import SamplingParams

        self.options, self.llm = spec.task_options, llm
        self.tokenizer: Any = AutoTokenizer.from_pretrained(spec.model_path, local_files_only=True)
        eos = llm.llm_engine.vllm_config.model_config.hf_config.eos_token_id  # the model's own, as a user reads it
        self.eos = sorted({*(eos if isinstance(eos, list) else [eos]), *_generation_eos(spec.model_path)})
        self.params = SamplingParams(temperature=0.0, max_tokens=int(self.options["max_new_tokens"]),
                                     logprobs=int(self.options["top_k"]), stop_token_ids=self.eos, detokenize=False)

    def prompt_ids(self, text: str) -> list[int]:
        filled = self.options["template"].replace("{text}", text)
        if self.options.get("chat_template"):
            filled = self.tokenizer.apply_chat_template([{"role": "user", "content": filled}], tokenize=False,
                                                        add_generation_prompt=True)
        return list(self.tokenizer(filled, add_special_tokens=not self.options.get("chat_template"))["input_ids"])

    def timed_pass(self, corpus_path: str, batch_size: int, clock: Any) -> tuple[float, list[list[int]]]:
        start = clock()
        with open(corpus_path, encoding="utf-8") as handle:
            texts = [json.loads(line)["text"] for line in handle if line.strip()]
        prompts = [{"prompt_token_ids": self.prompt_ids(text)} for text in texts]
        k = int(self.options["top_k"])
        tokens: list[list[int]] = []
        for first in range(0, len(prompts), batch_size):
            for output in self.llm.generate(prompts[first:first + batch_size], self.params, use_tqdm=False):
                completion = output.outputs[0]
                ids = list(completion.token_ids)
                self.tokenizer.decode(ids, skip_special_tokens=True)
                [sorted(position.items(), key=lambda item: item[1].rank)[:k] for position in completion.logprobs]
                tokens.append(ids)
        return clock() - start, tokens


def _generation_eos(model_path: str) -> list[int]:
    try:
        config = json.loads((Path(model_path) / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    eos = config.get("eos_token_id")
    return [] if eos is None else (eos if isinstance(eos, list) else [eos])


def _runner(spec: Any, model: Any, out: Path) -> dict[str, Any]:
    from benchmarks.generation import pass_record
    from runner.trial.run import Trial

    out.mkdir()
    trial = Trial(spec, out)
    trial.base_manifest()
    trial.setup_torch()
    trial._pass(model)
    return pass_record(trial, out)


def worker(spec_path: Path, out: Path, pairs: int) -> int:
    import gc

    import runner.trial.measured_pass as pass_module
    from protocol.records.codec import read_record
    from protocol.records.stages import TrialSpec
    from runner.trial.engines import trial_engine
    from runner.trial.run import Trial

    spec = read_record(spec_path, TrialSpec)
    spec = dataclasses.replace(spec, task_options=dict(spec.task_options))
    loader = Trial(spec, out / "load")
    (out / "load").mkdir()
    loader.base_manifest()
    problem = loader.verify()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    loader.setup_torch()
    engine = trial_engine("vllm")
    try:
        model = loader.load_model(engine)
        loader.warm_up(model)
        bare = BareLoop(spec, model.llm)  # type: ignore[attr-defined]
        results = []
        for mode, clock in (("wall", time.perf_counter), ("cpu", tree_cpu_s)):
            pass_module.clock = clock  # type: ignore[assignment]
            for index in range(pairs):
                record: dict[str, Any] = {"clock": mode, "pair": index + 1, "load_average": list(os.getloadavg())}
                for side in (("runner", "bare") if index % 2 == 0 else ("bare", "runner")):
                    gc.collect()
                    if side == "runner":
                        record.update(_runner(spec, model, out / f"runner-{mode}-{index}"))
                    else:
                        record["bare_s"], record["bare_tokens"] = bare.timed_pass(spec.corpus_path,
                                                                                  spec.variant.batch_size, clock)
                record["same_tokens"] = record.pop("tokens") == record.pop("bare_tokens")
                results.append(record)
                print(f"{mode} pair {index + 1}: runner {record['runner_pass_s']:.3f}, bare {record['bare_s']:.3f}",
                      flush=True)
        pass_module.clock = time.perf_counter  # type: ignore[assignment]
        (out / "vllm-pass.json").write_text(json.dumps({"pairs": results, "load_s": loader.state.phases["load_s"],
                                                        "engine": loader.manifest.get("engine", {})}, indent=1),
                                            encoding="utf-8")
    finally:
        engine.close(None)  # the engine's own close: its core and worker stopped, whatever happened
    return 0


if __name__ == "__main__":
    sys.exit(worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
