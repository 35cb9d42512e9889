from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study
from protocol.study.model import bucket_for


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
        ('scenario = "offline"', 'scenario = "interactive"', "is not one of 'offline', 'server'", "key scenario"),
        ('scenario = "offline"', 'scenario = "offline"\ncolour = "blue"', "unknown key 'colour'", "key colour"),
        ("max_length = 32", "max_length = 32\nmax_lenght = 4", "unknown key 'max_lenght'", "key base.max_lenght"),
        ('metric = "accuracy"', 'metric = "bleu"', "'bleu' is not one of", "key quality.metric"),
        ('precision = "fp32"', 'precision = "fp16"', "fp16 is GPU-only", "key base.precision"),
        ('tuned_on = "tuning"', 'tuned_on = "corpus"', "tuned on the final comparison corpus", "quality.tuned_on"),
        ('reference_variant = "batch_size=1"', 'reference_variant = "batch_size=2"', "not one of the variants",
         "quality.reference_variant"),
        ('field = "batch_size"', 'field = "batch"', "unknown variant field 'batch'", "series[0].field"),
        ("values = [1, 4, 8]", "values = [1, 4, 4]", "same value twice", "series[0].values"),
        ("values = [1, 4, 8]", "values = [1, 0]", "batch_size must be between 1 and 65536, got 0", "series[0].values"),
        ("schema_version = 1", "schema_version = 2", "not supported", "schema_version"),
        ("repetitions = 5", "repetitions = 0", "repetitions must be between 1 and 1000, got 0",
             "campaign.repetitions"),
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


# -- every number that sizes work or memory is bounded, and the bound is in the error (issue 11) ------

@pytest.mark.parametrize("old, new, key, bound", [
    ("repetitions = 5", "repetitions = 1000001", "campaign.repetitions", "1000"),
    ("threads = 1", "threads = 100000", "base.threads", "1024"),
    ("batch_size = 1\n", "batch_size = 99999999\n", "base.batch_size", "65536"),
    ("values = [1, 4, 8]", "values = [1, 4, 8000000]", "series[0].values", "65536"),
    ("max_length = 32", "max_length = 123456789", "base.max_length", "1048576"),
    ("seed = 0", "seed = 99999999999999", "base.seed", "4294967295"),
    ("inputs = 2", "inputs = 10000000", "warmup.inputs", "100000"),
    ("runs = 1", "runs = 100000", "warmup.runs", "100"),
    ("max_tokens = 16", "max_tokens = 999999999", "length_buckets[0].max_tokens", "1048576"),
    ("trial_timeout_s = 60", "trial_timeout_s = 1e12", "campaign.trial_timeout_s", "604800"),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\nseeds = [" + ", ".join(map(str, range(101))) + "]",
     "campaign.seeds", "100"),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\nseeds = [99999999999]", "campaign.seeds", "4294967295"),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\nmemory_limit_bytes = " + str(2**62), "campaign.memory_limit_bytes",
     str(2**50)),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\ncpu_limit = 100000", "campaign.cpu_limit", "4096"),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\ncpu_limit = 0", "campaign.cpu_limit", "0.01"),
    ("trial_timeout_s = 60", "trial_timeout_s = 60\noutput_file_limit_bytes = 10", "campaign.output_file_limit_bytes",
     "65536"),
])
def test_numbers_that_size_work_are_bounded_with_the_bound_in_the_error(tmp_path, study_text, old, new, key, bound):
    text = study_text()
    assert old in text
    path = write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(UserError) as caught:
        load_study(path)
    assert key in caught.value.where
    assert bound in caught.value.what or bound in caught.value.fix


def test_the_container_limits_a_study_may_set(tmp_path, study_text):
    text = study_text().replace("trial_timeout_s = 60",
                                "trial_timeout_s = 60\ncpu_limit = 1.5\noutput_file_limit_bytes = 1048576")
    study = load_study(write(tmp_path, text))
    assert study.campaign.cpu_limit == 1.5
    assert study.campaign.output_file_limit_bytes == 2**20
    (tmp_path / "plain").mkdir()
    plain = load_study(write(tmp_path / "plain", study_text()))
    assert plain.campaign.cpu_limit is None and plain.campaign.output_file_limit_bytes is None


def test_a_study_that_plans_too_many_passes_is_refused(tmp_path, study_text):
    values = "[" + ", ".join(str(i) for i in range(1, 1002)) + "]"
    path = write(tmp_path, study_text(batches=values, repetitions=200))
    with pytest.raises(UserError, match="100000"):
        load_study(path)
