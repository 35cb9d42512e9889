"""``make faults``: run every fault case and print a table of case, launcher, outcome and rows lost.

The cases run with trials as local processes, then, where a Docker engine answers, in
containers of this checkout's CPU image (built once; seconds with the layer cache). Without an
engine the container cases are listed as not run, with the reason; with
``ISOCOST_REQUIRE_DOCKER=1`` (CI) that is a failure. A case that mounts a tmpfs (disk-full) is
not run, with the reason, where mounting is refused (probed by trying it); with
``ISOCOST_REQUIRE_MOUNT=1`` (CI) that is a failure too. The table never passes by skipping:
the last line says how many cases did not run and why. Names given as arguments run only those
cases (``python tests/faults/fault_table.py hang engine-restart``); ``--containers`` or ``--processes``
runs only that half. Last, the Slurm cases (``slurm_cases.py``) run on a one-node test cluster they
start; without Slurm or root they are not run, which ``ISOCOST_REQUIRE_SLURM=1`` (CI) makes a failure.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from cases import (  # noqa: E402
    DOCKER_CASES,
    PROCESS_CASES,
    REQUIRE_DOCKER_ENV,
    NotRun,
    Outcome,
    docker_context,
    docker_unavailable,
    process_context,
)
from workspace import build_tiny_model  # noqa: E402

LAUNCHER_COLUMN = {"process": "process", "docker": "containers", "slurm": "slurm"}


Result = tuple[Outcome | None, str, float, bool]  # outcome (None: not run), name or why, seconds, required


def run_cases(cases: dict[str, Callable[[Any], Outcome]], make_context: Callable[[Path, Path], Any], work: Path,
              model: Path, launcher: str) -> list[Result]:
    results: list[Result] = []
    for name, case in cases.items():
        root = work / launcher / name
        root.mkdir(parents=True)
        os.environ["ISOCOST_HOME"] = str(root / "isocost-home")  # each case is its own user: no shared ledger
        start = time.monotonic()
        required = False
        try:
            outcome: Outcome | None = case(make_context(root, model))
            why = ""
        except NotRun as exc:
            outcome, why, required = None, f"{name}: {exc}", exc.required
        seconds = time.monotonic() - start
        results.append((outcome, why or name, seconds, required))
        mark = "not run" if outcome is None else ("ok  " if outcome.passed and not outcome.rows_lost else "FAIL")
        print(f"{mark} [{LAUNCHER_COLUMN[launcher]}] {outcome.case if outcome else why} ({seconds:.0f} s)",
              file=sys.stderr, flush=True)
    return results


def main(argv: list[str]) -> int:
    halves = {"--containers", "--processes"} & set(argv)
    only = set(argv) - halves
    from slurm_cases import SLURM_CASES, run_slurm_cases  # the Slurm half: its own cluster (slurm_cases.py)

    unknown = only - set(PROCESS_CASES) - set(DOCKER_CASES) - set(SLURM_CASES)
    if unknown:
        print(f"unknown case(s): {', '.join(sorted(unknown))}; known: "
              f"{', '.join(sorted(set(PROCESS_CASES) | set(DOCKER_CASES)))}", file=sys.stderr)
        return 2

    def pick(cases: dict[str, Any]) -> dict[str, Any]:
        return {name: case for name, case in cases.items() if not only or name in only}

    work = Path(tempfile.mkdtemp(prefix="isocost-faults-"))
    model = build_tiny_model(work / "model")
    process_cases = pick(PROCESS_CASES) if "--containers" not in halves else {}
    results = run_cases(process_cases, process_context, work, model, "process")
    docker_cases = pick(DOCKER_CASES) if "--processes" not in halves else {}
    engine_start = time.monotonic()
    why_not = docker_unavailable() if docker_cases else ""
    if why_not:
        print(f"not run [containers]: {why_not}", file=sys.stderr, flush=True)
        required = os.environ.get(REQUIRE_DOCKER_ENV) == "1"
        docker_results: list[Result] = [(None, f"{name}: {why_not}", 0.0, required) for name in docker_cases]
    else:
        docker_results = run_cases(docker_cases, docker_context, work, model, "docker")
    docker_s = time.monotonic() - engine_start
    slurm_results = run_slurm_cases(work, model, only) if not halves else []

    print()
    print("| case | launcher | expected | observed | rows lost | verdict | s |")
    print("|---|---|---|---|---|---|---|")
    for (outcome, why, seconds, _), launcher in [*((r, "process") for r in results),
                                              *((r, "docker") for r in docker_results),
                                              *((r, "slurm") for r in slurm_results)]:
        if outcome is None:
            print(f"| {why.split(':', 1)[0]} | {LAUNCHER_COLUMN[launcher]} | - | not run: "
                  f"{why.split(':', 1)[-1].strip()} | - | NOT RUN | {seconds:.0f} |")
            continue
        print(f"| {outcome.case} | {LAUNCHER_COLUMN[launcher]} | {outcome.expected} | {outcome.observed} | "
              f"{outcome.rows_lost} | {'as expected' if outcome.passed else 'UNEXPECTED'} | {seconds:.0f} |")
    everything = [*results, *docker_results, *slurm_results]
    ran = [o for o, _, _, _ in everything if o is not None]
    not_run = [(why, required) for o, why, _, required in everything if o is None]
    failed = [o for o in ran if not o.passed or o.rows_lost]
    required_missing = [why for why, required in not_run if required]
    print(f"\n{len(ran)} cases ran: {len(ran) - len(failed)} passed, {len(failed)} failed; {len(not_run)} not run"
          + (f" ({len(required_missing)} of them required here)" if required_missing else "")
          + (f" (containers: {docker_s:.0f} s in all)" if docker_cases and not why_not else ""))
    for why, required in not_run:
        print(f"not run{' (REQUIRED)' if required else ''}: {why}")
    print(f"(campaigns kept in {work})")
    return 1 if failed or required_missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
