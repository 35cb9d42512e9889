"""A served answer per task (runner/trial/tasks: ``TrialTask.answer``, ``answer_outputs``, ``token_counts``) and the
first-token hooks a generator calls (protocol/tasks/generation/trial.py ``_StepRecorder``,
protocol/engines/vllm/trial/engine.py ``_report_first_tokens``, runner/trial/serving/sut.py ``ServingSystem``).

Classification and generation answer with their offline lines; an embedding's answer keeps its vector, read back
bit for bit into the files the embedding gate reads; a generation's answer carries its token count. The system
under test tells LoadGen each query's first token once, before its completion, at the step that produced it."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy
import pytest

from protocol.tasks.classification.trial import TRIAL_TASK as CLASSIFICATION
from protocol.tasks.embedding import VECTOR_IDS, VECTORS
from protocol.tasks.embedding.trial import TRIAL_TASK as EMBEDDING
from protocol.tasks.embedding.vector_file import read_vectors
from protocol.tasks.generation.trial import TRIAL_TASK as GENERATION
from protocol.tasks.generation.trial import _StepRecorder
from runner.trial.serving.sut import BatcherSettings, ServingSystem
from runner.trial.serving.trial_pass import offline_answers, same_answer
from runner.trial.tasks.sink import OutputSink

GENERATED = [{"tokens": [5, 9, 2], "text": "a b", "n_tokens": 3, "top_ids": [[5, 1], [9, 4], [2, 3]],
              "top_logprobs": [[-0.1, -2.5], [-0.2, -3.0], [-0.01, -5.0]]},
             {"tokens": [7], "text": "c", "n_tokens": 1, "top_ids": [[7, 1]], "top_logprobs": [[-0.3, -1.4]]}]


def test_a_generation_answers_with_its_offline_line_and_its_token_count() -> None:
    assert GENERATION.answer(["g1", "g2"], GENERATED) == GENERATION.lines(["g1", "g2"], GENERATED)
    assert GENERATION.answer_outputs([{"id": "g1"}]) is None  # the answers are written as they are
    assert GENERATION.token_counts(GENERATED) == [3, 1]


def test_a_classification_answers_with_its_offline_line_and_counts_no_tokens() -> None:
    outputs = SimpleNamespace(labels=["x"], scores=[0.5])
    assert CLASSIFICATION.token_counts(outputs) is None
    assert CLASSIFICATION.answer_outputs([{"id": "a", "label": "x"}]) is None


def test_an_embedding_answer_keeps_its_vector_exactly_and_the_gate_files_read_it_back(tmp_path: Path) -> None:
    rng = numpy.random.default_rng(3)
    vectors = rng.standard_normal((3, 16)).astype("<f4")
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    ids = ["d0", "d1", "d2"]
    answers = [json.loads(line) for line in EMBEDDING.answer(ids, vectors).splitlines()]
    assert [a["id"] for a in answers] == ids and all(len(a["vector"]) == 16 for a in answers)
    read_back = EMBEDDING.answer_outputs(answers)
    assert read_back.dtype == numpy.dtype("<f4") and read_back.tobytes() == vectors.tobytes()  # bit for bit
    with OutputSink(tmp_path, EMBEDDING) as sink:
        sink.write(sink.lines(ids, read_back), read_back)
    found = read_vectors(tmp_path / VECTORS, tmp_path / VECTOR_IDS)
    assert found.problems == [] and found.ids == tuple(ids)
    assert numpy.array_equal(found.vectors, vectors)
    with pytest.raises(ValueError, match="dimension"):
        EMBEDDING.answer_outputs([{"id": "a", "vector": [1.0, 0.0]}, {"id": "b", "vector": [1.0]}])


def test_repeats_of_a_vector_or_a_generation_agree_within_the_tolerance_element_by_element() -> None:
    first = {"id": "d0", "vector": [0.5, -0.25, 0.125]}
    assert same_answer(first, {"id": "d0", "vector": [0.5 + 3e-5, -0.25, 0.125 - 2e-5]})
    assert not same_answer(first, {"id": "d0", "vector": [0.125, -0.25, 0.5]})  # the disagree fault's reversal
    assert not same_answer(first, {"id": "d0", "vector": [0.5, -0.25]})
    row = json.loads(GENERATION.lines(["g1"], GENERATED[:1]))
    moved = {**row, "top_logprobs": [[v + 1e-6 for v in r] for r in row["top_logprobs"]]}
    assert same_answer(row, moved)  # a batch of other queries pads differently: the last bits move
    assert not same_answer(row, {**row, "tokens": [5, 8, 2]})  # another token is another answer


def test_the_generators_step_recorder_calls_the_hook_once_at_the_first_step() -> None:
    torch = pytest.importorskip("torch")
    calls: list[float] = []
    recorder = _StepRecorder(torch, 2, lambda: None, lambda: calls.append(time.monotonic()))
    scores = torch.tensor([[0.1, 2.0, -1.0], [1.0, 0.0, 3.0]])
    assert recorder(None, scores) is scores and len(calls) == 1 and recorder.first_step_at is not None
    recorder(None, scores)
    assert len(calls) == 1 and len(recorder.values) == 2
    assert _StepRecorder(torch, 2, lambda: None)(None, scores) is scores  # offline: no hook


def test_vllm_reports_each_request_once_at_the_step_that_gave_its_first_token() -> None:
    from protocol.engines.vllm.trial.engine import VllmGenerator

    told: list[list[int]] = []
    model = VllmGenerator(llm=None, tokenizer=None, variant=None, options={}, eos_ids=(2,), pad_id=0, vocab_size=9,
                          params=None, hf_config=None, on_first_token=told.append)

    def out(ident: str, tokens: list[int]) -> Any:
        return SimpleNamespace(request_id=ident, outputs=[SimpleNamespace(token_ids=tokens)])

    rows, reported = {"10": 0, "11": 1, "12": 2}, set[str]()
    model._report_first_tokens([out("10", [4]), out("11", []), out("12", [])], rows, reported)  # 11, 12: prefill
    model._report_first_tokens([out("10", [4, 5]), out("11", [3]), out("12", [6])], rows, reported)
    model._report_first_tokens([out("10", [4, 5, 2]), out("11", [3, 2]), out("12", [6, 1])], rows, reported)
    assert told == [[0], [1, 2]]


class Stepwise:
    """A generator of two rows whose first tokens come at two steps (as vLLM's engine may give them), or none
    (``silent``: the hook is never called, as when a batch fails before its first step)."""

    reports_first_token = True

    def __init__(self, silent: bool = False) -> None:
        self.silent = silent
        self.on_first_token: Any = None

    def tokenize(self, texts: list[str]) -> list[str]:
        return texts

    def predict_encoded(self, features: list[str]) -> list[dict[str, Any]]:
        if not self.silent:
            self.on_first_token([0])
            time.sleep(0.01)
            self.on_first_token([1, 0])  # row 0 again: told once only
            time.sleep(0.01)
        return [{"tokens": [1, 2], "n_tokens": 2, "text": f} for f in features]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def complete(self, answered: Sequence[tuple[int, bytes, int]]) -> None:
        self.events += [("complete", query) for query, _, _ in answered]

    def first_token(self, queries: Sequence[int]) -> None:
        self.events += [("first", query) for query in queries]


def lines(ids: Sequence[str], outputs: list[dict[str, Any]]) -> str:
    return "".join(json.dumps({"id": i, **o}) + "\n" for i, o in zip(ids, outputs, strict=True))


def serve_two(model: Any, settings: BatcherSettings) -> tuple[ServingSystem, Recorder]:
    """Queries 101 and 102 (ids a and b) served by ``model`` behind ``settings``, to the end."""
    system = ServingSystem(model, [("a", "x"), ("b", "y")], lines, settings, token_counts=GENERATION.token_counts)
    responder = Recorder()
    system.load_samples([0, 1])
    system.start(responder)
    system.issue_queries([SimpleNamespace(id=101, index=0), SimpleNamespace(id=102, index=1)])
    system.stop()
    return system, responder


@pytest.mark.parametrize("silent", [False, True])
def test_the_system_tells_each_first_token_once_before_its_completion(silent: bool) -> None:
    system, responder = serve_two(Stepwise(silent), BatcherSettings(2, 200.0))
    assert sorted(responder.events) == sorted([("first", 101), ("first", 102), ("complete", 101), ("complete", 102)])
    for query in (101, 102):
        assert responder.events.index(("first", query)) < responder.events.index(("complete", query))
    records = {r.query: r for r in system.records}
    assert all(r.n_tokens == 2 and r.first_token_ns is not None for r in records.values())
    assert all(r.started_ns <= r.first_token_ns <= r.completed_ns for r in records.values())  # type: ignore[operator]
    if not silent:  # row 0's first token came a step before row 1's
        assert records[101].first_token_ns < records[102].first_token_ns  # type: ignore[operator]
    assert [json.loads(text)["id"] for text in offline_answers(["a", "b"], system).lines] == ["a", "b"]


def test_a_generation_runs_token_figures_reach_the_manifest() -> None:
    from runner.trial.serving.loadgen_run import ServerSettings, ServingRun
    from runner.trial.serving.sut import QueryRecord
    from runner.trial.serving.trial_pass import token_figures

    settings = ServerSettings(target_qps=4.0, percentile=0.5, min_query_count=12, min_duration_s=0.0,
                              max_duration_s=None, seed=0, ttft_bound_ms=800.0, tpot_bound_ms=50.0)
    measured = {"first_token": 912.5, "tpot": 42.0}
    summary = SimpleNamespace(percentile_ms=lambda name, p: measured[name] if p == 0.5 else None,
                              completed_tokens_per_second=17.5)
    run = ServingRun(summary=summary, queries=2, unanswered=1, errors=("RuntimeError: boom",), batches=2)  # type: ignore[arg-type]
    records = [QueryRecord(seq=i, query=i, index=i, id=f"g{i}", issued_ns=0, started_ns=1, first_token_ns=2,
                           completed_ns=3, batch=i, batch_size=1, n_tokens=n, error=error)
               for i, (n, error) in enumerate([(6, None), (0, "RuntimeError: boom")])]
    figures = token_figures(run, settings, SimpleNamespace(records=records))  # type: ignore[arg-type]
    assert figures == {"token_latencies": True, "ttft_bound_ms": 800.0, "ttft_at_percentile_ms": 912.5,
                       "ttft_within_bound": False, "tpot_bound_ms": 50.0, "tpot_at_percentile_ms": 42.0,
                       "tpot_within_bound": True, "output_tokens": 6, "completed_tokens_per_second": 17.5}
    whole = ServerSettings(target_qps=4.0, percentile=0.5, min_query_count=12, min_duration_s=0.0,
                           max_duration_s=None, seed=0, latency_bound_ms=100.0)
    assert token_figures(run, whole, SimpleNamespace(records=records)) == {}  # type: ignore[arg-type]


def test_a_trial_interpreter_without_loadgen_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from protocol.records.codec import to_dict
    from protocol.study.traffic import LatencyBound, Traffic
    from runner.trial.serving import trial_pass
    from runner.trial.torch_settings import Refusal

    traffic = Traffic(arrivals="poisson", rates_qps=(2.0,), trace=None, min_query_count=44, min_duration_s=0.0,
                      max_duration_s=None, bounds=(LatencyBound("latency", 500.0, 0.9),), seed=0)
    trial = SimpleNamespace(spec=SimpleNamespace(traffic=to_dict(traffic), task="text-classification"))
    monkeypatch.setattr(trial_pass.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(Refusal, match="mlperf_loadgen"):
        trial_pass.ServingPass(trial, model=None).run()  # type: ignore[arg-type]


class Concurrent(Stepwise):
    """A model that runs batches at once (vLLM's HTTP server's way): each batch with its own first-token hook."""

    concurrent = True

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[Any] = []

    def predict_concurrent(self, features: list[str], hook: Any) -> list[dict[str, Any]]:
        self.hooks.append(hook)
        time.sleep(0.2)
        hook([0])
        return [{"tokens": [1, 2], "n_tokens": 2, "text": f} for f in features]


def test_batches_in_flight_at_once_each_tell_their_own_first_tokens() -> None:
    model = Concurrent()
    system, responder = serve_two(model, BatcherSettings(1, 0.0, in_flight=2))
    assert len(model.hooks) == 2 and model.hooks[0] is not model.hooks[1]
    assert model.on_first_token is None  # never set: each batch got its hook as an argument
    records = sorted(system.records, key=lambda r: r.started_ns)
    assert records[1].started_ns < records[0].completed_ns, "the second batch waited for the first"
    assert {r.batch for r in records} == {0, 1}
    for query in (101, 102):
        assert responder.events.index(("first", query)) < responder.events.index(("complete", query))
