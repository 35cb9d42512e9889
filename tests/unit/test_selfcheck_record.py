"""``selfcheck.json`` (protocol/records/selfcheck.py): round trip, versions, verdicts, exit status, the text report."""

from __future__ import annotations

import json

import pytest

from protocol.errors import UserError
from protocol.records import codec
from protocol.records.selfcheck import (
    Check,
    SelfcheckReport,
    cut_for_budget,
    exit_code,
    failed,
    overall,
    passed,
    render_text,
    skipped,
)


def report(*checks: Check) -> SelfcheckReport:
    return SelfcheckReport(device="cuda", requested_device="auto", budget_s=300, started_at="2026-12-01T10:00:00+00:00",
                           model={"source": "demo", "path": ".isocost-demo/model", "description": "BERT, 6 layers"},
                           environment={"software": {"torch": "2.11.0+cu130", "torch_build": "cuda 13.0",
                                                     "transformers": "5.17.0", "python": "3.12.3"},
                                        "device": {"gpu_name": "NVIDIA H200", "gpu_uuid": "GPU-1",
                                                   "gpu_memory_bytes": 150 * 2**30, "driver_version": "580.1",
                                                   "backend": "cuda", "backend_version": "13.0"}},
                           checks=checks, elapsed_s=12.34)


def test_round_trip_keeps_every_field():
    original = report(passed("gpu", "NVIDIA H200", facts={"a": 1}), skipped("energy", "no counter"))
    again = codec.from_dict(SelfcheckReport, codec.to_dict(original))
    assert again == original
    assert codec.to_dict(original)["schema_version"] == 1


@pytest.mark.parametrize(("change", "what"), [
    ({"schema_version": 2}, "selfcheck.json has schema_version 2; this isocost reads 1"),
    ({"extra": 1}, "unknown key 'extra'"),
    ({"budget_s": "300"}, "key 'budget_s' must be a number, got '300'"),
    ({"checks": [{"name": "gpu", "verdict": "WARN", "figure": ""}]}, "key 'checks[0].verdict' must be one of 'PASS', "
                                                                     "'FAIL', 'SKIP', got 'WARN'"),
    ({"checks": [{"name": "gpu", "verdict": "PASS", "figure": "", "colour": 1}]}, "unknown key 'checks[0].colour'"),
])
def test_a_hostile_selfcheck_json_is_refused_naming_the_file_and_key(tmp_path, change, what):
    path = tmp_path / "selfcheck.json"
    path.write_text(json.dumps({**codec.to_dict(report(passed("gpu", "x"))), **change}), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        codec.read_record(path, SelfcheckReport)
    assert caught.value.what == what
    assert caught.value.where == str(path)


def test_a_fail_or_skip_needs_a_reason_and_verdicts_are_closed():
    with pytest.raises(ValueError, match="without a reason"):
        Check("gpu", "FAIL", "")
    with pytest.raises(ValueError, match="not one of"):
        Check("gpu", "WARN", "", "x")


@pytest.mark.parametrize(("verdicts", "expected", "code"), [
    (("PASS", "SKIP"), "PASS", 0),
    (("PASS", "FAIL", "SKIP"), "FAIL", 1),
    (("SKIP", "SKIP"), "SKIP", 3),  # nothing checked is no success
    ((), "SKIP", 3),
])
def test_overall_verdict_and_exit_status(verdicts, expected, code):
    checks = [Check(f"c{i}", v, "", "" if v == "PASS" else "why") for i, v in enumerate(verdicts)]
    assert overall(report(*checks)) == expected
    assert exit_code(report(*checks)) == code


def test_cut_for_budget_says_what_it_needed_and_what_was_left():
    check = cut_for_budget("compile", 120, 150, -3)
    assert check.verdict == "SKIP" and check.details == {"cut": True}
    assert check.reason == "cut to fit --budget-s 120: needs about 150 s, 0 s left"


def test_text_report_lists_checks_in_their_order_with_reasons():
    text = render_text(report(
        skipped("energy", "NVML energy counter not readable: Not Supported"),
        passed("gpu", "NVIDIA H200, GPU-1"),
        failed("timing", "host 0.2 s, CUDA events 0.1 s", "the host timer and the CUDA events disagree"),
    ))
    assert text == (
        "isocost selfcheck: device cuda (asked: auto), budget 300 s, started 2026-12-01T10:00:00+00:00\n"
        "torch 2.11.0+cu130 (cuda 13.0 build), transformers 5.17.0, python 3.12.3\n"
        "GPU: NVIDIA H200, GPU-1, 150.0 GiB, driver 580.1, cuda 13.0\n"
        "model: demo: BERT, 6 layers (.isocost-demo/model)\n"
        "PASS  gpu     NVIDIA H200, GPU-1\n"
        "FAIL  timing  host 0.2 s, CUDA events 0.1 s\n"
        "              reason: the host timer and the CUDA events disagree\n"
        "SKIP  energy\n"
        "              why: NVML energy counter not readable: Not Supported\n"
        "1 PASS, 1 FAIL, 1 SKIP in 12.3 s (budget 300 s) -> FAIL\n"
    )
