"""The exclusive test groups really run on one worker each (tests/conftest.py, ``--dist loadgroup``): with pytest
9.2 and pytest-xdist 3.8.0 every group was silently spread over the workers (xdist renames ``Node._nodeid``, which
pytest 9.2 no longer reads), so two vLLM campaigns ran at once and one blamed the other's engine processes. A real
pytest with this checkout's conftest, two workers, a group of four tests that each say which worker ran them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GROUPED = '''
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm  # the vllm group by its marker, as tests/conftest.py assigns it


@pytest.mark.parametrize("n", range(4))
def test_says_its_worker(n):
    Path(os.environ["WORKERS_SEEN"], str(n)).write_text(os.environ.get("PYTEST_XDIST_WORKER", ""))
'''


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", project / "tests" / "conftest.py")
    (project / "tests" / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["vllm: x"]\n', encoding="utf-8")
    seen = tmp_path / "seen"
    seen.mkdir()
    env = {**os.environ, "WORKERS_SEEN": str(seen), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "-v", "tests"], cwd=project, capture_output=True, text=True, timeout=300,
                          env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {path.read_text() for path in seen.iterdir()}
    assert len(list(seen.iterdir())) == 4 and len(workers) == 1, (workers, done.stdout)
    assert "test_says_its_worker[0]@vllm" in done.stdout
