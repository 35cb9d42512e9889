"""A declared dynamic batcher: queries that arrive while the model is busy are run together.

:class:`DynamicBatcher` takes each query as it arrives (:meth:`DynamicBatcher.put`, from the load generator's
thread: it only appends) and runs a worker thread that forms batches by two declared rules: a batch starts with the
oldest waiting query, takes every query that arrives until it holds ``max_batch`` queries or ``max_wait_ms`` have
passed since that first query arrived, then goes to ``handler`` (the model) at once. ``max_wait_ms = 0`` runs what
is waiting, never waiting for more. One worker (the default): the model runs one batch at a time, as the offline
pass does; ``workers = N`` lets N batches run at once (a server study's ``max_batches_in_flight``, for an engine
that batches continuously what it is sent).

The batcher knows nothing of LoadGen or of models (pure threads, testable alone): the system under test
(:mod:`runner.trial.serving.sut`) gives it the handler. An exception from the handler is the handler's to report;
the batcher keeps running the next batches, so the load generator never waits forever.

Example::

    batcher = DynamicBatcher(max_batch=8, max_wait_ms=5.0, handler=lambda batch: print(len(batch)))
    batcher.start()
    batcher.put(Pending(query=1, index=0, arrived_ns=time.monotonic_ns()))
    batcher.stop()      # runs what is still waiting, then joins the worker
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pending:
    """One query waiting: the load generator's response id, the sample index, when it arrived (monotonic ns), and
    its place in the order of arrival."""

    query: int
    index: int
    arrived_ns: int
    seq: int = 0


class DynamicBatcher:
    """Batches of at most ``max_batch`` queries, the first waiting at most ``max_wait_ms``, run by ``workers``
    workers (1: one batch at a time; more: a batch starts as soon as it forms, while at most ``workers - 1`` others
    still run)."""

    def __init__(self, max_batch: int, max_wait_ms: float, handler: Callable[[list[Pending]], None],
                 workers: int = 1) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if not 0 <= max_wait_ms < 3_600_000:
            raise ValueError(f"max_wait_ms must be from 0 to an hour, got {max_wait_ms}")
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.max_batch = max_batch
        self.max_wait_ns = int(max_wait_ms * 1_000_000)
        self.handler = handler
        self.batches = 0
        self._waiting: deque[Pending] = deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._workers = [threading.Thread(target=self._run, name=f"isocost-batcher-{n}", daemon=True)
                         for n in range(workers)]

    def start(self) -> None:
        for worker in self._workers:
            worker.start()

    def put(self, pending: Pending) -> None:
        with self._ready:
            self._waiting.append(pending)
            self._ready.notify()

    def put_many(self, pendings: list[Pending]) -> None:
        with self._ready:
            self._waiting.extend(pendings)
            self._ready.notify()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Run what is still waiting, then end the worker (``timeout_s``: the longest wait for it)."""
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            if worker.is_alive():
                worker.join(max(deadline - time.monotonic(), 0.0))

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self.handler(batch)

    def _next_batch(self) -> list[Pending] | None:
        """The next batch by the declared rule; None once stopped with nothing waiting. The oldest waiting query's
        deadline is read again after every wait: with several workers another may have taken it meanwhile."""
        with self._ready:
            while True:
                while not self._waiting:
                    if self._stopping:
                        return None
                    self._ready.wait()
                left_ns = self._waiting[0].arrived_ns + self.max_wait_ns - time.monotonic_ns()
                if len(self._waiting) >= self.max_batch or left_ns <= 0 or self._stopping:
                    count = min(self.max_batch, len(self._waiting))
                    self.batches += 1
                    batch = [self._waiting.popleft() for _ in range(count)]
                    if self._waiting:
                        self._ready.notify()  # another worker may form the next batch now
                    return batch
                self._ready.wait(left_ns / 1e9)
