"""The table `make bench` prints, and the Markdown it puts in docs/performance.md."""

from __future__ import annotations

from typing import Any

from benchmarks.common import Row

COLUMNS = ("#", "benchmark", "measured: median [min–max]", "baseline (same run)", "ratio", "target", "met")


def _met(row: Row) -> str:
    if not row.measured or not row.target:
        return "—"
    return {True: "yes", False: "NO", None: "unclear"}[row.met]


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        measured = row.measured or "(empty, see note)"
        cells = (row.key, row.title, measured, row.baseline, row.ratio, row.target, _met(row))
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    notes = [f"- [{row.key}] {row.reason}" for row in rows if row.reason]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def machine_line(machine: dict[str, Any]) -> str:
    memory = machine.get("memory_bytes")
    load = machine.get("load_average_at_start")
    shown_memory = f"{memory / 2**30:.1f} GiB memory" if memory else "memory unknown"
    shown_load = " / ".join(f"{x:.2f}" for x in load) if load else "unknown"
    return (f"{machine.get('cpu_model')}, {machine.get('cpu_count_logical')} logical cores "
            f"({machine.get('cpu_affinity_count')} usable), {shown_memory}, Linux {machine.get('kernel')}, "
            f"Python {machine.get('python')}, torch {machine.get('torch')}, transformers "
            f"{machine.get('transformers')}; load average at start {shown_load} (1 / 5 / 15 min)")
