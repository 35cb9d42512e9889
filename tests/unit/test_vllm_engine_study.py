"""Engine vllm's host half in a study: what it runs (text-generation, CPU, fp32/bf16), its [engines.vllm] settings
(defaults filled in, bounds checked), and a variant it cannot run refused naming why."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE

from protocol.engines import engine_named
from protocol.engines.vllm.trial.engine import DEFAULTS
from protocol.errors import UserError
from protocol.study.load import parse_study
from protocol.study.reader import StudyErrors


def _study(**tables: Any) -> dict[str, Any]:
    data = tomllib.loads(STUDY_TEMPLATE.format(
        corpus_fp="sha256:" + "1" * 64, tuning_fp="sha256:" + "2" * 64, model_fp="sha256:" + "3" * 64,
        minimum=0.5, repetitions=2, batches="[1, 4]", timeout=60, reference=1))
    data["series"] = [{"name": "engine", "field": "engine", "values": ["transformers", "vllm"]}]
    data["quality"]["reference_variant"] = "engine=transformers"
    data.update(tables)
    return data


def _messages(data: dict[str, Any]) -> str:
    with pytest.raises((UserError, StudyErrors)) as caught:
        parse_study(data, path=Path("/nowhere/study.toml"), sha256="0" * 64)
    errors = caught.value.errors if isinstance(caught.value, StudyErrors) else [caught.value]
    return " | ".join(f"{e.what} ({e.where}) {e.fix}" for e in errors)


def test_what_engine_vllm_runs_and_its_settings() -> None:
    engine = engine_named("vllm")
    assert (engine.tasks, engine.devices, engine.precisions) == (("text-generation",), ("cpu",), ("fp32", "bf16"))
    assert engine.trial_module == "protocol.engines.vllm.trial.engine" and engine.python_env == "ISOCOST_VLLM_PYTHON"
    assert DEFAULTS == {"enforce_eager": True, "max_model_len": 2048, "max_num_seqs": 256, "kv_cache_gib": 1,
                        "block_size": 128, "enable_prefix_caching": False, "server": False}
    assert engine.refusal("text-generation", {"device": "cpu", "precision": "fp16"}) == (
        "engine vllm runs fp32, bf16, not fp16")
    assert engine.refusal("text-generation", {"device": "cpu", "precision": "fp32", "padding": "max_length"}) == (
        'engine vllm runs with padding = "longest" only, not "max_length"')


def test_a_classification_study_cannot_run_vllm_and_a_setting_out_of_bounds_is_refused() -> None:
    assert "engine vllm runs text-generation, not text-classification" in _messages(_study())
    bad = _study(engines={"vllm": {"max_num_seqs": 0}})
    assert "engines.vllm.max_num_seqs" in _messages(bad)


def test_batches_in_flight_are_allowed_for_vllms_http_server_only() -> None:
    """A generation server study of engine vllm alone: ``max_batches_in_flight = 4`` parses with ``server = true``
    and is refused with the engine stepped in the trial's process (naming the setting that allows it)."""
    data = _study(task="text-generation", generation={"template": "Headline: {text}", "max_new_tokens": 8},
                  scenario="server", traffic={"rate_qps": 2.0, "min_query_count": 44, "ttft_bound_ms": 800,
                                              "tpot_bound_ms": 200, "ttft_percentile": 0.9, "tpot_percentile": 0.9,
                                              "max_batches_in_flight": 4})
    data["series"] = [{"name": "batch", "field": "batch_size", "values": [1, 4]}]
    data["base"]["engine"] = "vllm"
    data["quality"].update(metric="chrf", reference_variant="batch_size=1", subgroups=[])
    data["engines"] = {"vllm": {"server": True}}
    study = parse_study(data, path=Path("/nowhere/study.toml"), sha256="0" * 64)
    assert study.traffic is not None and study.traffic.max_batches_in_flight == 4
    data["engines"] = {"vllm": {"server": False}}
    words = _messages(data)
    assert "engine vllm runs one batch at a time; engine vllm does with server = true" in words, words
