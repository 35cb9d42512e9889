"""A passed test's tmp_path is removed when the test ends (pyproject's ``tmp_path_retention_policy``): an
end-to-end test copies the 88 MB tiny model into its tmp_path, about 400 of them run in one session, and CI on
460f9bd died of a full disk (``OSError: [Errno 28] No space left on device`` after 1,087 passed, then 2,356
errors). A real pytest with this checkout's ``[tool.pytest.ini_options]``: a passing and a failing test each
write a file into tmp_path; only the failing test's directory is left for a reader."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = '''
def test_passes(tmp_path):
    (tmp_path / "written").write_bytes(b"x" * 1024)


def test_fails(tmp_path):
    (tmp_path / "written").write_bytes(b"x" * 1024)
    assert False
'''


def test_a_passed_tests_tmp_path_is_removed_a_failed_ones_kept(tmp_path: Path) -> None:
    project, basetemp = tmp_path / "project", tmp_path / "basetemp"
    project.mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")  # its [tool.pytest.ini_options]
    (project / "test_two.py").write_text(TESTS, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"--basetemp={basetemp}", "test_two.py"], cwd=project, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # one failed, as written
    left = sorted(path.parent.name for path in basetemp.rglob("written"))
    assert left == ["test_fails0"], left
