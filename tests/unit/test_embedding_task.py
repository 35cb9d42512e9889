"""The sentence-embedding task, host side: vector files, the pass check, retrieval metrics, cosine agreement.

Every figure is computed by hand from vectors written here (no model): a pass is a trial directory holding
``vectors.f32`` + ``vector_ids.jsonl`` and ``query_vectors.f32`` + ``query_ids.jsonl``.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from protocol.tasks.embedding import EMBEDDING, EmbeddingReference, retrieval
from protocol.tasks.embedding.queries import Query
from protocol.tasks.embedding.vector_file import header, id_lines, read_vectors

DOCS = ("d0", "d1", "d2", "d3")
QUERIES = (Query("q0", "zero", ("d0",)), Query("q1", "one", ("d1",)), Query("q2", "two", ("d2", "d3")))


def write_vectors(directory: Path, stem: str, ids: tuple[str, ...] | list[str], vectors: np.ndarray) -> None:
    names = {"doc": ("vectors.f32", "vector_ids.jsonl"), "query": ("query_vectors.f32", "query_ids.jsonl")}[stem]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / names[0]).write_bytes(header(vectors.shape[1]) + vectors.astype("<f4").tobytes())
    (directory / names[1]).write_text(id_lines(list(ids)), encoding="utf-8")


def basis(n: int = 4, dim: int = 4) -> np.ndarray:
    return np.eye(n, dim, dtype=np.float32)


def write_pass(directory: Path, docs: np.ndarray | None = None, ids: tuple[str, ...] = DOCS,
               queries: np.ndarray | None = None, query_ids: tuple[str, ...] = ("q0", "q1", "q2")) -> Path:
    docs = basis() if docs is None else docs
    if queries is None:  # q0 → d0, q1 → d1, q2 between d2 and d3
        queries = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.9]], dtype=np.float32)
    write_vectors(directory, "doc", ids, docs)
    write_vectors(directory, "query", query_ids, queries)
    return directory


def study(metric: str = "ndcg@10", minimum: float = 0.0, min_cosine: float = 0.999) -> SimpleNamespace:
    quality = SimpleNamespace(metric=metric, minimum=minimum, extra={"min_cosine": min_cosine}, subgroups=())
    return SimpleNamespace(quality=quality)


REFERENCE = EmbeddingReference(ids=DOCS, dimension=4, queries=QUERIES)


def check(directory: Path, **options: float | str):  # type: ignore[no-untyped-def]
    return EMBEDDING.check_pass(EMBEDDING.read_pass(directory), REFERENCE, study(**options))  # type: ignore[arg-type]


def test_an_exact_pass_is_accepted_with_its_metric(tmp_path: Path) -> None:
    verdict = check(write_pass(tmp_path / "t"), minimum=0.9)
    assert verdict.accepted, verdict.reasons
    # q0, q1 rank their document first (1.0 each); q2 ranks d2 then d3, both relevant: ideal, 1.0.
    assert verdict.metric_value == pytest.approx(1.0)
    assert (verdict.expected_ids, verdict.observed_ids, verdict.format_errors) == (4, 4, 0)


def test_metrics_by_hand() -> None:
    top = np.array([[2, 0, 1, 3]])
    assert retrieval.per_query("ndcg@10", top, [[0]])[0] == pytest.approx(1 / math.log2(3))
    assert retrieval.per_query("mrr@10", top, [[0]])[0] == pytest.approx(0.5)
    assert retrieval.per_query("recall@10", top, [[0, 3, 9]])[0] == pytest.approx(2 / 3)
    ideal = 1 + 1 / math.log2(3)
    assert retrieval.per_query("ndcg@10", top, [[1, 2]])[0] == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    assert retrieval.per_query("mrr@10", top, [[7]])[0] == 0.0


def test_top_k_breaks_ties_by_corpus_order_and_caps_at_the_corpus_size() -> None:
    documents = retrieval.normalised(np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32))
    top = retrieval.top_k(retrieval.normalised(np.array([[1, 0]], dtype=np.float32)), documents)
    assert top.tolist() == [[0, 1, 3, 2]]


def test_the_minimum_rejects_with_the_metric_in_the_reason(tmp_path: Path) -> None:
    queries = np.array([[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0.9]], dtype=np.float32)  # q0 finds d3 first
    verdict = check(write_pass(tmp_path / "t", queries=queries), metric="mrr@10", minimum=0.9)
    assert not verdict.accepted
    assert verdict.metric_value is not None and verdict.metric_value < 0.9
    assert any("mrr@10" in reason and "below the study's minimum 0.9" in reason for reason in verdict.reasons)


def _nan(d: Path) -> None:
    docs = basis()
    docs[2, 1] = np.nan
    write_pass(d, docs)


def _inf(d: Path) -> None:
    docs = basis()
    docs[0, 0] = np.inf
    write_pass(d, docs)


def _cut(d: Path) -> None:
    write_pass(d)
    data = (d / "vectors.f32").read_bytes()
    (d / "vectors.f32").write_bytes(data[:-6])


BAD_PASSES = {
    "nan": (_nan, "1 vector(s) with NaN or inf values, e.g. id 'd2'"),
    "inf": (_inf, "1 vector(s) with NaN or inf values, e.g. id 'd0'"),
    "wrong dimension": (lambda d: write_pass(d, np.eye(4, 3, dtype=np.float32),
                                             queries=np.eye(3, 3, dtype=np.float32)),
                        "dimension 3, the study declares 4"),
    "missing id": (lambda d: write_pass(d, basis(3), ids=DOCS[:3]), "1 missing id(s), e.g. 'd3'"),
    "extra id": (lambda d: write_pass(d, basis(5, 4), ids=(*DOCS, "d9")), "1 id(s) not in the corpus, e.g. 'd9'"),
    "duplicate id": (lambda d: write_pass(d, ids=("d0", "d1", "d2", "d2")), "1 duplicate id(s), e.g. 'd2'"),
    "cut file": (_cut, "vectors.f32 is cut: 10 byte(s) after the last complete row of 4 float32 values"),
    "rows and ids apart": (lambda d: (write_pass(d), (d / "vector_ids.jsonl").write_text(id_lines(DOCS[:3]))),
                           "4 vector row(s) in vectors.f32 for 3 id(s)"),
    "no vector file": (lambda d: (write_pass(d), (d / "vectors.f32").unlink()), "vectors: vectors.f32 is missing"),
    "cut id line": (lambda d: (write_pass(d), (d / "vector_ids.jsonl").write_text(id_lines(DOCS)[:-3])),
                    "cut short (no line end)"),
    "not a vector file": (lambda d: (write_pass(d), (d / "vectors.f32").write_bytes(b"[1.0, 2.0]\n")),
                          "has no isocost vector header"),
    "queries out of order": (lambda d: write_pass(d, query_ids=("q1", "q0", "q2")),
                             "query vectors: 3 query ids, not the study's 3 queries in order"),
    "no query vectors": (lambda d: (write_pass(d), (d / "query_vectors.f32").unlink()),
                         "query vectors: query_vectors.f32 is missing"),
}


@pytest.mark.parametrize("case", sorted(BAD_PASSES))
def test_a_bad_pass_is_rejected_with_its_reason_never_a_traceback(tmp_path: Path, case: str) -> None:
    make, reason = BAD_PASSES[case]
    make(tmp_path / "t")
    verdict = check(tmp_path / "t")
    assert not verdict.accepted
    assert verdict.metric_value is None
    assert any(reason in r for r in verdict.reasons), verdict.reasons


def test_a_killed_pass_keeps_the_rows_written_before_it(tmp_path: Path) -> None:
    """A crash between a batch's vectors and its ids: the reader pairs neither, says so, and keeps the rest."""
    write_vectors(tmp_path, "doc", DOCS[:2], basis(3))  # 3 rows flushed, the third batch's ids never written
    found = read_vectors(tmp_path / "vectors.f32", tmp_path / "vector_ids.jsonl")
    assert (found.ids, found.rows, found.vectors) == (DOCS[:2], 3, None)
    assert found.problems == ["vectors: 3 vector row(s) in vectors.f32 for 2 id(s) in vector_ids.jsonl"]


def test_agreement_is_the_share_of_inputs_within_min_cosine(tmp_path: Path) -> None:
    reference = EMBEDDING.read_pass(write_pass(tmp_path / "ref"))
    moved = basis()
    moved[1] = [0.1, 1.0, 0.0, 0.0]  # cosine 0.995 with the reference's d1
    candidate = EMBEDDING.read_pass(write_pass(tmp_path / "cand", moved))
    found = EMBEDDING.agreement(candidate, reference, study(min_cosine=0.999))  # type: ignore[arg-type]
    assert found.agreement == 0.75
    assert found.identical is False
    cosine = 1 / math.sqrt(1.01)
    assert found.max_score_delta == pytest.approx(1 - cosine, abs=1e-6)
    assert found.details["lowest_cosine"] == pytest.approx(cosine, abs=1e-6)
    assert found.details["inputs_below_min_cosine"] == 1
    assert found.details["top10_overlap"] == 1.0
    assert found.differing_ids == (candidate.documents.ids[1],)  # what the comparison across campaigns names
    loose = EMBEDDING.agreement(candidate, reference, study(min_cosine=0.99))  # type: ignore[arg-type]
    assert loose.agreement == 1.0 and loose.differing_ids == ()


def test_agreement_with_itself_is_identical_and_reads_ids_in_any_order(tmp_path: Path) -> None:
    reference = EMBEDDING.read_pass(write_pass(tmp_path / "ref"))
    same = EMBEDDING.agreement(reference, reference, study())  # type: ignore[arg-type]
    assert (same.agreement, same.identical) == (1.0, True)
    shuffled = EMBEDDING.read_pass(write_pass(tmp_path / "shuffled", basis()[[3, 1, 0, 2]],
                                              ids=("d3", "d1", "d0", "d2")))
    found = EMBEDDING.agreement(shuffled, reference, study())  # type: ignore[arg-type]
    assert (found.agreement, found.identical, found.details["top10_overlap"]) == (1.0, True, 1.0)


def test_agreement_is_undefined_over_other_ids(tmp_path: Path) -> None:
    reference = EMBEDDING.read_pass(write_pass(tmp_path / "ref"))
    other = EMBEDDING.read_pass(write_pass(tmp_path / "other", basis(3), ids=DOCS[:3]))
    found = EMBEDDING.agreement(other, reference, study())  # type: ignore[arg-type]
    assert (found.agreement, found.max_score_delta, found.identical) == (None, None, None)


def test_similarities_are_float32_whatever_the_vectors_were(tmp_path: Path) -> None:
    """A bf16-like pass (values rounded to 8 mantissa bits) is compared in float32: its cosines stay above 0.999."""
    rng = np.random.default_rng(0)
    exact = rng.standard_normal((4, 64)).astype(np.float32)
    rounded = (exact.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bfloat16 truncation
    reference = EMBEDDING.read_pass(write_pass(tmp_path / "fp32", exact, queries=exact[:3]))
    candidate = EMBEDDING.read_pass(write_pass(tmp_path / "bf16", rounded, queries=rounded[:3]))
    found = EMBEDDING.agreement(candidate, reference, study())  # type: ignore[arg-type]
    assert found.agreement == 1.0 and found.identical is False
    assert candidate.normalised().dtype == np.float32


def test_bootstrap_resamples_queries(tmp_path: Path) -> None:
    # q0 finds d3, then d0 (ties by corpus order): reciprocal rank 1/2.
    queries = np.array([[0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0.9]], dtype=np.float32)
    outputs = EMBEDDING.read_pass(write_pass(tmp_path / "t", queries=queries))
    score = EMBEDDING.resampled_metric(outputs, REFERENCE, study("mrr@10"))  # type: ignore[arg-type]
    assert score([0, 0, 0]) == pytest.approx(0.5)
    assert score([1, 2]) == pytest.approx(1.0)
    assert EMBEDDING.scored_units(REFERENCE) == 3
    assert not EMBEDDING.is_proportion("recall@10")


def test_subgroups_score_queries_by_their_documents_length_bucket(tmp_path: Path) -> None:
    rows = [{"id": d, "label": "", "n_tokens": "3", "length_bucket": b} for d, b in zip(DOCS, "sslL", strict=True)]
    options = {"dimension": 4, "queries": {"path": "q.jsonl", "items": [q.to_item() for q in QUERIES]}}
    frozen = SimpleNamespace(task_options=options, quality=SimpleNamespace(subgroups=("length_bucket",)), path="s")
    reference = EMBEDDING.reference(rows, frozen)
    assert reference.groups == {"length_bucket": {"q0": "s", "q1": "s", "q2": "l"}}
    verdict = EMBEDDING.check_pass(EMBEDDING.read_pass(write_pass(tmp_path / "t")), reference, study())  # type: ignore[arg-type]
    assert verdict.subgroups == {"length_bucket": {"l": 1.0, "s": 1.0}}
