"""The launcher as a plugin: kinds found by name, each with its options, choice and replay; every
launcher's life behind one interface (no cluster or engine needed here)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from protocol.errors import UserError
from runner.campaign.launcher_choice import choose_launcher, launcher_options, replay_launcher
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.launch.launcher import LauncherBase, LaunchResult, kind_names, launcher_kinds, placement_values


@pytest.fixture
def study(tmp_path: Path, study_text) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(study_text())
    return path


def test_every_kind_is_found_and_auto_chooses_among_them():
    assert list(launcher_kinds()) == ["process", "docker", "slurm"]
    assert kind_names(auto=True) == ("auto", "process", "docker", "slurm")
    assert kind_names(replay=True) == ("original", "process", "docker")
    names = [option.name for option in launcher_options()["slurm"]]
    assert names[:5] == ["partition", "account", "qos", "gres", "gpus"] and "shared" in names


def test_another_kinds_options_are_refused_with_the_flag_to_add(study):
    with pytest.raises(UserError) as info:
        choose_launcher(study, "process", options={"slurm": {"partition": "gpu", "arg": ()}})
    assert info.value.what == "--slurm-partition belong to --launcher slurm"
    assert "Add --launcher slurm" in info.value.fix
    assert choose_launcher(study, "process", options={"slurm": {"partition": None}}).launcher.name == "process"


def test_the_cli_refuses_slurm_options_without_the_slurm_launcher(study, tmp_path):
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out"), "--launcher", "process",
                                       "--slurm-gres", "gpu:1"])
    assert result.exit_code == 2 and "--slurm-gres belong to --launcher slurm" in result.output
    hosts = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out"), "--launcher", "slurm",
                                      "--host", "a=local"])
    assert hosts.exit_code == 2 and "a Slurm cluster is one --launcher slurm campaign" in hosts.output


def _specs(launcher: str, image: str = "") -> dict[str, Any]:
    """What a replay reads of the originals' specs: their launcher, image and stack."""
    spec = SimpleNamespace(launcher=launcher, image_digest=image, image_id="", variant=SimpleNamespace(stack="cpu"))
    return {"001-r1-batch_size-1": spec}


def test_each_kind_replays_its_own_way():
    launcher, facts = replay_launcher("process", _specs("slurm"))
    assert isinstance(launcher, ProcessLauncher) and facts["exact"] is False and "'slurm'" in facts["note"]
    with pytest.raises(UserError) as info:
        replay_launcher("original", _specs("slurm"))
    assert "does not go through Slurm" in info.value.what and "--launcher docker" in info.value.fix
    with pytest.raises(UserError, match="no image digest is recorded"):
        replay_launcher("docker", _specs("process"))


class Minimal(LauncherBase):
    name = "minimal"

    def run(self, paths, timeout_s):  # pragma: no cover - never run here
        return LaunchResult(exit_code=0)


def test_the_base_gives_every_part_of_a_launchers_life_a_default(tmp_path):
    launcher = Minimal()
    assert launcher.resume_identity() == {"kind": "minimal", "image_id": ""}
    assert launcher.preflight(None, tmp_path) == "" and launcher.recover_leftovers(tmp_path) == []  # type: ignore[arg-type]
    assert launcher.summary() == "minimal" and launcher.check_line() == ("launcher", "minimal") and launcher.lost == ""
    assert launcher.stop_leftover(tmp_path) is None  # no process or container of that trial here


def test_placement_cells_are_empty_with_a_reason_without_a_scheduler():
    values, reasons = placement_values("process", LaunchResult(exit_code=0))
    assert values == {"queue_s": None, "node": None, "job_id": None, "allocated_gpu": None}
    assert reasons["queue_s"] == "launcher 'process' has no scheduler queue"


def test_a_broken_launcher_folder_is_an_error_with_the_fix(study, tmp_path, monkeypatch):
    monkeypatch.setenv("ISOCOST_LAUNCHERS_PATH", str(tmp_path / "missing"))
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out"), "--launcher", "process"])
    assert result.exit_code == 2 and "is not a directory (ISOCOST_LAUNCHERS_PATH)" in result.output
    folder = tmp_path / "launchers"
    (folder / "no_kind").mkdir(parents=True)
    (folder / "no_kind" / "__init__.py").write_text("KIND = 1\n")
    monkeypatch.setenv("ISOCOST_LAUNCHERS_PATH", str(folder))
    with pytest.raises(UserError, match="defines no KIND"):
        launcher_kinds()
    (folder / "no_kind" / "__init__.py").write_text(
        "from runner.launch.kinds.process import KIND as PROCESS\nKIND = PROCESS\n")
    with pytest.raises(UserError, match="is not a usable name for package no_kind"):
        launcher_kinds()
    (folder / "no_kind").rename(folder / "process")
    with pytest.raises(UserError, match="two launcher packages are named 'process'"):
        launcher_kinds()
