"""End-to-end: a ``scenario = "server"`` study with the real tiny classifier, each trial in its own process.

Each trial loads and warms the model as an offline trial does, then serves MLPerf LoadGen's Server scenario at the
study's one rate (runner/trial/serving/trial_pass.py); the task's own predictions.jsonl, written from the answers
(one line per id), is judged by the unchanged gate; LoadGen's verdict is in the manifest, sealed, and summarised in
summary.md's ``## Serving``. Under the test-only ``disagree`` fault one variant's answers differ from the reference's
and it is not serving-acceptable, whatever LoadGen says."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from serving_study import SERVER, TRAFFIC

from runner.analysis.summarize import summarize_campaign
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.trial.faults import FAULT_ENV, disagrees

pytestmark = pytest.mark.e2e
pytest.importorskip("mlperf_loadgen")

N = 12
SEALED = ("predictions.jsonl", "answers.jsonl", "queries.jsonl", "mlperf_log_summary.txt", "mlperf_log_detail.txt")


def serve_study(make_workspace: Callable[..., Path], name: str, replace: dict[str, str] | None = None) -> Path:
    return make_workspace(name, n=N, repetitions=1, batches="[1, 4]", replace={**SERVER, **(replace or {})},
                          extra=TRAFFIC)


def test_a_server_study_serves_judges_and_summarises(make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    study = serve_study(make_workspace, "ws")
    checked = CliRunner().invoke(main, ["check", str(study)])
    assert "ok    serving: each trial serves MLPerf LoadGen's Server scenario at 20 qps" in checked.output, \
        checked.output
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["batch_size=1", "batch_size=4"]
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        assert row["status"] == "ok" and row["corpus_accepted"] == "true", row
        assert (row["expected_ids"], row["observed_ids"], row["ids_match"]) == (str(N), str(N), "true")
        assert [json.loads(line)["id"] for line in (trial / "predictions.jsonl").read_text().splitlines()] == ids
        serving = json.loads((trial / "manifest.json").read_text())["serving"]
        assert serving["result"] in ("VALID", "INVALID") and serving["target_qps"] == 20.0
        assert serving["queries"] == serving["library_samples"] == 48 and serving["corpus_copies"] == 4
        assert serving["answers"]["written"] == N and serving["answers"]["differing_count"] == 0
        assert serving["max_batch"] == int(row["variant_id"].split("=")[1]) and serving["max_wait_ms"] == 10
        assert serving["latency_at_percentile_ms"] is not None and serving["completed_qps"] > 0
        assert float(row["pass_s"]) > 1.0  # 48 Poisson arrivals at 20 qps: about 2.4 s
        sealed = row["outputs_sha256"]
        assert all(f"{name}=" in sealed for name in SEALED), sealed
    summary = (out / "summary.md").read_text()
    section = summary.split("## Serving", 1)[1]
    for variant in ("batch_size=1", "batch_size=4"):
        assert f"- {variant}: LoadGen " in section, section
    assert "answers accepted" in section and "p90 latency" in section and "of 20 qps" in section
    assert "Serving-acceptable" in section

    # decide on a server study needs the declared traffic (tests/e2e/test_serving_decide.py decides one).
    decided = CliRunner().invoke(main, ["decide", str(out)])
    assert decided.exit_code == 2 and "--peak-qps is missing" in decided.output, decided.output

    # A sealed serving file changed after the run is refused by name.
    trial = out / "trials" / rows[0]["trial_id"]
    (trial / "answers.jsonl").write_text((trial / "answers.jsonl").read_text().replace('"x"', '"y"', 1))
    checked = CliRunner().invoke(main, ["summarize", str(out)])
    assert checked.exit_code != 0 and "answers.jsonl" in checked.output, checked.output


def test_a_variant_that_answers_differently_is_not_serving_acceptable(make_workspace: Callable[..., Path],
                                                                      tmp_path: Path) -> None:
    relaxed = {"min_agreement = 0.99": "min_agreement = 0.9"}
    study = serve_study(make_workspace, "fault", relaxed)
    out = tmp_path / "out"

    def progress(message: str) -> None:
        if ": ok" in message:
            os.environ[FAULT_ENV] = "disagree:0.5"  # the second trial (not the reference) answers differently

    try:
        run_campaign(study, out, ProcessLauncher(), progress=progress)
    finally:
        os.environ.pop(FAULT_ENV, None)
    summarize_campaign(out)
    rows = read_raw(out / "raw.csv")
    assert [r["variant_id"] for r in rows] == ["batch_size=1", "batch_size=4"]
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    changed = [i for i in ids if disagrees(i, 0.5)]
    assert changed, "the fault must change some answers"
    perturbed = out / "trials" / rows[1]["trial_id"]
    serving = json.loads((perturbed / "manifest.json").read_text())["serving"]
    assert serving["answers"]["differing_count"] == 0  # every repeat perturbed alike: one answer per id
    summary = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert "- batch_size=4: LoadGen" in summary and "answers NOT accepted" in summary.split("- batch_size=4:")[1]
    acceptable = summary.split("Serving-acceptable", 1)[1].splitlines()[0]
    assert "batch_size=4" not in acceptable


def test_a_series_of_rates_runs_each_configuration_once_per_rate(make_workspace: Callable[..., Path],
                                                                  tmp_path: Path) -> None:
    """``rates_qps = [10.0, 20.0]``: two configurations (batch 1 and 4), each a variant per rate, four trials in
    real processes, each serving its own rate; the rate is in spec.json, raw.csv and summary.json's ``serving``."""
    rates = {"rate_qps = 20.0": "rates_qps = [10.0, 20.0]"}
    study = make_workspace("rates", n=N, repetitions=1, batches="[1, 4]", replace=SERVER,
                           extra=TRAFFIC.replace(*next(iter(rates.items()))))
    checked = CliRunner().invoke(main, ["check", str(study)])
    assert "at its variant's rate, one of 10, 20 qps" in checked.output, checked.output
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "process"])
    assert result.exit_code == 0, result.output
    rows = read_raw(out / "raw.csv")
    assert [(r["variant_id"], r["rate_qps"]) for r in rows] == [
        ("batch_size=1@rate_qps=10", "10.0"), ("batch_size=1@rate_qps=20", "20.0"),
        ("batch_size=4@rate_qps=10", "10.0"), ("batch_size=4@rate_qps=20", "20.0")]
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        spec = json.loads((trial / "spec.json").read_text())
        serving = json.loads((trial / "manifest.json").read_text())["serving"]
        assert spec["variant"]["rate_qps"] == serving["target_qps"] == float(row["rate_qps"]), row["trial_id"]
        assert row["status"] == "ok" and row["corpus_accepted"] == "true", row
    record = json.loads((out / "summary.json").read_text())
    assert record["schema_version"] == 2 and record["serving"]["schema_version"] == 1
    serving = record["serving"]
    assert serving["rates_qps"] == [10.0, 20.0] and serving["queries_needed"] == 44
    by_configuration: dict[str, list[float]] = {}
    for variant in serving["variants"]:
        by_configuration.setdefault(variant["configuration_id"], []).append(variant["rate_qps"])
        (run,) = variant["runs"]
        assert run["target_qps"] == variant["rate_qps"] and run["loadgen_result"] in ("VALID", "INVALID")
        assert run["queries"] + run["failed_queries"] == 48 and run["distribution"]["count"] == run["queries"]
        assert run["distribution"]["undecided"] == ["p95", "p99"]  # 48 queries: p95 needs 90, p99 459
        assert sum(run["distribution"]["histogram"]) == run["queries"]
    assert by_configuration == {"batch_size=1": [10.0, 20.0], "batch_size=4": [10.0, 20.0]}
    section = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert "Poisson arrivals at 10, 20 qps" in section
    for variant in ("batch_size=1@rate_qps=10", "batch_size=4@rate_qps=20"):
        assert f"- {variant}: LoadGen " in section, section
    assert "of 10 qps" in section and "of 20 qps" in section and "latency ms over 48 answered queries" in section
    assert "(* undecided with 48 queries: p95 needs 90, p99 needs 459)" in section
