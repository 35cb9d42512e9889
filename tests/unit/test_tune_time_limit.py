"""``isocost tune`` when its tuning pass runs into the study's trial time limit: the message names the limit and
the fix, not only the signal the trial saw (no model is run: the launcher is replaced)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from recordfiles import trial_status, write_status

from protocol.errors import UserError
from protocol.study.load import load_study
from runner.launch.launcher import LaunchResult
from runner.own import tune


class TimedOut:
    """A launcher whose trial is killed by the host at the limit: the trial's status says SIGTERM."""

    def run(self, paths: Any, timeout_s: float | None) -> LaunchResult:
        write_status(paths.trial_dir, trial_status("tune", "interrupted", error="received signal SIGTERM"))
        return LaunchResult(exit_code=-15, timed_out=True,
                            notes=(f"killed by the host at the trial time limit ({timeout_s:g} s)",))


class Failed:
    def run(self, paths: Any, timeout_s: float | None) -> LaunchResult:
        write_status(paths.trial_dir, trial_status("tune", "failed", error="CUDA is not available"))
        return LaunchResult(exit_code=1)


def run_reference(tmp_path: Path, study_text: Callable[..., str], launcher: type) -> UserError:
    path = tmp_path / "study.toml"
    path.write_text(study_text(timeout=37), encoding="utf-8")
    study = load_study(path)
    variant = tune._reference_variant(study)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tune, "ProcessLauncher", launcher)
        with pytest.raises(UserError) as caught:
            tune._run_reference(study, variant, (), lambda line: None)
    return caught.value


def test_a_tuning_pass_killed_at_the_time_limit_names_the_limit_and_the_fix(tmp_path, study_text) -> None:
    error = run_reference(tmp_path, study_text, TimedOut)
    assert "time limit" in error.message and "37 s" in error.message
    assert "trial_timeout_s" in error.message  # the key that sets it
    assert "fix the study or the checkpoint" not in error.message


def test_a_tuning_pass_that_fails_otherwise_still_says_read_the_log(tmp_path, study_text) -> None:
    error = run_reference(tmp_path, study_text, Failed)
    assert "failed: CUDA is not available" in error.message and "trial.log" in error.message
