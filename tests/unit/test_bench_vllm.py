"""Benchmark 11 (``benchmarks/vllm_pass.py``): without ``.venv-vllm`` its rows are empty with the reason, never a
zero; its rows judge the ratio per pair, refuse a pair whose tokens differ, and compare reported tokens/s with the
file's."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import vllm_pass


def test_without_the_vllm_environment_the_rows_say_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ISOCOST_VLLM_PYTHON", str(tmp_path / "no-such-python"))
    rows = vllm_pass.run(tmp_path / "work", progress=lambda line: None)
    assert [row.key for row in rows] == ["11", "11b"]
    for row in rows:
        assert row.measured == "" and row.met is None
        assert "no vLLM environment" in row.reason and "make vllm" in row.reason
    assert not (tmp_path / "work").exists()  # nothing prepared for a benchmark that cannot run


def _pair(clock: str, runner_s: float, bare_s: float, same: bool = True, counted: int = 10) -> dict[str, object]:
    return {"clock": clock, "pair": 1, "runner_pass_s": runner_s, "bare_s": bare_s, "same_tokens": same,
            "reported_tokens": 10, "counted_tokens": counted, "reported_tps": 10 / runner_s,
            "counted_tps": counted / runner_s, "load_average": [0.0, 0.0, 0.0]}


def test_the_rows_judge_the_pairs_and_the_token_count() -> None:
    pairs = [_pair(clock, 1.0, 1.0) for clock in ("wall", "cpu") for _ in range(6)]
    rows = {row.key: row for row in vllm_pass._rows({"pairs": pairs, "load_s": 40.0, "engine": {}}, "t", "≥ 0.99")}
    assert rows["11"].met is True and rows["11c"].met is True and rows["11b"].met is True
    pairs[0] = _pair("wall", 1.0, 1.0, same=False, counted=9)
    rows = {row.key: row for row in vllm_pass._rows({"pairs": pairs, "load_s": 40.0, "engine": {}}, "t", "≥ 0.99")}
    assert rows["11"].met is False and "not the same work" in rows["11"].reason
    assert rows["11b"].met is False and rows["11b"].ratio == "differ"
