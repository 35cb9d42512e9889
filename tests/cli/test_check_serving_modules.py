"""A server study's trials need MLPerf LoadGen (``mlperf_loadgen``) in the interpreter they run with: ``isocost check``
asks that interpreter for it, and ``run`` refuses before anything runs, both naming the module, the interpreter and
the fix, instead of a trial refusing later.

The interpreter lacking it is real: a virtual environment made here (``python -m venv --without-pip``) that sees
every package of this one but LoadGen (its site folder links each entry but ``mlperf_loadgen`` and
``mlcommons_loadgen``). ``isocost`` runs under it, so the process launcher's trials would too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from serving_study import SERVER, TRAFFIC
from test_hostile_inputs import assert_out_usable, write_study
from test_hostile_inputs import ws as ws  # noqa: F401  (the fixture)

pytest.importorskip("mlperf_loadgen")  # this interpreter has it: the lean one below is made from it, without it

CHECKOUT = Path(__file__).resolve().parents[2]
WITHOUT = ("mlperf_loadgen", "mlcommons_loadgen")


def lean_python(folder: Path) -> Path:
    """A Python with every package of this interpreter but LoadGen's."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    shown = folder / "shown"
    shown.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(WITHOUT):
            (shown / entry.name).symlink_to(entry)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "shown.pth").write_text(f"import site; site.addsitedir({str(shown)!r})\n", encoding="utf-8")
    return python


def isocost(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    return subprocess.run([str(python), "-m", "runner.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def test_check_and_run_refuse_a_server_study_whose_trial_interpreter_lacks_loadgen(ws: Path,  # noqa: F811
                                                                                   tmp_path: Path) -> None:
    python = lean_python(tmp_path / "lean")
    found = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('mlperf_loadgen'), "
                            "u.find_spec('transformers') is not None)"], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["None", "True"], found.stdout  # the engine's modules there, LoadGen not
    study = write_study(ws, extra=TRAFFIC)
    study.write_text(study.read_text().replace(*next(iter(SERVER.items()))), encoding="utf-8")
    what = f"a server study's trials need the Python module(s) mlperf_loadgen, which {python}"

    checked = isocost(python, "check", str(study), "--launcher", "process")
    assert checked.returncode != 0 and "isocost run would not start" in checked.stdout, checked.stdout
    [line] = [line for line in checked.stdout.splitlines() if what in line]
    assert line.lstrip().startswith("FAIL"), line
    assert "make setup" in checked.stdout and "serving" in checked.stdout, checked.stdout

    out = tmp_path / "out"
    ran = isocost(python, "run", str(study), "--out", str(out), "--launcher", "process")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    error = ran.stderr[ran.stderr.index("Error: "):]
    assert what in error and "make setup" in error, error
    assert_out_usable(out)  # refused before anything ran: no trial, no campaign

    offline = write_study(ws)  # the same interpreter serves an offline study: LoadGen is not asked for
    assert what not in isocost(python, "check", str(offline), "--launcher", "process").stdout


def test_check_says_the_trials_interpreter_finds_loadgen(ws: Path) -> None:  # noqa: F811
    """This interpreter has LoadGen: the same server study's check has an ok line for it."""
    from test_hostile_inputs import invoke

    study = write_study(ws, extra=TRAFFIC)
    study.write_text(study.read_text().replace(*next(iter(SERVER.items()))), encoding="utf-8")
    said = invoke(["check", str(study), "--launcher", "process"]).output
    assert "ok    loadgen: MLPerf LoadGen (mlperf_loadgen) found where the trials run" in said, said
