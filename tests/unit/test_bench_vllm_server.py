"""Benchmark 12's figures (benchmarks/vllm_server.py) from recorded requests: isocost's client times over vLLM's
own per-request metrics for the same requests, a request without vLLM's figures left out, never a zero."""

from __future__ import annotations

from benchmarks.vllm_server import TOLERANCE, ratios, rows


def _request(ttft: float, latency: float, queue: float | None, server_ttft: float, generation: float) -> dict:
    return {"client_ttft_ms": ttft, "client_latency_ms": latency,
            "server": {"queue_time_ms": queue, "time_to_first_token_ms": server_ttft, "generation_time_ms": generation}}


def test_ratios_are_the_client_time_over_vllms_queue_and_ttft_and_generation() -> None:
    requests = [_request(105.0, 1010.0, 5.0, 95.0, 900.0), _request(100.0, 1000.0, None, 90.0, 900.0)]
    assert ratios(requests, "ttft") == [105.0 / 100.0]  # the second has no queue time: left out
    assert ratios(requests, "latency") == [1010.0 / 1000.0]


def test_rows_judge_the_one_at_a_time_median_within_the_tolerance() -> None:
    alone = [_request(104.0, 1003.0, 0.0, 100.0, 900.0)] * 3
    grouped = [_request(200.0, 1200.0, 0.0, 100.0, 900.0)] * 3
    made = rows({"alone": alone, "grouped": grouped, "ready_s": 30.0}, "t", "within 5%")
    assert [(row.key, row.met) for row in made] == [("12", True), ("12b", True)]
    assert "three at once 2.000" in made[0].ratio  # shown, not judged
    slow = [_request(100.0 * (1 + 2 * TOLERANCE), 1000.0, 0.0, 100.0, 900.0)] * 3
    assert rows({"alone": slow, "grouped": [], "ready_s": 30.0}, "t", "x")[0].met is False


def test_no_vllm_metrics_is_an_empty_row_with_its_reason() -> None:
    made = rows({"alone": [{"client_ttft_ms": 1.0, "client_latency_ms": 2.0, "server": {}}], "grouped": [],
                 "ready_s": 1.0}, "t", "x")
    assert made[0].measured == "" and "no per-request metrics" in made[0].reason
