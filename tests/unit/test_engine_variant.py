"""The engine as a variant field: found by name (a fixture engine added by its own folder alone), parsed from
``[base] engine``, a ``[[series]]`` over it and ``[engines.NAME]``, refused where it cannot run the variant, and
read back in the trial (``settings_differences``)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE

from protocol.engines import DEFAULT_ENGINE, ENGINES_PATH_ENV, engine_named, engine_names
from protocol.errors import UserError
from protocol.study.load import parse_study
from protocol.study.reader import StudyErrors
from runner.trial.engines.base import settings_differences

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"


@pytest.fixture
def relay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENGINES_PATH_ENV, str(FIXTURES))


def study(series: list[str] | None = None, base_engine: str | None = None, **tables: Any) -> dict[str, Any]:
    data = tomllib.loads(STUDY_TEMPLATE.format(
        corpus_fp="sha256:" + "1" * 64, tuning_fp="sha256:" + "2" * 64, model_fp="sha256:" + "3" * 64,
        minimum=0.5, repetitions=2, batches="[1, 4]", timeout=60, reference=1))
    if base_engine is not None:
        data["base"]["engine"] = base_engine
    if series is not None:
        data["series"] = [{"name": "engine", "field": "engine", "values": series}]
        data["quality"]["reference_variant"] = f"engine={series[0]}"
    data.update(tables)
    return data


def parse(data: dict[str, Any]) -> Any:
    return parse_study(data, path=Path("/nowhere/study.toml"), sha256="0" * 64)


def messages(data: dict[str, Any]) -> str:
    with pytest.raises((UserError, StudyErrors)) as caught:
        parse(data)
    errors = caught.value.errors if isinstance(caught.value, StudyErrors) else [caught.value]
    return " | ".join(f"{e.what} ({e.where}) {e.fix}" for e in errors)


def test_the_default_engine_comes_first_and_an_unknown_one_names_the_known_ones() -> None:
    assert engine_names()[0] == DEFAULT_ENGINE == "transformers"
    with pytest.raises(UserError) as caught:
        engine_named("vllm-turbo", "study.toml, key base.engine")
    assert "unknown engine 'vllm-turbo'" in caught.value.what and ENGINES_PATH_ENV in caught.value.fix


def test_a_study_without_engine_runs_the_default_and_its_1_0_config_is_unchanged() -> None:
    parsed = parse(study())
    assert {v.engine for v in parsed.variants()} == {"transformers"}
    assert "engine" not in parsed.variants()[0].config()  # a 1.0 campaign's derived files re-derive byte for byte
    assert parsed.settings_of("transformers") == {}


def test_an_engine_from_its_own_folder_is_a_series_with_its_settings(relay: None) -> None:
    parsed = parse(study(["transformers", "relay"], engines={"relay": {"mode": "changed"}}))
    assert [(v.variant_id, v.engine) for v in parsed.series_variants()] == [
        ("engine=transformers", "transformers"), ("engine=relay", "relay")]
    assert parsed.variants()[1].config()["engine"] == "relay"
    assert parsed.settings_of("relay") == {"mode": "changed"}
    assert parse(study(["transformers", "relay"])).settings_of("relay") == {"mode": "same"}  # its default


def test_without_its_folder_the_engine_is_unknown_naming_the_variable() -> None:
    text = messages(study(["transformers", "relay"]))
    assert "unknown engine 'relay'" in text and "series[0]" in text and ENGINES_PATH_ENV in text


@pytest.mark.parametrize(("change", "expected"), [
    ({"precision": "bf16"}, "engine relay runs fp32, not bf16"),
    ({"compile": True}, "engine relay runs with compile = false only, not true"),
])
def test_a_variant_the_engine_cannot_run_is_refused_naming_it(relay: None, change: dict[str, Any],
                                                              expected: str) -> None:
    data = study(base_engine="relay")
    data["base"].update(change)
    assert expected in messages(data)


def test_an_engine_for_another_task_is_refused(relay: None) -> None:
    data = study(["transformers", "relay"])
    data["task"] = "sentence-embedding"
    data["embedding"] = {"pooling": "mean", "normalize": True, "dimension": 384,
                         "queries": {"path": "q.jsonl", "fingerprint": "sha256:" + "5" * 64},
                         "tuning_queries": {"path": "tq.jsonl", "fingerprint": "sha256:" + "5" * 64}}
    data["quality"].update(metric="ndcg@10")
    data["quality"].pop("subgroups", None)
    assert "engine relay runs text-classification, not sentence-embedding" in messages(data)


@pytest.mark.parametrize(("tables", "expected"), [
    ({"engines": {"relay": {"mood": "same"}}}, "unknown key 'mood'"),
    ({"engines": {"relay": {"mode": 3}}}, "engines.relay.mode"),
    ({"engines": {"nosuch": {}}}, "unknown engine 'nosuch'"),
])
def test_a_bad_engines_table_is_refused_by_key(relay: None, tables: dict[str, Any], expected: str) -> None:
    assert expected in messages(study(["transformers", "relay"], **tables))


def test_an_engines_table_no_variant_runs_is_refused(relay: None) -> None:
    assert "[engines.relay] is declared but no variant runs engine relay" in messages(
        study(engines={"relay": {"mode": "same"}}))


def test_a_setting_the_engine_runs_otherwise_is_named() -> None:
    assert settings_differences({"mode": "same", "n": 2}, {"mode": "same", "n": 2}) == []
    assert settings_differences({"mode": "same", "dtype": "float32"}, {"mode": "same", "dtype": "bfloat16"}) == [
        "dtype: declared 'float32', engine runs 'bfloat16'"]
    assert settings_differences({"kv": 1}, {}) == ["kv: declared 1, engine runs '(not reported)'"]


def test_the_process_launcher_finds_an_engines_modules_in_the_trials_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``isocost check`` and run's preflight ask the interpreter the trials will run with for each engine's
    modules; a missing one is an error naming it, the interpreter and the fix, before anything runs."""
    from runner.launch.kinds.process.launcher import ProcessLauncher

    package = tmp_path / "needy"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from protocol.engines.base import Engine\n"
        "ENGINE = Engine(name='needy', help='needs a module nobody has', trial_module='x.trial',\n"
        "                requires=('json', 'isocost_no_such_module_anywhere'))\n", encoding="utf-8")
    monkeypatch.setenv(ENGINES_PATH_ENV, f"{FIXTURES}{os.pathsep}{tmp_path}")
    launcher = ProcessLauncher()
    assert launcher.engine_problems({"transformers", "relay"}) == []
    [error] = launcher.engine_problems({"transformers", "needy"})
    assert error.what == (f"engine needy needs the Python module(s) isocost_no_such_module_anywhere, which "
                          f"{launcher.python} lacks")
    assert "Install them into that environment" in error.fix
