"""Benchmark 12: through vLLM's HTTP server, isocost's measured times against those vLLM reports per request.

The demo's ``generate`` stories (SmolLM2 fp32, eager, 16 new tokens, top-5; isocost's own prompts) go to vLLM's
OpenAI-compatible server as isocost's trial starts it (``[engines.vllm] server = true``:
:func:`protocol.engines.vllm.trial.server.start_server`, ``--enable-per-request-metrics``), in ONE fresh process of
``.venv-vllm``'s interpreter. Each request is sent by isocost's client (:func:`stream_completion`, what a trial
sends), which times it from sending: its first streamed token (isocost's time to first token) and its end
(isocost's latency); the server reports, in the same stream, its own ``queue_time_ms`` (queued to scheduled),
``time_to_first_token_ms`` (scheduled to first token) and ``generation_time_ms`` (first to last token). For the
SAME request:

- row 12: isocost's time to first token ÷ vLLM's (queue + time to first token), median over the requests;
- row 12b: isocost's latency ÷ vLLM's (queue + time to first token + generation), median over the requests.

Target: within 5 % (each ratio in [0.95, 1.05]). The requests are sent one at a time (``--vllm-server-requests``),
then in groups of three at once, as the trial sends a batch of three (reported in the details, not judged: on two
cores the server's front end waits for the CPU its engine holds, and vLLM's clock starts only when the front end
hands the request to the engine). Without ``.venv-vllm`` the rows are empty with the reason, never a zero.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Row, worker_result

TOLERANCE = 0.05
TITLE = "vLLM HTTP server: isocost's client times vs vLLM's own per-request metrics, same requests"


def run(root: Path, requests: int = 16, progress: Any = print, timeout_s: float | None = None) -> list[Row]:
    from benchmarks.generation import make_slice
    from runner.launch.kinds.process.interpreter import own_python
    from runner.launch.kinds.process.launcher import trial_env

    title = f"{TITLE} (SmolLM2 fp32, {requests} requests one at a time, 16 new tokens)"
    target = f"within {TOLERANCE:.0%} (ratio in [{1 - TOLERANCE:.2f}, {1 + TOLERANCE:.2f}])"
    python = own_python("vllm")
    if not Path(python).exists():
        reason = f"not run: no vLLM environment at {python} (make vllm builds it)"
        return [Row(key=key, title=title, target=target, reason=reason) for key in ("12", "12b")]
    study = make_slice(root / "slice", requests, 16)
    with tempfile.TemporaryDirectory(prefix="isocost-bench-vllm-server-") as tmp:
        out = Path(tmp)
        progress(f"  one vLLM server start, then {requests} requests one at a time and {requests} three at once")
        result, why = worker_result([python, "-m", "benchmarks.vllm_server", str(study), str(out), str(requests)],
                                    out / "vllm-server.json", {**trial_env(), "PYTHONPATH": str(ROOT)}, timeout_s)
    if why:
        return [Row(key="12", title=title, target=target, reason=why)]
    return rows(result, title, target)


def ratios(requests: list[dict[str, Any]], measure: str) -> list[float]:
    """Per request: isocost's time ÷ vLLM's for ``measure`` ("ttft" or "latency"); requests lacking a figure are
    left out."""
    found = []
    for request in requests:
        server = request["server"]
        parts = [server.get("queue_time_ms"), server.get("time_to_first_token_ms")]
        if measure == "latency":
            parts.append(server.get("generation_time_ms"))
        mine = request["client_ttft_ms"] if measure == "ttft" else request["client_latency_ms"]
        if mine is not None and all(isinstance(p, int | float) for p in parts) and sum(parts) > 0:
            found.append(mine / sum(parts))
    return found


def rows(result: dict[str, Any], title: str, target: str) -> list[Row]:
    made = []
    for key, measure, words in (("12", "ttft", "time to first token"), ("12b", "latency", "latency")):
        alone, grouped = ratios(result["alone"], measure), ratios(result["grouped"], measure)
        if not alone:
            made.append(Row(key=key, title=f"{title}: {words}", target=target,
                            reason="vLLM reported no per-request metrics for these requests"))
            continue
        median = statistics.median(alone)
        met = abs(median - 1) <= TOLERANCE
        client = statistics.median(r[f"client_{'ttft' if measure == 'ttft' else 'latency'}_ms"]
                                   for r in result["alone"])
        made.append(Row(
            key=key, title=f"{title}: {words}", measured=f"{client:.1f} ms isocost (median, one at a time)",
            baseline="vLLM's own per-request metrics, the same requests",
            ratio=f"{median:.3f} [{min(alone):.3f}–{max(alone):.3f}] isocost/vLLM; three at once "
                  f"{statistics.median(grouped):.3f} [{min(grouped):.3f}–{max(grouped):.3f}]" if grouped else
                  f"{median:.3f} [{min(alone):.3f}–{max(alone):.3f}] isocost/vLLM",
            target=target, met=met, reason="" if met else "isocost's clock and vLLM's differ by more than 5 %",
            details={"alone": alone, "grouped": grouped, "ready_s": result["ready_s"], "requests": result}))
    return made


# -- inside the worker process (.venv-vllm) --------------------------------------------------------


def worker(study_path: Path, out: Path, count: int) -> int:
    import torch

    from protocol.engines.vllm.trial.engine import DEFAULTS, NO_COMPILE_ENV, OFFLINE_ENV
    from protocol.engines.vllm.trial.server import request_line, start_server, stream_completion
    from protocol.study.load import load_study
    from protocol.tasks.generation.trial import TRIAL_TASK
    from runner.trial.faults import FaultInjector

    os.environ.update({**OFFLINE_ENV, NO_COMPILE_ENV: "1"})  # as the trial's engine sets them (eager)
    for key in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME"):
        os.environ.setdefault(key, str(out / key.lower()))
    study = load_study(study_path)
    variant = study.variants()[0]
    options = dict(study.task_options)
    model = TRIAL_TASK.load(Path(study.model.path), variant, torch, dict(options))  # isocost's prompts
    prompts = [feature["input_ids"] for feature in model.tokenize([r.text for r in _records(study)][:count])]
    settings = {**DEFAULTS, "max_model_len": 512, "max_num_seqs": 8, "server": True}
    backend = start_server(sys.executable, Path(study.model.path), variant, settings, int(options["top_k"]), out,
                           FaultInjector(""))
    try:
        def send(prompt: list[int]) -> dict[str, Any]:
            answer = stream_completion(backend.process.port, prompt, int(options["max_new_tokens"]),
                                       int(options["top_k"]), list(model.eos_ids))
            return dict(json.loads(request_line(answer, 0, 0)))

        for prompt in prompts[:2]:
            send(prompt)  # warm-up, as a trial's
        alone = [send(prompt) for prompt in prompts]
        grouped: list[dict[str, Any]] = []  # three at once, as a trial sends a batch of three
        for first in range(0, len(prompts), 3):
            threads = [threading.Thread(target=lambda p=p: grouped.append(send(p))) for p in prompts[first:first + 3]]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        (out / "vllm-server.json").write_text(json.dumps({"alone": alone, "grouped": grouped,
                                                          "ready_s": backend.ready_s}), encoding="utf-8")
    finally:
        backend.process.stop()
    return 0


def _records(study: Any) -> list[Any]:
    from protocol.corpus import read_corpus

    return list(read_corpus(Path(study.corpus.path), require_label=False))


if __name__ == "__main__":  # the worker: python -m benchmarks.vllm_server STUDY OUT REQUESTS
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(worker(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
