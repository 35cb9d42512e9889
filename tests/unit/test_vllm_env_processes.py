"""tests/vllm_env.engine_processes: an engine process started during the tests is found; one that ran before
the tests were collected (another session's) is not blamed on them."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import vllm_env  # noqa: E402

RENAME_AND_WAIT = "open('/proc/self/comm', 'w').write('VLLM::Probe'); print('ready', flush=True); input()"


@pytest.fixture
def fake_engine() -> Iterator[int]:
    """A process titled as vLLM's engine core titles itself (``VLLM::…``), alive until the test ends."""
    process = subprocess.Popen([sys.executable, "-c", RENAME_AND_WAIT], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait(timeout=10)


def test_an_engine_process_started_during_the_tests_is_found(fake_engine: int) -> None:
    assert fake_engine in vllm_env.engine_processes("/no/such/campaign")


def test_an_engine_process_older_than_the_tests_is_not_blamed(fake_engine: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_env, "_ENGINES_BEFORE", frozenset({fake_engine}))
    assert fake_engine not in vllm_env.engine_processes("/no/such/campaign")


def test_a_trial_process_is_found_by_its_campaign_folder(tmp_path: Path) -> None:
    marker = str(tmp_path / "campaign")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "runner.trial", marker])
    try:
        deadline = time.monotonic() + 10
        while process.pid not in vllm_env.engine_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.pid in vllm_env.engine_processes(marker)
        assert process.pid not in vllm_env.engine_processes(str(tmp_path / "another"))
    finally:
        process.kill()
        process.wait(timeout=10)
