"""The raw row's GPU columns, from a trial's status.json (no trial runs here)."""

from __future__ import annotations

import dataclasses

from protocol.records import codec
from protocol.records.stages import MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus, Variant, WarmupRule
from protocol.study.load import load_study
from protocol.tasks.classification import Reference
from runner.campaign.gather import gather_trial, trial_inputs
from runner.launch.launcher import LaunchResult

VARIANT = Variant(variant_id="batch_size=4", stack="cuda", device="cuda", precision="fp32", quantization="none",
                  compile=True, attention="sdpa", batch_size=4, padding="longest", max_length=8,
                  length_grouping="none", resume="none", threads=1, seed=0, deterministic=True)


def setup(tmp_path, study_text, **status_fields):
    study_path = tmp_path / "study.toml"
    study_path.write_text(study_text(), encoding="utf-8")
    study = load_study(study_path)
    trial_dir = tmp_path / "trials" / "t1"
    trial_dir.mkdir(parents=True)
    (trial_dir / "predictions.jsonl").write_text('{"id": "a", "label": "x", "score": 0.9}\n')
    status = TrialStatus(trial_id="t1", status="ok", completed=1, expected=1,
                         phases=PhaseTimes(pass_s=2.0, gpu_pass_s=0.5, trial_s=3.0),
                         memory=MemoryPeaks(peak_allocated_bytes=10, peak_reserved_bytes=20,
                                            device_used_max_bytes=300),
                         truncated_count=0, **status_fields)
    codec.write_record(trial_dir / "status.json", status)
    spec = TrialSpec(trial_id="t1", campaign_id="c", study_sha256="s", variant=VARIANT, repetition=1, order_index=1,
                     attempt=1, corpus_path="/c", corpus_fingerprint="a", model_path="/m", model_fingerprint="b",
                     warmup=WarmupRule("tuning", 2, 1, "warmup"), warmup_texts=("a",), launcher="process")
    reference = Reference(ids=("a",), labels={"a": "x"}, groups={})
    study = dataclasses.replace(study, quality=dataclasses.replace(study.quality, subgroups=()))
    return gather_trial(spec, trial_dir, LaunchResult(exit_code=0, wall_s=3.5), reference, study).values


def test_device_busy_share_energy_and_memory_columns(tmp_path, study_text):
    values = setup(tmp_path, study_text, gpu_energy_j=123.5, cpu_energy_j=None,
                   cpu_energy_reason="RAPL not readable", pass_compilations=0)
    assert values["device_busy_share"] == 0.25
    assert values["gpu_energy_j"] == 123.5 and values["cpu_energy_j"] is None
    assert "cpu_energy_j: RAPL not readable" in values["empty_reasons"]
    assert values["device_used_max_bytes"] == 300
    assert values["pass_compilations"] == 0 and "recompiled" not in values["notes"]


def test_a_pass_that_recompiled_is_flagged(tmp_path, study_text):
    values = setup(tmp_path, study_text, pass_compilations=2)
    assert values["pass_compilations"] == 2
    assert "recompiled during the measured pass: 2 torch.compile graph(s)" in values["notes"]


def test_trial_inputs_carry_buckets_and_warmup_shapes(tmp_path):
    index = tmp_path / "corpus_index.csv"
    index.write_text("id,label,n_tokens,length_bucket\na,x,5,short\nb,x,40,long\nc,y,3,short\n")
    got = trial_inputs(index, VARIANT)
    assert got["input_buckets"] == {"a": "short", "b": "long", "c": "short"}
    assert got["warmup_shapes"] == ((3, 8),)  # one batch of 3, padded to max_length 8 (40 truncated)
    index.write_text("id,label,n_tokens,length_bucket\na,x,5,\n")
    assert trial_inputs(index, VARIANT)["input_buckets"] == {}
