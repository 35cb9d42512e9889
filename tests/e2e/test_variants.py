"""End-to-end: declared resume variants and common seeds, in real processes."""

from __future__ import annotations

import json

import pytest

from runner.analysis.summarize import summarize_campaign
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e


def test_resume_variant_is_its_own_variant_and_its_ooms_count(make_workspace, tmp_path, monkeypatch):
    study = make_workspace(
        n=12, repetitions=1, batches="[8]",
        replace={'name = "batch"\nfield = "batch_size"\nvalues = [8]': 'name = "resume"\nfield = "resume"\n'
                 'values = ["none", "halve-batch-on-oom"]', 'reference_variant = "batch_size=8"':
                 'reference_variant = "resume=none"', "batch_size = 1": "batch_size = 8"},
    )
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "oom-if-batch-over:4")
    out = tmp_path / "out"
    run_campaign(study, out, ProcessLauncher())
    rows = {r["variant_id"]: r for r in read_raw(out / "raw.csv")}
    plain, resumed = rows["resume=none"], rows["resume=halve-batch-on-oom"]
    assert plain["status"] == "oom" and plain["completed"] == "0" and plain["batch_size"] == "8"
    assert resumed["status"] == "ok" and resumed["completed"] == "12" and resumed["batch_size"] == "8"
    assert resumed["oom_events"] == "1"  # 12 inputs = batches of 8 (OOM, retried as 4 + 4) and 4
    summary = summarize_campaign(out)
    by_id = {v.variant_id: v for v in summary.variants}
    assert by_id["resume=none"].accepted == 0
    assert by_id["resume=halve-batch-on-oom"].oom_events == 1
    text = (out / "summary.md").read_text()
    assert "resume=none: INFEASIBLE" in text
    assert "1 out-of-memory retries absorbed" in text


def test_common_seeds_are_kept_apart(make_workspace, tmp_path):
    study = make_workspace(n=4, repetitions=1, batches="[1, 4]",
                           replace={"repetitions = 1": "repetitions = 1\nseeds = [0, 7]"})
    out = tmp_path / "out"
    run_campaign(study, out, ProcessLauncher())
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == [
        "batch_size=1@seed=0", "batch_size=1@seed=7", "batch_size=4@seed=0", "batch_size=4@seed=7"]
    assert {r["variant_id"]: r["seed"] for r in rows}["batch_size=4@seed=7"] == "7"
    summarize_campaign(out)
    verdicts = json.loads((out / "verdicts.json").read_text())["verdicts"]
    reference = {v["variant_id"]: v["reference_trial"] for v in verdicts}
    assert reference["batch_size=4@seed=7"].endswith("batch_size-1-seed-7")
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["variants"]) == 4  # never pooled across seeds
