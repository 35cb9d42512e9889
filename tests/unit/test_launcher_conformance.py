"""Every launcher kind through the same cases: it describes itself, its options reach the CLI, its launcher.json
record round-trips, it is chosen by name (and ``auto`` chooses among the kinds), its resume identity survives
``adopt``, it stops a leftover trial, and it replays its own way.

The kinds are those the discovery finds (runner/launch/kinds/) plus the test fixture kind ``cwd-process``
(tests/fixtures/launchers/, found through ``ISOCOST_LAUNCHERS_PATH`` as a user's own launcher is): a kind
added to either folder runs through these cases with no change here. A kind that cannot be chosen on this
machine (no Docker engine, no Slurm cluster: the kind's ``requires``) skips the cases that need its launcher
here; they run in tests/docker and tests/slurm with the same functions (tests/launcher_cases.py), which fail
instead of skipping where CI sets ``ISOCOST_REQUIRE_DOCKER=1`` and ``ISOCOST_REQUIRE_SLURM=1``. The real
campaign of every kind that can run here is ``tests/e2e/test_launcher_kinds_e2e.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import launcher_cases as cases
import pytest

from protocol.errors import UserError
from runner.campaign.launcher_choice import choose_launcher, replay_launcher
from runner.launch.launcher import LAUNCHERS_ENV, LauncherKind, launcher_kinds
from runner.launch.launcher_file import LAUNCHER_SCHEMA_VERSION, read_launcher_file, write_launcher_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_LAUNCHERS = ROOT / "tests" / "fixtures" / "launchers"


with pytest.MonkeyPatch.context() as _patch:  # the kinds found with the fixture folder, at collection
    _patch.setenv(LAUNCHERS_ENV, str(FIXTURE_LAUNCHERS))
    KINDS = launcher_kinds()


@pytest.fixture(autouse=True)
def with_fixture_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LAUNCHERS_ENV, str(FIXTURE_LAUNCHERS))


@pytest.fixture
def study(tmp_path: Path, study_text) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(study_text())
    for name in ("corpus.jsonl", "tuning.jsonl"):  # the inputs a container launcher checks it can read
        (tmp_path / name).write_text("")
    (tmp_path / "model").mkdir()
    return path


def chosen(kind: LauncherKind, study: Path) -> Any:
    """The kind's launcher for the study; a kind that needs an engine or a cluster (``requires``) runs these cases
    where its environment is (tests/docker, tests/slurm; CI sets ``requires`` to 1 there)."""
    if kind.requires:
        pytest.skip(f"launcher {kind.name} needs its environment: run with {kind.requires}=1 in tests/docker or "
                    "tests/slurm (launcher_cases.py)")
    return choose_launcher(study, kind.name).launcher


def test_the_discovery_finds_the_built_in_kinds_and_the_fixture():
    assert {"process", "docker", "slurm", "cwd-process"} <= set(KINDS)


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_describes_itself(name: str):
    kind = KINDS[name]
    assert kind.help and not kind.help.endswith(".")
    assert dataclasses.is_dataclass(kind.record) and kind.record.__dataclass_params__.frozen  # type: ignore[attr-defined]
    defaults = {f.name: f.default for f in dataclasses.fields(kind.record)}
    assert defaults.pop("kind") == name
    assert set(defaults.values()) == {None}  # a key the launcher did not write is absent
    for option in kind.options:
        assert option.name.replace("-", "").isalnum() and option.metavar and option.help
        assert option.kind in ("str", "float")


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    """``isocost run|check|replay --help`` in a fresh CLI that was started with the fixture folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), LAUNCHERS_ENV: str(FIXTURE_LAUNCHERS), "COLUMNS": "400"}
    return {command: subprocess.run([sys.executable, "-m", "runner.cli", command, "--help"], cwd=ROOT, env=env,
                                    capture_output=True, text=True, check=True, timeout=120).stdout
            for command in ("run", "check", "replay")}


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_name_help_and_options_reach_the_cli(name: str, helps: dict[str, str]):
    kind = KINDS[name]
    for command in ("run", "check"):
        flat = "".join(helps[command].split())  # click wraps the help, at hyphens too
        assert f"|{name}" in helps[command] and "".join(f"{name}: {kind.help}.".split()) in flat
        for option in kind.options:
            assert f"--{name}-{option.name} {option.metavar}" in helps[command]
    assert (f"|{name}" in helps["replay"]) == kind.replay_choice


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_record_round_trips_through_launcher_json(name: str, tmp_path: Path):
    record_type = KINDS[name].record
    write_launcher_file(tmp_path, {}, record_type)
    data = json.loads((tmp_path / "launcher.json").read_text(encoding="utf-8"))
    assert data == {"schema_version": LAUNCHER_SCHEMA_VERSION, "kind": name}
    assert read_launcher_file(tmp_path) == record_type()
    other = next(n for n in KINDS if n != name)
    with pytest.raises(UserError, match=f"this record is '{name}'"):
        write_launcher_file(tmp_path, {"kind": other}, record_type)


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_is_chosen_by_name_and_refuses_another_kinds_options(name: str, study: Path):
    cases.chosen_by_name(KINDS[name], chosen(KINDS[name], study), study, KINDS)


def test_auto_chooses_the_first_kind_that_does_not_decline(study: Path):
    choice = choose_launcher(study, "auto", answers=lambda timeout_s: (False, "no engine in this test"))
    assert choice.launcher.name in {k.name for k in KINDS.values() if k.auto is not None}
    assert "no engine in this test" in choice.notice


def test_an_unknown_kind_is_refused_listing_the_known_ones(study: Path):
    with pytest.raises(UserError) as info:
        choose_launcher(study, "kubernetes")
    assert info.value.what == "unknown launcher 'kubernetes'" and all(name in info.value.fix for name in KINDS)


@pytest.mark.parametrize("name", KINDS)
def test_a_kinds_resume_identity_survives_adopt(name: str, study: Path):
    cases.resume_identity_survives_adopt(KINDS[name], chosen(KINDS[name], study))


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_stops_a_leftover_trial(name: str, study: Path, tmp_path: Path):
    launcher = chosen(KINDS[name], study)
    cases.stops_nothing_in_an_empty_trial(launcher, tmp_path)
    cases.stops_a_leftover_trial_process(launcher, tmp_path)


def _specs(launcher: str) -> dict[str, Any]:
    spec = SimpleNamespace(launcher=launcher, image_digest="", image_id="", variant=SimpleNamespace(stack="cpu"))
    return {"001-r1-batch_size-1": spec}


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_replays_its_own_way_or_says_how_to_replay(name: str):
    try:
        launcher, facts = replay_launcher(name, _specs("process"))
    except UserError as exc:
        assert exc.fix and "--launcher" in exc.fix
        return
    assert launcher.name == name
    assert set(facts) == {"kind", "original", "exact", "image", "note"} and facts["kind"] == name
    assert facts["original"] == "process" and (facts["exact"] is (name == "process")) and (facts["note"] == "") \
        is facts["exact"]
