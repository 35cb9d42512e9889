"""``isocost selfcheck`` on the host: choose the model, run the checks with the host's own torch, then the
OOM trial in a fresh process, and write ``selfcheck.json`` and ``selfcheck.txt``.

The checks run as ``python -m runner.trial.selfcheck`` (the host CLI never imports torch), with this
interpreter and the environment a process-launched trial gets (``runner.launch.kinds.process.launcher.trial_env``:
offline, this checkout on ``PYTHONPATH``), stopped at the budget plus a short grace. Then, on a GPU,
the OOM trial that process wrote runs through :class:`runner.launch.kinds.process.launcher.ProcessLauncher`, exactly
as a campaign's trial, with a real device out-of-memory injected (``protocol.records.selfcheck.OOM_FAULT``);
the campaign's own rule (``runner.campaign.gather.decide_status``) must make it an ``oom`` row.

Example::

    report = run_selfcheck(Request(device="cpu", out=Path("results/selfcheck"), budget_s=120))
    print(render_text(report), end="")
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from protocol.corpus import read_corpus
from protocol.errors import UserError
from protocol.io.jsonio import write_text_atomic
from protocol.io.safe_write import write_binary
from protocol.records.codec import read_record, write_record
from protocol.records.selfcheck import (
    CHECK_NAMES,
    OOM_FAULT,
    Check,
    SelfcheckReport,
    cut_for_budget,
    failed,
    passed,
    render_text,
    skipped,
)
from protocol.records.stages import TrialSpec
from protocol.tasks.classification.labels import check_labels
from runner.campaign.gather import decide_status, read_status
from runner.launch.kinds.process.launcher import ProcessLauncher, trial_env
from runner.launch.launcher import LaunchResult, TrialPaths
from runner.trial.faults import FAULT_ENV
from runner.trial.measure import clock

#: Seconds the check process may run past the budget (imports, writing its report) before it is stopped.
GRACE_S = 30.0
#: Seconds the OOM trial needs: a fresh process imports torch and transformers, loads the model, fills the card.
OOM_TRIAL_NEEDS_S = 30.0
DEMO_CORPUS = "corpus-quick.jsonl"


@dataclass(frozen=True)
class Request:
    """What ``isocost selfcheck`` was asked."""

    device: str = "auto"
    out: Path = Path("results/selfcheck")
    budget_s: float = 300.0
    model: Path | None = None
    corpus: Path | None = None
    demo_dir: Path = Path(".isocost-demo")
    texts: int = 0  # 0: the trial side's default for the device
    python: str = sys.executable


def choose_model(request: Request) -> tuple[str, Path | None, Path | None]:
    """(source, model directory, corpus): the model given, else the demo's, else none (a random one is built)."""
    if request.model is not None:
        if not (request.model / "config.json").is_file():
            raise UserError("not a checkpoint directory (no config.json)", str(request.model),
                            "Pass --model a directory saved by save_pretrained (config, weights, tokenizer).")
        return "given", request.model, request.corpus
    demo_model = request.demo_dir / "model"
    if (demo_model / "config.json").is_file():
        corpus = request.corpus or (request.demo_dir / DEMO_CORPUS if (request.demo_dir / DEMO_CORPUS).is_file()
                                    else None)
        return "demo", demo_model, corpus
    return "random", None, request.corpus


def check_command(request: Request) -> list[str]:
    source, model, corpus = choose_model(request)
    command = [request.python, "-m", "runner.trial.selfcheck", "--device", request.device, "--out",
               str(request.out), "--budget-s", f"{request.budget_s:g}", "--texts", str(request.texts),
               "--model-source", source]
    if model is not None:
        command += ["--model", str(model)]
    if corpus is not None:
        command += ["--corpus", str(corpus)]
    return command


def run_checks(request: Request) -> tuple[int | None, bool]:
    """Run the check process (output in ``OUT/selfcheck.log``); returns (exit status, stopped at the budget)."""
    request.out.mkdir(parents=True, exist_ok=True)
    extra = {"TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    if os.environ.get("LD_LIBRARY_PATH"):  # where some GPU hosts keep the driver's libcuda (trials drop it)
        extra["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    env = trial_env(extra)
    with write_binary(request.out / "selfcheck.log", request.out) as log:  # never through a link
        proc = subprocess.Popen(check_command(request), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            return proc.wait(timeout=request.budget_s + GRACE_S), False
        except subprocess.TimeoutExpired:
            _stop(proc)
            return proc.returncode, True
        except BaseException:
            _stop(proc)
            raise


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def load_report(out: Path, code: int | None) -> SelfcheckReport:
    path = out / "selfcheck.json"
    if not path.is_file():
        log = out / "selfcheck.log"
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        raise UserError(f"the check process wrote no selfcheck.json (exit {code}): {' | '.join(tail)}", str(out),
                        "It needs torch and transformers in this python (pip install -e '.[trial]'); "
                        f"its output is in {log}.")
    return read_record(path, SelfcheckReport)


def complete(report: SelfcheckReport, code: int | None, stopped: bool) -> SelfcheckReport:
    """A SKIP for every in-process check that has no verdict (the process was stopped, or ended early)."""
    why = (f"cut: the check process was stopped at the budget ({report.budget_s:g} s + {GRACE_S:g} s grace) "
           "while this or an earlier check ran" if stopped else
           f"not run: the check process ended early (exit {code}); see selfcheck.log")
    for name in CHECK_NAMES:
        if name != "oom-trial" and report.check(name) is None:
            report = report.with_check(skipped(name, why))
    return report


@contextmanager
def _fault(value: str) -> Iterator[None]:
    """The fault variable for the one trial launched inside (the launcher passes it on); restored after."""
    before = os.environ.get(FAULT_ENV)
    os.environ[FAULT_ENV] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(FAULT_ENV, None)
        else:
            os.environ[FAULT_ENV] = before


def oom_trial(report: SelfcheckReport, out: Path, left_s: float) -> Check:
    """Run the OOM trial the check process wrote, in a fresh process, and judge the row it makes."""
    directory = out / "trials" / "oom"
    if report.device == "cpu":
        return skipped("oom-trial", "CPU: no device memory to exhaust (filling host memory would hit the whole "
                                    "machine)")
    if not (directory / "spec.json").is_file():
        return skipped("oom-trial", "no OOM trial to run: the gpu check or the model checks did not complete")
    if left_s < OOM_TRIAL_NEEDS_S:
        return cut_for_budget("oom-trial", report.budget_s, OOM_TRIAL_NEEDS_S, left_s)
    spec = read_record(directory / "spec.json", TrialSpec)
    paths = TrialPaths(directory, Path(spec.corpus_path), Path(spec.model_path))
    with _fault(OOM_FAULT):
        result = ProcessLauncher().run(paths, max(left_s, OOM_TRIAL_NEEDS_S))
    return judge_oom_trial(spec, directory, result)


def judge_oom_trial(spec: TrialSpec, directory: Path, result: LaunchResult) -> Check:
    """PASS when the row is ``oom``, the trial wrote its status (no crash), kept the completed batch and
    both peaks (apart), and names the device's OutOfMemoryError."""
    status, problem = read_status(directory)
    row_status = decide_status(status, result)
    if status is None:
        return failed("oom-trial", f"row status {row_status}", f"the trial crashed: {problem} (exit "
                                                                f"{result.exit_code}); see {directory}/trial.log")
    memory = status.memory
    allocated, reserved = memory.peak_allocated_bytes, memory.peak_reserved_bytes
    error = status.error.splitlines()[0][:160] if status.error else ""
    figure = (f"row status {row_status} (exit {result.exit_code}, status.json written): {status.completed} of "
              f"{status.expected} inputs kept before the device refused; peaks allocated "
              f"{_gib(allocated)}, reserved {_gib(reserved)} (apart); {error}")
    problems = []
    if row_status != "oom":
        problems.append(f"the row would be {row_status!r}, not 'oom'")
    if status.completed != spec.variant.batch_size:
        problems.append(f"{status.completed} inputs completed, expected the first batch ({spec.variant.batch_size})")
    if allocated is None or reserved is None or allocated > reserved:
        problems.append(f"peaks not recorded apart (allocated {allocated}, reserved {reserved})")
    if "OutOfMemoryError" not in status.error:
        problems.append("the error is not torch's OutOfMemoryError")
    details = {"row_status": row_status, "exit_code": result.exit_code, "completed": status.completed,
               "peak_allocated_bytes": allocated, "peak_reserved_bytes": reserved, "trial_dir": str(directory)}
    if problems:
        return failed("oom-trial", figure, "; ".join(problems), **details)
    return passed("oom-trial", figure, **details)


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.2f} GiB" if value is not None else "none"


def check_corpus(request: Request) -> None:
    """Read ``--corpus`` now, as the check process will (and its labels against ``--model``'s): a corpus it cannot
    use is refused at once, not half a minute later under another check's name."""
    source, model, corpus = choose_model(request)
    if corpus is None:
        return
    how = ("Give isocost selfcheck --corpus a classification corpus (JSONL or CSV with id, text, label), or leave "
           "--corpus out to use the demo's texts.")
    try:
        records = read_corpus(corpus)
        if source == "given" and model is not None:
            check_labels([r.label for r in records], model, f"isocost selfcheck --corpus {corpus} --model {model}")
    except UserError as exc:
        raise UserError(exc.what, exc.where, f"{exc.fix} {how}".strip()) from None


def run_selfcheck(request: Request) -> SelfcheckReport:
    """Every check within the budget; writes OUT/selfcheck.json and OUT/selfcheck.txt, returns the report."""
    check_corpus(request)
    start = clock()
    code, stopped = run_checks(request)
    report = complete(load_report(request.out, code), code, stopped)
    started = clock()
    check = oom_trial(report, request.out, request.budget_s - (started - start))
    report = report.with_check(dataclasses.replace(check, seconds=round(clock() - started, 3)))
    report = dataclasses.replace(report, elapsed_s=clock() - start)
    write_record(request.out / "selfcheck.json", report)
    write_text_atomic(request.out / "selfcheck.txt", render_text(report))
    return report
