"""The campaign directory is sealed: one writer, a chained append-only raw table, exact resume.

Real host code in real processes, fake trials (tests/fakecampaign.py): each test takes seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fakecampaign import FakeLauncher, fake_workspace, host_command, host_env

from protocol.errors import UserError
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.e2e


def _wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.02)


def _final_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    from runner.campaign_dir.raw_table import is_host_stopped

    return [r for r in rows if not is_host_stopped(r)]


def test_a_trial_that_finished_after_the_host_died_is_recorded_not_rerun(tmp_path):
    """Defect 1: kill the host while trial 2 runs, let trial 2 finish, --resume: 2 rows, no -a2."""
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    host = subprocess.Popen(host_command(study, out), env=host_env(trial_s=1.5),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = out / "trials" / "002-r1-batch_size-4"
    _wait_for(second / "launcher.json")
    host.kill()
    host.wait()
    _wait_for(second / "status.json")  # the trial goes on alone and finishes by itself
    time.sleep(0.2)
    outcome = run_campaign(study, out, FakeLauncher(), resume=True)
    rows = read_raw(out / "raw.csv")
    assert [r["trial_id"] for r in rows] == ["001-r1-batch_size-1", "002-r1-batch_size-4"]
    assert rows[1]["status"] == "ok"
    assert "ended by itself" in rows[1]["notes"]
    assert not (out / "trials" / "002-r1-batch_size-4-a2").exists()
    assert outcome.rows_written == 1
    assert len(_final_rows(rows)) == 2


def test_a_second_writer_is_refused_with_the_pid_and_host(tmp_path):
    """Defect 2: two writers of one --out: the second is refused, the first finishes alone."""
    study = fake_workspace(tmp_path / "ws", repetitions=2, batches="[1, 4]")
    out = tmp_path / "out"
    first = subprocess.Popen(host_command(study, out), env=host_env(trial_s=0.6),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(out / "trials" / "001-r1-batch_size-1" / "launcher.json")
    second = subprocess.run(host_command(study, out, resume=True), env=host_env(trial_s=0.1),
                            capture_output=True, text=True, timeout=120)
    assert first.wait(timeout=120) == 0
    assert second.returncode == 2, second.stderr
    assert second.stderr.startswith("Error: another isocost run is writing this campaign")
    assert f"pid {first.pid} on host {os.uname().nodename}" in second.stderr
    rows = read_raw(out / "raw.csv")
    assert sorted(r["order_index"] for r in rows) == ["1", "2", "3", "4"]
    assert len({r["trial_id"] for r in rows}) == 4


def test_a_trial_left_running_without_launcher_json_is_stopped_before_it_is_recorded(tmp_path, monkeypatch):
    """The host died between starting the trial and writing launcher.json: --resume still finds and stops it."""
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    env = {**host_env(trial_s=3), "ISOCOST_FAKE_NO_LAUNCHER_JSON": "1"}
    host = subprocess.Popen(host_command(study, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = out / "trials" / "002-r1-batch_size-4"
    _wait_for(second / "manifest.json")  # the trial runs
    host.kill()
    host.wait()
    run_campaign(study, out, FakeLauncher(), resume=True)
    time.sleep(3.5)  # had the leftover lived on, it would have written its status by now
    assert not (second / "status.json").exists()
    rows = read_raw(out / "raw.csv")
    assert [(r["trial_id"], r["status"]) for r in rows] == [
        ("001-r1-batch_size-1", "ok"), ("002-r1-batch_size-4", "interrupted"), ("002-r1-batch_size-4-a2", "ok")]
    from runner.campaign_dir.integrity import check_evidence

    assert check_evidence(out).ok, check_evidence(out).headline()


def test_a_writer_lock_is_released_when_its_holder_dies(tmp_path):
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    host = subprocess.Popen(host_command(study, out), env=host_env(trial_s=5),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(out / "trials" / "001-r1-batch_size-1" / "launcher.json")
    host.send_signal(signal.SIGKILL)
    host.wait()
    run_campaign(study, out, FakeLauncher(), resume=True)  # the kernel released the lock
    assert len(_final_rows(read_raw(out / "raw.csv"))) == 2


@pytest.mark.parametrize("cut", ["inside the trial id", "inside the last column", "just before the newline"])
def test_a_cut_last_row_is_quarantined_and_rederived_on_resume(tmp_path, cut):
    """Defect 3: a raw.csv cut inside its last row: readers refuse; --resume keeps the cut bytes aside."""
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    run_campaign(study, out, FakeLauncher())
    raw = out / "raw.csv"
    data = raw.read_bytes()
    start = data.rindex(b"\n002-r1-b") + 1
    at = {"inside the trial id": start + len("002-r1-ba"), "inside the last column": len(data) - 20,
          "just before the newline": len(data) - 1}[cut]
    raw.write_bytes(data[:at])

    with pytest.raises(UserError, match=r"raw.csv ends in a partial row \(row 2, byte \d+\).*--resume"):
        read_raw(raw)

    outcome = run_campaign(study, out, FakeLauncher(), resume=True)
    assert outcome.rows_written == 1
    assert (out / "raw.csv.partial-1").read_bytes() == data[start:at]
    rows = read_raw(raw)
    assert [r["trial_id"] for r in rows] == ["001-r1-batch_size-1", "002-r1-batch_size-4"]
    assert rows[1]["status"] == "ok"
    assert raw.read_bytes()[:start] == data[:start]
    assert not (out / "trials" / "002-r1-batch_size-4-a2").exists()
    if cut == "inside the trial id":  # the kept bytes travel in the bundle, and it verifies
        import tarfile

        from runner.analysis.summarize import summarize_campaign
        from runner.bundle.pack import create_bundle
        from runner.bundle.verify import verify_bundle

        summarize_campaign(out)
        create_bundle(out, tmp_path / "b.tar.gz")
        report = verify_bundle(tmp_path / "b.tar.gz")
        assert report.ok, report.first
        with tarfile.open(tmp_path / "b.tar.gz") as tar:
            assert tar.extractfile("campaign/raw.csv.partial-1").read() == data[start:at]  # type: ignore[union-attr]


def test_an_edited_row_breaks_the_chain_and_is_named(tmp_path):
    study = fake_workspace(tmp_path / "ws", repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    run_campaign(study, out, FakeLauncher())
    raw = out / "raw.csv"
    text = raw.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    lines[1] = lines[1].replace(",ok,", ",oom,", 1)
    raw.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UserError, match=r"raw.csv row 1 \(001-r1-batch_size-1\) does not match its chain digest"):
        read_raw(raw)
    with pytest.raises(UserError, match="row 1 .001-r1-batch_size-1. does not match its chain digest"):
        run_campaign(study, out, FakeLauncher(), resume=True)
