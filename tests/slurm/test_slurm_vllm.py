"""Engine vLLM as a Slurm job (issue 35, deliverable 6): the docker runtime runs each job in this checkout's
``cpu-vllm`` image (locked down as every job's container, with the /dev/shm the engine declares), on the test
cluster's one node; the row, its image and the manifest's engine block are what ran. The same for vLLM's HTTP
server as the system under test of a server study (issue 36, deliverable 6): it listens on the job container's
own loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from generation_workspace import write_generation_workspace

from runner.campaign.launcher_choice import choose_launcher
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.docker]

SETTINGS = "\n[engines.vllm]\nmax_model_len = 512\nmax_num_seqs = 8\n"


def _one_job(study: Path, out: Path, image: str) -> dict[str, str]:
    """Run ``study`` (one trial) as a job of the test cluster in ``image`` (docker runtime); its raw row."""
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the trial container's user reads them
    launcher = choose_launcher(study, "slurm", image, options={"slurm": {
        "runtime": "docker", "gres": "gpu:1", "start_wait": 120}}).launcher
    run_campaign(study, out, launcher)
    (row,) = read_raw(out / "raw.csv")
    return row


def test_a_vllm_campaign_as_slurm_jobs_in_its_own_image(cluster: Any, smollm2: Any, cpu_vllm_image: str,
                                                        tmp_path: Path) -> None:
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=4, batches="[2]", max_new_tokens=8, replace={
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n'}, extra=SETTINGS)
    out = tmp_path / "out"
    row = _one_job(study, out, cpu_vllm_image)
    assert (row["status"], row["corpus_accepted"], row["engine"]) == ("ok", "true", "vllm"), row["notes"]
    assert row["image_id"] == cpu_vllm_image and row["node"] == cluster.node and row["job_id"]
    trial = out / "trials" / row["trial_id"]
    assert f"container_image={cpu_vllm_image}" in (trial / "slurm-job.txt").read_text()
    assert "--shm-size 512m " in (trial / "slurm-job.sh").read_text()
    engine = json.loads((trial / "manifest.json").read_text())["engine"]
    assert (engine["name"], engine["dtype"], engine["torch_compile"]) == ("vllm", "float32", "disabled")
    assert len((trial / "generations.jsonl").read_text().splitlines()) == 4


def test_vllm_http_server_serves_in_a_slurm_job(cluster: Any, smollm2: Any, cpu_vllm_image: str,
                                                tmp_path: Path) -> None:
    """``server = true`` in a server study run as a Slurm job: the job's container starts vLLM's HTTP server on its
    loopback (the container has no network), LoadGen's queries reach it two at a time, every answer is kept, the
    server's log is in the trial directory, and no trial container is left when the job ends."""
    from serving_study import GENERATION_TRAFFIC

    study = write_generation_workspace(tmp_path / "ws", smollm2, n=4, batches="[1]", max_new_tokens=6, replace={
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n',
        'scenario = "offline"': 'scenario = "server"'},
        extra=SETTINGS + "server = true\n" + GENERATION_TRAFFIC + "max_batches_in_flight = 2\n")
    out = tmp_path / "out"
    row = _one_job(study, out, cpu_vllm_image)
    assert (row["status"], row["launcher"], row["engine"]) == ("ok", "slurm", "vllm"), row["notes"]
    assert row["image_id"] == cpu_vllm_image and row["node"] == cluster.node and row["job_id"]
    trial = out / "trials" / row["trial_id"]
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["engine"]["settings"]["server"] is True
    assert manifest["engine"]["server"]["address"].startswith("127.0.0.1:")
    serving = manifest["serving"]
    assert serving["queries"] == 12 and serving["unanswered"] == 0 and serving["answers"]["written"] == 4, serving
    assert (serving["max_batch"], serving["max_batches_in_flight"]) == (1, 2)
    assert serving["result"] in ("VALID", "INVALID") and serving["ttft_at_percentile_ms"] is not None
    assert "Application startup complete" in (trial / "vllm_server.log").read_text()
    assert len((trial / "vllm_requests.jsonl").read_text().splitlines()) >= 12
    assert "--shm-size 512m " in (trial / "slurm-job.sh").read_text()
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.isocost.job_id={row['job_id']}"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert left == [], "the job's container was left behind"
