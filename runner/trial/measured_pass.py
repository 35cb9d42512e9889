"""The measured pass: corpus in, the task's outputs and ``batches.jsonl`` out, ``pass_s`` timed.

Measured boundary (offline): corpus read, tokenization, host→device transfer, inference and
materialisation of the task's outputs on the host (their JSON lines included). The incremental writes and
flushes of the task's pass files (the one :class:`~runner.trial.tasks.sink.OutputSink`) are timed apart and
excluded from ``pass_s``; so are the writes of
``batches.jsonl`` and the device-memory probe after each batch. On a GPU the device is synchronised
before the timer starts and before it stops; ``gpu_pass_s`` is device time: the sum, over the
pass's forwards, of CUDA events recorded just before and after each forward.

Per-batch record (``batches.jsonl``, one line per batch, flushed per batch): see
:func:`runner.trial.batches.batch_record`, plus the task's own figures where its model keeps them
(``take_batch_figures``: a generation's ``prefill_s``, ``decode_s``, ``generated_tokens`` and
``decode_steps``); ``batch_s`` is host wall time of the batch inside the
measured boundary (its writes excluded), ``device_s`` the CUDA-event time of its forwards (null on
CPU). With ``halve-batch-on-oom`` a batch retried in halves is still one record (the retry's time
included).

Energy: counters read right before the pass's start and right after its end
(``runner.trial.energy``); ``None`` with a reason when not readable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from protocol.corpus import Record, read_corpus
from protocol.io.safe_write import write_handle
from runner.trial.batches import batch_record
from runner.trial.faults import is_oom
from runner.trial.measure import clock
from runner.trial.state import PassContext
from runner.trial.tasks.base import TaskModel
from runner.trial.tasks.sink import OutputSink


class MeasuredPass:
    """One measured pass of the task's ``model`` over the spec's corpus, filling the context's trial state."""

    def __init__(self, context: PassContext, model: TaskModel) -> None:
        from runner.trial.tasks import trial_task

        self.context, self.state = context, context.state
        self.model = model
        self.task = trial_task(context.spec.task)
        self.variant = context.variant
        self.write_s = 0.0
        self.device_s_total: float | None = 0.0 if self.variant.device == "cuda" else None
        self.records: tuple[Record, ...] = ()
        self.encoded: list[dict[str, list[int]]] = []
        self.buckets: list[str] = []

    def run(self) -> tuple[Record, ...]:
        """Run the pass; returns the corpus records read inside it."""
        context, state = self.context, self.state
        gpu_meter, cpu_meter = self._meters()
        out = context.out
        with OutputSink(out, self.task) as sink, write_handle(out / "batches.jsonl", out) as batch_sink:
            context.sync()
            gpu_meter.start()
            cpu_meter.start()
            pass_start = clock()
            order = self._read_corpus(Path(context.spec.corpus_path))
            for batch_no, start in enumerate(range(0, len(order), self.variant.batch_size)):
                self._batch(batch_no, order[start : start + self.variant.batch_size], sink, batch_sink)
            context.sync()
            pass_total = clock() - pass_start
            state.gpu_energy_j, state.gpu_energy_reason = gpu_meter.stop()
            state.cpu_energy_j, state.cpu_energy_reason = cpu_meter.stop()
        state.phases["pass_s"] = pass_total - self.write_s
        state.pass_write_s = self.write_s
        if self.variant.device == "cuda":
            state.phases["gpu_pass_s"] = self.device_s_total
        return self.records

    def _meters(self) -> tuple[Any, Any]:
        """Energy meters for the pass (GPU: the card's counter; CPU: RAPL); on a GPU, peaks reset and events on."""
        from runner.trial.energy import NoMeter, RaplMeter
        from runner.trial.env import gpu_energy_meter

        if self.variant.device != "cuda":
            return NoMeter("CPU trial: no GPU energy counter"), RaplMeter()
        self.context.torch.cuda.reset_peak_memory_stats()
        self.state.peaks_reset = True
        self.model.forward_events = []
        return gpu_energy_meter(self.context.device), RaplMeter()

    def _read_corpus(self, path: Path) -> list[int]:
        """Read and tokenize the corpus (inside the pass); returns the order the inputs run in."""
        self.records = read_corpus(path, require_label=False)  # labels and references are the host's to check
        self.state.expected = len(self.records)
        self.encoded = self.model.tokenize([r.text for r in self.records])
        self.buckets = [self.context.bucket(r.id) for r in self.records]
        order = list(range(len(self.records)))
        if self.variant.length_grouping == "sort":
            order.sort(key=lambda i: (len(self.encoded[i]["input_ids"]), i))
        return order

    def _batch(self, batch_no: int, index: list[int], sink: OutputSink, batch_sink: IO[str]) -> None:
        """One batch: predict and write it, probe device memory, write its record; only the prediction counts."""
        self.model.take_batch_figures()  # what the warm-up or an earlier batch left
        batch_start = clock()
        batch_write_s = self._predict_and_write(batch_no, index, sink)
        batch_s = clock() - batch_start - batch_write_s
        figures = self.model.take_batch_figures()  # the task's own per-batch figures
        device_s = drain_forward_events(self.model)
        probe_start = clock()
        self.state.sample_device_memory(self.context.torch, self.variant.device)
        self.write_s += clock() - probe_start  # excluded from pass_s, like the writes
        if self.device_s_total is not None and device_s is not None:
            self.device_s_total += device_s
        line = json.dumps({**batch_record(batch_no, index, self.encoded, self.buckets, batch_s, device_s),
                           **figures}) + "\n"
        write_start = clock()
        batch_sink.write(line)
        batch_sink.flush()
        self.write_s += batch_write_s + (clock() - write_start)

    def _predict_and_write(self, batch_no: int, index: list[int], sink: OutputSink) -> float:
        """Predict one batch and write it; returns seconds spent writing."""
        context, state = self.context, self.state
        retry = False
        try:
            context.fault.before_batch(batch_no, len(index))
            outputs = self.model.predict_encoded([self.encoded[i] for i in index])
            outputs = context.fault.perturb([self.records[i].id for i in index], outputs, self.model, self.task)
        except BaseException as exc:
            if self.variant.resume != "halve-batch-on-oom" or len(index) == 1 or not is_oom(exc):
                raise
            retry = True
        if retry:
            # A declared resume variant: retry this batch in halves; the time stays in the pass. Out of
            # the handler, so the failed batch's tensors (held by the traceback) are freed first.
            state.oom_events += 1
            if self.variant.device == "cuda":
                context.torch.cuda.empty_cache()
            half = (len(index) + 1) // 2
            return (self._predict_and_write(batch_no, index[:half], sink)
                    + self._predict_and_write(batch_no, index[half:], sink))
        lines = context.fault.corrupt(sink.lines([self.records[i].id for i in index], outputs), state.completed,
                                    state.expected)
        write_start = clock()
        sink.write(lines, outputs)
        state.completed += len(index)
        return clock() - write_start


def drain_forward_events(model: TaskModel) -> float | None:
    """Device seconds of the forwards since the last call (their events are complete: the batch's
    results were copied to the host, which waits for the stream)."""
    events = model.forward_events
    if events is None:
        return None
    seconds = sum(start.elapsed_time(stop) for start, stop in events) / 1000.0
    events.clear()
    return seconds
