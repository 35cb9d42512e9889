"""The Slurm launcher's options: what they accept, what they refuse and why (no cluster needed)."""

from __future__ import annotations

import pytest

from protocol.errors import UserError
from runner.launch.kinds.slurm.options import SlurmOptions, check_extra_args, gpu_request, time_seconds


@pytest.mark.parametrize("gres, text", [
    ("gpu", "gres=gpu:1"), ("gpu:2", "gres=gpu:2"), ("gpu:a100:1", "gres=gpu:a100:1"), ("gpu:h100", "gres=gpu:h100:1"),
])
def test_gres_forms(gres, text):
    assert gpu_request(gres, None).text() == text


@pytest.mark.parametrize("gres", ["gpu:", "gpu:a100:x", "nvme:1", "gpu:1:2:3", "gpu:-1", "gpu;rm -rf /", "gpu:0"])
def test_malformed_gres_is_refused(gres):
    with pytest.raises(UserError) as info:
        gpu_request(gres, None)
    assert info.value.where == "--slurm-gres"


def test_gpus_forms_and_both_refused():
    assert gpu_request(None, "h100:2").sbatch_arg() == ["--gpus=h100:2"]
    assert gpu_request(None, "1").sbatch_arg() == ["--gpus=1"]
    with pytest.raises(UserError, match="both --slurm-gres and --slurm-gpus"):
        gpu_request("gpu:1", "1")
    with pytest.raises(UserError, match="malformed GPU request"):
        gpu_request(None, "h100")
    assert gpu_request(None, None).sbatch_arg() == []


@pytest.mark.parametrize("text, seconds", [
    ("90", 5400), ("05:30", 330), ("01:30:00", 5400), ("1-00", 86400), ("1-02:00", 93600), ("1-02:00:30", 93630),
])
def test_slurm_time_formats(text, seconds):
    assert time_seconds(text) == seconds


def test_time_limit_defaults_to_the_study_limit_plus_a_margin_and_refuses_shorter():
    assert SlurmOptions().time_limit(900) == "20"  # (900 + 300) s → 20 minutes
    assert SlurmOptions().time_limit(None) == ""
    assert SlurmOptions.from_values({"time": "30"}).time_limit(900) == "30"
    with pytest.raises(UserError, match="shorter than the study's trial_timeout_s"):
        SlurmOptions.from_values({"time": "10"}).time_limit(900)
    with pytest.raises(UserError, match="malformed Slurm time limit"):
        SlurmOptions.from_values({"time": "ten"})


@pytest.mark.parametrize("arg, rule", [
    ("--requeue", "one row per attempt"),
    ("--job-name=x", "lane"),
    ("--dependency=afterok:1", "singleton"),
    ("--array=1-4", "one job"),
    ("--nodes=2", "one node"),
    ("--nodelist=gpu01", "--slurm-node"),
    ("--output=/tmp/x", "trial.log"),
    ("--export=ALL", "environment is fixed"),
    ("--partition=gpu", "--slurm-partition"),
    ("--gres=gpu:1", "--slurm-gres"),
    ("--time=10", "--slurm-time"),
    ("--hold", "never starts"),
    ("--uid=0", "submitting user"),
])
def test_extra_args_that_break_a_rule_are_refused_with_the_rule(arg, rule):
    with pytest.raises(UserError) as info:
        check_extra_args((arg,))
    assert rule in info.value.what and info.value.where == "--slurm-arg"


def test_extra_args_allowed_and_the_forms_refused():
    assert check_extra_args(("--mem=8G", "--exclusive", "--constraint=a100&ib")) == (
        "--mem=8G", "--exclusive", "--constraint=a100&ib")
    with pytest.raises(UserError, match="--name\\[=value\\] form"):
        check_extra_args(("-c4",))
    with pytest.raises(UserError, match="not known to keep the campaign's rules"):
        check_extra_args(("--frobnicate",))
    with pytest.raises(UserError, match="line break"):
        check_extra_args(("--comment=a\nb",))


def test_options_from_values_check_names_runtime_wait_and_login():
    options = SlurmOptions.from_values({"partition": "gpu", "account": "proj-1", "qos": "normal", "gres": "gpu:1",
                                        "arg": ("--mem=4G",), "start_wait": 60, "runtime": "docker"})
    assert options.sbatch_args(node="n1", time_limit="20") == [
        "--partition=gpu", "--account=proj-1", "--qos=normal", "--gres=gpu:1", "--time=20", "--nodelist=n1",
        "--mem=4G"]
    assert options.facts()["gpus_per_trial"] == "gres=gpu:1"
    for values, where in (({"partition": "a b"}, "--slurm-partition"), ({"runtime": "podman"}, "--slurm-runtime"),
                          ({"start_wait": 0}, "--slurm-start-wait"), ({"login": "login.example.org"}, "--slurm-login"),
                          ({"colour": "red"}, "--launcher slurm")):
        with pytest.raises(UserError) as info:
            SlurmOptions.from_values(values)
        assert info.value.where == where
