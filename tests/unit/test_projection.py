"""Projection of the job from hand-made per-batch records; every expected figure computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.costing.batch_fit import Batch, PassEvidence, fit_batches, solve
from protocol.costing.projection import percentile, project, refusal
from protocol.costing.trial_files import read_batches, setup_seconds
from protocol.errors import UserError
from protocol.records import codec

BUCKETS = ("long", "short")


def batch(index: int, short: tuple[int, int], long: tuple[int, int], batch_s: float) -> Batch:
    """short/long = (inputs, tokens)."""
    inputs = {k: v[0] for k, v in (("short", short), ("long", long)) if v[0]}
    tokens = {k: v[1] for k, v in (("short", short), ("long", long)) if v[0]}
    return Batch(index, short[0] + long[0], short[1] + long[1], inputs, tokens, batch_s, None)


def one_pass(trial: str = "t1", scale: float = 1.0, setup_s: float | None = 36.0) -> PassEvidence:
    # short costs 0.1 s/token, long 0.2 s/token (× scale); the pass spends 1 s (× scale) outside its batches.
    return PassEvidence(trial, 8.5 * scale, setup_s, (
        batch(0, (2, 10), (0, 0), 1.0 * scale),
        batch(1, (0, 0), (1, 20), 4.0 * scale),
        batch(2, (1, 5), (1, 10), 2.5 * scale),
    ))


def test_fit_recovers_the_per_bucket_rates_with_zero_residual() -> None:
    fit = fit_batches(one_pass().batches, BUCKETS)
    assert fit.s_per_token == pytest.approx((0.2, 0.1))
    assert fit.residual_rms_s == pytest.approx(0.0, abs=1e-12)
    assert fit.mean_batch_s == pytest.approx(2.5)
    assert fit.method.startswith("least squares")


def test_a_per_batch_constant_is_fitted_and_spread_over_the_inputs_per_batch() -> None:
    # 0.5 s per batch + 0.1 s/short token + 0.2 s/long token; 5 inputs in 3 batches; pass_s = Σ batch_s (factor 1)
    p = PassEvidence("t", 11.0, 0.0, (
        batch(0, (2, 10), (0, 0), 1.5),
        batch(1, (0, 0), (1, 20), 4.5),
        batch(2, (1, 5), (1, 20), 5.0),
    ))
    fit = fit_batches(p.batches, BUCKETS)
    assert fit.s_per_batch == pytest.approx(0.5)
    assert fit.s_per_token == pytest.approx((0.2, 0.1))
    assert fit.method.startswith("least squares of batch time on a per-batch constant")
    # per input: 0.5 × 3/5 + 0.6 × 5 × 0.1 + 0.4 × 20 × 0.2 = 0.3 + 0.3 + 1.6 = 2.2 s
    result = project([p], job_inputs=1000, corpora=1, workers=1, mix=None, seed="0", resamples=100)
    assert result.s_per_input == pytest.approx(2.2)
    assert result.checks[0].predicted_s == pytest.approx(11.0)


def test_alike_batches_fall_back_to_one_pooled_rate() -> None:
    batches = [batch(0, (1, 10), (1, 10), 3.0), batch(1, (2, 20), (2, 20), 6.0)]
    fit = fit_batches(batches, BUCKETS)
    assert fit.s_per_token == pytest.approx((0.15, 0.15))  # 9 s / 60 tokens
    assert "pooled" in fit.method and "singular" in fit.method


def test_projection_by_hand_with_the_corpus_mix() -> None:
    # factor 8.5/7.5; corpus shares short 3/5, long 2/5; tokens/input short 5, long 15:
    # s/input = 8.5/7.5 × (0.6×5×0.1 + 0.4×15×0.2) = 8.5/7.5 × 1.5 = 1.7 s.
    # 1,000,000 inputs on 2 workers: 850,000 s + 36 s set-up = 850,036 s.
    result = project([one_pass("t1"), one_pass("t2")], job_inputs=1_000_000, corpora=1, workers=2, mix=None,
                     seed="7", resamples=200)
    assert result.s_per_input == pytest.approx(1.7)
    assert result.job_h == pytest.approx(850_036 / 3600)
    assert result.compute_h == pytest.approx(1_700_000 / 3600)
    assert dict(result.shares) == pytest.approx({"short": 0.6, "long": 0.4})
    assert [c.predicted_s for c in result.checks] == pytest.approx([8.5, 8.5])  # the whole-pass check
    assert (result.low_h, result.high_h) == pytest.approx((result.job_h, result.job_h))  # identical passes


def test_projection_by_hand_with_a_declared_mix_and_corpora() -> None:
    # only short inputs: 8.5/7.5 × 5 × 0.1 = 0.5666… s/input; 3600 inputs × 2 corpora on 1 worker = 4080 s.
    result = project([one_pass(setup_s=None)], job_inputs=3600, corpora=2, workers=1,
                     mix=(("short", 1.0), ("long", 0.0)), seed="0", resamples=100)
    assert result.job_h == pytest.approx(4080 / 3600)
    assert result.setup_s == 0.0


def test_bootstrap_interval_spans_the_passes_and_is_reproducible_from_its_seed() -> None:
    passes = [one_pass("fast"), one_pass("slow", scale=2.0), one_pass("mid", scale=1.5)]
    kwargs = dict(job_inputs=1000, corpora=1, workers=1, mix=None, resamples=500)
    first = project(passes, seed="42:cfg", **kwargs)  # type: ignore[arg-type]
    again = project(passes, seed=first.seed, **kwargs)  # type: ignore[arg-type]
    other = project(passes, seed="43:cfg", **kwargs)  # type: ignore[arg-type]
    assert first.samples_h == again.samples_h
    assert (first.low_h, first.high_h) == (again.low_h, again.high_h)
    assert first.samples_h != other.samples_h
    # every resample lies between "all fast" (1.7 s/input) and "all slow" (3.4 s/input), set-up 36 s
    fast_h, slow_h = (1000 * 1.7 + 36) / 3600, (1000 * 3.4 + 36) / 3600
    assert fast_h - 1e-9 <= first.low_h < first.job_h < first.high_h <= slow_h + 1e-9
    assert codec.to_dict(first)["bootstrap"] == {"seed": "42:cfg", "resamples": 500, "over": "3 accepted passes",
                                            "rng": "Python random.Random(seed), passes drawn with replacement"}


def test_a_mix_bucket_never_measured_is_refused() -> None:
    only_short = PassEvidence("t", 1.0, None, (batch(0, (2, 10), (0, 0), 1.0),))
    with pytest.raises(ValueError, match="needs length bucket\\(s\\) long, which no measured batch held"):
        project([only_short], job_inputs=10, corpora=1, workers=1, mix=(("short", 0.5), ("long", 0.5)),
                seed="0", resamples=100)


def test_refusals() -> None:
    assert refusal(0, 0, {}, True).startswith("zero accepted passes")
    assert "failed 1 of its attempts (1 oom)" in refusal(4, 1, {"ok": 4, "oom": 1}, True)
    assert refusal(5, 0, {"ok": 5}, False).startswith("quality not shown equivalent")
    assert refusal(5, 0, {"ok": 5}, True) == ""
    with pytest.raises(ValueError, match="zero accepted passes"):
        project([], job_inputs=1, corpora=1, workers=1, mix=None, seed="0", resamples=100)


def test_read_batches_round_trip_and_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "batches.jsonl"
    good = {"index": 0, "n_inputs": 2, "n_tokens": 10, "inputs_by_bucket": {"short": 2},
            "tokens_by_bucket": {"short": 10}, "batch_s": 0.5, "device_s": None}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "batch_s": -1}) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_batches(path)
    assert f"{path}:2" in caught.value.message
    path.write_text(json.dumps(good) + "\n", encoding="utf-8")
    assert read_batches(path) == (Batch(0, 2, 10, {"short": 2}, {"short": 10}, 0.5, None),)
    with pytest.raises(UserError, match="no per-batch record"):
        read_batches(tmp_path / "absent.jsonl")


def test_setup_seconds_and_helpers() -> None:
    assert setup_seconds({"phases": {"imports_s": 2.0, "load_s": 1.0, "warmup_s": 0.5}}) == 3.5
    assert setup_seconds({"phases": {"imports_s": 2.0, "load_s": None, "warmup_s": 0.5}}) is None
    assert setup_seconds({"phases": ["not", "a", "table"]}) is None
    assert setup_seconds({"phases": {"imports_s": float("nan"), "load_s": 1.0, "warmup_s": 0.5}}) is None
    assert solve([[2, 0], [0, 4]], [2, 8]) == [1.0, 2.0]
    assert solve([[1, 2], [2, 4]], [1, 2]) is None
    assert percentile([1, 2, 3, 4], 0.5) == 2.5


def test_energy_per_input_and_per_validated_corpus_or_empty_with_reason() -> None:
    from protocol.costing.trial_files import TrialRecord, energy_fields, energy_figures
    from runner.analysis.summarize import _energy_lines

    cpu_only = [TrialRecord(None, **energy_fields({"gpu_energy_j": None, "gpu_energy_reason": "CPU trial: no GPU "
                                                   "energy counter", "cpu_energy_j": joules, "cpu_energy_reason": ""}))
                for joules in (100.0, 120.0, 140.0)]
    figures = energy_figures(cpu_only, 10, None)
    assert figures["cpu_j_per_input"] == 12.0  # median 120 J / 10 inputs
    assert figures["cpu_j_per_validated_corpus"] == 120.0
    assert figures["gpu_j_per_input"] is None and figures["gpu_reason"] == "CPU trial: no GPU energy counter"
    assert energy_figures(cpu_only, 10, 1_000_000)["cpu_j_per_validated_corpus"] == 12_000_000.0
    unreadable = energy_fields({"cpu_energy_j": "lots"})
    assert unreadable["cpu_energy_j"] is None and "not a count of joules" in unreadable["cpu_energy_reason"]
    assert energy_fields({})["gpu_energy_reason"] == "status.json records no gpu_energy_j"
    text = _energy_lines({"batch_size=4": figures})
    assert "- batch_size=4: GPU empty (CPU trial: no GPU energy counter); CPU 12 J per input, 120 J per validated " \
           "corpus" in text
