"""Real containers of this checkout's CPU image: a one-rate server campaign, and an engine series with ONNX Runtime.

- **server** (issue 36, launchers): each container serves MLPerf LoadGen's Server scenario at one rate beside the
  tiny classifier (LoadGen is in the image and runs in-process: no port, network ``none``); the answers are judged
  by the unchanged gate, LoadGen's VALID/INVALID verdict is in every manifest, and the serving files (answers,
  queries, LoadGen's logs) come back through the trial directory and are sealed; rows lost 0.
- **engines** (issue 35): ``engine = ["transformers", "onnxruntime"]`` as a series, each trial in a container,
  both accepted against the one transformers reference; each manifest's ``engine`` block says what ran.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from serving_study import TRAFFIC
from workspace import series_toml, write_workspace

from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.seal import parse_outputs_cell

pytestmark = pytest.mark.docker

N = 12
SERVING_FILES = {"predictions.jsonl", "answers.jsonl", "queries.jsonl", "mlperf_log_summary.txt",
                 "mlperf_log_detail.txt"}
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "onnxruntime"]\n'


def _readable(study: Path) -> Path:
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the container's non-root user reads the inputs
    return study


def _run(study: Path, out: Path, images_lock: Path) -> str:
    from runner.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        patch.delenv("ISOCOST_ENGINE_CACHE", raising=False)
        result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "docker"])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_server_campaign_in_containers(cpu_image: Any, images_lock: Path, tiny_model: Path,
                                         tmp_path: Path) -> None:
    pytest.importorskip("mlperf_loadgen")  # the host reads LoadGen's summary only through the manifest
    study = _readable(write_workspace(tmp_path / "ws", tiny_model, n=N, repetitions=1, batches="[1, 4]",
                                      replace={'scenario = "offline"': 'scenario = "server"'}, extra=TRAFFIC))
    out = tmp_path / "out"
    output = _run(study, out, images_lock)
    printed = re.search(r"launcher: docker, image (\S+)", output)
    assert printed is not None, output
    # The image by its id, or by its registry digest once an earlier test pushed it (test_replay_by_digest.py);
    # which image ran is each row's and manifest's image_id, asserted below.
    assert printed.group(1) == cpu_image.image_id or "@sha256:" in printed.group(1), output
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["batch_size=1", "batch_size=4"]  # rows lost 0
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    for row in rows:
        trial = out / "trials" / row["trial_id"]
        assert (row["status"], row["corpus_accepted"], row["launcher"]) == ("ok", "true", "docker"), row
        assert row["image_id"] == cpu_image.image_id
        assert (row["expected_ids"], row["observed_ids"], row["ids_match"]) == (str(N), str(N), "true")
        assert [json.loads(line)["id"] for line in (trial / "predictions.jsonl").read_text().splitlines()] == ids
        manifest = json.loads((trial / "manifest.json").read_text())
        serving = manifest["serving"]
        assert serving["result"] in ("VALID", "INVALID") and serving["target_qps"] == 20.0
        assert serving["answers"]["written"] == N and serving["answers"]["differing_count"] == 0
        assert serving["max_batch"] == int(row["variant_id"].split("=")[1])
        assert serving["latency_at_percentile_ms"] is not None and serving["completed_qps"] > 0
        assert manifest["image_id"] == cpu_image.image_id
        assert SERVING_FILES <= set(parse_outputs_cell(row["outputs_sha256"])), row["outputs_sha256"]
        assert all((trial / name).stat().st_size > 0 for name in SERVING_FILES)
    summary = (out / "summary.md").read_text().split("## Serving", 1)[1]
    assert all(f"- {v}: LoadGen " in summary for v in ("batch_size=1", "batch_size=4")), summary
    assert "answers accepted" in summary
    from runner.cli import main

    assert CliRunner().invoke(main, ["validate", str(out)]).exit_code == 0  # the seals hold


def test_an_engine_series_with_onnxruntime_in_containers(cpu_image: Any, images_lock: Path, tiny_model: Path,
                                                         tmp_path: Path) -> None:
    study = _readable(write_workspace(tmp_path / "ws", tiny_model, n=N, repetitions=1, replace={
        series_toml().format(batches="[1, 4]"): ENGINE_SERIES, "batch_size = 1": "batch_size = 4",
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'}))
    out = tmp_path / "out"
    _run(study, out, images_lock)
    rows = read_raw(out / "raw.csv")
    assert sorted(r["variant_id"] for r in rows) == ["engine=onnxruntime", "engine=transformers"]
    for row in rows:
        assert (row["status"], row["corpus_accepted"], row["launcher"]) == ("ok", "true", "docker"), row
        assert row["image_id"] == cpu_image.image_id
        manifest = json.loads((out / "trials" / row["trial_id"] / "manifest.json").read_text())
        engine = manifest["engine"]
        assert engine["name"] == row["engine"]
        if row["engine"] == "onnxruntime":
            assert engine["providers"][0] == "CPUExecutionProvider" and engine["version"]
            assert len(engine["export"]["onnx_sha256"]) == 64
            assert manifest["model"]["onnx_sha256"] == engine["export"]["onnx_sha256"]
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=onnxruntime"]["agreement"] == 1.0
