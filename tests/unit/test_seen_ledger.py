"""The seen-corpus ledger belongs to the project: next to the study, overridable, plain messages (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study
from runner.campaign.seen import check_and_record, ledger_path, seen_entries


def study_at(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_default_ledger_is_next_to_the_study(tmp_path, study_text, monkeypatch):
    monkeypatch.delenv("ISOCOST_HOME", raising=False)
    monkeypatch.delenv("ISOCOST_LEDGER_DIR", raising=False)
    study = load_study(study_at(tmp_path / "proj", study_text()))
    assert ledger_path(study) == tmp_path / "proj" / ".isocost" / "evaluations.jsonl"
    check_and_record(study, "sha256:" + "c" * 64, "camp1", tmp_path / "out", False)
    assert (tmp_path / "proj" / ".isocost" / "evaluations.jsonl").is_file()
    # Another project with the same corpus content has its own ledger: nothing blocks it.
    other = load_study(study_at(tmp_path / "other", study_text(minimum=0.9)))
    assert check_and_record(other, "sha256:" + "c" * 64, "camp2", tmp_path / "out2", False) is None


def test_ledger_directory_can_be_overridden(tmp_path, study_text, monkeypatch):
    monkeypatch.setenv("ISOCOST_LEDGER_DIR", str(tmp_path / "shared-ledger"))
    study = load_study(study_at(tmp_path / "proj", study_text()))
    assert ledger_path(study) == tmp_path / "shared-ledger" / "evaluations.jsonl"
    assert ledger_path(study, tmp_path / "flag") == tmp_path / "flag" / "evaluations.jsonl"


def test_conflict_message_is_plain_words_with_the_fingerprint_form(tmp_path, study_text, monkeypatch):
    monkeypatch.delenv("ISOCOST_HOME", raising=False)
    first = load_study(study_at(tmp_path / "proj", study_text(minimum=0.5)))
    check_and_record(first, "sha256:" + "c" * 64, "camp1", tmp_path / "out", False)
    assert [e["campaign_id"] for e in seen_entries(first, "sha256:" + "c" * 64)] == ["camp1"]
    (tmp_path / "proj" / "study.toml").write_text(study_text(minimum=0.9), encoding="utf-8")
    second = load_study(tmp_path / "proj" / "study.toml")
    with pytest.raises(UserError) as info:
        check_and_record(second, "sha256:" + "c" * 64, "camp2", tmp_path / "out2", False)
    message = info.value.message
    assert first.corpus.fingerprint in message  # what `isocost fingerprint corpus.jsonl` prints
    assert "{" not in message and "}" not in message  # no Python dict
    assert "minimum 0.5" in message and "minimum 0.9" in message
    assert "--acknowledge-seen-corpus" in message and "new final corpus" in message
