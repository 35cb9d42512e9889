"""The host side of ``isocost selfcheck`` (runner/selfcheck/host.py), without torch: model choice, the check
process stopped at its budget, the report completed, and the OOM trial's row judged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.records import codec
from protocol.records.selfcheck import CHECK_NAMES, SelfcheckReport, passed
from protocol.records.stages import MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus, Variant, WarmupRule
from runner.launch.launcher import LaunchResult
from runner.selfcheck import host
from runner.selfcheck.host import Request


def test_the_model_given_wins_then_the_demo_then_a_random_one(tmp_path):
    given = tmp_path / "mine"
    given.mkdir()
    (given / "config.json").write_text("{}")
    assert host.choose_model(Request(model=given)) == ("given", given, None)
    demo = tmp_path / "demo"
    (demo / "model").mkdir(parents=True)
    (demo / "model" / "config.json").write_text("{}")
    (demo / "corpus-quick.jsonl").write_text("")
    assert host.choose_model(Request(demo_dir=demo)) == ("demo", demo / "model", demo / "corpus-quick.jsonl")
    assert host.choose_model(Request(demo_dir=tmp_path / "none")) == ("random", None, None)
    with pytest.raises(UserError, match="not a checkpoint directory"):
        host.choose_model(Request(model=tmp_path))


def test_the_check_command_runs_the_trial_module_with_this_python(tmp_path):
    command = host.check_command(Request(device="rocm", out=tmp_path, budget_s=90, demo_dir=tmp_path, texts=5))
    assert command[:3] == [sys.executable, "-m", "runner.trial.selfcheck"]
    assert command[3:] == ["--device", "rocm", "--out", str(tmp_path), "--budget-s", "90", "--texts", "5",
                           "--model-source", "random"]


def fake_checks(monkeypatch, script: str) -> None:
    """The check process replaced by a short python script (no torch)."""
    monkeypatch.setattr(host, "check_command", lambda request: [sys.executable, "-c", script, str(request.out)])


PARTIAL = (
    "import json, sys, time\n"
    "from pathlib import Path\n"
    "out = Path(sys.argv[1])\n"
    "report = {'device': 'cuda', 'requested_device': 'cuda', 'model': {}, 'budget_s': 1, 'started_at': 't',\n"
    "          'environment': {}, 'checks': [{'name': 'gpu', 'verdict': 'PASS', 'figure': 'H200', 'reason': '',\n"
    "          'seconds': 0.1, 'details': {}}], 'ended_at': '', 'elapsed_s': None, 'schema_version': 1}\n"
    "(out / 'selfcheck.json').write_text(json.dumps(report))\n"
    "print('gpu done', flush=True)\n"
    "time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 60)\n"
)


def test_a_check_process_past_its_budget_is_stopped_and_the_rest_reported_cut(tmp_path, monkeypatch):
    fake_checks(monkeypatch, PARTIAL)
    monkeypatch.setattr(host, "GRACE_S", 1.0)  # the script writes its report at once, then hangs
    report = host.run_selfcheck(Request(device="cuda", out=tmp_path, budget_s=4))
    assert report.check("gpu").verdict == "PASS"
    for name in CHECK_NAMES:
        if name not in ("gpu", "oom-trial"):
            assert report.check(name).reason.startswith("cut: the check process was stopped at the budget"), name
    assert report.check("oom-trial").reason.startswith("no OOM trial to run")
    assert (tmp_path / "selfcheck.txt").read_text().splitlines()[-1].endswith("-> PASS")
    assert "gpu done" in (tmp_path / "selfcheck.log").read_text()
    assert json.loads((tmp_path / "selfcheck.json").read_text())["elapsed_s"] is not None


def test_a_check_process_that_wrote_nothing_is_an_error_naming_its_log(tmp_path, monkeypatch):
    fake_checks(monkeypatch, "import sys; print('ModuleNotFoundError: No module named torch'); sys.exit(1)")
    with pytest.raises(UserError, match=r"wrote no selfcheck.json \(exit 1\): ModuleNotFoundError") as info:
        host.run_selfcheck(Request(device="cuda", out=tmp_path, budget_s=30))
    assert "pip install -e '.[trial]'" in info.value.message


def test_a_check_process_that_ended_early_leaves_skips_saying_so():
    report = SelfcheckReport(device="cpu", requested_device="cpu", model={}, budget_s=60, started_at="t",
                             checks=(passed("timing", "x"),))
    done = host.complete(report, 1, stopped=False)
    assert done.check("memory").reason == "not run: the check process ended early (exit 1); see selfcheck.log"
    assert done.check("oom-trial") is None  # the host's own step, judged after


def gpu_report(device="cuda", budget_s=300) -> SelfcheckReport:
    return SelfcheckReport(device=device, requested_device=device, model={}, budget_s=budget_s, started_at="t")


def test_the_oom_trial_skips_on_cpu_without_a_spec_and_when_the_budget_is_spent(tmp_path):
    assert host.oom_trial(gpu_report("cpu"), tmp_path, 100).reason.startswith("CPU: no device memory")
    assert host.oom_trial(gpu_report(), tmp_path, 100).reason.startswith("no OOM trial to run")
    (tmp_path / "trials" / "oom").mkdir(parents=True)
    (tmp_path / "trials" / "oom" / "spec.json").write_text("{}")
    check = host.oom_trial(gpu_report(budget_s=60), tmp_path, 12)
    assert check.reason == "cut to fit --budget-s 60: needs about 30 s, 12 s left"


SPEC = TrialSpec(trial_id="oom", campaign_id="selfcheck", study_sha256="", repetition=1, order_index=1, attempt=1,
                 variant=Variant(variant_id="oom", stack="cuda", device="cuda", precision="fp32", quantization="none",
                                 compile=False, attention="sdpa", batch_size=4, padding="longest", max_length=256,
                                 length_grouping="none", resume="none", threads=1, seed=0, deterministic=True),
                 corpus_path="c.jsonl", corpus_fingerprint="x", model_path="m", model_fingerprint="y",
                 warmup=WarmupRule("tuning", 8, 1, "warmup"), warmup_texts=("a",), launcher="process")


def write_status(directory: Path, status: str, completed: int, error: str, allocated=None, reserved=None) -> None:
    record = TrialStatus(trial_id="oom", status=status, completed=completed, expected=12, phases=PhaseTimes(),
                         memory=MemoryPeaks(peak_allocated_bytes=allocated, peak_reserved_bytes=reserved),
                         truncated_count=None, error=error)
    codec.write_record(directory / "status.json", record)


def test_an_oom_trial_that_crashed_fails(tmp_path):
    check = host.judge_oom_trial(SPEC, tmp_path, LaunchResult(exit_code=-11))
    assert check.verdict == "FAIL" and check.figure == "row status interrupted"
    assert check.reason.startswith("the trial crashed: the trial wrote no status.json (exit -11)")


def test_an_oom_trial_recorded_as_an_error_fails_naming_the_row(tmp_path):
    write_status(tmp_path, "error", 0, "RuntimeError: CUDA error: unspecified launch failure")
    check = host.judge_oom_trial(SPEC, tmp_path, LaunchResult(exit_code=1))
    assert check.verdict == "FAIL"
    assert "the row would be 'error', not 'oom'" in check.reason
    assert "expected the first batch (4)" in check.reason and "not torch's OutOfMemoryError" in check.reason


def test_an_oom_row_with_the_first_batch_and_both_peaks_passes(tmp_path):
    write_status(tmp_path, "oom", 4, "OutOfMemoryError: CUDA out of memory.", 130 * 2**30, 131 * 2**30)
    check = host.judge_oom_trial(SPEC, tmp_path, LaunchResult(exit_code=1))
    assert check.verdict == "PASS", check
    assert check.figure == ("row status oom (exit 1, status.json written): 4 of 12 inputs kept before the device "
                            "refused; peaks allocated 130.00 GiB, reserved 131.00 GiB (apart); OutOfMemoryError: "
                            "CUDA out of memory.")
    # killed by the kernel for memory from the outside: still an oom row, but the trial's own account is missing
    assert host.judge_oom_trial(SPEC, tmp_path / "x", LaunchResult(exit_code=-9, oom_killed=True)).verdict == "FAIL"
