"""Campaigns through a real Slurm cluster (one node, two fake GPUs), with fake trials in real jobs.

What is real: slurmctld, slurmd, munged, sbatch/scontrol/scancel/squeue/sinfo, the lanes, the GRES
allocation, the pre-flight job, the batch scripts; the trial is tests/fakecampaign.py's fake
(its files are a real trial's). Real-model and container campaigns: test_slurm_real.py; the
faults (node down, cancel, timeout, host killed): tests/faults/slurm_cases.py.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fakecampaign import fake_workspace
from fakes import FAKE_S_ENV, FakeTrialSlurmLauncher, fake_launcher

from protocol.errors import UserError
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_rows
from runner.decision.period_report import campaign_period
from runner.launch.kinds.slurm.launcher import lane_name

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "raw.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _events(out: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def _schedule(out: Path) -> list[str]:
    with open(out / "schedule.csv", encoding="utf-8", newline="") as handle:
        return [row["trial_id"] for row in csv.DictReader(handle)]


def test_the_cluster_comes_up_with_two_gpus(cluster):
    assert cluster.bring_up_s > 0
    node = cluster.scontrol("-o", "show", "node", cluster.node)
    assert "Gres=gpu:alpha:1,gpu:beta:1" in node and "State=IDLE" in node


def test_a_campaign_runs_each_trial_as_one_job_on_the_pinned_node(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=6, repetitions=2, batches="[1, 4]")
    out = tmp_path / "out"
    outcome = run_campaign(study, out, fake_launcher(gres="gpu:1"))
    assert (outcome.rows_written, outcome.slots_total) == (4, 4)
    rows = _rows(out)
    assert [r["trial_id"] for r in rows] == _schedule(out)  # the rotated order, one job after another
    campaign = json.loads((out / "campaign.json").read_text())
    launcher = campaign["launcher"]
    assert launcher["kind"] == "slurm" and launcher["node"] == cluster.node and launcher["gpus"] in ("0", "1")
    assert launcher["preflight_node"] == cluster.node
    lane = lane_name(campaign["campaign_id"])
    job_ids = [r["job_id"] for r in rows]
    assert len(set(job_ids)) == 4 and all(j.isdigit() for j in job_ids)
    for row in rows:
        assert row["status"] == "ok" and row["corpus_accepted"] == "true" and row["launcher"] == "slurm"
        assert row["node"] == cluster.node and row["allocated_gpu"] == launcher["gpus"]
        assert float(row["queue_s"]) >= 0
        job = cluster.scontrol("-o", "show", "job", row["job_id"])
        assert f"JobName={lane} " in job and "Requeue=0" in job and f"NodeList={cluster.node}" in job
        record = json.loads((out / "trials" / row["trial_id"] / "launcher.json").read_text())
        assert record["jobs"][-1]["slurm"]["state"] == "COMPLETED" and record["lane"] == lane
        assert (out / "trials" / row["trial_id"] / "slurm-job.sh").read_text().startswith("#!/bin/bash")
    kinds = [e["event"] for e in _events(out)]
    assert kinds.count("queue_start") == kinds.count("queue_end") == 4


def test_gpus_asked_with_slurm_gpus_are_recorded_the_same_way(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    run_campaign(study, out, fake_launcher(gpus="beta:1"))
    row = _rows(out)[0]
    assert row["status"] == "ok" and row["allocated_gpu"] == "1"  # card 1 is the beta one
    assert "TresPerJob=gres:gpu:beta:1" in cluster.scontrol("-o", "show", "job", row["job_id"])


def test_the_period_shows_the_queue_apart_from_running(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    run_campaign(study, out, fake_launcher(gres="gpu:1"))
    period = campaign_period(out).period
    queue, trials = period.component("queue"), period.component("trials")
    assert queue is not None and trials is not None and queue.intervals == 2
    assert queue.seconds is not None and trials.seconds is not None and queue.seconds <= trials.seconds
    assert not queue.counted and "rented time" in queue.source  # inside the trials' span, counted once
    assert not any("overlap" in note for note in period.notes)


def _run_in_thread(study: Path, out: Path, gres: str, errors: list[BaseException]) -> threading.Thread:
    def target() -> None:
        try:
            run_campaign(study, out, fake_launcher(gres=gres))
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def test_two_campaigns_run_in_parallel_lanes_each_in_its_rotated_order(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv(FAKE_S_ENV, "1.5")
    errors: list[BaseException] = []
    studies = {kind: fake_workspace(tmp_path / f"ws-{kind}", n=4, repetitions=2, batches="[1, 4]")
               for kind in ("alpha", "beta")}
    threads = [_run_in_thread(studies[k], tmp_path / f"out-{k}", f"gpu:{k}:1", errors) for k in studies]
    for thread in threads:
        thread.join(timeout=300)
    assert not errors and not any(t.is_alive() for t in threads)
    spans = {}
    for kind in studies:
        out = tmp_path / f"out-{kind}"
        rows = _rows(out)
        assert [r["trial_id"] for r in rows] == _schedule(out) and all(r["status"] == "ok" for r in rows)
        assert {r["allocated_gpu"] for r in rows} == {"0" if kind == "alpha" else "1"}  # its own card, every time
        ends = [e for e in _events(out) if e["event"] in ("queue_end", "trial_end")]
        spans[kind] = (ends[0]["at"], ends[-1]["at"])
        lane = lane_name(json.loads((out / "campaign.json").read_text())["campaign_id"])
        assert all(f"JobName={lane} " in cluster.scontrol("-o", "show", "job", r["job_id"]) for r in rows)
    # The lanes overlapped in time: each started before the other ended.
    assert spans["alpha"][0] < spans["beta"][1] and spans["beta"][0] < spans["alpha"][1]


def _hold(cluster, kind: str) -> str:
    """A job that holds one fake card (gpu type alpha or beta) until cancelled."""
    done = subprocess.run(["sbatch", "--parsable", f"--gres=gpu:{kind}:1", "--job-name=holder", "-o", "/dev/null",
                           "--wrap", "sleep 300"], env={**os.environ, **cluster.env}, capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.strip()


def _job_state(cluster, job_id: str) -> tuple[str, str]:
    words = dict(w.split("=", 1) for w in cluster.scontrol("-o", "show", "job", job_id).split() if "=" in w)
    return words.get("JobState", ""), words.get("Reason", "")


def _job_of(trial_dir: Path) -> str:
    record = trial_dir / "launcher.json"
    try:
        jobs = json.loads(record.read_text()).get("jobs")
    except (OSError, ValueError):
        return ""
    return jobs[-1]["job_id"] if jobs else ""


def _until(condition, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_a_trial_waiting_for_a_card_shows_as_queued_not_running(cluster, tmp_path, monkeypatch):
    """beta is held from the start, so the campaign is pinned to alpha; while trial 1 runs, another job queues
    for alpha and takes it next: trial 2 waits PENDING, with its queue_start and no queue_end, until it is freed."""
    monkeypatch.setenv(FAKE_S_ENV, "3")
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    holders = [_hold(cluster, "beta")]
    errors: list[BaseException] = []
    thread = _run_in_thread(study, out, "gpu:1", errors)
    first, second = out / "trials" / "001-r1-batch_size-1", out / "trials" / "002-r1-batch_size-4"
    assert _until(lambda: bool(_job_of(first)) and _job_state(cluster, _job_of(first))[0] == "RUNNING")
    holders.insert(0, _hold(cluster, "alpha"))  # queues behind trial 1 for alpha
    assert _until(lambda: bool(_job_of(second)) and _job_state(cluster, _job_of(second)) == ("PENDING", "Resources"))
    state = _job_state(cluster, _job_of(second))
    queued = [e["event"] for e in _events(out) if e.get("trial_id") == second.name]
    for holder in holders:  # alpha first: the pinned card frees, trial 2 starts on it
        subprocess.run(["scancel", holder], env={**os.environ, **cluster.env}, check=False, timeout=30)
    thread.join(timeout=120)
    assert not errors and not thread.is_alive()
    assert state == ("PENDING", "Resources")
    assert "queue_start" in queued and "queue_end" not in queued  # queued, not running
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["ok", "ok"] and {r["allocated_gpu"] for r in rows} == {"0"}
    assert float(rows[1]["queue_s"]) > 0


def test_a_job_cancelled_outside_isocost_keeps_its_row_and_the_campaign_goes_on(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv(FAKE_S_ENV, "20")
    study = fake_workspace(tmp_path / "ws", n=20, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    first = out / "trials" / "001-r1-batch_size-1"

    def cancel_first() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            predictions = first / "predictions.jsonl"
            if predictions.exists() and predictions.read_text().count("\n") >= 2:
                job = json.loads((first / "launcher.json").read_text())["jobs"][-1]["job_id"]
                subprocess.run(["scancel", job], env={**os.environ, **cluster.env}, check=False, timeout=30)
                monkeypatch.setenv(FAKE_S_ENV, "0.2")  # the second trial: quick
                return
            time.sleep(0.1)

    killer = threading.Thread(target=cancel_first)
    killer.start()
    run_campaign(study, out, fake_launcher(gres="gpu:1"))
    killer.join()
    rows = _rows(out)
    assert [r["trial_id"] for r in rows] == _schedule(out)
    assert rows[0]["status"] == "interrupted" and "cancelled outside isocost" in rows[0]["notes"]
    assert rows[0]["corpus_accepted"] == "false" and int(rows[0]["completed"]) >= 2
    assert rows[1]["status"] == "ok"


# -- bad input: clear errors before any trial, --out left as it was ------------------------------------------


@pytest.mark.parametrize("values, where, words", [
    ({"partition": "nosuch"}, "--slurm-partition", "unknown partition 'nosuch'"),
    ({"gres": "gpu:gamma:1"}, "--slurm-gres", "offers gres=gpu:gamma:1"),
    ({"gres": "gpu:alpha:2"}, "--slurm-gres", "GPUs there: gpu:2, gpu:alpha:1, gpu:beta:1"),
    ({"gpus": "3"}, "--slurm-gpus", "offers gpus=3"),
    ({"node": "node9"}, "--slurm-node", "node node9 is not in partition debug"),
    ({"arg": ("--mem=10T",)}, "--slurm-arg", "has the memory --slurm-arg=--mem=10T asks for"),
    ({"arg": ("--cpus-per-task=64",)}, "--slurm-arg", "has the 64 CPUs --slurm-arg=--cpus-per-task=64 asks for"),
])
def test_the_cluster_refuses_before_anything_is_submitted(cluster, values, where, words):
    with pytest.raises(UserError) as info:
        fake_launcher(**values)
    assert info.value.where == where and words in info.value.what


def test_check_refuses_memory_no_node_has_with_runs_message(cluster, tmp_path):
    """The one-node cluster's node has RealMemory=1000 (MB): sbatch would refuse --mem=10T at `run`; `check` asks sinfo
    and refuses first, with the same words."""
    from click.testing import CliRunner

    from runner.cli import main as cli

    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    flags = ["--launcher", "slurm", "--slurm-arg=--mem=10T"]
    checked = CliRunner().invoke(cli, ["check", str(study), *flags])
    ran = CliRunner().invoke(cli, ["run", str(study), "--out", str(tmp_path / "out"), *flags])
    words = "no node of partition debug has the memory --slurm-arg=--mem=10T asks for"
    assert checked.exit_code == 2 and "FAIL  launcher: " + words in checked.output, checked.output
    assert ran.exit_code == 2 and words in ran.output, ran.output
    assert "the largest node has 1,000 MB" in checked.output and "the largest node has 1,000 MB" in ran.output
    assert not (tmp_path / "out" / "campaign.json").exists()


def test_check_refuses_an_out_outside_the_shared_directory_as_run_does(cluster, tmp_path):
    from click.testing import CliRunner

    from runner.cli import main as cli

    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    (tmp_path / "shared").mkdir()
    flags = ["--out", str(tmp_path / "out"), "--launcher", "slurm", "--slurm-shared", str(tmp_path / "shared")]
    checked = CliRunner().invoke(cli, ["check", str(study), *flags])
    ran = CliRunner().invoke(cli, ["run", str(study), *flags])
    words = f"--out {tmp_path / 'out'} is outside the shared directory"
    assert checked.exit_code == 2 and "FAIL  launcher: " + words in checked.output, checked.output
    assert ran.exit_code == 2 and words in ran.output, ran.output


def test_sbatch_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands at all
    with pytest.raises(UserError) as info:
        fake_launcher()
    assert "sinfo is not installed on this machine" in info.value.what and "--slurm-login" in info.value.fix


def test_a_job_that_never_starts_is_refused_before_any_trial(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    cluster.set_node("drain")
    launcher = fake_launcher(gres="gpu:1", start_wait=3)
    with pytest.raises(UserError) as info:
        run_campaign(study, out, launcher)
    assert "pre-flight job" in info.value.what and "did not start within 3 s" in info.value.what
    assert info.value.where == "--slurm-start-wait"
    assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")]  # the lock is its owner's


def test_out_outside_the_shared_directory_is_refused(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    (tmp_path / "shared").mkdir()
    with pytest.raises(UserError) as info:
        run_campaign(study, tmp_path / "out", fake_launcher(shared=str(tmp_path / "shared")))
    assert "outside the shared directory" in info.value.what and info.value.where == "--out"


def test_inputs_outside_the_shared_directory_are_copied_there_and_checked(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    shared = tmp_path / "shared"
    shared.mkdir()
    out = shared / "out"
    run_campaign(study, out, fake_launcher(shared=str(shared)))
    spec = json.loads((out / "trials" / "001-r1-batch_size-1" / "spec.json").read_text())
    assert spec["corpus_path"].startswith(str(shared / ".isocost-inputs"))
    assert _rows(out)[0]["status"] == "ok"


def test_a_node_that_cannot_write_into_out_is_refused_before_any_trial(cluster, tmp_path):
    """As another user the job cannot write the root-owned --out: what a node without the shared directory sees."""
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    launcher = fake_launcher()
    launcher.options = dataclasses.replace(launcher.options, extra=("--uid=65534",))
    with pytest.raises(UserError) as info:
        run_campaign(study, out, launcher)
    assert "wrote nothing into" in info.value.what and "cannot see or write" in info.value.what
    assert info.value.where == "--slurm-shared"
    assert not [p for p in out.iterdir() if not p.name.startswith(".")]


def test_resume_refuses_another_node_or_runtime(cluster, tmp_path):
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    run_campaign(study, out, fake_launcher())
    other = fake_launcher(gres="gpu:1")
    with pytest.raises(UserError) as info:
        run_campaign(study, out, other, resume=True)
    assert "gpus_per_trial" in info.value.what
    assert len(read_rows(out / "raw.csv")) == 1


def test_a_job_given_another_card_runs_no_trial_and_is_submitted_again(cluster, tmp_path):
    """The campaign is pinned to card 1 while another job holds it: the trial's job gets card 0, starts no
    trial, and is submitted again until it gets card 1 (here: once the holder moves to card 0)."""
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    holders = [_hold(cluster, "beta")]

    class PinnedToCardOne(FakeTrialSlurmLauncher):
        def preflight(self, study, out):
            said = super().preflight(study, out)
            self.gpus = "1"  # as if the pre-flight job had been given card 1
            return said

    launcher = PinnedToCardOne(fake_launcher(gres="gpu:1").options, trial_timeout_s=60, kill_grace_s=5)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _safe_run(study, out, launcher, errors))
    thread.start()
    first = out / "trials" / "001-r1-batch_size-1"

    def refused_once() -> bool:
        try:
            jobs = json.loads((first / "launcher.json").read_text())["jobs"]
        except (OSError, ValueError, KeyError):
            return False
        return any(job.get("seen", {}).get("refused") == "card" for job in jobs)

    assert _until(refused_once)
    holders.append(_hold(cluster, "alpha"))  # card 0 taken, card 1 freed: the next submission gets card 1
    subprocess.run(["scancel", holders[0]], env={**os.environ, **cluster.env}, check=False, timeout=30)
    thread.join(timeout=180)
    subprocess.run(["scancel", holders[1]], env={**os.environ, **cluster.env}, check=False, timeout=30)
    assert not errors and not thread.is_alive()
    row = _rows(out)[0]
    jobs = json.loads((first / "launcher.json").read_text())["jobs"]
    assert row["status"] == "ok" and row["allocated_gpu"] == "1" and row["job_id"] == jobs[-1]["job_id"]
    assert len(jobs) >= 2 and jobs[0]["seen"]["refused"] == "card" and "exit_code" not in jobs[0]["seen"]


def _safe_run(study: Path, out: Path, launcher, errors: list[BaseException]) -> None:
    try:
        run_campaign(study, out, launcher)
    except BaseException as exc:  # noqa: BLE001  (reported by the test)
        errors.append(exc)
