"""A study's ``scenario = "server"`` and its ``[traffic]`` table (protocol/study.py, protocol/traffic.py): the two
go together, one target rate for now, the three shipped tasks served; ``offline`` is unchanged."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE

from protocol.codec import from_dict, to_dict
from protocol.errors import UserError
from protocol.study import parse_study
from protocol.study_reader import StudyErrors
from protocol.traffic import Traffic

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
    ("server", {**TRAFFIC, "rate_qps": None, "rates_qps": [1.0, 2.0]}, "traffic.rates_qps",
     "a series of 2 rates is not supported yet", "run one study per rate"),
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
    from protocol.study import SERVED_TASKS
    from protocol.tasks import task_named

    assert SERVED_TASKS == ("text-classification", "sentence-embedding", "text-generation")
    assert all(task_named(name, "test").name == name for name in SERVED_TASKS)


def test_only_the_launchers_that_declare_the_server_scenario_run_it() -> None:
    """Containers and Slurm do not run serving trials yet (their images lack LoadGen): refused before anything
    runs, naming the launcher that does; ``auto`` passes them by."""
    from runner.campaign.launcher_choice import choose_launcher

    study = parse_study(study_data(), path=SOURCE, sha256="sha256:" + "0" * 64)
    for kind in ("docker", "slurm"):
        with pytest.raises(UserError) as caught:
            choose_launcher(study, kind)
        assert caught.value.what == f"launcher {kind} does not run scenario 'server' yet"
        assert "--launcher process" in caught.value.fix
    assert choose_launcher(study, "auto").launcher.name == "process"
