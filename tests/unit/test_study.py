from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study import bucket_for, load_study


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_study_expands_series_into_variants(tmp_path, study_text):
    study = load_study(write(tmp_path, study_text()))
    assert [v.variant_id for v in study.variants()] == ["batch_size=1", "batch_size=4", "batch_size=8"]
    assert study.variants()[1].batch_size == 4
    assert study.variants()[1].precision == "fp32"
    assert study.corpus.path == (tmp_path / "corpus.jsonl").resolve()
    assert study.sha256.startswith("sha256:")
    assert study.campaign.repetitions == 5


def test_study_hash_changes_with_any_byte(tmp_path, study_text):
    first = load_study(write(tmp_path, study_text())).sha256
    second = load_study(write(tmp_path, study_text(minimum=0.51))).sha256
    assert first != second


def test_identical_configs_from_two_series_are_one_variant(tmp_path, study_text):
    text = study_text() + '\n[[series]]\nname = "grouping"\nfield = "length_grouping"\nvalues = ["none", "sort"]\n'
    variants = load_study(write(tmp_path, text)).variants()
    ids = [v.variant_id for v in variants]
    # base batch 1 + grouping none == batch_size=1: merged, listed under both series
    assert ids == ["batch_size=1", "batch_size=4", "batch_size=8", "length_grouping=sort"]
    assert variants[0].series == ("batch", "grouping")


@pytest.mark.parametrize(
    ("old", "new", "message", "key"),
    [
        ('scenario = "offline"', 'scenario = "interactive"', "out of scope", "key scenario"),
        ('scenario = "offline"', 'scenario = "offline"\ncolour = "blue"', "unknown key 'colour'", "key colour"),
        ("max_length = 32", "max_length = 32\nmax_lenght = 4", "unknown key 'max_lenght'", "key base.max_lenght"),
        ('metric = "accuracy"', 'metric = "bleu"', "'bleu' is not one of", "key quality.metric"),
        ('precision = "fp32"', 'precision = "fp16"', "fp16 is GPU-only", "key base.precision"),
        ('tuned_on = "tuning"', 'tuned_on = "corpus"', "tuned on the final comparison corpus", "quality.tuned_on"),
        ('reference_variant = "batch_size=1"', 'reference_variant = "batch_size=2"', "not one of the variants",
         "quality.reference_variant"),
        ('field = "batch_size"', 'field = "batch"', "unknown variant field 'batch'", "series[0].field"),
        ("values = [1, 4, 8]", "values = [1, 4, 4]", "same value twice", "series[0].values"),
        ("values = [1, 4, 8]", "values = [1, 0]", "positive integer", "series[0].values"),
        ("schema_version = 1", "schema_version = 2", "not supported", "schema_version"),
        ("repetitions = 5", "repetitions = 0", "at least 1", "campaign.repetitions"),
        ('path = "tuning.jsonl"', 'path = "corpus.jsonl"', "tuning corpus is the final corpus", "tuning.path"),
    ],
)
def test_bad_study_names_file_key_and_fix(tmp_path, study_text, old, new, message, key):
    text = study_text()
    assert old in text
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(UserError) as info:
        load_study(path)
    assert message in info.value.message
    assert str(path.resolve()) in info.value.message
    assert key in info.value.message


def test_missing_required_key(tmp_path, study_text):
    text = study_text().replace('question = "Which batch size classifies every tiny input, meets the rule, and '
                                'costs least?"\n', "")
    with pytest.raises(UserError, match="missing required key .*key question"):
        load_study(write(tmp_path, text))


def test_bad_fingerprint_format(tmp_path, study_text):
    with pytest.raises(UserError, match="64 hex digits"):
        load_study(write(tmp_path, study_text(corpus_fp="abc")))


def test_toml_syntax_error_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not valid TOML"):
        load_study(write(tmp_path, "name = \n"))


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="study file not found"):
        load_study(tmp_path / "nope.toml")


def test_bucket_for_uses_inclusive_upper_bounds(tmp_path, study_text):
    study = load_study(write(tmp_path, study_text()))
    assert bucket_for(16, study.length_buckets) == "short"
    assert bucket_for(17, study.length_buckets) == "long"
    assert bucket_for(10_000, study.length_buckets) == "long"
