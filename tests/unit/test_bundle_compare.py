"""The replay comparison rules, environment differences and replay.md, without a campaign."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from recordfiles import manifest_for, sample_spec

from protocol.errors import UserError
from protocol.records import codec
from protocol.records.codec import write_record
from protocol.tasks.classification import compare_predictions
from protocol.tasks.classification.predictions import ParsedPredictions, Prediction
from runner.bundle.compare import environment_differences, render_replay, replay_differences
from runner.bundle.records import InputUse, ReplayReport, TrialReplay


def _parsed(*scores: tuple[str, str, float]) -> ParsedPredictions:
    return ParsedPredictions(tuple(Prediction(i, label, score) for i, label, score in scores), ())


ORIGINAL = _parsed(("a", "x", 0.9), ("b", "y", 0.6))


@pytest.mark.parametrize("mode, bound, replayed, expected", [
    ("identical", None, ORIGINAL, []),
    ("identical", None, _parsed(("a", "x", 0.9), ("b", "y", 0.60001)),
     ["not identical: label agreement 1.0000, max |Δscore| 1e-05"]),
    ("bounded", 1e-4, _parsed(("a", "x", 0.9), ("b", "y", 0.60001)), []),
    ("bounded", 1e-6, _parsed(("a", "x", 0.9), ("b", "y", 0.60001)),
     ["max |Δscore| 1e-05 exceeds the declared bound 1e-06"]),
    ("bounded", 1.0, _parsed(("a", "x", 0.9), ("b", "x", 0.6)), ["labels differ: agreement 0.5000"]),
    ("bounded", math.nan, ORIGINAL, ["the study's quality.max_score_delta nan is not a usable bound"]),
    ("identical", None, _parsed(("a", "x", 0.9)), ["the replay's ids differ from the original's (1 vs 2 outputs)"]),
])
def test_replay_comparison_rules(mode, bound, replayed, expected):
    agreement = compare_predictions(replayed, ORIGINAL)
    assert replay_differences("ok", True, (), agreement, replayed, ORIGINAL, mode, bound) == expected


def test_the_quality_rule_only_asks_for_a_passing_rerun():
    different = _parsed(("a", "y", 0.1), ("b", "x", 0.2))
    agreement = compare_predictions(different, ORIGINAL)
    assert replay_differences("ok", True, (), agreement, different, ORIGINAL, "quality", None) == []
    assert replay_differences("oom", False, ("accuracy 0.1 below the study's minimum 0.5",), agreement, different,
                           ORIGINAL, "quality", None) == [
        "the replay ended with status oom",
        "the replay is not an accepted pass under the study's quality rule: accuracy 0.1 below the study's "
        "minimum 0.5",
    ]


def _manifest(folder: Path, **blocks: object) -> Path:
    folder.mkdir()
    write_record(folder / "manifest.json", manifest_for(sample_spec(), **blocks))
    return folder


def test_environment_differences_name_each_changed_fact(tmp_path):
    before = _manifest(tmp_path / "before", software={"torch": "2.3.0", "python": "3.12.1"}, device={"name": "cpu"},
                       image_id="sha256:aa", launcher="docker")
    after = _manifest(tmp_path / "after", software={"torch": "2.4.0", "python": "3.12.1", "numpy": "2.0"},
                      device={"name": "cpu"}, host={"kernel": "6.1"}, image_id="sha256:aa", launcher="process")
    assert environment_differences(before, after) == {
        "software.numpy": [None, "2.0"],
        "software.torch": ["2.3.0", "2.4.0"],
        "host.kernel": [None, "6.1"],
        "launcher": ["docker", "process"],
    }


def test_environment_differences_are_empty_when_a_manifest_is_missing(tmp_path):
    before = _manifest(tmp_path / "before", software={"torch": "2.3.0"})
    (tmp_path / "after").mkdir()
    assert environment_differences(before, tmp_path / "after") == {}


def _trial(matches: bool, reasons: tuple[str, ...] = ()) -> TrialReplay:
    return TrialReplay(
        trial_id="001-r1-batch_size-1", variant_id="batch_size-1", mode="bounded", matches=matches, reasons=reasons,
        status="ok", compared_ids=2, label_agreement=1.0, max_score_delta=2e-05, identical=False,
        original_metric=0.9, replay_metric=0.9, replay_accepted=True, original_pass_s=1.5, replay_pass_s=1.6,
        environment_differences={"software.torch": ["2.3.0", "2.4.0"]}, trial_dir="/tmp/r/trials/001",
    )


def _report(*trials: TrialReplay, launcher: dict | None = None) -> ReplayReport:
    return ReplayReport(
        bundle="/tmp/quick.tar.gz", bundle_sha256="sha256:bb", campaign_id="c1", study_sha256="sha256:cc",
        mode="bounded", max_score_delta=1e-4,
        launcher=launcher or {"kind": "docker", "original": "docker", "exact": True, "image": "img@sha256:dd",
                              "note": ""},
        inputs=(InputUse("corpus", "/c.csv", "sha256:ee", "bundle"), InputUse("model", "/m", "sha256:ff", "--inputs")),
        trials=trials, out_dir="/tmp/r", created_at="2026-01-01T00:00:00+00:00",
    )


def test_render_replay_states_the_rule_the_launcher_each_trial_and_the_result():
    text = render_replay(_report(_trial(True)))
    assert text == (
        "# Replay of quick.tar.gz\n"
        "\n"
        "Campaign c1, study sha256:cc.\n"
        "Replay rule (quality.replay): bounded (max |Δscore| ≤ 0.0001).\n"
        "Launcher: docker (original: docker, image img@sha256:dd)\n"
        "Inputs: corpus sha256:ee from bundle; model sha256:ff from --inputs\n"
        "\n"
        "- 001-r1-batch_size-1 (batch_size-1): status ok, label agreement 1.0000, max |Δscore| 2e-05, identical "
        "false: MATCHES\n"
        "  environment differences: software.torch: '2.3.0' -> '2.4.0'\n"
        "\n"
        "Result: the replay MATCHES (bounded).\n"
    )


def test_render_replay_says_when_it_differs_and_is_not_exact():
    launcher = {"kind": "process", "original": "docker", "exact": False, "image": "", "note": "ran locally"}
    text = render_replay(_report(_trial(False, ("labels differ: agreement 0.5000",)), launcher=launcher))
    assert "Launcher: process (original: docker) - NOT an exact replay: ran locally\n" in text
    assert ": DIFFERS: labels differ: agreement 0.5000\n" in text
    assert text.endswith("Result: the replay DIFFERS (bounded).\n")
    assert not _report().matches  # no trial replayed is no match


def test_replay_json_round_trips_and_is_read_strictly():
    report = _report(_trial(True), _trial(False, ("the replay ended with status oom",)))
    data = json.loads(json.dumps(codec.to_dict(report)))
    assert data["matches"] is False  # derived, written for readers
    assert codec.from_dict(ReplayReport, data) == report
    with pytest.raises(UserError, match=r"key 'matches' is true, but the record's other keys give false"):
        codec.from_dict(ReplayReport, {**data, "matches": True}, "r/replay.json")
    data["trials"][0]["replay_metric"] = "0.9"
    with pytest.raises(UserError, match=r"key 'trials\[0\].replay_metric' must be a number or null, got '0.9'"):
        codec.from_dict(ReplayReport, data, "r/replay.json")
