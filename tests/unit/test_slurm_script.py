"""The batch scripts of the Slurm launcher: every value quoted, the pins, the runtimes' command lines.

The process script is run for real here by bash, outside Slurm (the job's variables set by hand),
with paths that would run commands if a shell split or expanded them. The docker and pyxis
scripts are checked as text (and by ``bash -n``): pyxis cannot run here, the docker one runs in
tests/slurm/test_slurm_real.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.launch.kinds.slurm.script import FACTS_FILE, JobSpec, enroot_uri, parse_facts, trial_script

HOSTILE = "in $(touch PWNED) `touch PWNED2` 'q' \"dq\" ;&|"
DIGEST = "sha256:" + "ab" * 32
DUMP = ("import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, "
        "open(os.path.join(sys.argv[-1], 'seen.json'), 'w'))")


def _job(tmp_path: Path, **changes) -> JobSpec:
    trial = tmp_path / f"trial {HOSTILE}"
    trial.mkdir(exist_ok=True)
    values = dict(trial_dir=str(trial), runtime="process", corpus=str(tmp_path / f"c {HOSTILE}.jsonl"),
                  model=str(tmp_path / f"m {HOSTILE}"), lane="isocost-0123456789abcdef",
                  command=(sys.executable, "-c", DUMP), env={"HF_HUB_OFFLINE": "1", "WEIRD": HOSTILE})
    values.update(changes)
    return JobSpec(**values)  # type: ignore[arg-type]


def _bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=False)


def _job_env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": "/tmp", "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "node1",
            "SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "1", **extra}


@pytest.mark.parametrize("runtime", ["process", "docker", "pyxis"])
def test_every_script_is_valid_bash(tmp_path, runtime):
    job = _job(tmp_path, runtime=runtime, image=f"127.0.0.1:5000/isocost/cpu@{DIGEST}", corpus_in="/in/corpus.jsonl",
               stack="cuda")
    assert subprocess.run(["bash", "-n"], input=trial_script(job), text=True, capture_output=True,
                          check=False).returncode == 0


def test_the_process_script_passes_every_value_as_one_word_and_runs_nothing_else(tmp_path):
    job = _job(tmp_path)
    done = _bash(trial_script(job), _job_env(ISOCOST_SECRET="x"), tmp_path)
    assert done.returncode == 0, done.stderr
    trial = Path(job.trial_dir)
    seen = json.loads((trial / "seen.json").read_text())
    assert seen["argv"] == [f"{job.trial_dir}/spec.json", job.trial_dir]
    assert seen["env"]["WEIRD"] == HOSTILE and seen["env"]["HF_HUB_OFFLINE"] == "1"
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "1"  # the job's own card, kept
    assert "ISOCOST_SECRET" not in seen["env"] and "SLURM_JOB_ID" not in seen["env"]  # env -i: nothing else
    assert not list(tmp_path.rglob("PWNED*"))
    facts = parse_facts((trial / FACTS_FILE).read_text())
    assert (facts["job_id"], facts["node"], facts["job_gpus"], facts["exit_code"]) == ("42", "node1", "1", "0")
    assert "T" in str(facts["started_at"]) and str(facts["started_at"]).endswith("+00:00")


def test_another_node_or_card_starts_no_trial(tmp_path):
    for changes, refused in (({"node": "node2"}, "node"), ({"gpus": "0"}, "card")):
        job = _job(tmp_path, **changes)
        done = _bash(trial_script(job), _job_env(), tmp_path)
        assert done.returncode == 0
        assert parse_facts((Path(job.trial_dir) / FACTS_FILE).read_text())["refused"] == refused
        assert not (Path(job.trial_dir) / "seen.json").exists()
    job = _job(tmp_path, node="node1", gpus="1")
    assert _bash(trial_script(job), _job_env(), tmp_path).returncode == 0
    assert (Path(job.trial_dir) / "seen.json").exists()


def test_the_trials_exit_code_is_the_jobs(tmp_path):
    job = _job(tmp_path, command=(sys.executable, "-c", "import sys; sys.exit(3)"))
    assert _bash(trial_script(job), _job_env(), tmp_path).returncode == 3
    assert parse_facts((Path(job.trial_dir) / FACTS_FILE).read_text())["exit_code"] == "3"


def test_nvidia_smi_cards_are_recorded(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    smi = fake_bin / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, GPU-aaaa, NVIDIA H200'\necho '1, GPU-bbbb, NVIDIA H200'\n")
    smi.chmod(0o755)
    job = _job(tmp_path)
    _bash(trial_script(job), _job_env(PATH=f"{fake_bin}:{os.environ['PATH']}"), tmp_path)
    facts = parse_facts((Path(job.trial_dir) / FACTS_FILE).read_text())
    assert facts["cards"] == ["0, GPU-aaaa, NVIDIA H200", "1, GPU-bbbb, NVIDIA H200"]


def test_the_docker_script_names_the_container_passes_the_allocated_card_and_traps_term(tmp_path):
    job = _job(tmp_path, runtime="docker", image=DIGEST, stack="cuda", corpus_in="/in/corpus.jsonl",
               mem_limit="8589934592", grace_s=7)
    text = trial_script(job)
    assert 'name="isocost-job-${SLURM_JOB_ID:-0}"' in text
    assert 'gpu_args=(--gpus "device=$gpus"' in text and 'gpus="${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}"' in text
    assert "trap 'stop_container' TERM INT" in text and "docker kill --signal TERM" in text
    assert "timeout 7 docker wait" in text and 'docker rm -f "$name"' in text
    for flag in ("--network none", "--read-only", "--cap-drop ALL", "--security-opt no-new-privileges",
                 "--memory 8589934592", f"image={DIGEST}", "/out/spec.json /out &"):
        assert flag in text
    assert "--label org.isocost.lane=isocost-0123456789abcdef" in text
    assert "trial containers never run as root" in text
    assert "CUDA_VISIBLE_DEVICES" not in text.split("docker run", 1)[1].split("\n", 1)[0]
    cpu = trial_script(_job(tmp_path, runtime="docker", image=DIGEST, stack="cpu", corpus_in="/in/corpus.jsonl"))
    assert "--gpus" not in cpu


def test_the_pyxis_command_line(tmp_path):
    image = f"registry.example.org:5000/team/isocost-cuda@{DIGEST}"
    job = _job(tmp_path, runtime="pyxis", image=image, stack="cuda", corpus_in="/in/corpus.jsonl")
    text = trial_script(job)
    line = next(row for row in text.splitlines() if row.startswith("srun "))
    assert f"--container-image='registry.example.org:5000#team/isocost-cuda@{DIGEST}'" in line  # '#' quoted
    assert "--no-container-mount-home" in line and "--no-container-remap-root" in line
    assert "--container-workdir=/out" in line and line.endswith("python3 -m runner.trial /out/spec.json /out &")
    mounts = line.split("--container-mounts=", 1)[1].split(" --container-workdir")[0]
    assert mounts.startswith("'") and f"{job.corpus}:/in/corpus.jsonl:ro" in mounts.replace("'\"'\"'", "'")
    assert "export HF_HUB_OFFLINE=1" in text


@pytest.mark.parametrize("image, uri", [
    (f"ghcr.io/acme/isocost@{DIGEST}", f"ghcr.io#acme/isocost@{DIGEST}"),
    (f"127.0.0.1:5000/isocost/cpu@{DIGEST}", f"127.0.0.1:5000#isocost/cpu@{DIGEST}"),
    (f"localhost/isocost@{DIGEST}", f"localhost#isocost@{DIGEST}"),
    (f"acme/isocost@{DIGEST}", f"acme/isocost@{DIGEST}"),  # Docker Hub: no registry part
])
def test_enroot_names_the_registry_apart(image, uri):
    assert enroot_uri(image) == uri
