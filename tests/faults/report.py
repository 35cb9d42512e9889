"""``make faults``: run every fault case and print a table of case, outcome and rows lost."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from cases import PROCESS_CASES, Outcome, process_context  # noqa: E402
from workspace import build_tiny_model  # noqa: E402


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="isocost-faults-"))
    model = build_tiny_model(work / "model")
    outcomes: list[tuple[Outcome, float]] = []
    for name, case in PROCESS_CASES.items():
        root = work / name
        root.mkdir()
        os.environ["ISOCOST_HOME"] = str(root / "isocost-home")  # each case is its own user: no shared ledger
        start = time.monotonic()
        outcome = case(process_context(root, model))
        outcomes.append((outcome, time.monotonic() - start))
        print(f"{'ok  ' if outcome.passed else 'FAIL'} {outcome.case}", file=sys.stderr, flush=True)
    print()
    print("| case | launcher | expected | observed | rows lost | verdict | s |")
    print("|---|---|---|---|---|---|---|")
    for outcome, seconds in outcomes:
        print(f"| {outcome.case} | {outcome.launcher} | {outcome.expected} | {outcome.observed} | "
              f"{outcome.rows_lost} | {'as expected' if outcome.passed else 'UNEXPECTED'} | {seconds:.0f} |")
    failed = [o for o, _ in outcomes if not o.passed or o.rows_lost]
    print(f"\n{len(outcomes) - len(failed)} passed, {len(failed)} failed")
    print(f"(campaigns kept in {work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
