"""End-to-end: real campaigns with the real MiniLM model, each trial in a fresh process."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from protocol.errors import UserError
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e


def rows_of(out: Path) -> list[dict[str, str]]:
    return read_raw(out / "raw.csv")


def test_campaign_rows_order_verdicts_and_summary(make_workspace, tmp_path):
    study = make_workspace(n=12, repetitions=2, batches="[1, 4]")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    assert f"Results: {out.resolve()}" in result.output
    assert "| batch_size=1 |" in result.output

    rows = rows_of(out)
    assert [r["variant_id"] for r in rows] == ["batch_size=1", "batch_size=4", "batch_size=4", "batch_size=1"]
    assert [r["order_index"] for r in rows] == ["1", "2", "3", "4"]
    for r in rows:
        assert r["status"] == "ok"
        assert (r["expected_ids"], r["observed_ids"], r["ids_match"], r["corpus_accepted"]) == ("12", "12", "true",
                                                                                                 "true")
        assert float(r["pass_s"]) > 0
        assert r["peak_allocated_bytes"] == ""  # no GPU: empty, with its reason, never 0
        assert "peak_allocated_bytes: CPU trial: no GPU" in r["empty_reasons"]
        assert "image_digest: launcher 'process' runs no container image" in r["empty_reasons"]
        predictions = (out / r["predictions_path"]).read_text().splitlines()
        assert len(predictions) == 12

    with open(out / "schedule.csv") as handle:
        assert [s["variant_id"] for s in csv.DictReader(handle)] == [r["variant_id"] for r in rows]

    manifest = json.loads((out / "trials" / rows[0]["trial_id"] / "manifest.json").read_text())
    assert manifest["device"]["backend"] == "cpu"
    assert manifest["software"]["torch"].startswith("2.")
    assert manifest["determinism"]["seed"] == 0
    assert manifest["truncation"]["max_length"] == 32
    assert manifest["model"]["labels"] == ["x", "y"]
    assert manifest["empty_reasons"]["driver_version"] == "CPU trial: no GPU in use"

    summary = json.loads((out / "summary.json").read_text())
    b1 = summary["variants"][0]
    assert b1["variant_id"] == "batch_size=1" and b1["accepted"] == 2 and len(b1["pass_s"]) == 2
    assert b1["median_pass_s"] == pytest.approx(sorted(b1["pass_s"])[0] / 2 + sorted(b1["pass_s"])[1] / 2)
    # batch 1 vs 4 on the same inputs: the same labels
    assert summary["variants"][1]["min_agreement"] == 1.0
    verdicts = list(csv.DictReader(open(out / "verdicts.csv")))
    assert all(v["matches_raw"] == "true" for v in verdicts)


def test_killed_trial_keeps_its_row_with_completed_count(make_workspace, tmp_path, monkeypatch):
    study = make_workspace(n=12, repetitions=1, batches="[1, 4]")
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "sleep-per-batch:0.4")
    first = out / "trials" / "001-r1-batch_size-1"
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            predictions = first / "predictions.jsonl"
            launcher = first / "launcher.json"
            if predictions.exists() and predictions.read_text().count("\n") >= 3 and launcher.exists():
                pid = json.loads(launcher.read_text())["pid"]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    run_campaign(study, out, ProcessLauncher())
    thread.join()
    assert killed
    rows = rows_of(out)
    assert len(rows) == 2  # the campaign went on after the kill
    row = rows[0]
    assert row["status"] == "interrupted"
    assert int(row["completed"]) >= 3 and row["completed"] == row["observed_ids"]
    assert row["ids_match"] == "false" and row["corpus_accepted"] == "false"
    assert row["pass_s"] == "" and "pass_s:" in row["empty_reasons"]
    assert "exit code -9" in row["notes"]
    assert rows[1]["status"] == "ok"


def test_simulated_oom_is_kept_not_rerun_smaller(make_workspace, tmp_path, monkeypatch):
    study = make_workspace(n=12, repetitions=1, batches="[4]")
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "oom-at-batch:2")
    run_campaign(study, out, ProcessLauncher())
    rows = rows_of(out)
    assert len(rows) == 1
    assert rows[0]["status"] == "oom" and rows[0]["completed"] == "8" and rows[0]["batch_size"] == "4"
    assert "SimulatedOOM" in rows[0]["notes"]


def test_hanging_trial_is_killed_at_the_time_limit(make_workspace, tmp_path, monkeypatch):
    study = make_workspace(n=12, repetitions=1, batches="[4]", timeout=15)
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "hang-at-batch:1")
    run_campaign(study, out, ProcessLauncher())
    row = rows_of(out)[0]
    assert row["status"] == "timeout" and row["completed"] == "4"
    assert "time limit (15 s)" in row["notes"]


def test_host_killed_then_resume_completes_without_duplicates(make_workspace, tmp_path):
    study = make_workspace(n=12, repetitions=2, batches="[1, 4]")
    out = tmp_path / "out"
    env = {**os.environ, "ISOCOST_FAULT_INJECT": "sleep-per-batch:0.2"}
    command = [sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out), "--launcher", "process"]
    host = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(rows_of(out) if (out / "raw.csv").exists() else []) < 1:
        time.sleep(0.1)
    while time.monotonic() < deadline and not (out / "trials" / "002-r1-batch_size-4" / "launcher.json").exists():
        time.sleep(0.05)
    host.kill()  # SIGKILL: no chance to clean up
    host.wait()
    before = (out / "raw.csv").read_bytes()
    assert len(rows_of(out)) == 1

    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--resume", "--launcher", "process"])
    assert result.exit_code == 0, result.output
    after = (out / "raw.csv").read_bytes()
    assert after.startswith(before)  # earlier rows byte-identical
    rows = rows_of(out)
    final = [r for r in rows if HOST_STOP_NOTE not in r["notes"]]
    assert sorted(r["order_index"] for r in final) == ["1", "2", "3", "4"]  # one final row per pass
    orphans = [r for r in rows if HOST_STOP_NOTE in r["notes"]]
    assert len(orphans) == 1 and orphans[0]["trial_id"] == "002-r1-batch_size-4"
    assert orphans[0]["status"] == "interrupted"
    assert any(r["trial_id"] == "002-r1-batch_size-4-a2" and r["status"] == "ok" for r in rows)


def test_resume_refuses_a_changed_study(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=1, batches="[1]")
    out = tmp_path / "out"
    run_campaign(study, out, ProcessLauncher())
    study.write_text(study.read_text().replace("minimum = 0.0", "minimum = 0.1"))
    with pytest.raises(UserError, match="the study changed since this campaign started"):
        run_campaign(study, out, ProcessLauncher(), resume=True)
    with pytest.raises(UserError, match="already holds a campaign.*Use --resume"):
        run_campaign(study, out, ProcessLauncher())


def test_results_dir_of_another_study_is_refused(make_workspace, tmp_path):
    first = make_workspace(n=4, repetitions=1, batches="[1]", name="one")
    second = make_workspace(n=4, repetitions=1, batches="[1, 4]", name="two")
    out = tmp_path / "out"
    run_campaign(first, out, ProcessLauncher())
    result = CliRunner().invoke(main, ["run", str(second), "--out", str(out), "--resume", "--launcher", "process"])
    assert result.exit_code == 2
    assert "Error: the study changed since this campaign started" in result.output


def test_corpus_changed_on_disk_is_refused_before_the_next_trial(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=2, batches="[1]")
    out = tmp_path / "out"
    corpus = study.parent / "corpus.jsonl"

    def progress(message: str) -> None:
        if message.startswith("[1/2]") and "ok" in message:
            corpus.write_text(corpus.read_text().replace("c-000", "c-999"))

    with pytest.raises(UserError, match="corpus fingerprint .* differs .*checked before the next trial"):
        run_campaign(study, out, ProcessLauncher(), progress=progress)
    assert len(rows_of(out)) == 1


def test_wrong_fingerprint_is_refused_before_any_trial(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=1, batches="[1]")
    (study.parent / "model" / "config.json").write_text("{}")
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out"), "--launcher", "process"])
    assert result.exit_code == 2
    assert "Error: model fingerprint" in result.output and "differs from the study's" in result.output
    assert not (tmp_path / "out" / "raw.csv").exists()


def test_changed_threshold_on_a_seen_final_corpus_needs_a_new_evaluation_set(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=1, batches="[1]")
    run_campaign(study, tmp_path / "first", ProcessLauncher())
    study.write_text(study.read_text().replace("minimum = 0.0", "minimum = 0.2"))
    with pytest.raises(UserError, match="has been seen by campaign .*new independent evaluation set"):
        run_campaign(study, tmp_path / "second", ProcessLauncher())
    run_campaign(study, tmp_path / "third", ProcessLauncher(), acknowledge_seen_corpus=True)
    campaign = json.loads((tmp_path / "third" / "campaign.json").read_text())
    assert campaign["seen_corpus_reuse"]["quality_rule"]["minimum"] == 0.0
    result = CliRunner().invoke(main, ["summarize", str(tmp_path / "third")])
    assert "not an independent evaluation" in result.output


def test_a_study_outside_the_allowed_roots_is_refused(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=1, batches="[1]")
    elsewhere = tmp_path / "allowed"
    elsewhere.mkdir()
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out"), "--launcher", "process",
                                       "--allowed-root", str(elsewhere)])
    assert result.exit_code == 2
    assert "Error:" in result.output and str(elsewhere) in result.output
    assert not (tmp_path / "out").exists()


def test_run_ledger_dir_is_the_ledger_tune_and_check_read(make_workspace, tmp_path, monkeypatch):
    """`isocost run --ledger DIR` records the evaluation in DIR, the ledger `tune --ledger DIR` reads: a changed
    rule on the seen corpus is then refused there, and nothing is written next to the study."""
    monkeypatch.delenv("ISOCOST_LEDGER_DIR", raising=False)
    monkeypatch.delenv("ISOCOST_HOME", raising=False)
    study = make_workspace(n=4, repetitions=1, batches="[1]")
    shared = tmp_path / "shared-ledger"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "first"), "--launcher", "process",
                                       "--ledger", str(shared)])
    assert result.exit_code == 0, result.output
    [entry] = [json.loads(line) for line in (shared / "evaluations.jsonl").read_text().splitlines()]
    assert entry["out"] == str((tmp_path / "first").resolve())
    assert not (study.parent / ".isocost").exists()
    study.write_text(study.read_text().replace("minimum = 0.0", "minimum = 0.2"))
    with pytest.raises(UserError, match="has been seen by campaign"):
        run_campaign(study, tmp_path / "second", ProcessLauncher(), ledger_dir=shared)
