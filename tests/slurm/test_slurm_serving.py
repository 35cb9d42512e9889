"""A one-rate server campaign and an ONNX Runtime engine series through the test cluster (process runtime).

The serving trial runs inside the job, unchanged: LoadGen beside the tiny classifier in the trial's own Python (the
submitting environment's, as every process-runtime job); the answers are judged, LoadGen's VALID/INVALID verdict is
in every manifest, the serving files are sealed, rows lost 0; with the docker runtime (marker docker) each job runs
this checkout's CPU image, LoadGen inside. The engine series runs transformers and onnxruntime
as two jobs, both accepted against the one reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from serving_study import TRAFFIC
from workspace import series_toml

from runner.campaign.launcher_choice import choose_launcher
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.seal import parse_outputs_cell
from runner.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

N = 12
SERVING_FILES = {"predictions.jsonl", "answers.jsonl", "queries.jsonl", "mlperf_log_summary.txt",
                 "mlperf_log_detail.txt"}
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "onnxruntime"]\n'


def _run(study: Path, out: Path) -> str:
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "slurm",
                                       "--slurm-gres", "gpu:1", "--slurm-start-wait", "120"])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_server_campaign_as_slurm_jobs(cluster, make_workspace, tmp_path):
    pytest.importorskip("mlperf_loadgen")
    study = make_workspace("ws", n=N, repetitions=1, batches="[1, 4]",
                           replace={'scenario = "offline"': 'scenario = "server"'}, extra=TRAFFIC)
    out = tmp_path / "out"
    output = _run(study, out)
    assert "launcher: slurm (process runtime" in output
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["batch_size=1", "batch_size=4"]  # rows lost 0
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        assert (row["status"], row["corpus_accepted"], row["launcher"]) == ("ok", "true", "slurm"), row
        assert row["node"] == cluster.node and row["job_id"]
        assert (row["expected_ids"], row["observed_ids"], row["ids_match"]) == (str(N), str(N), "true")
        serving = json.loads((trial / "manifest.json").read_text())["serving"]
        assert serving["result"] in ("VALID", "INVALID") and serving["target_qps"] == 20.0
        assert serving["answers"]["written"] == N and serving["answers"]["differing_count"] == 0
        assert serving["latency_at_percentile_ms"] is not None and serving["completed_qps"] > 0
        assert SERVING_FILES <= set(parse_outputs_cell(row["outputs_sha256"])), row["outputs_sha256"]
    summary = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert all(f"- {v}: LoadGen " in summary for v in ("batch_size=1", "batch_size=4")), summary


def test_an_onnxruntime_engine_series_as_slurm_jobs(cluster, make_workspace, tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("ISOCOST_ENGINE_CACHE", str(tmp_path / "engine-cache"))
    study = make_workspace("ws", n=N, repetitions=1, replace={
        series_toml().format(batches="[1, 4]"): ENGINE_SERIES, "batch_size = 1": "batch_size = 4",
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'})
    out = tmp_path / "out"
    _run(study, out)
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["engine=onnxruntime", "engine=transformers"]
    for row in rows:
        assert (row["status"], row["corpus_accepted"], row["launcher"]) == ("ok", "true", "slurm"), row
        engine = json.loads((out / "trials" / row["trial_id"] / "manifest.json").read_text())["engine"]
        assert engine["name"] == row["engine"]
        if row["engine"] == "onnxruntime":
            assert engine["providers"][0] == "CPUExecutionProvider" and len(engine["export"]["onnx_sha256"]) == 64
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=onnxruntime"]["agreement"] == 1.0


@pytest.mark.docker
def test_a_server_campaign_as_slurm_jobs_in_containers(cluster, make_workspace, tmp_path, cpu_image):
    """The docker runtime: each job runs this checkout's CPU image (LoadGen inside), network none, no port."""
    study = make_workspace("ws", n=N, repetitions=1, batches="[4]",
                           replace={'scenario = "offline"': 'scenario = "server"'}, extra=TRAFFIC)
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the trial container's user reads them
    out = tmp_path / "out"
    launcher = choose_launcher(study, "slurm", cpu_image, options={"slurm": {
        "runtime": "docker", "gres": "gpu:1", "start_wait": 120}}).launcher
    run_campaign(study, out, launcher)
    (row,) = read_raw(out / "raw.csv")
    assert (row["status"], row["corpus_accepted"], row["image_id"]) == ("ok", "true", cpu_image), row
    trial = out / "trials" / row["trial_id"]
    assert f"container_image={cpu_image}" in (trial / "slurm-job.txt").read_text()
    serving = json.loads((trial / "manifest.json").read_text())["serving"]
    assert serving["result"] in ("VALID", "INVALID") and serving["answers"]["written"] == N
    assert SERVING_FILES <= set(parse_outputs_cell(row["outputs_sha256"])), row["outputs_sha256"]
