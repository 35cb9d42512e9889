"""``python -m benchmarks`` (``make bench``): what the harness costs, and how the analysis scales.

Prints one table and writes ``benchmarks/results/<name>-<UTC date and time>.json`` (the machine,
every raw sample) after EVERY benchmark, so a later failure loses nothing. See
docs/performance.md for what each figure means.

    python -m benchmarks                      # everything, sized to finish in < 15 min here
    python -m benchmarks --only 5,2           # just some
    python -m benchmarks --only 6,7           # the sentence-embedding pass and its check at scale
    python -m benchmarks --only 9             # serving: LoadGen driving isocost's system under test vs a bare one
    python -m benchmarks --only 10,11         # the engines: ONNX Runtime and vLLM passes vs their bare loops
    python -m benchmarks --only 12            # vLLM's HTTP server: isocost's clock vs vLLM's per-request metrics
    python -m benchmarks --image sha256:…     # containers with this image (else study / images.lock)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Row, load_average, machine_facts, now_iso, write_results
from benchmarks.table import machine_line, table

#: Cheapest and most deterministic first; 4 stops at the time budget.
ALL = ("5", "7", "2", "9", "1", "6", "8", "10", "11", "12", "3", "4")
RESULTS_DIR = ROOT / "benchmarks" / "results"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="bench", help="results file prefix (default: bench)")
    parser.add_argument("--only", default=",".join(sorted(ALL)), help="benchmarks to run, e.g. 1,5 (default: all)")
    parser.add_argument("--pairs", type=int, default=12, help="interleaved pairs for benchmark 1 (≥ 5; default 12)")
    parser.add_argument("--overhead-inputs", type=int, default=60,
                        help="demo inputs in benchmark 1's pass (default 60 of 300)")
    parser.add_argument("--overhead-threads", type=int, default=1,
                        help="torch threads in benchmark 1, both sides (default 1: on a small shared machine, "
                             "2-thread passes swing several-fold with other load, which hides the harness)")
    parser.add_argument("--overhead-campaign-inputs", type=int, default=20,
                        help="demo inputs per trial in benchmark 3 (default 20: the overhead does not depend on it)")
    parser.add_argument("--overhead-campaign-repetitions", type=int, default=3,
                        help="repetitions per variant in benchmark 3 (default 3: 9 trials per launcher)")
    parser.add_argument("--campaign-inputs", type=int, default=300,
                        help="demo inputs in benchmark 4 (default 300 = the whole quick corpus)")
    parser.add_argument("--repetitions", type=int, default=1,
                        help="repetitions per variant in benchmark 4 (the demo's own is 5; default 1)")
    parser.add_argument("--image", default=os.environ.get("BENCH_IMAGE") or None,
                        help="image for the container benchmarks (default: the study's, else images/images.lock)")
    parser.add_argument("--predictions", type=int, default=1_000_000, help="benchmark 5: predictions in the pass")
    parser.add_argument("--raw-rows", type=int, default=100_000, help="benchmark 5: rows in the raw table")
    parser.add_argument("--embedding-vectors", type=int, default=100_000, help="benchmark 7: vectors in the pass")
    parser.add_argument("--embedding-queries", type=int, default=1_000, help="benchmark 7: queries")
    parser.add_argument("--embedding-inputs", type=int, default=24, help="benchmark 6: article bodies in the pass")
    parser.add_argument("--embedding-pairs", type=int, default=5, help="benchmark 6: interleaved pairs (default 5)")
    parser.add_argument("--generation-inputs", type=int, default=8,
                        help="benchmark 8: stories of the demo's generate corpus in the pass (default 8)")
    parser.add_argument("--generation-pairs", type=int, default=4, help="benchmark 8: interleaved pairs (default 4)")
    parser.add_argument("--serving-rate", type=float, default=50.0, help="benchmark 9: target qps (default 50)")
    parser.add_argument("--serving-service-ms", type=float, default=5.0,
                        help="benchmark 9: fixed service time per query, ms (default 5)")
    parser.add_argument("--serving-duration-s", type=float, default=8.0,
                        help="benchmark 9: seconds per run (default 8)")
    parser.add_argument("--serving-pairs", type=int, default=5, help="benchmark 9: interleaved pairs (default 5)")
    parser.add_argument("--onnxruntime-inputs", type=int, default=60,
                        help="benchmark 10: demo inputs in the ONNX Runtime pass (default 60 of 300)")
    parser.add_argument("--onnxruntime-pairs", type=int, default=5, help="benchmark 10: interleaved pairs (default 5)")
    parser.add_argument("--vllm-inputs", type=int, default=24,
                        help="benchmark 11: stories of the demo's generate corpus in the vLLM pass (default 24, all)")
    parser.add_argument("--vllm-pairs", type=int, default=6, help="benchmark 11: interleaved pairs per clock "
                        "(default 6)")
    parser.add_argument("--vllm-server-requests", type=int, default=16,
                        help="benchmark 12: stories sent to vLLM's HTTP server, one at a time (default 16)")
    parser.add_argument("--budget-s", type=float, default=14 * 60, help="wall-time budget (default 840 s)")
    args = parser.parse_args(argv)
    if args.pairs < 5:
        parser.error("--pairs must be at least 5")
    return args


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.started_at = now_iso()
        self.machine = machine_facts()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%MZ")
        self.path = RESULTS_DIR / f"{args.name}-{stamp}.json"
        self.rows: list[Row] = []
        self.extra: dict[str, Any] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return self.args.budget_s - self.elapsed()

    def save(self) -> None:
        write_results(self.path, {
            "name": self.args.name, "started_at": self.started_at, "updated_at": now_iso(),
            "elapsed_s": self.elapsed(), "machine": self.machine, "load_average_now": load_average(),
            "settings": {k: v for k, v in vars(self.args).items()},
            "rows": [row.to_dict() for row in self.rows], "table_markdown": table(self.rows), **self.extra,
        })

    def add(self, rows: list[Row]) -> None:
        self.rows.extend(rows)
        self.save()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    wanted = {part.strip() for part in args.only.split(",") if part.strip()}
    bench = Bench(args)
    say(f"isocost benchmarks, {bench.started_at}: {machine_line(bench.machine)}")
    with tempfile.TemporaryDirectory(prefix="isocost-bench-") as tmp:
        os.environ["ISOCOST_HOME"] = str(Path(tmp) / "home")  # the seen-corpus ledger stays private
        for key in ALL:
            if key not in wanted:
                continue
            say(f"[{key}] {TITLES[key]} (elapsed {bench.elapsed():.0f} s)")
            try:
                RUNNERS[key](bench, Path(tmp))
            except Exception as exc:  # one broken benchmark must not hide the others
                traceback.print_exc()
                bench.add([Row(key=key, title=TITLES[key], reason=f"failed: {type(exc).__name__}: {exc}")])
    bench.rows.sort(key=lambda row: (row.key.rstrip("abcp"), row.key))
    bench.save()
    print()
    print(f"isocost benchmarks, {bench.started_at} ({bench.elapsed():.0f} s)")
    print(f"machine: {machine_line(bench.machine)}")
    print()
    print(table(bench.rows))
    print()
    print(f"results: {bench.path.relative_to(ROOT)}")
    return 0


TITLES = {
    "1": "measurement overhead: runner's measured pass vs a bare loop",
    "2": "timer correctness",
    "3": "container (and process) overhead per trial",
    "4": "campaign efficiency",
    "5": "scale of the analysis",
    "6": "sentence embeddings: the runner's measured pass vs a bare AutoModel loop",
    "7": "sentence embeddings: checking one pass of 100,000 vectors vs numpy",
    "8": "text generation: measured pass vs a bare model.generate loop, tokens/s against the output file",
    "9": "serving: LoadGen driving isocost's system under test vs a bare function, same service time and rate",
    "10": "ONNX Runtime classification: isocost's onnxruntime pass vs a bare InferenceSession.run loop",
    "11": "vLLM generation: isocost's vllm pass vs a bare LLM.generate loop, tokens/s against the output file",
    "12": "vLLM HTTP server: isocost's time to first token and latency vs vLLM's own per-request metrics",
}


def _scale(bench: Bench, tmp: Path) -> None:
    from benchmarks import scale

    variants = max(bench.args.raw_rows // 5, 1)
    bench.add(scale.run(predictions=bench.args.predictions, variants=variants, repetitions=5, pairs=5, progress=say))


def _timer(bench: Bench, tmp: Path) -> None:
    from benchmarks import timer

    bench.add([timer.run(progress=say)])


def _overhead(bench: Bench, tmp: Path) -> None:
    from benchmarks import overhead
    from benchmarks.workspace import make_workspace

    workspace = make_workspace(tmp / "overhead", inputs=bench.args.overhead_inputs, repetitions=1,
                               threads=bench.args.overhead_threads)
    rows = overhead.run(workspace, pairs=bench.args.pairs, progress=say, timeout_s=max(bench.remaining() * 0.4, 60))
    bench.add(rows)


def _overhead_campaigns(bench: Bench, tmp: Path) -> None:
    from benchmarks import trial_overhead
    from benchmarks.workspace import make_workspace

    workspace = make_workspace(tmp / "overhead-campaign", inputs=bench.args.overhead_campaign_inputs,
                               repetitions=bench.args.overhead_campaign_repetitions)
    rows, runs = trial_overhead.run_overhead(workspace, image=bench.args.image, progress=say)
    bench.extra["overhead_campaigns"] = {kind: {k: v for k, v in data.items() if k != "events"}
                                         for kind, data in runs.items()}
    bench.add(rows)


def _efficiency_campaigns(bench: Bench, tmp: Path) -> None:
    from benchmarks import trial_overhead
    from benchmarks.workspace import make_workspace

    workspace = make_workspace(tmp / "efficiency-campaign", inputs=bench.args.campaign_inputs,
                               repetitions=bench.args.repetitions)
    deadline = bench.started + bench.args.budget_s - 20  # monotonic clock, as Bench.started
    rows, runs = trial_overhead.run_efficiency(workspace, image=bench.args.image, progress=say, deadline=deadline)
    bench.extra["efficiency_campaigns"] = {kind: {k: v for k, v in data.items() if k != "events"}
                                           for kind, data in runs.items()}
    bench.add(rows)


def _embedding_pass(bench: Bench, tmp: Path) -> None:
    from benchmarks import embedding_pass

    bench.add(embedding_pass.run(inputs=bench.args.embedding_inputs, pairs=bench.args.embedding_pairs,
                                 threads=bench.args.overhead_threads, progress=say,
                                 timeout_s=max(bench.remaining() * 0.4, 120)))


def _embedding_check(bench: Bench, tmp: Path) -> None:
    from benchmarks import embedding_check

    bench.add([embedding_check.run(documents=bench.args.embedding_vectors, queries=bench.args.embedding_queries,
                                   progress=say)])


def _generation(bench: Bench, tmp: Path) -> None:
    from benchmarks import generation

    bench.add(generation.run(tmp / "generation", inputs=bench.args.generation_inputs,
                             pairs=bench.args.generation_pairs, progress=say,
                             timeout_s=max(bench.remaining() * 0.4, 60)))


def _serving(bench: Bench, tmp: Path) -> None:
    from benchmarks import serving

    bench.add(serving.run(rate_qps=bench.args.serving_rate, service_ms=bench.args.serving_service_ms,
                          duration_s=bench.args.serving_duration_s, pairs=bench.args.serving_pairs, progress=say))


def _onnxruntime_pass(bench: Bench, tmp: Path) -> None:
    from benchmarks import onnxruntime_pass
    from benchmarks.workspace import make_workspace

    workspace = make_workspace(tmp / "onnxruntime", inputs=bench.args.onnxruntime_inputs, repetitions=1,
                               threads=bench.args.overhead_threads)
    bench.add(onnxruntime_pass.run(workspace, pairs=bench.args.onnxruntime_pairs, progress=say,
                                   timeout_s=max(bench.remaining() * 0.4, 120)))


def _vllm_pass(bench: Bench, tmp: Path) -> None:
    from benchmarks import vllm_pass

    bench.add(vllm_pass.run(tmp / "vllm", inputs=bench.args.vllm_inputs, pairs=bench.args.vllm_pairs, progress=say,
                            timeout_s=max(bench.remaining() * 0.5, 240)))


def _vllm_server(bench: Bench, tmp: Path) -> None:
    from benchmarks import vllm_server

    bench.add(vllm_server.run(tmp / "vllm-server", requests=bench.args.vllm_server_requests, progress=say,
                              timeout_s=max(bench.remaining() * 0.5, 240)))


RUNNERS = {"1": _overhead, "2": _timer, "3": _overhead_campaigns, "4": _efficiency_campaigns, "5": _scale,
           "6": _embedding_pass, "7": _embedding_check, "8": _generation, "9": _serving, "10": _onnxruntime_pass,
           "11": _vllm_pass, "12": _vllm_server}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
