"""A server trial's pass (runner/trial/serving/trial_pass.py): the library repeats the corpus whole, one offline line
per id from the answers (the first; repeats must agree), and an id with a failed, malformed or differing answer, or
never served, is left out of predictions.jsonl, so the unchanged classification gate refuses the pass."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from protocol.corpus import Record
from protocol.study.traffic import SERVING_FILES, LatencyBound, Traffic
from protocol.tasks.classification import Reference, check_pass
from protocol.tasks.classification.predictions import parse_predictions
from runner.trial.serving.sut import QueryRecord
from runner.trial.serving.trial_pass import SERVING_FILES as WRITTEN
from runner.trial.serving.trial_pass import library, offline_answers, same_answer

IDS = ("a", "b", "c")
REFERENCE = Reference(ids=IDS, labels={"a": "x", "b": "y", "c": "x"}, groups={})


def traffic(min_query_count: int = 44, min_duration_s: float = 0.0) -> Traffic:
    return Traffic(arrivals="poisson", rates_qps=(20.0,), trace=None, min_query_count=min_query_count,
                   min_duration_s=min_duration_s, max_duration_s=None,
                   bounds=(LatencyBound("latency", 500.0, 0.9),), seed=0)


def records(n: int) -> list[Record]:
    return [Record(id=f"r{i}", text=f"text {i}", label="") for i in range(n)]


def test_the_library_repeats_the_corpus_whole() -> None:
    samples, copies = library(records(12), traffic(44), 20.0)
    assert copies == 4 and len(samples) == 48 and samples[:12] == samples[12:24]
    assert library(records(50), traffic(44), 20.0)[1] == 1  # at least the corpus
    # with a minimum duration: more than rate x duration (20 qps x 10 s x 1.2 + 10 = 250 samples)
    samples, copies = library(records(12), traffic(44, 10.0), 20.0)
    assert copies == 21 and samples == [(r.id, r.text) for r in records(12)] * 21


def test_repeats_agree_on_every_field_and_numbers_within_the_tolerance() -> None:
    first = {"id": "a", "label": "x", "score": 0.75}
    assert same_answer(first, {"id": "a", "label": "x", "score": 0.75 + 5e-5})
    assert not same_answer(first, {"id": "a", "label": "x", "score": 0.76})
    assert not same_answer(first, {"id": "a", "label": "y", "score": 0.75})
    assert not same_answer(first, {"id": "a", "label": "x"})


def system(answers: list[tuple[str, str | None, str | None]]) -> SimpleNamespace:
    """A run's records: (id, the answer's line or None, error or None), in the order queries reached the system."""
    found = SimpleNamespace(records=[], answers={})
    for seq, (ident, line, error) in enumerate(answers):
        found.records.append(QueryRecord(seq=seq, query=100 + seq, index=IDS.index(ident), id=ident, issued_ns=seq,
                                         started_ns=seq, first_token_ns=None, completed_ns=seq + 1, batch=seq,
                                         batch_size=1, n_tokens=1, error=error))
        if line is not None:
            found.answers[100 + seq] = line
    return found


def line(ident: str, label: str, score: float = 0.9) -> str:
    return json.dumps({"id": ident, "label": label, "score": score})


def gate(tmp_path: Path, lines: list[str]) -> object:
    (tmp_path / "predictions.jsonl").write_text("".join(lines))
    return check_pass(parse_predictions(tmp_path / "predictions.jsonl"), REFERENCE, "accuracy", 0.0)


def test_every_id_answered_alike_gives_one_line_per_id_in_corpus_order(tmp_path: Path) -> None:
    run = system([("c", line("c", "x"), None), ("a", line("a", "x"), None), ("b", line("b", "y"), None),
                  ("a", line("a", "x", 0.9 + 1e-6), None)])
    found = offline_answers(IDS, run)
    assert [json.loads(text)["id"] for text in found.lines] == ["a", "b", "c"]
    assert json.loads(found.lines[0])["score"] == 0.9  # the first answer of a
    assert found.served["a"] == 2 and not (found.failed or found.malformed or found.differing or found.missing)
    assert gate(tmp_path, found.lines).accepted


@pytest.mark.parametrize(("answers", "kind"), [
    ([("a", line("a", "x"), None), ("b", None, "RuntimeError: boom"), ("c", line("c", "x"), None)], "failed"),
    ([("a", line("a", "x"), None), ("b", line("a", "y"), None), ("c", line("c", "x"), None)], "malformed"),
    ([("a", line("a", "x"), None), ("b", line("b", "y"), None), ("c", line("c", "x"), None),
      ("b", line("b", "x"), None)], "differing"),
    ([("a", line("a", "x"), None), ("c", line("c", "x"), None)], "missing"),
])
def test_an_id_without_one_sure_answer_is_left_out_and_the_gate_refuses(answers: list, kind: str,
                                                                        tmp_path: Path) -> None:
    found = offline_answers(IDS, system(answers))
    assert getattr(found, kind) == ["b"]
    assert [json.loads(text)["id"] for text in found.lines] == ["a", "c"]
    verdict = gate(tmp_path, found.lines)
    assert not verdict.accepted and verdict.missing_ids == 1  # the unchanged gate: an id is missing


def test_a_duplicated_line_is_refused_by_the_gate(tmp_path: Path) -> None:
    found = offline_answers(IDS, system([(i, line(i, "x"), None) for i in IDS]))
    verdict = gate(tmp_path, [*found.lines, found.lines[0]])  # what the corrupt:duplicate fault writes
    assert not verdict.accepted and verdict.duplicate_ids == 1


def test_the_host_seals_the_files_the_serving_pass_writes() -> None:
    assert SERVING_FILES == WRITTEN
