"""Measure what a container costs per trial, next to a plain process (not a test; run by hand).

    python tests/docker/measure_overhead.py STUDY.toml --image sha256:… --out /tmp/overhead

Runs the study's campaign twice, with the Docker launcher and with the process launcher, and
prints per trial (median over trials, in seconds):

- start: launch requested → the runner's own clock starts (status.json ``started_at``);
  for containers split into create+start API calls and the rest (Python start-up, imports);
- runner: the trial's own ``trial_s`` (identical work in both launchers);
- exit: the runner's status written → the process/container has exited → seen by the host;
- row: exit seen → logs/state collected, container removed → the raw row appended.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any


def _ts(text: str) -> float:
    """ISO time → epoch seconds; Docker's nanoseconds are cut to what fromisoformat takes."""
    text = text.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest[:9] if c.isdigit())
        text = f"{head}.{digits[:6]:0<6}{rest[len(digits):]}"
    return datetime.fromisoformat(text).timestamp()


def run(study: Path, out: Path, launcher: Any) -> dict[str, float]:
    import runner.campaign.run as campaign

    written: dict[str, float] = {}
    original = campaign.append_row

    def append_row(path: Path, row: Any) -> None:
        original(path, row)
        written[row.values["trial_id"]] = time.time()

    campaign.append_row = append_row  # type: ignore[assignment]
    try:
        campaign.run_campaign(study, out, launcher)
    finally:
        campaign.append_row = original  # type: ignore[assignment]
    return written


def summarize(out: Path, written: dict[str, float], kind: str) -> dict[str, list[float]]:
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    launched = {e["trial_id"]: _ts(e["at"]) for e in events if e["event"] == "trial_start"}
    ended = {e["trial_id"]: _ts(e["at"]) for e in events if e["event"] == "trial_end"}
    table: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        table.setdefault(name, []).append(value)

    for trial in sorted((out / "trials").iterdir()):
        status = json.loads((trial / "status.json").read_text())
        trial_id = trial.name
        runner_start, runner_end = _ts(status["started_at"]), _ts(status["ended_at"])
        add("runner trial_s", status["phases"]["trial_s"])
        if kind == "docker":
            record = json.loads((trial / "launcher.json").read_text())
            times, state = record["times"], record["state"]
            create = _ts(times["create_at"])
            add("start: create → runner clock", runner_start - create)
            add("  create+start API calls", _ts(times["started_at"]) - create)
            add("  container start → runner clock", runner_start - _ts(state["StartedAt"]))
            add("exit: runner done → container exited", _ts(state["FinishedAt"]) - runner_end)
            add("  container exited → host saw it", _ts(times["exit_seen_at"]) - _ts(state["FinishedAt"]))
            add("row: exit seen → logs, state, removed", _ts(times["collected_at"]) - _ts(times["exit_seen_at"]))
            add("  removed → row written", written[trial_id] - _ts(times["collected_at"]))
            add("total: exit seen → row written", written[trial_id] - _ts(times["exit_seen_at"]))
        else:
            add("start: Popen → runner clock", runner_start - launched[trial_id])
            add("exit: runner done → host saw exit", ended[trial_id] - runner_end)
            add("total: exit seen → row written", written[trial_id] - ended[trial_id])
        add("host wall per trial (trial_start → row)", written[trial_id] - launched[trial_id])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--image", required=True, help="image ID or REPO@sha256 of the CPU image")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from protocol.study import load_study
    from runner.launch.docker import DockerLauncher
    from runner.launch.process import ProcessLauncher

    stack = load_study(args.study).base["stack"]
    results = {}
    for kind, launcher in (("docker", DockerLauncher(args.image, stack=stack)), ("process", ProcessLauncher())):
        out = args.out / kind
        written = run(args.study, out, launcher)
        results[kind] = summarize(out, written, kind)
    for kind, table in results.items():
        print(f"\n{kind} launcher ({len(next(iter(table.values())))} trials): median [min – max] s")
        for name, values in table.items():
            print(f"  {name:45s} {statistics.median(values):7.3f}  [{min(values):.3f} – {max(values):.3f}]")


if __name__ == "__main__":
    main()
