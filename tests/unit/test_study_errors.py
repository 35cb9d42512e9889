"""Every study key error is reported at once, and a missing table is hinted as a table (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_all_errors_of_a_sparse_study_come_in_one_report(tmp_path):
    # What a new user starts from: the keys they know. Every missing key must surface in ONE run.
    path = write(tmp_path, 'schema_version = 1\nname = "mine"\n\n[base]\nstack = "cpu"\nbatch_size = 0\n')
    with pytest.raises(UserError) as info:
        load_study(path)
    message = info.value.message
    for key in ("key question", "key scenario", "key corpus", "key tuning", "key model", "key quality",
                "key series", "key base.device", "key base.precision", "key base.seed"):
        assert key in message, (key, message)
    assert "batch_size must be between 1 and 65536, got 0" in message  # a value error beside the missing keys
    assert message.count("\n") >= 6  # one line per problem


def test_missing_table_is_hinted_as_a_table(tmp_path, study_text):
    text = study_text()
    start = text.index("[tuning]")
    end = text.index("[model]")
    path = write(tmp_path, text[:start] + text[end:])
    with pytest.raises(UserError) as info:
        load_study(path)
    assert "[tuning]" in info.value.message
    assert "tuning = …" not in info.value.message


def test_two_independent_mistakes_are_both_reported(tmp_path, study_text):
    text = study_text().replace('metric = "accuracy"', 'metric = "bleu"').replace("repetitions = 5",
                                                                                   "repetitions = 0")
    with pytest.raises(UserError) as info:
        load_study(write(tmp_path, text))
    assert "'bleu' is not one of" in info.value.message
    assert "repetitions must be between 1 and 1000, got 0" in info.value.message


def test_warmup_and_campaign_tables_may_be_omitted(tmp_path, study_text):
    text = study_text()
    for table in ("[warmup]\ninputs = 2\nruns = 1\n", "[campaign]\nrepetitions = 5\ntrial_timeout_s = 60\n"):
        assert table in text
        text = text.replace(table, "")
    study = load_study(write(tmp_path, text))
    assert study.campaign.repetitions == 5
    assert study.warmup.inputs == 8


def test_every_unknown_key_is_named(tmp_path, study_text):
    text = study_text().replace("max_length = 32", "max_length = 32\nmax_lenght = 4\nbatchsize = 2")
    with pytest.raises(UserError) as info:
        load_study(write(tmp_path, text))
    assert "unknown key 'max_lenght'" in info.value.message and "unknown key 'batchsize'" in info.value.message
