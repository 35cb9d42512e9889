"""``benchmarks.common.worker_result``, the one way a benchmark runs its worker process: the JSON it leaves, or
why there is none (a failure with its last lines, a time budget run past), and never a process left behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from benchmarks.common import worker_result


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_result_is_the_json_the_worker_left(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    result, why = worker_result(_python(f"open({str(out)!r}, 'w').write('{{\"pairs\": [1, 2]}}')"), out,
                                dict(os.environ), timeout_s=60)
    assert (result, why) == ({"pairs": [1, 2]}, "")


def test_a_failed_worker_is_named_with_its_exit_and_last_lines(tmp_path: Path) -> None:
    result, why = worker_result(_python("import sys; print('model not found', file=sys.stderr); sys.exit(3)"),
                                tmp_path / "never.json", dict(os.environ), timeout_s=60)
    assert result is None and why == "the worker failed (exit 3): model not found"
    # An exit 0 that left no result is a failure too, not an empty row of figures.
    result, why = worker_result(_python("print('done')"), tmp_path / "never.json", dict(os.environ), timeout_s=60)
    assert result is None and why == "the worker failed (exit 0): done"


def test_past_its_budget_the_worker_and_its_children_are_stopped(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    # The worker starts a child of its own (as vLLM's engine core is) and then waits past the budget.
    code = (f"import subprocess, sys, time; child = subprocess.Popen([sys.executable, '-c', 'import time; "
            f"time.sleep(300)']); open({str(child_pid)!r}, 'w').write(str(child.pid)); time.sleep(300)")
    started = time.monotonic()
    result, why = worker_result(_python(code), tmp_path / "never.json", dict(os.environ), timeout_s=5)
    assert result is None and why == "the worker ran past the time budget (5 s) and was stopped"
    assert time.monotonic() - started < 60
    pid = int(child_pid.read_text())
    for _ in range(100):  # the child was killed with its group; wait for init to reap it
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid), f"the worker's child {pid} outlived the benchmark"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead, not yet reaped
    except FileNotFoundError:
        return False
