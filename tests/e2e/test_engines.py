"""End-to-end: the engine as a variant, in a real campaign: the isocost CLI in its own process, each trial in a
fresh process with the real tiny checkpoint, a ``[[series]]`` over ``engine`` with a test engine added by its
own folder (tests/fixtures/engines/relay: the task's own model, one setting read back). Both engines' rows are
kept and ranked under one reference; an engine that reads back another setting than the study's is refused with
the difference named, its row kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import series_toml, write_workspace

from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / "tests" / "fixtures" / "engines"
ENGINE_SERIES = '[[series]]\nname = "engine"\nfield = "engine"\nvalues = ["transformers", "relay"]\n'


def _isocost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOCOST_ENGINES_PATH": str(ENGINES)}
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, check=False)


def test_a_series_over_engines_runs_both_and_ranks_them_under_one_reference(tiny_model: Path,
                                                                           tmp_path: Path) -> None:
    study = write_workspace(tmp_path / "ws", tiny_model, n=8, repetitions=1, replace={
        series_toml().format(batches="[1, 4]"): ENGINE_SERIES,
        'reference_variant = "batch_size=1"': 'reference_variant = "engine=transformers"'},
        extra='\n[engines.relay]\nmode = "same"\n')
    out = tmp_path / "out"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {row["variant_id"]: row for row in read_raw(out / "raw.csv")}
    assert sorted(rows) == ["engine=relay", "engine=transformers"]
    for variant_id, row in rows.items():
        engine = variant_id.split("=")[1]
        assert (row["status"], row["corpus_accepted"], row["engine"]) == ("ok", "true", engine)
        trial = out / "trials" / row["trial_id"]
        spec, manifest = (json.loads((trial / name).read_text()) for name in ("spec.json", "manifest.json"))
        assert spec["variant"]["engine"] == engine and spec["schema_version"] == 5  # 4 (the engine) + the rate
        assert manifest["engine"]["name"] == engine and manifest["schema_version"] == 3
        assert "rate_qps" not in spec["variant"] and row["rate_qps"] == ""  # offline: no target rate
        assert "rate_qps: offline study: no target rate" in row["empty_reasons"]
        assert spec["engine_settings"] == ({"mode": "same"} if engine == "relay" else {})
    validated = _isocost("validate", str(out))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    verdicts = {v["variant_id"]: v for v in json.loads((out / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["engine=relay"]["agreement"] == 1.0  # the same model: the same labels, id by id
    summary = _isocost("summarize", str(out))
    assert summary.returncode == 0 and "engine=relay" in summary.stdout, summary.stdout + summary.stderr
    assert '"engine": "relay"' in (out / "summary.json").read_text()
    engines = (out / "summary.md").read_text().split("## Engines")[1].split("##")[0]
    assert "- relay (engine=relay): the same accepted result as engine=transformers" in engines


def test_an_engine_that_runs_another_setting_than_declared_is_refused_and_kept(tiny_model: Path,
                                                                              tmp_path: Path) -> None:
    study = write_workspace(tmp_path / "ws", tiny_model, n=8, repetitions=1, batches="[1]",
                            replace={'deterministic = true\n': 'deterministic = true\nengine = "relay"\n'},
                            extra='\n[engines.relay]\nmode = "changed"\n')
    out = tmp_path / "out"
    run = _isocost("run", str(study), "--out", str(out), "--launcher", "process")
    rows = read_raw(out / "raw.csv")
    assert len(rows) == 1 and rows[0]["status"] == "refused" and rows[0]["engine"] == "relay", run.stdout
    status = json.loads((out / "trials" / rows[0]["trial_id"] / "status.json").read_text())
    assert "engine relay does not run the study's settings: mode: declared 'changed', engine runs 'something else'" \
        in status["error"]
