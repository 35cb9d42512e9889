"""Engine vLLM as a Slurm job (issue 35, deliverable 6): the docker runtime runs each job in this checkout's
``cpu-vllm`` image (locked down as every job's container, with the /dev/shm the engine declares), on the test
cluster's one node; the row, its image and the manifest's engine block are what ran."""

from __future__ import annotations

import json
import os
import sys
import tempfile
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


@pytest.fixture(scope="module")
def cpu_vllm_image() -> str:
    """The image ID of this checkout's cpu-vllm image, built on the local base into a private lock."""
    from cases import BASE_IMAGE, docker_unavailable

    why = docker_unavailable()
    if why:
        if os.environ.get("ISOCOST_REQUIRE_DOCKER") == "1":
            pytest.fail(f"ISOCOST_REQUIRE_DOCKER=1 but {why}", pytrace=False)
        pytest.skip(why)
    from runner.images.build import build_image

    lock = Path(tempfile.mkdtemp(prefix="isocost-lock-")) / "images.lock"
    return build_image("cpu-vllm", BASE_IMAGE, lock_path=lock).image_id


def test_a_vllm_campaign_as_slurm_jobs_in_its_own_image(cluster: Any, smollm2: Any, cpu_vllm_image: str,
                                                        tmp_path: Path) -> None:
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=4, batches="[2]", max_new_tokens=8, replace={
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n'}, extra=SETTINGS)
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the trial container's user reads them
    out = tmp_path / "out"
    launcher = choose_launcher(study, "slurm", cpu_vllm_image, options={"slurm": {
        "runtime": "docker", "gres": "gpu:1", "start_wait": 120}}).launcher
    run_campaign(study, out, launcher)
    (row,) = read_raw(out / "raw.csv")
    assert (row["status"], row["corpus_accepted"], row["engine"]) == ("ok", "true", "vllm"), row["notes"]
    assert row["image_id"] == cpu_vllm_image and row["node"] == cluster.node and row["job_id"]
    trial = out / "trials" / row["trial_id"]
    assert f"container_image={cpu_vllm_image}" in (trial / "slurm-job.txt").read_text()
    assert "--shm-size 512m " in (trial / "slurm-job.sh").read_text()
    engine = json.loads((trial / "manifest.json").read_text())["engine"]
    assert (engine["name"], engine["dtype"], engine["torch_compile"]) == ("vllm", "float32", "disabled")
    assert len((trial / "generations.jsonl").read_text().splitlines()) == 4
