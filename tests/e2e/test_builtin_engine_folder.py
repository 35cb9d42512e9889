"""A built-in engine or task is one folder (issue 47): the test engine relay and the test task text-regression
(tests/fixtures/engines/relay, tests/fixtures/tasks/regression: a user's plugins elsewhere) dropped into
``protocol/engines/`` and ``protocol/tasks/`` of a copy of the checkout, with a ``requirements.txt`` beside the
engine, and nothing else in the copy edited. From its folder alone each is found by name with its trial half, its
keys are study keys, its rows are in the generated docs tables, ``make setup`` installs the engine's requirements,
ARCHITECTURE.md's map needs no line for either, and a real campaign (the CLI in its own process, trial processes,
the tiny checkpoint) runs each, its rows ``ok``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_regression_task import _regression_workspace
from workspace import write_workspace

from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
COPIED = ("protocol", "runner", "docs", "Makefile", "pyproject.toml", "requirements", "ARCHITECTURE.md",
          "tests/unit/test_architecture_doc.py", "tests/markdown_sections.py")
FOUND = """
import json
from protocol.engines import engine_named, engine_names
from protocol.engines.docs import engine_table
from protocol.study.schema import KEYS, markdown_table
engine = engine_named("relay")
print(json.dumps({"names": list(engine_names()), "trial_module": engine.trial_module,
                  "key": KEYS["engines.relay.mode"].default, "study_table": "`engines.relay.mode`" in markdown_table(),
                  "engine_table": [line for line in engine_table().splitlines() if "relay" in line]}))
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the checkout's code with the relay engine and the regression task built in: their folders the only
    things added."""
    copy = tmp_path / "checkout"
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    for kind, name in (("engines", "relay"), ("tasks", "regression")):
        shutil.copytree(FIXTURES / kind / name, copy / "protocol" / kind / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "protocol" / "engines" / "relay" / "requirements.txt").write_text("click>=8.1\n", encoding="utf-8")
    return copy


TASK_FOUND = """
import json
from protocol.study.schema import KEYS
from protocol.tasks import task_named
from protocol.tasks.docs import key_tables, task_table
task = task_named("text-regression")
print(json.dumps({"trial_module": task.trial_module, "key": "regression.label" in KEYS,
                  "task_table": "| `text-regression` |" in task_table(), "keys": "text-regression" in key_tables()}))
"""


def _in(copy: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("ISOCOST_ENGINES_PATH", "ISOCOST_TASKS_PATH")}
    env["PYTHONPATH"] = f"{copy}{os.pathsep}{copy / 'tests'}"
    return subprocess.run(list(command), cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False)


def test_an_engine_folder_dropped_into_protocol_engines_is_a_built_in_engine(checkout: Path, tiny_model: Path,
                                                                              tmp_path: Path) -> None:
    found = _in(checkout, sys.executable, "-c", FOUND)
    assert found.returncode == 0, found.stderr
    facts = json.loads(found.stdout)
    assert "relay" in facts["names"] and facts["trial_module"] == "protocol.engines.relay.trial", facts
    assert facts["key"] == '"same"' and facts["study_table"], facts
    assert len(facts["engine_table"]) == 1 and "nothing (a test fixture)" in facts["engine_table"][0], facts
    dry = _in(checkout, "make", "-n", "setup")
    assert dry.returncode == 0, dry.stderr
    assert "-r protocol/engines/onnxruntime/requirements.txt -r protocol/engines/relay/requirements.txt" in dry.stdout
    mapped = _in(checkout, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                 "tests/unit/test_architecture_doc.py::test_every_folder_is_named_in_architecture")
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr  # ARCHITECTURE.md's map needs no line for it

    study = write_workspace(tmp_path / "ws", tiny_model, n=6, repetitions=1,
                            replace={'deterministic = true\n': 'deterministic = true\nengine = "relay"\n'},
                            extra='\n[engines.relay]\nmode = "same"\n')
    out = tmp_path / "out"
    run = _in(checkout, sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out), "--launcher",
              "process")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_raw(out / "raw.csv")
    assert rows and all((row["status"], row["engine"]) == ("ok", "relay") for row in rows), rows
    engine = json.loads((out / "trials" / rows[0]["trial_id"] / "manifest.json").read_text())["engine"]
    assert (engine["name"], engine["settings"]) == ("relay", {"mode": "same"}), engine


def test_a_task_folder_dropped_into_protocol_tasks_is_a_built_in_task(checkout: Path, tiny_model: Path,
                                                                      tmp_path: Path) -> None:
    found = _in(checkout, sys.executable, "-c", TASK_FOUND)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == {"trial_module": "protocol.tasks.regression.trial", "key": True,
                                        "task_table": True, "keys": True}, found.stdout
    study, _ = _regression_workspace(tmp_path / "ws", tiny_model)
    out = tmp_path / "out"
    run = _in(checkout, sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out), "--launcher",
              "process")
    assert run.returncode == 0, run.stdout + run.stderr
    rows = read_raw(out / "raw.csv")
    assert [(row["status"], row["metric"]) for row in rows] == [("ok", "pearson")] * 2, rows
