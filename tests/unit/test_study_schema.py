"""The declared study schema (protocol/study/schema.py) is the parser's: every table accepts exactly its
declared keys, a missing required key is refused by name, an absent optional key takes its declared
default, every declared bound is where the parser starts refusing, and a value of another type than
the declared one is refused naming the key."""

from __future__ import annotations

import copy
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from workspace import STUDY_TEMPLATE

from protocol.errors import UserError
from protocol.study.load import parse_study
from protocol.study.model import Study
from protocol.study.reader import StudyErrors
from protocol.study.schema import COMMON_KEYS, KEYS, Bounds, keys_for, table_keys
from protocol.tasks import task_named

TASKS = ("text-classification", "sentence-embedding", "text-generation")
SOURCE = Path("/nowhere/study.toml")
UNKNOWN = "zz_not_a_key"


def base_study(task: str) -> dict[str, Any]:
    """A valid study of ``task`` with every optional table present (no files are read)."""
    data = tomllib.loads(STUDY_TEMPLATE.format(
        corpus_fp="sha256:" + "1" * 64, tuning_fp="sha256:" + "2" * 64, model_fp="sha256:" + "3" * 64,
        minimum=0.5, repetitions=5, batches="[1, 4, 8]", timeout=60, reference=1))
    data["deadline"] = {"start": "2026-12-07T09:00", "end": "2026-12-11T09:00", "tz": "UTC"}
    data["costing"] = {"catalog": "catalog.csv"}
    data["job"] = {"inputs": 1000}
    data["images"] = {"cpu": "sha256:" + "4" * 64}
    if task == "sentence-embedding":
        ref = {"path": "queries.jsonl", "fingerprint": "sha256:" + "5" * 64}
        data["embedding"] = {"pooling": "mean", "normalize": True, "dimension": 384, "queries": dict(ref),
                             "tuning_queries": {**ref, "path": "tuning-queries.jsonl"}}
    if task == "text-generation":
        data["generation"] = {"template": "Headline: {text}", "max_new_tokens": 16}
    if task != "text-classification":
        data["task"] = task
        data["quality"]["metric"] = "ndcg@10" if task == "sentence-embedding" else "chrf"
        data["quality"]["subgroups"] = ["length_bucket"]
    return data


def errors_of(data: dict[str, Any]) -> list[UserError]:
    try:
        parse_study(data, path=SOURCE, sha256="sha256:" + "0" * 64)
    except StudyErrors as exc:
        return list(exc.errors)
    except UserError as exc:
        return [exc]
    return []


def parsed(data: dict[str, Any]) -> Study:
    return parse_study(data, path=SOURCE, sha256="sha256:" + "0" * 64)


def container(data: dict[str, Any], dotted: str) -> tuple[dict[str, Any], str]:
    """The table holding ``dotted`` (``series[].name``: the first series) and the key's last name."""
    *tables, leaf = dotted.split(".")
    table = data
    for name in tables:
        table = table[name.removesuffix("[]")][0] if name.endswith("[]") else table.setdefault(name, {})
    return table, leaf


def where_pattern(dotted: str) -> re.Pattern[str]:
    """``key series[].name`` as the parser writes it (``key series[0].name``)."""
    return re.compile(r"key " + re.escape(dotted).replace(r"\[\]", r"\[\d+\]") + r"\b")


def names_key(errors: list[UserError], dotted: str) -> bool:
    pattern = where_pattern(dotted)
    return any(pattern.search(error.where) for error in errors)


TABLES = sorted({(task, key.rpartition(".")[0]) for task in TASKS for key in keys_for(task)
                 if not key.startswith("images")} | {(task, "") for task in TASKS})


@pytest.mark.parametrize(("task", "table"), TABLES, ids=[f"{t}:{n or 'top'}" for t, n in TABLES])
def test_every_table_accepts_exactly_its_declared_keys(task: str, table: str) -> None:
    data = base_study(task)
    target = container(data, f"{table}.x")[0] if table else data
    target[UNKNOWN] = 1
    found = [e for e in errors_of(data) if names_key([e], f"{table}.{UNKNOWN}" if table else UNKNOWN)]
    assert len(found) == 1, [e.message for e in errors_of(data)]
    assert f"unknown key {UNKNOWN!r}" in found[0].what
    accepted = re.search(r"accepts: (.*)\.$", found[0].fix)
    assert accepted, found[0].fix
    assert sorted(accepted.group(1).split(", ")) == sorted(table_keys(table, task)), (
        f"[{table or 'top level'}] of a {task} study: the parser and protocol/study/schema.py disagree")


def test_the_images_table_accepts_the_declared_stacks() -> None:
    data = base_study("text-classification")
    data["images"]["tpu"] = "sha256:" + "4" * 64
    (error,) = errors_of(data)
    assert "unknown stack 'tpu'" in error.what and error.fix == "Use one of: cpu, cuda, rocm, cpu-vllm."
    assert table_keys("images", "text-classification") == ("cpu", "cuda", "rocm", "cpu-vllm")


def test_the_base_studies_are_valid() -> None:
    for task in TASKS:
        assert errors_of(base_study(task)) == [], task


REQUIRED = [(task, key) for task in TASKS for key, entry in keys_for(task).items()
            if entry.default.startswith("required") and (task == "text-classification" or key not in
                                                          keys_for("text-classification"))]


@pytest.mark.parametrize(("task", "key"), REQUIRED, ids=[f"{t}:{k}" for t, k in REQUIRED])
def test_a_missing_required_key_is_refused_by_name(task: str, key: str) -> None:
    data = base_study(task)
    table, leaf = container(data, key)
    del table[leaf]
    errors = errors_of(data)
    assert names_key(errors, key), [e.message for e in errors]


def _literal(default: str) -> tuple[bool, Any]:
    """The declared default as a value: a TOML literal, or None for "none…"; (False, None) for words."""
    if default.startswith("none"):
        return True, None
    try:
        return True, tomllib.loads(f"v = {default}")["v"]
    except tomllib.TOMLDecodeError:
        return False, None


def parsed_value(study: Study, key: str) -> Any:
    table, _, leaf = key.rpartition(".")
    if key == "engines":
        return study.engine_settings or None
    if not table:
        return getattr(study, leaf)
    if table == "generation":
        return study.task_options[leaf]
    if table == "base":
        return study.base[leaf]
    record = getattr(study, table)
    if table == "quality" and not hasattr(record, leaf):
        return record.extra[leaf]
    return getattr(record, leaf)


DEFAULTS = [(task, key, value) for task in TASKS for key, entry in keys_for(task).items()
            if not entry.required and "[" not in key and not key.startswith("images")
            and (task == "text-classification" or key not in keys_for("text-classification"))
            for literal, value in [_literal(entry.default)] if literal]


@pytest.mark.parametrize(("task", "key", "default"), DEFAULTS, ids=[f"{t}:{k}" for t, k, _ in DEFAULTS])
def test_an_absent_key_takes_its_declared_default(task: str, key: str, default: Any) -> None:
    data = base_study(task)
    table, leaf = container(data, key)
    table.pop(leaf, None)
    if key == "quality.replay":
        data["quality"].pop("max_score_delta", None)
    value = parsed_value(parsed(data), key)
    assert (list(value) if isinstance(value, tuple) else value) == default, key


def _outside(entry_kind: str, bounds: Bounds) -> tuple[float, float]:
    step = 1 if entry_kind == "integer" else None
    low = bounds.low - (step or max(abs(bounds.low) * 1e-3, 1e-6))
    high = bounds.high + (step or max(abs(bounds.high) * 1e-3, 1e-6))
    return low, high


def _inside(entry_kind: str, bounds: Bounds) -> tuple[float, float]:
    step = 1 if entry_kind == "integer" else max(abs(bounds.high - bounds.low) * 1e-3, 1e-6)
    return (bounds.low + step if bounds.low_open else bounds.low,
            bounds.high - step if bounds.high_open else bounds.high)


BOUNDED = [(task, key) for task in TASKS for key, entry in keys_for(task).items() if entry.bounds is not None
           and (task == "text-classification" or key not in keys_for("text-classification"))]


def _with_value(task: str, key: str, value: float) -> dict[str, Any]:
    data = base_study(task)
    if key in ("job.inputs_per_day", "job.days"):  # the other way of stating the job's size
        data["job"] = {"inputs_per_day": 1, "days": 1}
    table, leaf = container(data, key)
    table[leaf] = value
    if key == "quality.max_score_delta":
        data["quality"]["replay"] = "bounded"
    return data


@pytest.mark.parametrize(("task", "key"), BOUNDED, ids=[f"{t}:{k}" for t, k in BOUNDED])
def test_the_declared_bounds_are_where_the_parser_refuses(task: str, key: str) -> None:
    entry = KEYS[key]
    assert entry.bounds is not None and entry.kind in ("integer", "number")
    convert = int if entry.kind == "integer" else float
    for value in _inside(entry.kind, entry.bounds):
        errors = errors_of(_with_value(task, key, convert(value)))
        assert errors == [], (key, value, [e.message for e in errors])
    for value in _outside(entry.kind, entry.bounds):
        if entry.kind == "integer" or math.isfinite(value):
            errors = errors_of(_with_value(task, key, convert(value)))
            assert names_key(errors, key), (key, value, [e.message for e in errors])


TYPED = [(task, key) for task in TASKS for key, entry in keys_for(task).items() if entry.kind != "table"
         and not key.startswith("images") and (task == "text-classification" or key not in
                                               keys_for("text-classification"))]


@pytest.mark.parametrize(("task", "key"), TYPED, ids=[f"{t}:{k}" for t, k in TYPED])
def test_a_value_of_another_type_is_refused_naming_the_key(task: str, key: str) -> None:
    wrong: Any = "not an array" if KEYS[key].kind == "array" else [1]
    errors = errors_of(_with_value(task, key, wrong))
    assert names_key(errors, key), (key, [e.message for e in errors])


def test_each_task_declares_its_own_keys_beside_the_common_ones() -> None:
    for task in TASKS:
        own = task_named(task).study_keys
        assert all(KEYS[entry.key] == entry and entry.key not in COMMON_KEYS for entry in own), task
        assert set(keys_for(task)) == set(COMMON_KEYS) | {entry.key for entry in own}


def test_the_declared_types_are_known() -> None:
    from protocol.study.schema import KINDS

    assert {entry.kind for entry in KEYS.values()} <= set(KINDS)
    assert copy.deepcopy(KEYS) == KEYS
