"""A server study's pass (issue 36): MLPerf LoadGen's Server scenario against the trial's loaded model, instead of
the offline measured pass, and the task's own output file written from the answers, for the unchanged gate.

The trial loads and warms the model as for an offline pass (``runner.trial.run``), then :class:`ServingPass`:

1. reads the corpus and builds LoadGen's query sample library from it: the corpus, in order, repeated whole
   ``copies`` times (:func:`library`), so that a sample's id is the corpus's id and every id is in it equally often;
2. runs LoadGen's Server scenario (:func:`~runner.trial.serving.loadgen_run.run_server`) at the study's one target
   rate, with LoadGen's ``performance_issue_unique``: each library sample is issued exactly once, in LoadGen's
   seeded random order, so every corpus id is asked ``copies`` times, among Poisson arrivals. The library holds at
   least ``min_query_count`` samples, at least the corpus, and (with ``min_duration_s``) more than the queries that
   duration needs at the rate (:data:`DURATION_MARGIN`). The system under test is the model behind the declared
   dynamic batcher: the largest batch is the variant's ``batch_size``, the longest wait ``[traffic] max_wait_ms``,
   at most ``max_batches_in_flight`` batches at once (above 1 only for a model that runs batches concurrently:
   ``concurrent``, vLLM's HTTP server; refused otherwise);
3. keeps LoadGen's logs and the harness's ``answers.jsonl`` and ``queries.jsonl`` in the trial directory;
4. writes the task's JSON-lines output file (``predictions.jsonl`` for classification) from the answers, one line
   per corpus id in corpus order: the id's FIRST answer (in the order queries reached the system). Every repeat of
   an id must give the same answer (:func:`same_answer`: equal fields, numbers within :data:`REPEAT_TOLERANCE`:
   a batch of other queries pads differently); an id with a failed query, a malformed answer or repeats that
   differ is left OUT of the file, and so is an id LoadGen never issued (a run stopped by ``max_duration_s``):
   the host's gate, unchanged, then refuses the pass as incomplete. Why, per id, is in the manifest;
5. records ``pass_s`` (from the first query issued to the last completed, as the system saw them) and the
   manifest's ``serving`` block (:func:`serving_block`): LoadGen's VALID/INVALID and each condition, the early
   stopping verdict, the latency at the declared percentile against the bound, the scheduled and completed rates
   against the target, and the answers per id.

The test-only faults act here as in the offline pass (``runner.trial.faults``): ``disagree`` changes the answers
of its ids (every repeat alike), ``sleep-per-batch`` and the out-of-memory faults act before a served batch (a
failed batch's queries are answered empty, and their ids left out), ``corrupt`` corrupts the written file.

Example::

    serving = ServingPass(context, model)      # in Trial.run, for a spec with ``traffic``
    records = serving.run()
    serving.block["result"]                    # "VALID": the manifest's ``serving`` block
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.corpus import Record, read_corpus
from protocol.io.safe_write import write_text_atomic
from protocol.records.codec import from_dict
from protocol.study.traffic import SERVING_FILES as traffic_files
from protocol.study.traffic import SERVING_REQUIRES, Traffic
from runner.trial.batches import batch_record
from runner.trial.serving.loadgen_run import ServerSettings, ServingRun, run_server
from runner.trial.serving.summary import DETAIL_FILE, SUMMARY_FILE
from runner.trial.serving.sut import ANSWERS_FILE, QUERIES_FILE, BatcherSettings, ServingSystem
from runner.trial.state import PassContext
from runner.trial.tasks.sink import OutputSink
from runner.trial.torch_settings import Refusal

if TYPE_CHECKING:
    from runner.trial.tasks.base import TaskModel, TrialTask

#: The serving run's files the host seals beside the task's outputs (``outputs_sha256``; protocol.study.traffic declares
#: them for the host). LoadGen's accuracy log (empty in performance mode) and its trace are kept, not sealed.
SERVING_FILES = (ANSWERS_FILE, QUERIES_FILE, SUMMARY_FILE, DETAIL_FILE)
assert SERVING_FILES == traffic_files, "protocol.study.traffic.SERVING_FILES names the files this pass writes"
#: The largest difference of a number between two answers for one id (a score: padding differs by batch).
REPEAT_TOLERANCE = 1e-4
#: With ``min_duration_s``, the library holds this share more than ``rate × min_duration_s`` (plus ten): Poisson
#: arrivals vary, and with each sample issued once LoadGen stops when the library is spent.
DURATION_MARGIN = 1.2
_LISTED = 20  # ids named per problem in the manifest


def library(records: Sequence[Record], traffic: Traffic, rate_qps: float) -> tuple[list[tuple[str, str]], int]:
    """LoadGen's query sample library: the corpus's ``(id, text)`` repeated whole; returns it and the copies.

    Example: 12 inputs, ``min_query_count = 44`` → 4 copies, 48 samples (each id served 4 times)."""
    wanted = max(traffic.min_query_count, len(records))
    if traffic.min_duration_s > 0:
        wanted = max(wanted, math.ceil(rate_qps * traffic.min_duration_s * DURATION_MARGIN) + 10)
    copies = math.ceil(wanted / len(records))
    return [(r.id, r.text) for _ in range(copies) for r in records], copies


def same_answer(first: Any, other: Any, tolerance: float = REPEAT_TOLERANCE) -> bool:
    """Two answers for one id agree: the same fields, numbers within ``tolerance`` (inside lists too: a vector,
    a generation's log-probabilities), everything else equal."""
    if _number(first) and _number(other):
        return bool(abs(first - other) <= tolerance)
    if isinstance(first, dict) and isinstance(other, dict):
        return first.keys() == other.keys() and all(same_answer(v, other[k], tolerance) for k, v in first.items())
    if isinstance(first, list) and isinstance(other, list):
        return len(first) == len(other) and all(same_answer(a, b, tolerance) for a, b in zip(first, other, strict=True))
    return bool(first == other)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass
class OfflineAnswers:
    """The task's offline lines chosen from a run's answers, and what kept an id out of them."""

    lines: list[str]
    served: Counter[str]
    failed: list[str]
    malformed: list[str]
    differing: list[str]
    missing: list[str]


def offline_answers(ids: Sequence[str], system: ServingSystem) -> OfflineAnswers:
    """One line per corpus id, in corpus order: its first answer, unless a query for it failed, an answer was not
    its line, or its repeats differ (then it is left out, and named)."""
    first: dict[str, tuple[str, dict[str, Any]]] = {}
    served: Counter[str] = Counter()
    failed, malformed, differing = set(), set(), set()
    for record in sorted(system.records, key=lambda r: r.seq):
        served[record.id] += 1
        if record.error is not None or record.query not in system.answers:
            failed.add(record.id)
            continue
        text = system.answers[record.query]
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if not isinstance(line, dict) or line.get("id") != record.id:
            malformed.add(record.id)
        elif record.id not in first:
            first[record.id] = (text, line)
        elif not same_answer(first[record.id][1], line):
            differing.add(record.id)
    left_out = failed | malformed | differing
    return OfflineAnswers(
        lines=[first[i][0] + "\n" for i in ids if i in first and i not in left_out], served=served,
        failed=[i for i in ids if i in failed], malformed=[i for i in ids if i in malformed],
        differing=[i for i in ids if i in differing], missing=[i for i in ids if served[i] == 0])


class _FaultedModel:
    """The trial's model as the batcher calls it, with the test-only fault of the trial before each batch; a
    generator's first-token hook (``on_first_token``) is the model's own."""

    def __init__(self, context: PassContext, model: TaskModel) -> None:
        self.context, self.model, self.batch_no = context, model, 0
        self._lock = threading.Lock()  # batches in flight at once number themselves in turn

    @property
    def reports_first_token(self) -> bool:
        return self.model.reports_first_token

    @property
    def on_first_token(self) -> Any:
        return self.model.on_first_token

    @on_first_token.setter
    def on_first_token(self, hook: Any) -> None:
        self.model.on_first_token = hook

    def tokenize(self, texts: list[str]) -> Any:
        return self.model.tokenize(texts)

    def predict_encoded(self, features: Any) -> Any:
        self._before(len(features))
        return self.model.predict_encoded(features)

    def predict_concurrent(self, features: Any, hook: Any) -> Any:
        self._before(len(features))
        return self.model.predict_concurrent(features, hook)

    def _before(self, size: int) -> None:
        with self._lock:
            number, self.batch_no = self.batch_no, self.batch_no + 1
        self.context.fault.before_batch(number, size)


class ServingPass:
    """One serving run of the trial's loaded ``model`` at the spec's traffic, filling the context's trial state;
    :attr:`block` is then the manifest's ``serving`` block."""

    def __init__(self, context: PassContext, model: TaskModel) -> None:
        from runner.trial.tasks import trial_task

        assert context.spec.traffic is not None, "a serving pass needs the study's [traffic]"
        self.context, self.model = context, model
        self.task: TrialTask = trial_task(context.spec.task)
        self.traffic = from_dict(Traffic, context.spec.traffic)
        self.block: dict[str, Any] = {}

    def _lines(self, ids: Sequence[str], outputs: Any) -> str:
        """The task's lines for one served batch (the ``disagree`` fault changes its ids' outputs first)."""
        outputs = self.context.fault.perturb(list(ids), outputs, self.model, self.task)
        return self.task.answer(ids, outputs)

    def run(self) -> tuple[Record, ...]:
        """Serve, write the task's output file and batches.jsonl; returns the corpus records."""
        context, traffic = self.context, self.traffic
        missing = [m for m in SERVING_REQUIRES if importlib.util.find_spec(m) is None]  # e.g. a .venv-vllm without
        if missing:
            raise Refusal(f"a server study's trial needs the Python module {', '.join(missing)} (mlcommons-loadgen), "
                          "which this trial's environment lacks (make setup installs it; make vllm for engine vllm)")
        records = read_corpus(Path(context.spec.corpus_path), require_label=False)
        state = context.state
        state.expected = len(records)
        rate = context.variant.rate_qps or traffic.rates_qps[0]  # the variant's rate (a version-4 spec: the one rate)
        samples, copies = library(records, traffic, rate)
        if traffic.max_batches_in_flight > 1 and not self.model.concurrent:
            raise Refusal(f"max_batches_in_flight = {traffic.max_batches_in_flight} needs an engine that runs batches "
                          f"at once; engine {context.variant.engine} as loaded runs one at a time")
        settings = dataclasses.replace(ServerSettings.from_traffic(traffic, rate), issue_unique=True)
        if settings.token_latencies and not self.model.reports_first_token:
            raise Refusal(f"a server study of task {self.task.name} measures time to first token; engine "
                          f"{context.variant.engine}'s model reports no first token (TaskModel.reports_first_token)")
        batcher = BatcherSettings(context.variant.batch_size, traffic.max_wait_ms, traffic.max_batches_in_flight)
        model = _FaultedModel(context, self.model)
        system = ServingSystem(model, samples, self._lines, batcher, self.task.token_counts)
        run = run_server(system, settings, context.out)
        times = [(r.issued_ns, r.completed_ns) for r in system.records]
        state.phases["pass_s"] = (max(c for _, c in times) - min(i for i, _ in times)) / 1e9 if times else None
        if not times:
            state.reasons["pass_s"] = "the serving run answered no query"
        why = "not measured in a serving run: energy per request is not wired yet"
        state.gpu_energy_reason = state.cpu_energy_reason = why
        answers = offline_answers([r.id for r in records], system)
        self._write_outputs(answers.lines, len(records))
        state.completed = len(answers.lines)
        self._write_batches(system, records)
        self.block = serving_block(run, settings, system, answers, copies, len(records))
        return records

    def _write_outputs(self, lines: list[str], inputs: int) -> None:
        """The task's pass files from the chosen answers: the answers themselves when they are the offline lines,
        else the outputs read back from them (an embedding's vectors) written as the offline pass writes them."""
        context, task = self.context, self.task
        parsed = [json.loads(line) for line in lines]
        outputs = task.answer_outputs(parsed)
        if outputs is None:
            text = context.fault.corrupt("".join(lines), 0, inputs)
            write_text_atomic(context.out / task.lines_file, text, root=context.out)
            return
        with OutputSink(context.out, task) as sink:
            if parsed:
                ids = [answer["id"] for answer in parsed]
                sink.write(context.fault.corrupt(sink.lines(ids, outputs), 0, inputs), outputs)

    def _write_batches(self, system: ServingSystem, records: Sequence[Record]) -> None:
        """``batches.jsonl``: one line per served batch (the queries the batcher ran together, its model time)."""
        encoded = self.model.tokenize([r.text for r in records])
        buckets = [self.context.bucket(r.id) for r in records]
        batches: dict[int, list[Any]] = {}
        for record in sorted(system.records, key=lambda r: r.seq):
            batches.setdefault(record.batch, []).append(record)
        lines = []
        for number, members in sorted(batches.items()):
            index = [member.index % len(records) for member in members]
            seconds = (members[0].completed_ns - members[0].started_ns) / 1e9
            lines.append(json.dumps(batch_record(number, index, encoded, buckets, seconds, None)) + "\n")
        write_text_atomic(self.context.out / "batches.jsonl", "".join(lines), root=self.context.out)


def serving_block(run: ServingRun, settings: ServerSettings, system: ServingSystem, answers: OfflineAnswers,
                  copies: int, inputs: int) -> dict[str, Any]:
    """The manifest's ``serving`` block: what was asked, what LoadGen said, what the answers were."""
    summary = run.summary
    bound = settings.latency_bound_ms
    measured = summary.percentile_ms("latency", settings.percentile) if summary is not None else None
    return {
        "scenario": "server", "arrivals": "poisson", "target_qps": settings.target_qps,
        "max_batch": system.settings.max_batch, "max_wait_ms": system.settings.max_wait_ms,
        "max_batches_in_flight": system.settings.in_flight,
        "min_query_count": settings.min_query_count, "min_duration_s": settings.min_duration_s,
        "max_duration_s": settings.max_duration_s, "seed": settings.seed,
        "library_samples": len(system.samples), "corpus_copies": copies,
        "result": None if summary is None else ("VALID" if summary.valid else "INVALID"),
        "performance_constraints_met": summary.performance_constraints_met if summary else None,
        "min_duration_met": summary.min_duration_met if summary else None,
        "min_queries_met": summary.min_queries_met if summary else None,
        "early_stopping_met": summary.early_stopping_met if summary else None,
        "early_stopping": list(summary.early_stopping) if summary else [],
        "more_queries_needed": summary.more_queries_needed if summary else None,
        "scheduled_qps": summary.scheduled_qps if summary else None,
        "completed_qps": summary.completed_qps if summary else None,
        "percentile": settings.percentile, "latency_bound_ms": bound, "latency_at_percentile_ms": measured,
        "latency_within_bound": None if measured is None or bound is None else measured <= bound,
        **token_figures(run, settings, system),
        "queries": run.queries, "unanswered": run.unanswered, "errors": list(run.errors[:5]), "batches": run.batches,
        "answers": {
            "rule": f"one line per id: its first answer; every repeat equal (numbers within {REPEAT_TOLERANCE:g}), "
                    "else the id is left out of the output file",
            "inputs": inputs, "written": len(answers.lines),
            "served_per_id_min": 0 if answers.missing or not answers.served else min(answers.served.values()),
            **{key: getattr(answers, key)[:_LISTED] for key in ("missing", "failed", "malformed", "differing")},
            **{f"{key}_count": len(getattr(answers, key)) for key in ("missing", "failed", "malformed", "differing")},
        },
    }


def token_figures(run: ServingRun, settings: ServerSettings, system: ServingSystem) -> dict[str, Any]:
    """A generation's serving figures (LoadGen's token latencies): time to first token and time per output token
    at the declared percentile against their bounds, the output tokens and LoadGen's completed tokens per second.
    Empty for a task bounded by its whole answer's latency."""
    if not settings.token_latencies:
        return {}
    summary = run.summary
    figures: dict[str, Any] = {"token_latencies": True}
    for name, measure, bound in (("ttft", "first_token", settings.ttft_bound_ms),
                                 ("tpot", "tpot", settings.tpot_bound_ms)):
        measured = summary.percentile_ms(measure, settings.percentile) if summary is not None else None
        figures[f"{name}_bound_ms"] = bound
        figures[f"{name}_at_percentile_ms"] = measured
        figures[f"{name}_within_bound"] = None if measured is None or bound is None else measured <= bound
    answered = [r for r in system.records if r.error is None]
    figures["output_tokens"] = sum(r.n_tokens for r in answered)
    figures["completed_tokens_per_second"] = summary.completed_tokens_per_second if summary is not None else None
    return figures
