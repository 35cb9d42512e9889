"""The system under test of a serving run: a task's model behind a declared dynamic batcher, every answer kept.

:class:`ServingSystem` is what MLPerf LoadGen drives (:mod:`runner.trial.serving.loadgen_run` hands its
callbacks to LoadGen): the query sample library is the corpus's ``(id, text)`` pairs, in order (the trial repeats
the corpus in it, whole, so that each id is served as often: :mod:`runner.trial.serving.trial_pass`), so a sample
index is a position in that library and its id stays the corpus's id (an id always names the same text);
:meth:`load_samples` tokenizes what LoadGen loads (before the timed run: MLPerf's library holds its samples
ready, as the offline pass's inputs are read before it),
:meth:`issue_queries` only hands each query to the :class:`~runner.trial.serving.batcher.DynamicBatcher`, and the
batcher's worker runs one batch through the model (anything with ``tokenize(texts)`` and
``predict_encoded(features)``: a :class:`~runner.trial.tasks.base.TaskModel`) and answers each query.

Every answer is the task's own line for its id (``lines(ids, outputs)``: the task's ``TrialTask.lines``, the
offline file's line), sent to LoadGen as the response bytes (what its accuracy log keeps) and stored by query and
id (:meth:`write`: ``answers.jsonl``). Per query the harness keeps when it was issued to the system, when its batch
started, its first token and its completion, in monotonic nanoseconds from the system's start
(``queries.jsonl``). A model that ``reports_first_token`` (a generator) calls ``on_first_token`` when rows of the batch
have their first token: ``on_first_token()`` for every row at once (the transformers generator's first step),
``on_first_token(rows)`` for those rows only (vLLM's engine step where each request produced its first token);
the system tells LoadGen then (``FirstTokenComplete``), and a row never reported is reported at its completion,
so that LoadGen sees a first token before every completion. A batch whose model call fails answers its queries
empty, so LoadGen ends, and records the error on each: a run with an unanswered query is never accepted.

LoadGen itself is reached only through a :class:`Responder` (the completion calls), so this module imports no
LoadGen and is tested with a fake one.

Example::

    system = ServingSystem(model, [("a1", "text one"), ("a2", "text two")], TRIAL_TASK.lines,
                           BatcherSettings(max_batch=8, max_wait_ms=5.0))
    system.start(responder)     # the batcher's worker
    ...                         # LoadGen calls load_samples, issue_queries
    system.stop(); system.write(out)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from protocol.io.safe_write import write_text_atomic
from runner.trial.serving.batcher import DynamicBatcher, Pending

ANSWERS_FILE = "answers.jsonl"
QUERIES_FILE = "queries.jsonl"


class ServedModel(Protocol):
    """What the system calls of the model: a :class:`~runner.trial.tasks.base.TaskModel`'s serving hooks (their
    defaults those of a model that generates no tokens and runs one batch at a time)."""

    on_first_token: Callable[..., None] | None = None

    @property
    def reports_first_token(self) -> bool:
        return False

    def tokenize(self, texts: list[str]) -> Any: ...

    def predict_encoded(self, features: Any) -> Any: ...

    def predict_concurrent(self, features: Any, on_first_token: Callable[..., None] | None) -> Any:
        why = f"{type(self).__name__} runs one batch at a time"  # two statements: not an abstract body
        raise NotImplementedError(why)


class Responder(Protocol):
    """The load generator's side: a query answered (``response``: its bytes, ``n_tokens``) or its first token."""

    def complete(self, answered: Sequence[tuple[int, bytes, int]]) -> None: ...

    def first_token(self, queries: Sequence[int]) -> None: ...


@dataclass(frozen=True)
class BatcherSettings:
    """The declared dynamic batcher: at most ``max_batch`` queries a batch, the first waiting ``max_wait_ms``, at most
    ``in_flight`` batches running at once (more than 1: the model runs batches concurrently, ``predict_concurrent``)."""

    max_batch: int
    max_wait_ms: float
    in_flight: int = 1


@dataclass
class QueryRecord:
    """One query as the harness saw it (``queries.jsonl``): times in ns from the system's start."""

    seq: int  # the order queries reached the system (LoadGen's sample_seq in its trace: one sample a query)
    query: int  # LoadGen's response id (an opaque number)
    index: int  # the sample index: the corpus position
    id: str
    issued_ns: int
    started_ns: int
    first_token_ns: int | None
    completed_ns: int
    batch: int
    batch_size: int
    n_tokens: int
    error: str | None = None


class ServingSystem:
    """A task's model behind a dynamic batcher, answering LoadGen's queries and keeping every answer."""

    def __init__(self, model: ServedModel, samples: Sequence[tuple[str, str]],
                 lines: Callable[[Sequence[str], Any], str], batcher: BatcherSettings,
                 token_counts: Callable[[Any], Sequence[int] | None] | None = None) -> None:
        if not samples:
            raise ValueError("a serving run needs at least one sample")
        texts: dict[str, str] = {}
        if any(texts.setdefault(ident, text) != text for ident, text in samples):
            raise ValueError("a sample id names two texts: an answer is judged by its id")
        self.model, self.samples, self.lines, self.token_counts = model, list(samples), lines, token_counts
        self.settings = batcher
        self.features: dict[int, Any] = {}
        self.records: list[QueryRecord] = []
        self.answers: dict[int, str] = {}  # response id → the task's line
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._origin_ns = time.monotonic_ns()
        self._batcher = DynamicBatcher(batcher.max_batch, batcher.max_wait_ms, self._run_batch, batcher.in_flight)
        self._responder: Responder | None = None
        self._batch_number = 0
        self._issued = 0

    # --- the query sample library (LoadGen's QSL callbacks) ------------------------------------------------------

    def load_samples(self, indices: Sequence[int]) -> None:
        """Tokenize the samples LoadGen loads (one call for all of them)."""
        wanted = [i for i in indices if i not in self.features]
        if wanted:
            encoded = self.model.tokenize([self.samples[i][1] for i in wanted])
            self.features.update(zip(wanted, encoded, strict=True))

    def unload_samples(self, indices: Sequence[int]) -> None:
        for index in indices:
            self.features.pop(index, None)

    # --- the system under test (LoadGen's SUT callbacks) ---------------------------------------------------------

    def start(self, responder: Responder) -> None:
        self._responder = responder
        self._origin_ns = time.monotonic_ns()
        self._batcher.start()

    def issue_queries(self, queries: Sequence[Any]) -> None:
        """LoadGen's thread: each query (``.id``, ``.index``) handed to the batcher, nothing else."""
        now = time.monotonic_ns()
        with self._lock:
            first, self._issued = self._issued, self._issued + len(queries)
        self._batcher.put_many([Pending(query=int(q.id), index=int(q.index), arrived_ns=now, seq=first + i)
                                for i, q in enumerate(queries)])

    def flush_queries(self) -> None:
        """Nothing is held back: the batcher runs what waits once its wait is over."""

    def stop(self) -> None:
        self._batcher.stop()

    @property
    def batches(self) -> int:
        return self._batcher.batches

    # --- one batch ------------------------------------------------------------------------------------------------

    def _run_batch(self, batch: list[Pending]) -> None:
        assert self._responder is not None, "start() the system before LoadGen issues queries"
        started = time.monotonic_ns()
        with self._lock:
            number, self._batch_number = self._batch_number, self._batch_number + 1
        first: dict[int, int] = {}  # row of the batch → its first token (monotonic ns)
        ids = [self.samples[p.index][0] for p in batch]
        tokens = self.model.reports_first_token
        try:
            hook = (lambda rows=None: self._first_token(batch, first, rows)) if tokens else None
            outputs = self._predict([self.features[p.index] for p in batch], hook)
            texts = self.lines(ids, outputs).splitlines()
            counted = self.token_counts(outputs) if self.token_counts else None
            counts = list(counted) if counted is not None else [1] * len(batch)
            if len(texts) != len(batch) or len(counts) != len(batch):
                raise ValueError(f"{len(batch)} queries gave {len(texts)} answer lines and {len(counts)} token counts")
            error = None
        except Exception as exc:  # noqa: BLE001 - the batch fails, the run goes on (the error is kept per query)
            texts, counts, error = [""] * len(batch), [0] * len(batch), f"{type(exc).__name__}: {exc}"
        completed = time.monotonic_ns()
        if tokens and len(first) < len(batch):  # LoadGen needs a first token before each completion: told now
            self._first_token(batch, first, [row for row in range(len(batch)) if row not in first], completed)
        self._responder.complete([(p.query, text.encode("utf-8"), n)
                                  for p, text, n in zip(batch, texts, counts, strict=True)])
        self._keep(batch, ids, texts, counts, error, (number, started, completed), first if tokens else {})

    def _predict(self, features: list[Any], hook: Callable[..., None] | None) -> Any:
        """One batch through the model: with batches in flight at once, each with its own first-token hook
        (``predict_concurrent``); else the model's ``on_first_token`` set for this batch."""
        if self.settings.in_flight > 1:
            return self.model.predict_concurrent(features, hook)
        if hook is not None:
            self.model.on_first_token = hook
        return self.model.predict_encoded(features)

    def _first_token(self, batch: list[Pending], first: dict[int, int], rows: Sequence[int] | None,
                     at_ns: int | None = None) -> None:
        """The first token of ``rows`` of the batch (None: every row), each told to LoadGen once."""
        now = time.monotonic_ns() if at_ns is None else at_ns
        new = [row for row in (range(len(batch)) if rows is None else rows) if row not in first]
        if new:
            first.update((row, now) for row in new)
            assert self._responder is not None
            self._responder.first_token([batch[row].query for row in new])

    def _keep(self, batch: list[Pending], ids: list[str], texts: list[str], counts: list[int], error: str | None,
              times: tuple[int, int, int], first: dict[int, int]) -> None:
        number, started, completed = times
        origin = self._origin_ns
        with self._lock:
            for row, (pending, ident, text, n_tokens) in enumerate(zip(batch, ids, texts, counts, strict=True)):
                self.records.append(QueryRecord(
                    seq=pending.seq, query=pending.query, index=pending.index, id=ident,
                    issued_ns=pending.arrived_ns - origin, started_ns=started - origin,
                    first_token_ns=first[row] - origin if row in first else None,
                    completed_ns=completed - origin, batch=number, batch_size=len(batch), n_tokens=n_tokens,
                    error=error))
                if error is None:
                    self.answers[pending.query] = text
            if error is not None:
                self.errors.append(error)

    # --- after the run --------------------------------------------------------------------------------------------

    @property
    def unanswered(self) -> int:
        return sum(1 for record in self.records if record.error is not None)

    def write(self, out: Path) -> None:
        """``answers.jsonl`` (each answer: ``query``, ``index`` and the task's line for its id) and
        ``queries.jsonl`` (each query's :class:`QueryRecord`), in completion order."""
        answers = []
        for record in self.records:
            if record.query in self.answers:
                line = json.loads(self.answers[record.query])
                answers.append(json.dumps({"seq": record.seq, "query": record.query, "index": record.index, **line})
                               + "\n")
        write_text_atomic(out / ANSWERS_FILE, "".join(answers), root=out)
        write_text_atomic(out / QUERIES_FILE, "".join(json.dumps(asdict(r)) + "\n" for r in self.records), root=out)
