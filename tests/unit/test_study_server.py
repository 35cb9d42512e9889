"""A study's ``scenario = "server"`` and its ``[traffic]`` table (protocol/study/load.py, protocol/study/traffic.py):
the two
go together; a series of rates makes one variant per configuration and rate; the three shipped tasks are served;
``offline`` is unchanged."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE

from protocol.errors import UserError
from protocol.records.codec import from_dict, to_dict
from protocol.study.load import parse_study
from protocol.study.reader import StudyErrors
from protocol.study.traffic import Traffic

SOURCE = Path("/nowhere/study.toml")
TRAFFIC = {"rate_qps": 4.0, "min_query_count": 44, "latency_bound_ms": 500, "latency_percentile": 0.9, "seed": 3}


def study_data(scenario: str = "server", traffic: dict[str, Any] | None = TRAFFIC) -> dict[str, Any]:
    data = tomllib.loads(STUDY_TEMPLATE.format(
        corpus_fp="sha256:" + "1" * 64, tuning_fp="sha256:" + "2" * 64, model_fp="sha256:" + "3" * 64,
        minimum=0.5, repetitions=1, batches="[1, 4]", timeout=60, reference=1))
    data["scenario"] = scenario
    if traffic is not None:
        data["traffic"] = dict(traffic)
    return data


def errors(data: dict[str, Any]) -> list[UserError]:
    try:
        parse_study(data, path=SOURCE, sha256="sha256:" + "0" * 64)
    except StudyErrors as exc:
        return list(exc.errors)
    except UserError as exc:
        return [exc]
    return []


def test_a_server_study_keeps_its_traffic_on_the_codec() -> None:
    study = parse_study(study_data(), path=SOURCE, sha256="sha256:" + "0" * 64)
    assert study.scenario == "server" and study.traffic is not None
    assert study.traffic.rates_qps == (4.0,) and study.traffic.min_query_count == 44
    assert study.traffic.bound("latency").bound_ms == 500.0 and study.traffic.bound("latency").percentile == 0.9
    assert study.traffic.max_wait_ms == 5.0  # the declared default
    assert from_dict(Traffic, to_dict(study.traffic)) == study.traffic


def test_an_offline_study_has_no_traffic() -> None:
    study = parse_study(study_data("offline", None), path=SOURCE, sha256="sha256:" + "0" * 64)
    assert study.scenario == "offline" and study.traffic is None


@pytest.mark.parametrize(("scenario", "traffic", "key", "words", "fix"), [
    ("offline", TRAFFIC, "traffic", 'scenario = "offline" sends no requests', 'Set scenario = "server"'),
    ("server", None, "scenario", "needs a [traffic] table", "Add [traffic]"),
    ("interactive", None, "scenario", "'interactive' is not one of 'offline', 'server'", '"server"'),
    ("server", {**TRAFFIC, "rate_qps": None, "rates_qps": [2.0, 1.0]}, "traffic.rates_qps[1]",
     "rises strictly", "from lowest to highest"),
    ("server", {**TRAFFIC, "min_query_count": 43}, "traffic.min_query_count", "at least 44 queries are needed",
     "min_query_count = 44"),
    ("server", {**TRAFFIC, "max_wait_ms": -1}, "traffic.max_wait_ms", "between 0 and 60000", "Use a value"),
    ("server", {**TRAFFIC, "rate": 1}, "traffic.rate", "unknown key 'rate'", "max_wait_ms"),
])
def test_scenario_and_traffic_go_together(scenario: str, traffic: dict[str, Any] | None, key: str, words: str,
                                          fix: str) -> None:
    if traffic is not None:
        traffic = {k: v for k, v in traffic.items() if v is not None}
    found = errors(study_data(scenario, traffic))
    assert len(found) == 1, [e.message for e in found]
    assert found[0].where.endswith(f"key {key}") and words in found[0].what and fix in found[0].fix, found[0].message


def test_a_generation_server_study_is_bounded_by_first_token_and_per_token_times() -> None:
    data = study_data(traffic={"rate_qps": 2.0, "min_query_count": 44, "ttft_bound_ms": 800, "tpot_bound_ms": 200,
                               "ttft_percentile": 0.9, "tpot_percentile": 0.9})
    data["task"] = "text-generation"
    data["generation"] = {"template": "Headline: {text}", "max_new_tokens": 16}
    data["quality"]["metric"] = "chrf"
    found = [e for e in errors(data) if "scenario" in e.where or "traffic" in e.where]
    assert found == [], [e.message for e in found]
    data["traffic"] = {**TRAFFIC}  # a whole answer's latency bound: refused for generation, naming the keys
    found = errors(data)
    assert any("traffic.latency_bound_ms" in e.where for e in found), [e.message for e in found]


def test_every_shipped_task_is_served_and_another_is_refused_naming_them() -> None:
    from protocol.study.load import SERVED_TASKS
    from protocol.tasks import task_named

    assert SERVED_TASKS == ("text-classification", "sentence-embedding", "text-generation")
    assert all(task_named(name, "test").name == name for name in SERVED_TASKS)


def test_only_the_launchers_that_declare_the_server_scenario_run_it() -> None:
    """Processes, containers (the CPU image has LoadGen) and Slurm jobs run serving trials; a kind that declares
    only ``offline`` (a plugin) is refused before anything runs, naming the kinds that do."""
    import dataclasses

    from runner.campaign.launcher_choice import _check_scenario
    from runner.launch.launcher import launcher_kinds

    study = parse_study(study_data(), path=SOURCE, sha256="sha256:" + "0" * 64)
    kinds = launcher_kinds()
    assert {"process", "docker", "slurm"} <= {name for name, kind in kinds.items() if "server" in kind.scenarios}
    for name in ("process", "docker", "slurm"):
        _check_scenario(kinds[name], study, f"--launcher {name}")
    offline_only = dataclasses.replace(kinds["docker"], name="plugin", scenarios=("offline",))
    with pytest.raises(UserError) as caught:
        _check_scenario(offline_only, study, "--launcher plugin")
    assert caught.value.what == "launcher plugin does not run scenario 'server' yet"
    assert "--launcher process, docker, slurm" in caught.value.fix


# -- a series of rates: one variant per configuration and rate ---------------------------------------------------

def rated_study(rates: list[float], **campaign: Any) -> Any:
    data = study_data(traffic={**{k: v for k, v in TRAFFIC.items() if k != "rate_qps"}, "rates_qps": rates})
    data["campaign"].update(campaign)
    return parse_study(data, path=SOURCE, sha256="sha256:" + "0" * 64)


def test_a_series_of_rates_expands_each_configuration_into_one_variant_per_rate() -> None:
    from protocol.records.stages import configuration_key
    from protocol.study.model import configuration_id

    study = rated_study([2.0, 4.0, 8.5])
    variants = study.variants()
    assert [v.variant_id for v in variants] == [
        "batch_size=1@rate_qps=2", "batch_size=1@rate_qps=4", "batch_size=1@rate_qps=8.5",
        "batch_size=4@rate_qps=2", "batch_size=4@rate_qps=4", "batch_size=4@rate_qps=8.5"]
    assert [v.rate_qps for v in variants] == [2.0, 4.0, 8.5] * 2
    assert {configuration_id(v.variant_id) for v in variants} == {"batch_size=1", "batch_size=4"}
    first, second = variants[0], variants[1]
    assert configuration_key(first) == configuration_key(second) and "rate_qps" not in configuration_key(first)
    assert first.config() == {**configuration_key(first), "rate_qps": 2.0}
    assert configuration_key(first) != configuration_key(variants[3])
    assert len(study.series_variants()) == 2  # the configurations themselves are unchanged


def test_each_rate_is_compared_with_the_reference_at_the_same_rate_and_seed() -> None:
    study = rated_study([2.0, 4.0], seeds=[1, 2])
    ids = [v.variant_id for v in study.variants()]
    assert "batch_size=4@rate_qps=4@seed=2" in ids and len(ids) == 8
    assert study.reference_for("batch_size=4@rate_qps=4@seed=2") == "batch_size=1@rate_qps=4@seed=2"
    assert study.reference_for("batch_size=4@rate_qps=2") == "batch_size=1@rate_qps=2"


def test_the_rotated_schedule_runs_every_configuration_and_rate_once_per_repetition() -> None:
    from protocol.study.schedule import rotated_schedule

    study = rated_study([2.0, 4.0], repetitions=2)
    slots = rotated_schedule(study.variants(), study.campaign.repetitions)
    first = [s.variant_id for s in slots if s.repetition == 1]
    second = [s.variant_id for s in slots if s.repetition == 2]
    assert sorted(first) == sorted(second) == sorted(v.variant_id for v in study.variants()) and len(first) == 4
    assert second == first[1:] + first[:1]  # rotated, as any series
    assert slots[0].trial_id == "001-r1-batch_size-1-rate_qps-2"


def test_one_rate_keeps_the_configuration_id_and_carries_the_rate() -> None:
    study = parse_study(study_data(), path=SOURCE, sha256="sha256:" + "0" * 64)
    assert [(v.variant_id, v.rate_qps) for v in study.variants()] == [("batch_size=1", 4.0), ("batch_size=4", 4.0)]


def test_an_offline_variant_has_no_rate_and_its_config_is_as_before() -> None:
    study = parse_study(study_data("offline", None), path=SOURCE, sha256="sha256:" + "0" * 64)
    assert all(v.rate_qps is None and "rate_qps" not in v.config() for v in study.variants())
    assert "rate_qps" not in to_dict(study.variants()[0])


def test_a_series_over_rate_qps_is_refused_pointing_at_traffic() -> None:
    data = study_data()
    data["series"].append({"name": "rates", "field": "rate_qps", "values": [1.0, 2.0]})
    found = errors(data)
    assert any(e.where.endswith("field") and "[traffic]" in e.what and "rates_qps" in e.fix for e in found), \
        [e.message for e in found]


def test_batches_in_flight_need_an_engine_that_runs_them_at_once() -> None:
    """``max_batches_in_flight`` above 1: refused for transformers (one batch at a time), naming the key and the
    engine that can; the default 1 is what every study had."""
    found = errors(study_data(traffic={**TRAFFIC, "max_batches_in_flight": 4}))
    (error,) = [e for e in found if "max_batches_in_flight" in e.where]
    assert "engine transformers runs one batch at a time" in error.message and "server = true" in error.fix
    assert errors(study_data(traffic={**TRAFFIC, "max_batches_in_flight": 1})) == []
    assert [e.where for e in errors(study_data(traffic={**TRAFFIC, "max_batches_in_flight": 0}))] == [
        "/nowhere/study.toml, key traffic.max_batches_in_flight"]
