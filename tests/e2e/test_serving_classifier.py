"""End-to-end: MLPerf LoadGen's Server scenario driving the real tiny classifier behind the dynamic batcher
(runner/trial/serving/), loaded as the trial loads it (protocol/tasks/classification/trial.py): every served answer is
the offline prediction for the same id, whatever batch it was served in; LoadGen's logs are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
torch = pytest.importorskip("torch")
pytest.importorskip("mlperf_loadgen")

from workspace import write_corpus  # noqa: E402

from protocol.records.stages import Variant  # noqa: E402
from protocol.tasks.classification.trial import TRIAL_TASK  # noqa: E402
from runner.trial.serving.loadgen_run import ServerSettings, run_server  # noqa: E402
from runner.trial.serving.summary import LOG_FILES  # noqa: E402
from runner.trial.serving.sut import BatcherSettings, ServingSystem  # noqa: E402

VARIANT = Variant(variant_id="batch_size=4", stack="cpu", device="cpu", precision="fp32", quantization="none",
                  compile=False, attention="sdpa", batch_size=4, padding="longest", max_length=64,
                  length_grouping="none", resume="none", threads=1, seed=0, deterministic=True)


def offline(model, samples: list[tuple[str, str]]) -> dict[str, dict]:
    """The offline pass's answers: the corpus in order, batches of the variant's size, the task's own lines."""
    answers = {}
    for start in range(0, len(samples), VARIANT.batch_size):
        chunk = samples[start:start + VARIANT.batch_size]
        ids = [ident for ident, _ in chunk]
        outputs = model.predict_encoded(model.tokenize([text for _, text in chunk]))
        answers.update((line["id"], line) for line in map(json.loads, TRIAL_TASK.lines(ids, outputs).splitlines()))
    return answers


def test_every_served_answer_is_the_offline_prediction_for_its_id(tiny_model: Path, tmp_path: Path):
    write_corpus(tmp_path / "corpus.jsonl", "c", 24, seed=1)
    rows = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    samples = [(row["id"], row["text"]) for row in rows]
    torch.manual_seed(0)
    model = TRIAL_TASK.load(tiny_model, VARIANT, torch, {})
    reference = offline(model, samples)
    assert len({line["label"] for line in reference.values()}) == 2  # both labels occur: equality can fail

    system = ServingSystem(model, samples, TRIAL_TASK.lines, BatcherSettings(max_batch=4, max_wait_ms=20))
    settings = ServerSettings(target_qps=30.0, percentile=0.9, min_query_count=60, min_duration_s=2.0,
                              max_duration_s=30.0, seed=1, latency_bound_ms=1000.0)
    run = run_server(system, settings, tmp_path / "serve")
    assert run.summary is not None and run.unanswered == 0 and run.queries >= 60
    assert all((tmp_path / "serve" / name).is_file() for name in LOG_FILES)
    served = [json.loads(line) for line in (tmp_path / "serve" / "answers.jsonl").read_text().splitlines()]
    sizes = [q["batch_size"] for q in map(json.loads, (tmp_path / "serve" / "queries.jsonl").read_text().splitlines())]
    assert len(served) == run.queries and max(sizes) > 1  # some answers came from batches of several queries
    for answer in served:
        expected = reference[answer["id"]]
        assert samples[answer["index"]][0] == answer["id"]
        assert answer["label"] == expected["label"], answer["id"]
        assert answer["score"] == pytest.approx(expected["score"], abs=1e-5), answer["id"]
