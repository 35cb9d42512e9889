"""The declared dynamic batcher (runner/trial/serving/batcher.py): at most max_batch, the first query waiting at
most max_wait_ms, one worker, nothing lost at stop."""

from __future__ import annotations

import threading
import time

import pytest

from runner.trial.serving.batcher import DynamicBatcher, Pending


def pending(n: int, at: int | None = None) -> Pending:
    return Pending(query=n, index=n, arrived_ns=time.monotonic_ns() if at is None else at, seq=n)


def collect(max_batch: int, max_wait_ms: float, service_s: float = 0.0) -> tuple[DynamicBatcher, list[list[int]]]:
    seen: list[list[int]] = []

    def handler(batch: list[Pending]) -> None:
        seen.append([p.query for p in batch])
        time.sleep(service_s)

    batcher = DynamicBatcher(max_batch, max_wait_ms, handler)
    batcher.start()
    return batcher, seen


def test_a_burst_is_cut_into_batches_of_at_most_max_batch_in_arrival_order():
    batcher, seen = collect(max_batch=4, max_wait_ms=50)
    batcher.put_many([pending(i) for i in range(10)])
    batcher.stop()
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and batcher.batches == 3


def test_a_lone_query_waits_no_longer_than_max_wait():
    batcher, seen = collect(max_batch=8, max_wait_ms=30)
    start = time.monotonic()
    batcher.put(pending(0))
    while not seen:
        time.sleep(0.001)
    waited = time.monotonic() - start
    batcher.stop()
    assert seen == [[0]] and 0.025 <= waited < 0.5


def test_queries_arriving_within_the_wait_join_the_first_one():
    batcher, seen = collect(max_batch=8, max_wait_ms=200)
    batcher.put(pending(0))
    time.sleep(0.02)
    batcher.put(pending(1))
    while not seen:
        time.sleep(0.001)
    batcher.stop()
    assert seen == [[0, 1]]


def test_zero_wait_runs_what_waits_and_queries_arriving_while_busy_form_the_next_batch():
    running, release = threading.Event(), threading.Event()
    seen: list[list[int]] = []

    def handler(batch: list[Pending]) -> None:
        seen.append([p.query for p in batch])
        running.set()
        release.wait(5)

    batcher = DynamicBatcher(max_batch=8, max_wait_ms=0, handler=handler)
    batcher.start()
    batcher.put(pending(0))
    assert running.wait(5)  # the first query ran alone, at once
    batcher.put_many([pending(1), pending(2)])
    release.set()
    batcher.stop()
    assert seen == [[0], [1, 2]]


def test_stop_runs_everything_still_waiting_and_ends_the_worker():
    batcher, seen = collect(max_batch=2, max_wait_ms=10_000)
    batcher.put_many([pending(i) for i in range(5)])
    batcher.stop()
    assert sorted(q for batch in seen for q in batch) == list(range(5))
    assert not any(t.name == "isocost-batcher" and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("max_batch, max_wait_ms", [(0, 1.0), (4, -1.0)])
def test_bad_settings_are_refused(max_batch: int, max_wait_ms: float):
    with pytest.raises(ValueError):
        DynamicBatcher(max_batch, max_wait_ms, lambda batch: None)


def test_with_two_workers_a_batch_starts_while_the_one_before_still_runs():
    """``workers = 2`` (a server study's ``max_batches_in_flight``): two single-query batches overlap; with one
    worker the second waits for the first."""
    for workers, overlap in ((2, True), (1, False)):
        spans = _spans(workers)
        (_, a_end), (b_start, _) = sorted(spans)
        assert (b_start < a_end) is overlap, (workers, spans)


def _spans(workers: int) -> list[tuple[float, float]]:
    """Two single-query batches, each taking 0.3 s: when each ran."""
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def handler(batch: list[Pending]) -> None:
        start = time.monotonic()
        time.sleep(0.3)
        with lock:
            spans.append((start, time.monotonic()))

    batcher = DynamicBatcher(1, 0, handler, workers=workers)
    batcher.start()
    batcher.put_many([pending(0), pending(1)])
    batcher.stop()
    assert batcher.batches == 2
    return spans


def test_many_workers_never_run_an_empty_batch_nor_lose_a_query():
    seen: list[list[int]] = []
    lock = threading.Lock()

    def handler(batch: list[Pending]) -> None:
        with lock:
            seen.append([p.query for p in batch])
        time.sleep(0.002)

    batcher = DynamicBatcher(3, 5, handler, workers=4)
    batcher.start()
    for n in range(60):
        batcher.put(pending(n))
        time.sleep(0.001)
    batcher.stop()
    assert all(1 <= len(batch) <= 3 for batch in seen), seen
    assert sorted(q for batch in seen for q in batch) == list(range(60)) and batcher.batches == len(seen)


def test_workers_must_be_at_least_one():
    with pytest.raises(ValueError, match="workers must be at least 1"):
        DynamicBatcher(1, 0, lambda batch: None, workers=0)
