"""A text-generation job's projection fits input and output tokens apart, and every billing option carries its
cost per million generated tokens; every expected figure computed by hand."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from protocol.costing.batch_fit import GENERATED, Batch, PassEvidence, fit_batches
from protocol.costing.job_cost import per_million_tokens
from protocol.costing.projection import project
from protocol.costing.trial_files import read_batches


def gen_batch(index: int, inputs: int, tokens: int, generated: int) -> Batch:
    # 0.5 s per batch, 0.01 s per prompt token, 0.2 s per generated token.
    return Batch(index, inputs, tokens, {"all": inputs}, {"all": tokens}, 0.5 + 0.01 * tokens + 0.2 * generated,
                 None, generated)


def gen_pass(trial: str = "t1") -> PassEvidence:
    batches = (gen_batch(0, 2, 100, 30), gen_batch(1, 2, 60, 10), gen_batch(2, 1, 80, 16), gen_batch(3, 1, 20, 4))
    return PassEvidence(trial, sum(b.batch_s for b in batches), 10.0, batches)


def test_the_fit_has_a_rate_per_generated_token() -> None:
    fit = fit_batches(gen_pass().batches, ("all", GENERATED))
    assert fit.s_per_batch == pytest.approx(0.5)
    assert fit.s_per_token == pytest.approx((0.01, 0.2))
    assert fit.residual_rms_s == pytest.approx(0.0, abs=1e-9)


def test_the_job_is_projected_on_input_and_output_tokens() -> None:
    projection = project([gen_pass("a"), gen_pass("b")], job_inputs=600, corpora=1, workers=1, mix=None,
                         seed="0:x", resamples=50)
    # per input: 0.5 × 4 batches / 6 inputs + 0.01 × 260 / 6 + 0.2 × 60 / 6 (the pass factor is 1)
    per_input = 0.5 * 4 / 6 + 0.01 * 260 / 6 + 0.2 * 60 / 6
    assert projection.generated_per_input == pytest.approx(10.0)
    assert projection.s_per_input == pytest.approx(per_input)
    assert projection.job_h == pytest.approx((600 * per_input + 10.0) / 3600)
    assert dict(projection.tokens_per_input)[GENERATED] == pytest.approx(10.0)
    # 600 inputs × 10 tokens = 6,000 tokens; 3.00 USD for them is 500.00 USD per million.
    assert per_million_tokens(Decimal("3.00"), projection) == Decimal("500.00")
    assert per_million_tokens(None, projection) is None


def test_a_task_that_generates_nothing_has_no_such_column(tmp_path: Path) -> None:
    path = tmp_path / "batches.jsonl"
    line = {"index": 0, "n_inputs": 1, "n_tokens": 5, "inputs_by_bucket": {"all": 1}, "tokens_by_bucket": {"all": 5},
            "batch_s": 0.5, "device_s": None}
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "index": 1, "generated_tokens": 7}) + "\n")
    first, second = read_batches(path)
    assert (first.generated_tokens, second.generated_tokens) == (None, 7)
    plain = PassEvidence("p", 1.0, None, (first,))
    projection = project([plain], job_inputs=10, corpora=1, workers=1, mix=None, seed="0", resamples=10)
    assert projection.generated_per_input is None and GENERATED not in dict(projection.tokens_per_input)


def test_per_pass_figures_by_hand() -> None:
    from protocol.tasks.generation.figures import pass_figures

    batches = [{"prefill_s": 0.2, "decode_s": 0.6, "generated_tokens": 8, "decode_steps": 4},
               {"prefill_s": 0.4, "decode_s": 0.2, "generated_tokens": 3, "decode_steps": 2}]
    figures = pass_figures(batches, pass_s=2.2)
    assert figures == {"generated_tokens": 11, "output_tokens_per_s": pytest.approx(5.0), "median_ttft_s":
                       pytest.approx(0.3), "max_ttft_s": 0.4, "time_per_output_token_s": pytest.approx(0.8 / 4)}
    assert set(pass_figures([{"batch_s": 1.0}], 1.0).values()) == {None}  # a classifier's batches: nothing
