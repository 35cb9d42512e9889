"""A replay directory's replay.json is derived, never trusted (issue 38, class 1): `compare` re-derives what it
records of each rerun from the rerun's files, so a replay.json whose outputs_sha256 was recomputed after the
replayed predictions were edited is refused; each rerun's manifest.json (which carries the fault-hook flag) is sealed
by the sha256 replay.json records for it.

The replay directory is built by hand from the golden 1.0 campaign (the rerun: a copy of the original
trial), as `isocost replay` lays it out: replay.json, trials/<id>/, bundle/campaign/.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from protocol.io.fingerprint import sha256_file
from protocol.records.codec import read_record, write_record
from protocol.study.load import load_study
from protocol.tasks import study_task
from runner.bundle.compare import rerun_figures
from runner.bundle.records import ReplayReport, TrialReplay
from runner.campaign_dir.layout import load_record, read_csv_rows
from runner.campaign_dir.seal import outputs_cell
from runner.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"
TRIAL = "001-r1-batch_size-1"


def _replay_dir(tmp_path: Path) -> Path:
    out = tmp_path / "golden.replay"
    original = out / "bundle" / "campaign"
    shutil.copytree(GOLDEN, original)
    rerun = out / "trials" / TRIAL
    shutil.copytree(original / "trials" / TRIAL, rerun)
    study = load_study(original / "study.toml")
    task = study_task(study)
    reference = task.reference(read_csv_rows(original / "corpus_index.csv"), study)
    figures = rerun_figures(task, study, reference, rerun, original / "trials" / TRIAL, "ok")
    assert figures["matches"] and figures["replay_accepted"], figures
    trial = TrialReplay(trial_id=TRIAL, variant_id="batch_size=1", mode=study.quality.replay, status="ok", **figures,
                        original_metric=1.0, original_pass_s=None, replay_pass_s=None, environment_differences={},
                        trial_dir=str(rerun), outputs_sha256=outputs_cell(rerun, task.output_files) or "",
                        manifest_sha256=sha256_file(rerun / "manifest.json"))
    campaign = load_record(original)
    report = ReplayReport(bundle="golden.tar.gz", bundle_sha256="", campaign_id=campaign.campaign_id,
                          study_sha256=campaign.study_sha256, mode=study.quality.replay,
                          max_score_delta=study.quality.max_score_delta,
                          launcher={"kind": "process", "original": "process", "exact": True, "image": "", "note": ""},
                          inputs=(), trials=(trial,), out_dir=str(out), created_at="2026-12-03T00:00:00Z")
    write_record(out / "replay.json", report, out)
    return out


def _compare(*dirs: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["compare", *map(str, dirs)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_a_replay_whose_files_give_what_replay_json_says_is_compared(tmp_path):
    replay = _replay_dir(tmp_path)
    code, output = _compare(replay)
    assert code == 0, output
    assert "replayed in golden.replay" in output


def test_edited_reruns_with_a_recomputed_outputs_sha256_are_refused(tmp_path):
    replay = _replay_dir(tmp_path)
    rerun = replay / "trials" / TRIAL
    lines = (rerun / "predictions.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    first = json.loads(lines[0])
    first["label"] = "y" if first["label"] == "x" else "x"
    lines[0] = json.dumps(first) + "\n"
    (rerun / "predictions.jsonl").write_text("".join(lines), encoding="utf-8")
    report = read_record(replay / "replay.json", ReplayReport)
    recomputed = dataclasses.replace(report.trials[0], outputs_sha256=outputs_cell(rerun, ("predictions.jsonl",)) or "")
    write_record(replay / "replay.json", dataclasses.replace(report, trials=(recomputed,)), replay)
    code, output = _compare(replay)
    assert code == 2, output
    assert f"replay.json does not follow from the replayed files of {TRIAL}" in output
    assert "label_agreement 1.0, its files give" in output


def test_a_replay_json_claiming_a_match_its_files_do_not_give_is_refused(tmp_path):
    replay = _replay_dir(tmp_path)
    report = read_record(replay / "replay.json", ReplayReport)
    forged = dataclasses.replace(report.trials[0], replay_metric=0.5)
    write_record(replay / "replay.json", dataclasses.replace(report, trials=(forged,)), replay)
    code, output = _compare(replay)
    metric = json.loads((GOLDEN / "verdicts.json").read_text(encoding="utf-8"))["verdicts"][0]["metric_value"]
    assert code == 2 and f"replay_metric 0.5, its files give {metric!r}" in output, output


def test_a_rerun_manifest_changed_after_the_replay_is_refused_naming_it(tmp_path):
    """The rerun's manifest.json says whether the test-only fault hook was set (the flag decide and compare show):
    replay.json seals it, so a manifest edited to hide (or claim) the hook is refused, naming the file."""
    replay = _replay_dir(tmp_path)
    manifest = replay / "trials" / TRIAL / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["fault_injection"] = None if data.get("fault_injection") else "sleep-per-batch:0.2"
    manifest.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    code, output = _compare(replay)
    assert code == 2, output
    assert f"the manifest.json of {TRIAL} is not the one replay.json recorded" in output, output
    assert str(manifest) in output, output
