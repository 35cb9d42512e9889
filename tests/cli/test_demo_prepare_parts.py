"""``isocost demo prepare --study NAME`` builds only the part of the demo that study needs (no model is run here:
the three builders are replaced by recorders)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from runner.cli import demo as demo_cli
from runner.cli import main
from runner.demo.parts import DEMO_PARTS, part_of


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []

    def classification(out_dir: Path, **kw: Any) -> Any:
        calls.append(("classification", kw))
        return SimpleNamespace(heldout_accuracy=0.9, minimum="0.85", study_paths=(out_dir / "quick.toml",))

    def embedding(out_dir: Path, **kw: Any) -> Any:
        calls.append(("embedding", kw))
        return SimpleNamespace(study_paths=(out_dir / "embed.toml",))

    def generation(out_dir: Path, **kw: Any) -> Any:
        calls.append(("generation", kw))
        return SimpleNamespace(study_paths=(out_dir / "generate.toml",))

    monkeypatch.setattr(demo_cli, "build_demo", classification)
    monkeypatch.setattr(demo_cli, "prepare_embedding_demo", embedding)
    monkeypatch.setattr(demo_cli, "build_generation_demo", generation)
    monkeypatch.setattr(demo_cli, "write_engine_study", lambda out_dir, name: calls.append((f"write {name}", {}))
                        or out_dir / f"{name}.toml")
    return calls


@pytest.mark.parametrize(("study", "part"), [
    ("quick", "classification"), ("classify-1000", "classification"), ("quick-cuda", "classification"),
    ("gpu-rocm", "classification"), ("embed", "embedding"), ("generate", "generation"),
    ("generate-gpu-cuda", "generation"), ("quick.toml", "classification"), ("engines", "classification"),
    ("engines-generate", "generation"),
])
def test_prepare_for_one_study_builds_only_its_part(built: list[tuple[str, dict[str, Any]]], tmp_path: Path,
                                                    study: str, part: str) -> None:
    result = CliRunner().invoke(demo_cli.demo, ["prepare", "--out", str(tmp_path), "--study", study])
    assert result.exit_code == 0, result.output
    assert [name for name, _ in built if not name.startswith("write ")] == [part]
    if part == "classification":
        assert built[0][1]["embedding"] is False  # the classification build leaves the embedding demo out
    assert part_of(study) == part


def test_prepare_without_a_study_builds_every_part(built: list[tuple[str, dict[str, Any]]], tmp_path: Path) -> None:
    result = CliRunner().invoke(demo_cli.demo, ["prepare", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [name for name, _ in built] == ["classification", "write engines", "write serve", "write serve-gpu",
                                           "generation", "write engines-generate"]
    assert built[0][1]["embedding"] is True  # the classification build makes the embedding part too
    assert DEMO_PARTS == ("classification", "embedding", "generation")


def test_an_unknown_demo_study_is_refused_naming_the_known_ones(built: list[tuple[str, dict[str, Any]]],
                                                                tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "prepare", "--out", str(tmp_path), "--study", "nope"])
    assert result.exit_code != 0
    assert "no demo study 'nope'" in result.output and "quick" in result.output and "generate" in result.output
    assert built == []


@pytest.mark.parametrize(("study", "written"), [("engines", "write engines"),
                                                ("engines-generate", "write engines-generate")])
def test_prepare_for_an_engine_study_writes_it_beside_its_base(built: list[tuple[str, dict[str, Any]]],
                                                               tmp_path: Path, study: str, written: str) -> None:
    result = CliRunner().invoke(demo_cli.demo, ["prepare", "--out", str(tmp_path), "--study", study])
    assert result.exit_code == 0, result.output
    assert written in [name for name, _ in built]
    assert f"{study}.toml" in result.output
