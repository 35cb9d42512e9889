"""Every task through the same cases: the three shipped with isocost and the fourth kept as a fixture
(tests/fixtures/tasks/regression/, found through ``ISOCOST_TASKS_PATH`` like a user's own task).

Each case uses only what every task provides (``protocol.tasks.base.Task``, its ``example()``, and its trial half,
a ``runner.trial.tasks.base.TrialTask``), so a new task is checked by being found, with no line added here.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from recordfiles import manifest_for, sample_spec

from protocol.records.codec import write_record
from protocol.study.schema import KEYS, keys_for, table_keys
from protocol.tasks import TASKS_PATH_ENV, all_tasks, task_named
from protocol.tasks.pass_check import Agreement, PassCheck

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"


@pytest.fixture(autouse=True)
def fixture_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TASKS_PATH_ENV, str(FIXTURES))


def _names() -> list[str]:
    import os

    before = os.environ.get(TASKS_PATH_ENV)
    os.environ[TASKS_PATH_ENV] = str(FIXTURES)
    try:
        return [task.name for task in all_tasks()]
    finally:
        if before is None:
            del os.environ[TASKS_PATH_ENV]
        else:
            os.environ[TASKS_PATH_ENV] = before


NAMES = _names()


def _study(name: str) -> Any:
    example = task_named(name).example()
    quality = SimpleNamespace(metric=example.metric, minimum=example.minimum, extra=dict(example.extra),
                              subgroups=("length_bucket",), max_metric_drop=0.0, min_agreement=1.0)
    return SimpleNamespace(task=name, quality=quality, task_options=dict(example.task_options), path=Path("s.toml"))


def _write_pass(name: str, out: Path, drop_last: bool = False) -> None:
    """One pass of the example through the task's trial half and the one output sink."""
    pytest.importorskip("numpy")
    from runner.trial.tasks import trial_task
    from runner.trial.tasks.sink import OutputSink

    task, example = trial_task(name), task_named(name).example()
    ids = [row["id"] for row in example.index_rows]
    out.mkdir(parents=True, exist_ok=True)
    write_record(out / "manifest.json", manifest_for(sample_spec(), model=dict(example.described)))
    with OutputSink(out, task) as sink:
        text = sink.lines(ids, example.outputs)
        sink.write("".join(text.splitlines(keepends=True)[:-1]) if drop_last else text, example.outputs)
    for rename, after_ids, outputs in example.after:
        with OutputSink(out, task, rename) as sink:
            sink.write(sink.lines(list(after_ids), outputs), outputs)


def test_the_fixture_task_is_found_by_name_beside_the_shipped_ones() -> None:
    assert NAMES[:1] == ["text-classification"]
    assert {"sentence-embedding", "text-generation", "text-regression"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_its_study_keys_are_declared_with_type_default_bounds_and_help(name: str) -> None:
    task = task_named(name)
    for entry in task.study_keys:
        assert KEYS[entry.key] == entry and entry.meaning and entry.default
        assert entry.key.split(".")[0] in (*task.option_tables, "quality"), entry.key
    for table in task.option_tables:
        assert table_keys(table, name), table  # each table the task reads has its keys declared
    assert set(keys_for(name)) >= {entry.key for entry in task.study_keys}
    assert task.metrics and task.example().metric in task.metrics


@pytest.mark.parametrize("name", NAMES)
def test_its_trial_half_is_found_through_the_host_half(name: str) -> None:
    pytest.importorskip("torch")
    from runner.trial.tasks import trial_task
    from runner.trial.tasks.base import TrialTask

    trial = trial_task(name)
    assert isinstance(trial, TrialTask) and trial.name == name
    assert {f.name for f in trial.pass_files} <= set(task_named(name).output_files)
    assert sum(not f.binary for f in trial.pass_files) == 1


@pytest.mark.parametrize("name", NAMES)
def test_the_output_files_round_trip_and_a_good_pass_is_accepted(name: str, tmp_path: Path) -> None:
    task, study = task_named(name), _study(name)
    _write_pass(name, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*task.output_files, "manifest.json"])
    reference = task.reference(task.example().index_rows, study)
    outputs = task.read_pass(tmp_path)
    assert tuple(outputs.ids) == tuple(row["id"] for row in task.example().index_rows)
    check = task.check_pass(outputs, reference, study)
    assert isinstance(check, PassCheck) and check.accepted, check.reasons
    assert check.ids_match and check.format_errors == 0 and check.metric_value is not None


@pytest.mark.parametrize("name", NAMES)
def test_a_pass_missing_its_last_line_is_rejected_with_the_reason(name: str, tmp_path: Path) -> None:
    task, study = task_named(name), _study(name)
    _write_pass(name, tmp_path, drop_last=True)
    check = task.check_pass(task.read_pass(tmp_path), task.reference(task.example().index_rows, study), study)
    assert not check.accepted and check.reasons
    assert not check.ids_match or check.format_errors > 0


@pytest.mark.parametrize("name", NAMES)
def test_a_pass_agrees_with_itself(name: str, tmp_path: Path) -> None:
    task, study = task_named(name), _study(name)
    _write_pass(name, tmp_path / "a")
    _write_pass(name, tmp_path / "b")
    found = task.agreement(task.read_pass(tmp_path / "a"), task.read_pass(tmp_path / "b"), study)
    assert isinstance(found, Agreement)
    assert (found.agreement, found.identical, found.failures, found.differing_ids) == (1.0, True, (), ())


@pytest.mark.parametrize("name", NAMES)
def test_tune_gets_the_units_and_a_resampled_metric_equal_to_the_pass_metric(name: str, tmp_path: Path) -> None:
    task, study = task_named(name), _study(name)
    _write_pass(name, tmp_path)
    reference = task.reference(task.example().index_rows, study)
    outputs = task.read_pass(tmp_path)
    units = task.scored_units(reference)
    assert units >= 1
    metric = task.resampled_metric(outputs, reference, study)
    assert metric(list(range(units))) == pytest.approx(task.check_pass(outputs, reference, study).metric_value)
    assert isinstance(metric([0] * units), float)
    assert all(isinstance(task.is_proportion(m), bool) for m in task.metrics)
