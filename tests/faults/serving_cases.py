"""Fault cases of a server trial (issue 36): the serving run killed mid-run, and queries answered with an error.

- ``server-killed-mid-run``: a server trial (MLPerf LoadGen's Server scenario, in the trial process) is SIGKILLed
  while LoadGen is issuing queries: its row is kept, ``interrupted``, not accepted, and nothing of the trial (no
  process of its group) is left running.
- ``server-queries-fail``: the system under test fails every batch from its third on (a simulated out-of-memory
  error, the in-process form of a client's error for a query): the run completes, the failed queries are counted
  in the manifest's ``serving`` block, the row is kept and its answers are not accepted, whatever LoadGen's
  latency says.

Process launcher. Example: ``python tests/faults/fault_table.py --processes server-killed-mid-run``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from cases import Context, Outcome, _first_row, fault, rows_lost  # noqa: I001
from serving_study import SERVER, TRAFFIC

from runner.campaign.run import run_campaign

FIRST = "001-r1-batch_size-1"


def _server_study(ctx: Context) -> Path:
    return ctx.study(n=12, repetitions=1, batches="[1]", replace=SERVER, extra=TRAFFIC)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def case_server_killed_mid_run(ctx: Context) -> Outcome:
    study = _server_study(ctx)
    out = ctx.root / "out"
    trial = out / "trials" / FIRST
    killed: dict[str, int] = {}

    def killer() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            # LoadGen opens its logs when the run starts; the run then lasts seconds (44+ queries at 20 qps).
            if (trial / "mlperf_log_detail.txt").exists() and (trial / "launcher.json").exists():
                time.sleep(1.0)
                pid = int(json.loads((trial / "launcher.json").read_text())["pid"])
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    with fault("sleep-per-batch:0.05"):
        thread.start()
        run_campaign(study, out, ctx.launcher_factory())
        thread.join()
    row = _first_row(out)
    left = "pid" in killed and _alive(killed["pid"])
    ok = ("pid" in killed and row["status"] == "interrupted" and row["corpus_accepted"] == "false" and not left)
    return Outcome("server trial killed mid-run (SIGKILL during LoadGen's run)", ctx.launcher_name,
                   "interrupted, not accepted, nothing left running",
                   f"{row['status']}, accepted {row['corpus_accepted']}, "
                   f"{'process left' if left else 'no process left'}", rows_lost(out), ok, row["notes"][:120])


def case_server_queries_fail(ctx: Context) -> Outcome:
    study = _server_study(ctx)
    out = ctx.root / "out"
    with fault("oom-at-batch:3"):
        run_campaign(study, out, ctx.launcher_factory())
    row = _first_row(out)
    manifest = out / "trials" / row["trial_id"] / "manifest.json"
    serving = json.loads(manifest.read_text()).get("serving", {}) if manifest.exists() else {}
    failed = int(serving.get("answers", {}).get("failed_count", 0))
    ok = row["corpus_accepted"] == "false" and failed > 0
    return Outcome("server trial whose queries fail from its third batch", ctx.launcher_name,
                   "row kept, failed queries counted, not accepted",
                   f"{row['status']}, {failed} ids failed, accepted {row['corpus_accepted']}", rows_lost(out), ok,
                   row["notes"][:120])


SERVING_CASES = {"server-killed-mid-run": case_server_killed_mid_run, "server-queries-fail": case_server_queries_fail}
