"""The interpreter of a local trial (runner/launch/kinds/process/interpreter.py): the engine's own environment when
its host half names one (engine vllm: ISOCOST_VLLM_PYTHON, default .venv-vllm/bin/python), the host's otherwise; the
process launcher starts each trial with it and refuses a campaign whose engine's interpreter is missing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
from recordfiles import SAMPLE_VARIANT, sample_spec

from protocol.errors import UserError
from protocol.records.codec import write_record
from runner.launch.kinds.process import interpreter
from runner.launch.kinds.process.interpreter import missing_pythons, trial_python
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.launch.launcher import TrialPaths


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder and a checkout without .venv-vllm, no ISOCOST_VLLM_PYTHON."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(interpreter, "CHECKOUT", tmp_path / "checkout")
    monkeypatch.delenv("ISOCOST_VLLM_PYTHON", raising=False)
    return tmp_path


def _python(folder: Path, missing: str = "") -> Path:
    """A stand-in for the engine's interpreter: asked for its modules (``-c`` and the module names), it names
    ``missing`` as the one it cannot find."""
    python = folder / ".venv-vllm" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nprintf '{missing}'\n")
    python.chmod(0o755)
    return python


def test_the_default_engine_runs_with_the_hosts_interpreter(nowhere: Path) -> None:
    assert trial_python("transformers", "/host/python") == "/host/python"
    assert missing_pythons(["transformers"]) == []


def test_vllm_runs_with_its_own_environment(nowhere: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    in_checkout = _python(nowhere / "checkout")
    assert trial_python("vllm", "/host/python") == str(in_checkout)
    in_cwd = _python(nowhere)
    assert trial_python("vllm", "/host/python") == str(in_cwd)
    monkeypatch.setenv("ISOCOST_VLLM_PYTHON", "/opt/vllm/bin/python")
    assert trial_python("vllm", "/host/python") == "/opt/vllm/bin/python"


def test_a_missing_interpreter_is_refused_before_anything_runs(nowhere: Path) -> None:
    (error,) = missing_pythons(["vllm", "transformers"])
    assert f"engine vllm runs its trials with {nowhere / '.venv-vllm/bin/python'}, which does not exist" in str(error)
    assert "make vllm" in str(error) and "ISOCOST_VLLM_PYTHON" in str(error)
    study = SimpleNamespace(variants=lambda: [SAMPLE_VARIANT, dataclasses.replace(SAMPLE_VARIANT, engine="vllm")])
    with pytest.raises(UserError, match="does not exist"):
        ProcessLauncher("/host/python").preflight(study, nowhere / "out")  # type: ignore[arg-type]
    python = _python(nowhere)
    assert ProcessLauncher("/host/python").preflight(study, nowhere / "out") == (  # type: ignore[arg-type]
        f"engine vllm runs its trials with {python}")
    python.write_text("#!/bin/sh\necho vllm\n")  # an environment without vLLM in it
    with pytest.raises(UserError, match=f"engine vllm needs the Python module\\(s\\) vllm, which {python} lacks"):
        ProcessLauncher("/host/python").preflight(study, nowhere / "out")  # type: ignore[arg-type]


def test_the_launcher_picks_each_trials_interpreter_from_its_spec(nowhere: Path) -> None:
    python = _python(nowhere)
    launcher = ProcessLauncher("/host/python")
    for engine, expected in (("vllm", str(python)), ("transformers", "/host/python")):
        trial = nowhere / engine
        trial.mkdir()
        write_record(trial / "spec.json", sample_spec(variant=dataclasses.replace(SAMPLE_VARIANT, engine=engine)))
        assert launcher.python_for(TrialPaths(trial, nowhere / "corpus", nowhere / "model")) == expected
    assert launcher.python_for(TrialPaths(nowhere / "absent", nowhere, nowhere)) == "/host/python"
