from __future__ import annotations

import json

import pytest

from protocol.errors import UserError
from protocol.records.raw_columns import RAW_COLUMNS
from protocol.records.raw_record import RawRecord
from protocol.records.stages import (
    CampaignEvent,
    MemoryPeaks,
    PhaseTimes,
    TrialSpec,
    TrialStatus,
    Variant,
    WarmupRule,
    codec,
)

VARIANT = Variant(variant_id="batch_size=4", stack="cpu", device="cpu", precision="fp32", quantization="none",
                  compile=False, attention="sdpa", batch_size=4, padding="longest", max_length=256,
                  length_grouping="none", resume="none", threads=2, seed=0, deterministic=True, series=("batch",))


def roundtrip(record, cls):
    return codec.from_dict(cls, json.loads(json.dumps(codec.to_dict(record), sort_keys=True)))


def test_trial_spec_roundtrip():
    spec = TrialSpec(trial_id="001-r1-batch_size-4", campaign_id="c", study_sha256="sha256:" + "0" * 64,
                     variant=VARIANT, repetition=1, order_index=1, attempt=1, corpus_path="/in/c.jsonl",
                     corpus_fingerprint="sha256:a", model_path="/in/model", model_fingerprint="sha256:b",
                     warmup=WarmupRule("tuning", 2, 1, "warmup"), warmup_texts=("a", "b"), launcher="process")
    assert roundtrip(spec, TrialSpec) == spec


def test_trial_status_roundtrip():
    status = TrialStatus(trial_id="t", status="oom", completed=37, expected=100, phases=PhaseTimes(load_s=1.5),
                         memory=MemoryPeaks(peak_rss_bytes=10), truncated_count=None, error="boom",
                         empty_reasons={"pass_s": "not reached"})
    assert roundtrip(status, TrialStatus) == status


def test_unknown_schema_version_is_refused_with_advice():
    data = codec.to_dict(VARIANT)
    data["schema_version"] = 99
    with pytest.raises(UserError, match="schema_version 99.*reads 1"):
        codec.from_dict(Variant, data)


def test_unknown_field_is_refused():
    data = codec.to_dict(VARIANT)
    data["colour"] = "blue"
    with pytest.raises(UserError, match="unknown key .colour."):
        codec.from_dict(Variant, data)


def test_raw_row_writes_empty_cells_not_zeros():
    row = RawRecord.from_values({"trial_id": "t", "pass_s": None, "ids_match": True, "peak_rss_bytes": 0})
    cells = dict(zip(RAW_COLUMNS, row.cells(), strict=False))
    assert cells["pass_s"] == ""
    assert cells["ids_match"] == "true"
    assert cells["peak_rss_bytes"] == "0"  # a real measured zero stays a zero
    assert RAW_COLUMNS[:11] == ("trial_id", "variant_id", "repetition", "order_index", "status", "pass_s",
                                "expected_ids", "observed_ids", "ids_match", "corpus_accepted", "notes")


def _spec() -> TrialSpec:
    return TrialSpec(trial_id="t", campaign_id="c", study_sha256="s", variant=VARIANT, repetition=1, order_index=1,
                     attempt=1, corpus_path="/c", corpus_fingerprint="a", model_path="/m", model_fingerprint="b",
                     warmup=WarmupRule("tuning", 2, 1, "warmup"), warmup_texts=("a",), launcher="process")


@pytest.mark.parametrize(("record", "version", "kind"), [
    ("status", 1, "status.json"), ("spec", 1, "spec.json"), ("spec", 2, "spec.json"),
    ("event", 1, "events.jsonl line"), ("event", None, "events.jsonl line")])
def test_a_pre_release_version_is_refused_naming_it_and_the_fix(record, version, kind):
    """isocost 1.x reads one version of each file (docs/formats.md): the versions 0.x wrote before it are refused
    with the version named and what to do, never read as another version."""
    status = TrialStatus(trial_id="t", status="ok", completed=1, expected=1, phases=PhaseTimes(),
                         memory=MemoryPeaks(), truncated_count=0)
    value = {"status": status, "spec": _spec(), "event": CampaignEvent(at="2026-12-03T00:00:00Z", event="x")}[record]
    data = codec.to_dict(value)
    if version is None:
        del data["schema_version"]  # an events.jsonl line of 0.x, before lines carried a version
    else:
        data["schema_version"] = version
    with pytest.raises(UserError) as caught:
        codec.from_dict(type(value), data)
    assert f"{kind} has schema_version 1" in caught.value.what or f"{kind} has schema_version {version}" in \
        caught.value.what
    assert "pre-release format (isocost 0.x)" in caught.value.what
    assert "isocost 0.x" in caught.value.fix and "new campaign" in caught.value.fix


def test_trial_spec_carries_input_buckets():
    spec = TrialSpec(trial_id="t", campaign_id="c", study_sha256="s", variant=VARIANT, repetition=1, order_index=1,
                     attempt=1, corpus_path="/c", corpus_fingerprint="a", model_path="/m", model_fingerprint="b",
                     warmup=WarmupRule("tuning", 2, 1, "warmup"), warmup_texts=("a",), launcher="process",
                     input_buckets={"x": "short"})
    assert codec.to_dict(spec)["schema_version"] == 5  # spec.json 5: the rate (1.1); 3 (1.0's) and 4 are still read
    assert roundtrip(spec, TrialSpec).input_buckets == {"x": "short"}


def _status_dict(**changes):
    status = TrialStatus(trial_id="t", status="ok", completed=1, expected=1, phases=PhaseTimes(load_s=1.0),
                         memory=MemoryPeaks(), truncated_count=0)
    return {**codec.to_dict(status), **changes}


@pytest.mark.parametrize(("data", "what"), [
    (_status_dict(phases={"load_s": "x"}), "key 'phases.load_s' must be a number or null, got 'x'"),
    (_status_dict(completed="7"), "key 'completed' must be an integer, got '7'"),
    (_status_dict(memory={"peak_rss_bytes": 1.5}), "key 'memory.peak_rss_bytes' must be an integer or null, got 1.5"),
    (_status_dict(phases={"load_s": 1.0, "pace_s": 2.0}), "unknown key 'phases.pace_s'"),
    ({k: v for k, v in _status_dict().items() if k != "status"}, "key 'status' is missing"),
])
def test_a_status_json_of_wrong_types_or_keys_is_refused_naming_the_key(data, what):
    with pytest.raises(UserError) as caught:
        codec.from_dict(TrialStatus, data)
    assert caught.value.what == what


def test_gather_reads_an_unreadable_status_as_none_with_the_key_named(tmp_path):
    from runner.campaign.gather import read_status

    (tmp_path / "status.json").write_text(json.dumps(_status_dict(phases={"pass_s": "fast"})), encoding="utf-8")
    status, reason = read_status(tmp_path)
    assert status is None
    assert "key 'phases.pass_s' must be a number or null, got 'fast'" in reason
