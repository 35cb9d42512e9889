"""``python -m runner.trial.selfcheck``: the checks of ``isocost selfcheck``, in one process that has torch.

The host command (``runner.selfcheck.host``) starts this with the host's own python and torch, no
container, no network, and reads back ``OUT/selfcheck.json``, which is rewritten after every check
(a check that hangs or a process stopped at the budget loses only what was still running). The
checks run in the order of ``protocol.records.selfcheck.CHECK_NAMES``; before each, its usual duration is
compared with what is left of ``--budget-s`` (minus what the host's OOM trial needs afterwards), and a
step that does not fit is cut: a ``SKIP`` that says so. A check that raises is a ``FAIL`` with the
error (its traceback goes to this process's stderr, ``OUT/selfcheck.log``).

Example::

    python -m runner.trial.selfcheck --device cuda --out results/selfcheck --budget-s 300 --texts 300 \\
        --model .isocost-demo/model --model-source demo --corpus .isocost-demo/corpus-quick.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.records.codec import write_record
from protocol.records.selfcheck import Check, SelfcheckReport, cut_for_budget, failed, skipped
from runner.trial.measure import clock
from runner.trial.selfcheck_device import (
    Context,
    check_async,
    check_energy,
    check_gpu,
    check_memory,
    check_oom,
    check_timing,
)
from runner.trial.selfcheck_model import prepare_workload
from runner.trial.selfcheck_trials import check_compile, check_numerics, check_warmup, write_oom_trial

REPORT_NAME = "selfcheck.json"
#: Texts per trial unless --texts says otherwise: the demo's quick corpus on a GPU, a few on a CPU.
DEFAULT_TEXTS_GPU = 300
DEFAULT_TEXTS_CPU = 32
#: Seconds the host's OOM trial (a fresh process: imports, load, fill) usually needs after this process.
OOM_TRIAL_NEEDS_S = {True: 30.0, False: 0.0}


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Context], Check]
    #: Usual seconds on a GPU and on a CPU (0: the check only says why it does not apply there).
    needs_gpu_s: float
    needs_cpu_s: float
    uses_model: bool = False

    def needs_s(self, gpu: bool) -> float:
        return self.needs_gpu_s if gpu else self.needs_cpu_s


STEPS: tuple[Step, ...] = (
    Step("gpu", check_gpu, 5, 0),
    Step("timing", check_timing, 3, 2),
    Step("async", check_async, 3, 0),
    Step("memory", check_memory, 2, 0),
    Step("energy", check_energy, 3, 2),
    Step("warmup", check_warmup, 25, 15, uses_model=True),
    Step("numerics", check_numerics, 30, 25, uses_model=True),
    Step("oom", check_oom, 15, 0),
    Step("compile", check_compile, 150, 0, uses_model=True),
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def resolve_device(asked: str, torch: Any) -> str:
    """``auto``: the torch build's own stack (a CUDA build checks its GPU, and fails without one)."""
    if asked != "auto":
        return asked
    from runner.trial.torch_settings import detected_backend

    return detected_backend(torch)


def environment(torch: Any, device: str) -> dict[str, Any]:
    from runner.trial.env import cpu_facts, software_facts
    from runner.trial.torch_settings import numerics_settings

    return {"software": software_facts(torch), "host": cpu_facts(),
            "numerics": numerics_settings(torch, "cpu" if device == "cpu" else "cuda"),
            # passed to this process by the host, never to a process-launched trial (the OOM trial shows whether
            # the trials find the GPU without it)
            "ld_library_path": os.environ.get("LD_LIBRARY_PATH")}


class Selfcheck:
    """Runs the steps in order within the budget, saving the report after each."""

    def __init__(self, args: argparse.Namespace, torch: Any) -> None:
        self.args = args
        self.start = clock()
        device = resolve_device(args.device, torch)
        self.ctx = Context(torch=torch, device=device, out=args.out, budget_s=args.budget_s)
        model = {"source": args.model_source, "path": str(args.model) if args.model else "(built in OUT)",
                 "description": "not loaded yet"}
        self.report = SelfcheckReport(device=device, requested_device=args.device, model=model,
                                      budget_s=args.budget_s, started_at=_now(), environment=environment(torch, device))
        self.save()

    def save(self) -> None:
        write_record(self.args.out / REPORT_NAME, self.report)

    def left_s(self) -> float:
        return self.args.budget_s - (clock() - self.start) - OOM_TRIAL_NEEDS_S[self.ctx.gpu]

    def run(self) -> None:
        for step in STEPS:
            check = self.one(step)  # may record the model it prepared in the report
            self.report = self.report.with_check(check)
            if step.name == "gpu" and self.ctx.facts:
                env = {**self.report.environment, "device": self.ctx.facts, "device_reasons": self.ctx.reasons}
                self.report = dataclasses.replace(self.report, environment=env)
            self.save()
        self.report = dataclasses.replace(self.report, ended_at=_now(), elapsed_s=clock() - self.start)
        self.save()

    def one(self, step: Step) -> Check:
        ctx = self.ctx
        needs, left = step.needs_s(ctx.gpu), self.left_s()
        if needs > left:
            return cut_for_budget(step.name, self.args.budget_s, needs, left)
        if ctx.gpu and not ctx.usable and step.name != "gpu":
            return skipped(step.name, "no usable GPU: see the gpu check")
        started = clock()
        try:
            if step.uses_model and ctx.workload is None:
                self.prepare()
            check = step.run(ctx)
        except UserError as exc:
            check = failed(step.name, "", exc.message)
        except Exception as exc:  # a check that breaks is a FAIL with its reason, never a lost report
            traceback.print_exc()
            check = failed(step.name, "", f"{type(exc).__name__}: {exc}")
        return dataclasses.replace(check, seconds=round(clock() - started, 3))

    def prepare(self) -> None:
        args = self.args
        texts = args.texts or (DEFAULT_TEXTS_GPU if self.ctx.gpu else DEFAULT_TEXTS_CPU)
        workload = prepare_workload(args.out, args.model, args.corpus, texts, args.model_source)
        self.ctx.workload = workload
        self.report = dataclasses.replace(self.report, model=workload.to_dict())
        if self.ctx.gpu:  # written now, so the host can run it even if this process is stopped at the budget
            write_oom_trial(self.ctx)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runner.trial.selfcheck")
    parser.add_argument("--device", choices=("auto", "cuda", "rocm", "cpu"), default="auto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--texts", type=int, default=0, help="0: 300 on a GPU, 32 on a CPU")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--model-source", choices=("given", "demo", "random"), default="random")
    parser.add_argument("--corpus", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.device != "cpu":  # before any cuBLAS handle exists, as a deterministic GPU trial needs it
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    Selfcheck(args, torch).run()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
