"""`make torch`: the CPU build from TORCH_INDEX when it answers, else the default index with a notice (issue 13).

Runs the real Makefile target against a scratch venv whose pip only records its arguments.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_venv(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    log = tmp_path / "pip.log"
    pip = bin_dir / "pip"
    pip.write_text(f'#!/bin/sh\necho "$@" >> {log}\n', encoding="utf-8")
    pip.chmod(0o755)
    return tmp_path / "venv", log


def make_torch(venv: Path, index: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "torch", f"VENV={venv}",
                           f"TORCH_INDEX={index}"], capture_output=True, text=True, timeout=60, env=env)


def test_unreachable_index_falls_back_to_the_default_with_a_notice(tmp_path: Path) -> None:
    venv, log = fake_venv(tmp_path)
    result = make_torch(venv, "http://127.0.0.1:9/whl/cpu")  # port 9 (discard): nothing answers
    assert result.returncode == 0, result.stderr
    assert "notice: http://127.0.0.1:9/whl/cpu not reachable" in result.stdout
    assert log.read_text().split() == ["install", "--quiet", "torch==2.13.0"]


def test_reachable_index_installs_the_cpu_build_from_it(tmp_path: Path) -> None:
    venv, log = fake_venv(tmp_path)
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "index.html").write_text("<html></html>", encoding="utf-8")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "site"), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}"
        result = make_torch(venv, index)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert "notice" not in result.stdout
    assert log.read_text().split() == ["install", "--quiet", "torch==2.13.0", "--index-url", index]
