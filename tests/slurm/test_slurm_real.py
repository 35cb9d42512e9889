"""Real campaigns through the test cluster: the real MiniLM trial runner as a process, and in containers.

- the process runtime through the whole CLI (``isocost run --launcher slurm``: pre-flight, lane,
  rows, summary);
- the docker runtime on the machine's engine (marker ``docker``): the container named after the
  job, this checkout's CPU image by its ID, the rows' image ID, and a job cancelled from outside
  whose TERM trap stops its container (a container is never in the job's cgroup).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.campaign.launcher_choice import choose_launcher
from runner.campaign.run import run_campaign
from runner.cli import main
from runner.launch.kinds.slurm.launcher import lane_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "raw.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _readable(study: Path) -> Path:
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the trial container's user reads them
    return study


def test_a_real_campaign_through_the_cli(cluster, make_workspace, tmp_path):
    study = make_workspace("ws", n=12, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "slurm",
                                       "--slurm-gres", "gpu:1", "--slurm-start-wait", "120"])
    assert result.exit_code == 0, result.output
    assert "launcher: slurm (process runtime, partition debug, GPUs gres=gpu:1)" in result.output
    assert f"on node {cluster.node}" in result.output and "the campaign is pinned to node" in result.output
    assert "| batch_size=1 |" in result.output and "Results:" in result.output
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["ok", "ok"] and all(r["corpus_accepted"] == "true" for r in rows)
    assert all(r["node"] == cluster.node and r["job_id"] and r["queue_s"] for r in rows)
    manifest = json.loads((out / "trials" / rows[0]["trial_id"] / "manifest.json").read_text())
    assert manifest["launcher"] == "slurm"


def _lane_containers(lane: str, *, running_only: bool = False) -> list[str]:
    args = ["docker", "ps", "-q", "--filter", f"label=org.isocost.lane={lane}"]
    return subprocess.run([*args, *([] if running_only else ["-a"])], capture_output=True, text=True,
                          timeout=60, check=True).stdout.split()


@pytest.mark.docker
def test_a_real_campaign_in_containers_on_the_node_engine(cluster, make_workspace, tmp_path, cpu_image):
    study = _readable(make_workspace("ws", n=12, repetitions=1, batches="[1, 4]"))
    out = tmp_path / "out"
    launcher = choose_launcher(study, "slurm", cpu_image, options={"slurm": {
        "runtime": "docker", "gres": "gpu:1", "start_wait": 120}}).launcher
    run_campaign(study, out, launcher)
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["ok", "ok"] and {r["image_id"] for r in rows} == {cpu_image}
    campaign = json.loads((out / "campaign.json").read_text())
    assert campaign["launcher"]["runtime"] == "docker" and campaign["launcher"]["image_id"] == cpu_image
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        seen = (trial / "slurm-job.txt").read_text()
        assert f"container_image={cpu_image}" in seen and "oom_killed=false" in seen
        assert 'name="isocost-job-${SLURM_JOB_ID:-0}"' in (trial / "slurm-job.sh").read_text()
        assert json.loads((trial / "spec.json").read_text())["corpus_path"] == "/in/corpus.jsonl"
    assert _lane_containers(lane_name(campaign["campaign_id"])) == []  # every container removed


@pytest.mark.docker
def test_a_cancelled_job_stops_its_container(cluster, make_workspace, tmp_path, cpu_image, monkeypatch):
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "sleep-per-batch:0.5")
    study = _readable(make_workspace("ws", n=12, repetitions=1, batches="[1, 4]"))
    out = tmp_path / "out"
    first = out / "trials" / "001-r1-batch_size-1"
    seen: dict[str, list[str]] = {}

    def cancel_mid_pass() -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            predictions = first / "predictions.jsonl"
            if predictions.exists() and predictions.read_text().count("\n") >= 2:
                lane = json.loads((first / "launcher.json").read_text())["lane"]
                seen["before"] = _lane_containers(lane, running_only=True)
                job = json.loads((first / "launcher.json").read_text())["jobs"][-1]["job_id"]
                subprocess.run(["scancel", job], env={**os.environ, **cluster.env}, check=False, timeout=30)
                return
            time.sleep(0.1)

    launcher = choose_launcher(study, "slurm", cpu_image, options={"slurm": {
        "runtime": "docker", "gres": "gpu:1", "start_wait": 120}}).launcher
    thread = threading.Thread(target=cancel_mid_pass)
    thread.start()
    run_campaign(study, out, launcher)
    thread.join()
    rows = _rows(out)
    lane = lane_name(json.loads((out / "campaign.json").read_text())["campaign_id"])
    assert len(seen["before"]) == 1  # the trial's container ran while the job did
    assert rows[0]["status"] == "interrupted" and "cancelled outside isocost" in rows[0]["notes"]
    assert rows[1]["status"] == "ok"
    assert _lane_containers(lane) == []  # the trap stopped it; the lane's next job cleans what a KILL left
