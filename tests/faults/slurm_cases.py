"""The fault cases of the Slurm launcher: a real small campaign per case through a real one-node cluster.

Each case runs the real MiniLM trial runner as the process runtime inside real Slurm jobs
(tests/slurm/cluster.py starts the cluster: munged, slurmctld, slurmd under a scratch directory)
and injects one fault the cluster owns: the node set DOWN mid-trial, the job cancelled from
outside, isocost's own time limit, Ctrl-C on the host CLI, the host CLI killed. Every case ends
with rows lost 0 (attempts made minus rows), after the ``--resume`` it performs.

``make faults`` runs them after the process and container cases (one cluster for all of them);
``tests/slurm/test_slurm_faults.py`` runs them under pytest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cases import ROOT, NotRun, Outcome, fault, rows_lost

from runner.campaign.launcher_choice import choose_launcher
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.raw_table import HOST_STOP_NOTE, is_host_stopped

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "slurm"))

from cluster import Cluster, SetupMissing, start, stop  # noqa: E402
from workspace import write_workspace  # noqa: E402

#: Set to 1 where the Slurm cases must run (CI): a missing Slurm is then a failure, not "not run".
REQUIRE_SLURM_ENV = "ISOCOST_REQUIRE_SLURM"
OPTIONS = {"gres": "gpu:1", "start_wait": 120}
CLI_OPTIONS = ["--launcher", "slurm", "--slurm-gres", "gpu:1", "--slurm-start-wait", "120"]
#: A job isocost stopped: CANCELLED, or FAILED when the trial ended by itself on the TERM (its status written).
STOPPED = ("CANCELLED", "FAILED")


@dataclass(frozen=True)
class SlurmContext:
    root: Path
    model: Path
    cluster: Cluster
    launcher_name: str = "slurm"

    def study(self, **options: Any) -> Path:
        study = write_workspace(self.root / "ws", self.model, **options)
        for path in [study.parent, *study.parent.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return study

    def launcher(self, study: Path) -> Any:
        return choose_launcher(study, "slurm", options={"slurm": OPTIONS}).launcher


@contextmanager
def slurm_cluster(work: Path) -> Iterator[Cluster]:
    """A cluster for the cases (SLURM_CONF set while it runs); NotRun with the reason where Slurm cannot run."""
    try:
        running = start(work / "slurm")
    except SetupMissing as exc:
        raise NotRun(str(exc), REQUIRE_SLURM_ENV) from None
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(running.conf)
    try:
        yield running
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
        stop(running)


def ready(cluster: Cluster) -> None:
    """No job left, the node up: what each case starts from."""
    cluster.cancel_all()
    if not cluster.usable(cluster.node_state()):
        cluster.set_node("resume")
    cluster.wait_idle()


def _job(trial_dir: Path) -> str:
    try:
        jobs = json.loads((trial_dir / "launcher.json").read_text()).get("jobs") or []
    except (OSError, ValueError):
        return ""
    return str(jobs[-1]["job_id"]) if jobs else ""


def _when_predicting(trial_dir: Path, lines: int, action: Callable[[], None],
                     timeout_s: float = 180) -> threading.Thread:
    """Run ``action`` once the trial has written ``lines`` predictions (bounded)."""
    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            predictions = trial_dir / "predictions.jsonl"
            if predictions.exists() and predictions.read_text().count("\n") >= lines and _job(trial_dir):
                action()
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def _state(cluster: Cluster, job_id: str) -> str:
    line = cluster.scontrol("-o", "show", "job", job_id, check=False)
    words = dict(w.split("=", 1) for w in line.split() if "=" in w)
    return words.get("JobState", "")


def _one_final_row_each(rows: list[dict[str, str]], passes: int) -> bool:
    final = [r for r in rows if not is_host_stopped(r)]
    return sorted(int(r["order_index"]) for r in final) == list(range(1, passes + 1))


def case_node_down_then_resume(ctx: SlurmContext) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    first = out / "trials" / "001-r1-batch_size-1"
    watcher = _when_predicting(first, 3, lambda: ctx.cluster.set_node("down", "isocost fault case"))
    stopped = ""
    with fault("sleep-per-batch:0.4"):
        launcher = ctx.launcher(study)
        try:
            run_campaign(study, out, launcher)
        except KeyboardInterrupt:
            stopped = launcher.lost
    watcher.join()
    lost_row = read_raw(out / "raw.csv")[0]
    ready(ctx.cluster)  # the node back (by hand, or by itself: ReturnToService=2)
    run_campaign(study, out, ctx.launcher(study), resume=True)
    rows = read_raw(out / "raw.csv")
    ok = ("NODE_FAIL" in stopped and HOST_STOP_NOTE in lost_row["notes"] and lost_row["status"] == "interrupted"
          and _one_final_row_each(rows, 2) and all(r["node"] == ctx.cluster.node for r in rows))
    return Outcome("Slurm node set DOWN mid-trial, then --resume", "slurm",
                   "a lost-host row (NODE_FAIL), the campaign stops; --resume completes it",
                   f"first row {lost_row['status']}, {len(rows)} rows for 2 passes", rows_lost(out), ok,
                   stopped[:160])


def case_cancelled_outside(ctx: SlurmContext) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    first = out / "trials" / "001-r1-batch_size-1"
    env = {**os.environ, **ctx.cluster.env}

    def cancel() -> None:
        subprocess.run(["scancel", _job(first)], env=env, check=False, timeout=30)

    watcher = _when_predicting(first, 3, cancel)
    with fault("sleep-per-batch:0.4"):
        run_campaign(study, out, ctx.launcher(study))
    watcher.join()
    rows = read_raw(out / "raw.csv")
    ok = (rows[0]["status"] == "interrupted" and "cancelled outside isocost" in rows[0]["notes"]
          and int(rows[0]["completed"]) >= 3 and HOST_STOP_NOTE not in rows[0]["notes"] and len(rows) == 2
          and rows[1]["status"] == "ok")
    return Outcome("Slurm job cancelled from outside (scancel)", "slurm",
                   "interrupted, completed count kept, final; the campaign goes on",
                   f"{rows[0]['status']}, completed {rows[0]['completed']}; then {rows[-1]['status']}",
                   rows_lost(out), ok, rows[0]["notes"][:160])


def case_own_timeout(ctx: SlurmContext) -> Outcome:
    study = ctx.study(n=8, repetitions=1, batches="[4]", timeout=20)
    out = ctx.root / "out"
    with fault("hang-at-batch:1"):
        run_campaign(study, out, ctx.launcher(study))
    row = read_raw(out / "raw.csv")[0]
    state = _state(ctx.cluster, row["job_id"])
    ok = row["status"] == "timeout" and row["completed"] == "4" and state in ("CANCELLED", "FAILED") \
        and "stopped by isocost at the trial time limit" in row["notes"]
    return Outcome("trial hangs in a Slurm job", "slurm", "isocost's own limit: timeout, the job stopped",
                   f"{row['status']}, completed {row['completed']}, job {state}", rows_lost(out), ok,
                   row["notes"][:160])


def _as_at_a_terminal() -> None:
    """SIGINT handled as Ctrl-C at a terminal: a command a non-interactive shell starts with ``&`` inherits SIGINT
    ignored, and Python then never raises KeyboardInterrupt (the CLI ran to its end, exit 0, whenever the suite was
    started in the background: `slurm-ctrl-c-resume`'s "flaky" failure)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _host(study: Path, out: Path, sleep_s: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ISOCOST_FAULT_INJECT": f"sleep-per-batch:{sleep_s}", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out), *CLI_OPTIONS],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_as_at_a_terminal)


def _wait_for(condition: Callable[[], bool], timeout_s: float = 180) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def _predicting(trial_dir: Path, lines: int) -> Callable[[], bool]:
    def check() -> bool:
        predictions = trial_dir / "predictions.jsonl"
        return predictions.exists() and predictions.read_text().count("\n") >= lines and bool(_job(trial_dir))

    return check


def case_ctrl_c_then_resume(ctx: SlurmContext) -> Outcome:
    # 24 inputs at 0.4 s a batch of 1: the pass runs ~10 s, so the Ctrl-C lands inside it on a loaded machine too.
    study = ctx.study(n=24, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    first = out / "trials" / "001-r1-batch_size-1"
    host = _host(study, out, 0.4)
    predicting = _wait_for(_predicting(first, 2))
    host.send_signal(signal.SIGINT)
    code = host.wait(timeout=300)
    said = host.stderr.read().decode(errors="replace") if host.stderr else ""
    job = _job(first)
    _wait_for(lambda: _state(ctx.cluster, job) in STOPPED, 60)  # COMPLETING may last a moment after scancel
    state = _state(ctx.cluster, job)
    row = read_raw(out / "raw.csv")[0]
    run_campaign(study, out, ctx.launcher(study), resume=True)
    rows = read_raw(out / "raw.csv")
    ok = (predicting and code == 130 and state in STOPPED and row["status"] == "interrupted"
          and HOST_STOP_NOTE in row["notes"] and "--resume" in said and _one_final_row_each(rows, 2))
    return Outcome("Ctrl-C on the host CLI during a Slurm job, then --resume", "slurm",
                   "exit 130, the job stopped, its row kept; --resume runs the pass again",
                   f"exit {code}, job {state}, first row {row['status']}, {len(rows)} rows for 2 passes"
                   + ("" if predicting else "; the pass was never seen predicting"), rows_lost(out), ok,
                   row["notes"][:160])


def case_host_killed_then_resume(ctx: SlurmContext) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    second = out / "trials" / "002-r1-batch_size-4"
    host = _host(study, out, 0.3)
    _wait_for(_predicting(second, 1))
    host.kill()
    host.wait(timeout=60)
    job = _job(second)
    left = _state(ctx.cluster, job)  # the job outlives the killed CLI
    before = (out / "raw.csv").read_bytes()
    lines: list[str] = []
    run_campaign(study, out, ctx.launcher(study), resume=True, progress=lines.append)
    rows = read_raw(out / "raw.csv")
    after = _state(ctx.cluster, job)
    ok = (left == "RUNNING" and after in STOPPED and (out / "raw.csv").read_bytes().startswith(before)
          and _one_final_row_each(rows, 2) and any("cancelled" in line for line in lines))
    return Outcome("host CLI killed during a Slurm job, then --resume", "slurm",
                   "the leftover job stopped by --resume; one final row per pass, earlier rows kept",
                   f"job {left} after the kill, {after} after --resume; {len(rows)} rows for 2 passes",
                   rows_lost(out), ok, next((line for line in lines if "left over" in line), "")[:160])


SLURM_CASES: dict[str, Callable[[SlurmContext], Outcome]] = {
    "slurm-node-down-resume": case_node_down_then_resume,
    "slurm-cancelled-outside": case_cancelled_outside,
    "slurm-own-timeout": case_own_timeout,
    "slurm-ctrl-c-resume": case_ctrl_c_then_resume,
    "slurm-host-killed-resume": case_host_killed_then_resume,
}


def run_slurm_cases(work: Path, model: Path, names: set[str]) -> list[tuple[Outcome | None, str, float, bool]]:
    """``make faults``' Slurm half: one cluster for the chosen cases (all when ``names`` is empty), as results of
    fault_table.run_cases (outcome or None, name or why not run, seconds, whether it was required here)."""
    chosen = {name: case for name, case in SLURM_CASES.items() if not names or name in names}
    if not chosen:
        return []
    results: list[tuple[Outcome | None, str, float, bool]] = []
    try:
        with slurm_cluster(work) as cluster:
            print(f"slurm: one-node test cluster idle {cluster.bring_up_s:.1f} s after its daemons started",
                  file=sys.stderr, flush=True)
            for name, case in chosen.items():
                root = work / "slurm-cases" / name
                root.mkdir(parents=True)
                os.environ["ISOCOST_HOME"] = str(root / "isocost-home")
                ready(cluster)
                began = time.monotonic()
                outcome = case(SlurmContext(root=root, model=model, cluster=cluster))
                results.append((outcome, name, time.monotonic() - began, False))
                mark = "ok  " if outcome.passed and not outcome.rows_lost else "FAIL"
                print(f"{mark} [slurm] {outcome.case} ({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)
    except NotRun as exc:
        return [(None, f"{name}: {exc}", 0.0, exc.required) for name in chosen]
    return results
