"""The study parser's parts on their own: the key-by-key reader, the error collector, bounds, one table's parser,
the field rules and the series expansion."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.study.load import load_study
from protocol.study.reader import ErrorCollector, StudyErrors, TableReader, check_bound, check_declared, sub_table
from protocol.study.tables import check_config, check_field, parse_campaign


def test_table_reader_types_defaults_and_unknown_keys() -> None:
    reader = TableReader("s.toml", {"n": 3, "flag": True, "extra": 1}, "campaign.")
    assert reader.get("n", int) == 3 and reader.get("missing", int, 7) == 7
    with pytest.raises(UserError, match=r"expected an integer, got a boolean \(s.toml, key campaign.flag\)"):
        reader.get("flag", int)
    with pytest.raises(UserError, match="unknown key 'extra'"):
        reader.finish()
    with pytest.raises(UserError, match=r"missing required key \(s.toml, key campaign.gone\)"):
        reader.get("gone", int)


def test_error_collector_keeps_every_error_and_returns_the_default() -> None:
    check = ErrorCollector()

    def fail(what: str) -> int:
        raise UserError(what)

    def fail_twice() -> None:
        raise StudyErrors([UserError("two"), UserError("three")], "s.toml")

    assert check.attempt(fail, "one", default=-1) == -1
    assert check.attempt(lambda: 5) == 5
    check.attempt(fail_twice)
    assert [e.what for e in check.errors] == ["one", "two", "three"]


def test_check_bound_names_the_range() -> None:
    check_bound("seeds", 100, "here")
    with pytest.raises(UserError, match="seeds must be between 0 and 100, got 101"):
        check_bound("seeds", 101, "here")
    assert check_declared("campaign.repetitions", 1000, "here") == 1000
    with pytest.raises(UserError, match=r"repetitions must be between 1 and 1000, got 1001 \(here\)\. Use a value "
                                        r"from 1 to 1000 \(full passes per variant"):
        check_declared("campaign.repetitions", 1001, "here")
    with pytest.raises(UserError, match=r"trial_timeout_s must be between 0 \(excluded\) and 604800, got 0\.0"):
        check_declared("campaign.trial_timeout_s", 0, "here")


def test_campaign_table_defaults_and_field_rules() -> None:
    rule = parse_campaign(TableReader("s.toml", {}, ""))
    assert (rule.repetitions, rule.order, rule.trial_timeout_s, rule.seeds) == (5, "rotate", None, ())
    top = TableReader("s.toml", {"campaign": {"seeds": [1, 1]}}, "")
    with pytest.raises(UserError, match="a seed is listed twice"):
        parse_campaign(top)
    assert sub_table(top, "campaign").prefix == "campaign."
    assert check_field("precision", "bf16", "w") == "bf16"
    with pytest.raises(UserError, match="batch_size must be between 1 and 65536, got 0"):
        check_field("batch_size", 0, "w")
    with pytest.raises(UserError, match="fp16 is GPU-only"):
        check_config(top, {"stack": "cpu", "device": "cpu", "quantization": "none", "precision": "fp16"})


def test_series_variants_before_seeds(tmp_path: Path, study_text: Callable[..., str]) -> None:
    path = tmp_path / "study.toml"
    path.write_text(study_text(), encoding="utf-8")
    study = load_study(path)
    assert [v.variant_id for v in study.series_variants()] == [v.variant_id for v in study.variants()]
    assert study.reference_for(study.quality.reference_variant + "@seed=3") == study.quality.reference_variant + \
        "@seed=3"


def test_a_cuda_stack_variant_may_run_on_the_cpu_and_rocm_may_not() -> None:
    """A CUDA image runs a trial on the CPU (issue 48: CI runs real trials in the CUDA images on a machine without a
    GPU; the row's device says cpu); ROCm stays GPU-only (its image is unbuilt here), and the cpu stack CPU-only."""
    top = TableReader("s.toml", {}, "")
    config = {"quantization": "none", "precision": "fp32"}
    check_config(top, {**config, "stack": "cuda", "device": "cpu"})
    check_config(top, {**config, "stack": "cuda", "device": "cuda"})
    with pytest.raises(UserError, match='stack "rocm" runs on device "cuda"'):
        check_config(top, {**config, "stack": "rocm", "device": "cpu"})
    with pytest.raises(UserError, match='stack "cpu" runs on device "cpu"'):
        check_config(top, {**config, "stack": "cpu", "device": "cuda"})
