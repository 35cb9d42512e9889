"""The optional [job] table: parsed into a frozen Job, every bad input named by file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study

NO_BUCKETS = ('[[length_buckets]]\nname = "short"\nmax_tokens = 16\n\n[[length_buckets]]\nname = "long"\n', "")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_job_table_means_no_job(tmp_path, study_text):
    assert load_study(write(tmp_path, study_text())).job is None


def test_job_with_inputs_and_mix(tmp_path, study_text):
    text = study_text() + "\n[job]\ninputs = 1000000\ncorpora = 2\n[job.mix]\nshort = 0.25\nlong = 0.75\n"
    job = load_study(write(tmp_path, text)).job
    assert job is not None
    assert (job.inputs, job.corpora, job.mix) == (1_000_000, 2, (("short", 0.25), ("long", 0.75)))
    assert (job.fit_level, job.bootstrap_resamples, job.bootstrap_seed) == (0.95, 2000, 0)
    assert job.where("inputs").endswith("study.toml, key job.inputs")


def test_job_per_day_times_days_and_default_corpora(tmp_path, study_text):
    text = study_text() + "\n[job]\ninputs_per_day = 2000000\ndays = 30\n"
    job = load_study(write(tmp_path, text)).job
    assert job is not None
    assert (job.inputs, job.inputs_per_day, job.days, job.corpora, job.mix) == (60_000_000, 2_000_000, 30, 1, None)


@pytest.mark.parametrize(
    ("job", "message", "key"),
    [
        ("inputs = 0", "inputs must be between 1 and 1000000000000, got 0", "key job.inputs"),
        ("inputs = -5", "inputs must be between 1 and 1000000000000, got -5", "key job.inputs"),
        ("inputs_per_day = 10\ndays = 0", "days must be between 1 and 3650, got 0", "key job.days"),
        ("inputs = 1.5", "expected an integer, got float 1.5", "key job.inputs"),
        ("inputs = 10\ncorpora = 0", "corpora must be between 1 and 1000000, got 0", "key job.corpora"),
        ("inputs_per_day = 10", "the job's size is missing", "key job.days"),
        ("corpora = 1", "the job's size is missing", "key job.inputs"),
        ("inputs = 10\ndays = 3", "not both", "key job.inputs"),
        ("inputs = 10\nfit_level = 1.5", "fit_level must be between 0.5 and 1 (excluded), got 1.5",
         "key job.fit_level"),
        ("inputs = 10\nbootstrap_resamples = 10", "bootstrap_resamples must be between 100 and 20000",
         "key job.bootstrap_resamples"),
        ("inputs = 10\nsize = 3", "unknown key 'size'", "key job.size"),
        ("inputs = 10\n[job.mix]\nshort = 0.5\nlong = 0.4", "the length mix sums to 0.9, not 1", "key job.mix"),
        ("inputs = 10\n[job.mix]\nshort = 0.5\nhuge = 0.5", "unknown length bucket 'huge'", "key job.mix.huge"),
        ("inputs = 10\n[job.mix]\nshort = -0.5\nlong = 1.5", "a share must be a number from 0 to 1",
         "key job.mix.short"),
    ],
)
def test_bad_job_names_file_and_key(tmp_path, study_text, job, message, key):
    path = write(tmp_path, study_text() + "\n[job]\n" + job + "\n")
    with pytest.raises(UserError) as caught:
        load_study(path)
    assert message in caught.value.message
    assert f"{path}, {key}" in caught.value.message


def test_mix_without_length_buckets_is_refused(tmp_path, study_text):
    text = study_text().replace(*NO_BUCKETS).replace('subgroups = ["length_bucket", "label"]', 'subgroups = ["label"]')
    path = write(tmp_path, text + "\n[job]\ninputs = 10\n[job.mix]\nall = 1.0\n")
    with pytest.raises(UserError, match="needs the study's \\[\\[length_buckets\\]\\]"):
        load_study(path)
