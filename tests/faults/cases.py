"""The fault-injection suite: each case runs a real small campaign and injects one fault.

Used by ``tests/faults/test_faults.py`` (pytest) and ``tests/faults/report.py``
(``make faults``: prints the table). Each case returns a :class:`Outcome`:
the status the protocol demands, the status observed, and the rows lost
(attempts made minus rows in raw.csv, after any resume the case performs).
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

from protocol.errors import UserError
from runner.campaign import read_raw, run_campaign
from runner.launch.base import HOST_STOP_NOTE
from runner.launch.process import ProcessLauncher

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from workspace import write_workspace  # noqa: E402


@dataclass(frozen=True)
class Outcome:
    case: str
    launcher: str
    expected: str
    observed: str
    rows_lost: int
    passed: bool
    detail: str


@dataclass(frozen=True)
class Context:
    root: Path  # a fresh directory for this case
    model: Path  # a tiny real checkpoint to copy
    launcher_factory: Callable[[], Any]
    launcher_name: str

    def study(self, **options: Any) -> Path:
        return write_workspace(self.root / "ws", self.model, **options)


def attempts_made(out: Path) -> int:
    trials = out / "trials"
    return sum(1 for d in trials.iterdir() if (d / "spec.json").exists()) if trials.exists() else 0


def rows_lost(out: Path) -> int:
    rows = read_raw(out / "raw.csv") if (out / "raw.csv").exists() else []
    return attempts_made(out) - len(rows)


@contextmanager
def fault(value: str) -> Iterator[None]:
    old = os.environ.get("ISOCOST_FAULT_INJECT")
    os.environ["ISOCOST_FAULT_INJECT"] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ISOCOST_FAULT_INJECT", None)
        else:
            os.environ["ISOCOST_FAULT_INJECT"] = old


def _first_row(out: Path) -> dict[str, str]:
    return read_raw(out / "raw.csv")[0]


# -- cases ----------------------------------------------------------------------------------


def case_oom_in_runner(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[4, 1]")
    out = ctx.root / "out"
    with fault("oom-at-batch:2"):
        run_campaign(study, out, ctx.launcher_factory())
    rows = read_raw(out / "raw.csv")
    row = rows[0]
    ok = (row["status"] == "oom" and row["completed"] == "8" and row["batch_size"] == "4"
          and len(rows) == 2 and rows[1]["batch_size"] == "1")
    return Outcome("GPU-style OOM raised in the runner", ctx.launcher_name, "oom, completed 8, campaign goes on, "
                   "no silent smaller batch", f"{row['status']}, completed {row['completed']}, "
                   f"{len(rows)} rows", rows_lost(out), ok, row["notes"][:120])


def case_killed_mid_pass(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1]")
    out = ctx.root / "out"
    first = out / "trials" / "001-r1-batch_size-1"

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            predictions = first / "predictions.jsonl"
            if predictions.exists() and predictions.read_text().count("\n") >= 3:
                _kill_trial(first, ctx.launcher_name)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    with fault("sleep-per-batch:0.4"):
        thread.start()
        run_campaign(study, out, ctx.launcher_factory())
        thread.join()
    row = _first_row(out)
    ok = row["status"] == "interrupted" and int(row["completed"]) >= 3 and row["corpus_accepted"] == "false"
    return Outcome("trial killed mid-pass (SIGKILL)", ctx.launcher_name, "interrupted, completed count kept",
                   f"{row['status']}, completed {row['completed']}", rows_lost(out), ok, row["notes"][:120])


def _kill_trial(trial_dir: Path, launcher_name: str) -> None:
    info = json.loads((trial_dir / "launcher.json").read_text())
    if launcher_name == "docker" and info.get("container_id"):
        import docker

        docker.from_env().containers.get(info["container_id"]).kill(signal="SIGKILL")
    else:
        os.kill(int(info["pid"]), signal.SIGKILL)


def case_host_killed_then_resume(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=2, batches="[1, 4]")
    out = ctx.root / "out"
    env = {**os.environ, "ISOCOST_FAULT_INJECT": "sleep-per-batch:0.2", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out),
               "--launcher", ctx.launcher_name]
    host = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    second = out / "trials" / "002-r1-batch_size-4" / "launcher.json"
    while time.monotonic() < deadline and not second.exists():
        time.sleep(0.05)
    host.kill()
    host.wait()
    before = (out / "raw.csv").read_bytes() if (out / "raw.csv").exists() else b""
    run_campaign(study, out, ctx.launcher_factory(), resume=True)
    after = (out / "raw.csv").read_bytes()
    rows = read_raw(out / "raw.csv")
    final = [r for r in rows if HOST_STOP_NOTE not in r["notes"]]
    one_each = sorted(r["order_index"] for r in final) == ["1", "2", "3", "4"]
    ok = after.startswith(before) and one_each and len(before) > 0
    return Outcome("host CLI killed mid-campaign, then --resume", ctx.launcher_name,
                   "completes; one final row per pass; earlier rows byte-identical",
                   f"{len(final)} final rows for 4 passes, earlier bytes "
                   f"{'kept' if after.startswith(before) else 'CHANGED'}",
                   rows_lost(out), ok, f"{len(rows) - len(final)} interrupted attempt(s) recorded")


def case_disk_full(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=2, batches="[1]")
    out = ctx.root / "out"
    out.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(out)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        return Outcome("output disk full", ctx.launcher_name, "error row, raw.csv intact", "not run",
                       0, False, f"cannot mount a tmpfs here: {exc}")
    try:
        ballast = out / "ballast"

        def fill(message: str) -> None:
            if message.startswith("[2/2]") and ": running" in message:
                try:  # fill the disk just before the second trial starts
                    with open(ballast, "wb") as handle:
                        while True:
                            handle.write(b"\0" * 4096)
                            handle.flush()
                except OSError:
                    pass

        error = ""
        try:
            run_campaign(study, out, ctx.launcher_factory(), progress=fill)
        except UserError as exc:
            error = exc.message
        intact_rows = read_raw(out / "raw.csv")  # parses: no partial row, whatever happened
        ballast.unlink()
        run_campaign(study, out, ctx.launcher_factory(), resume=True)  # completes what is missing, if anything
        rows = read_raw(out / "raw.csv")
        failed = [r for r in rows if r["trial_id"] == "002-r2-batch_size-1"]
        first = failed[0] if failed else {}
        stopped = f"; the host stopped cleanly: {error[:70]}" if error else ""
        observed = f"{first.get('status', 'no row')} row for the trial that hit the full disk{stopped}"
        ok = (len(intact_rows) >= 1 and first.get("status") in ("error", "interrupted")
              and "No space left" in first.get("notes", "") and rows_lost(out) == 0)
        return Outcome("output disk full (4 MiB tmpfs)", ctx.launcher_name,
                       "error row, raw.csv never corrupt, campaign resumable", observed, rows_lost(out), ok,
                       first.get("notes", "")[:160])
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False, capture_output=True)


def _corrupt_case(kind: str, expected_reason: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        study = ctx.study(n=8, repetitions=1, batches="[4]")
        out = ctx.root / "out"
        with fault(f"corrupt:{kind}"):
            run_campaign(study, out, ctx.launcher_factory())
        row = _first_row(out)
        ok = row["corpus_accepted"] == "false" and expected_reason in row["quality_verdict"]
        return Outcome(f"prediction file: {kind}", ctx.launcher_name, f"rejected: {expected_reason}; row kept",
                       row["quality_verdict"][:90], rows_lost(out), ok, row["notes"][:120])

    return run


def _changed_input(kind: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        study = ctx.study(n=4, repetitions=2, batches="[1]")
        out = ctx.root / "out"
        target = study.parent / ("corpus.jsonl" if kind == "corpus" else "model/config.json")

        def change(message: str) -> None:
            if message.startswith("[1/2]") and ": ok" in message:
                target.write_text(target.read_text() + "\n")

        error = ""
        try:
            run_campaign(study, out, ctx.launcher_factory(), progress=change)
        except UserError as exc:
            error = exc.message
        rows = read_raw(out / "raw.csv")
        ok = f"{kind} fingerprint" in error and "before the next trial" in error and len(rows) == 1
        return Outcome(f"{kind} changed on disk after the start", ctx.launcher_name,
                       "refused before the next trial", "refused" if ok else f"not refused: {error[:60]}",
                       rows_lost(out), ok, error[:140])

    return run


def case_hang(ctx: Context) -> Outcome:
    study = ctx.study(n=8, repetitions=1, batches="[4]", timeout=20)
    out = ctx.root / "out"
    with fault("hang-at-batch:1"):
        run_campaign(study, out, ctx.launcher_factory())
    row = _first_row(out)
    ok = row["status"] == "timeout" and row["completed"] == "4"
    return Outcome("trial hangs", ctx.launcher_name, "killed at the time limit: timeout",
                   f"{row['status']}, completed {row['completed']}", rows_lost(out), ok, row["notes"][:120])


PROCESS_CASES: dict[str, Callable[[Context], Outcome]] = {
    "oom-runner": case_oom_in_runner,
    "killed-mid-pass": case_killed_mid_pass,
    "host-killed-resume": case_host_killed_then_resume,
    "disk-full": case_disk_full,
    "truncated-predictions": _corrupt_case("truncate", "truncated (no final newline)"),
    "duplicate-ids": _corrupt_case("duplicate", "duplicate id(s)"),
    "foreign-ids": _corrupt_case("foreign-id", "not in the corpus"),
    "wrong-label-set": _corrupt_case("bad-label", "outside the corpus label set"),
    "corpus-changed": _changed_input("corpus"),
    "model-changed": _changed_input("model"),
    "hang": case_hang,
}


def process_context(root: Path, model: Path) -> Context:
    return Context(root=root, model=model, launcher_factory=ProcessLauncher, launcher_name="process")
