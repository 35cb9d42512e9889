"""Benchmark 7: checking one sentence-embedding pass at scale, against a straightforward numpy baseline.

One candidate pass of 100,000 vectors of 384 float32 values and its 1,000 query vectors, written the way the
trial writes them (``vectors.f32`` + ``vector_ids.jsonl``, ``query_vectors.f32`` + ``query_ids.jsonl``), is
checked against a reference pass already read and checked (as ``isocost validate`` has it after the reference
variant's own verdict):

- ours: ``read_pass`` + ``check_pass`` (ids, shape, finite values, query ids, nDCG@10 over the queries) +
  ``agreement`` (cosine per id to the reference, share ≥ 0.999, lowest and mean cosine, identity, top-10
  overlap with the reference's rankings);
- baseline: ``np.fromfile`` of both files, ids with ``json.loads`` per line, the id list compared, ``isfinite``,
  rows normalised, cosine per id and its share ≥ 0.999, the queries' similarities in float32 blocks,
  ``argpartition`` top 10, nDCG@10 with one relevant document per query.

Target: ours at most 1.2 × the baseline's time, pair by pair (ABBA, same run); both agree on the metric and the
agreement. The data are synthetic (seeded Gaussian vectors, the candidate the reference plus small noise).
"""

from __future__ import annotations

import gc
import json
import math
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.common import Row, Spread, fmt_ratio, fmt_s, interleaved, judge, ratio_spread, timed

TARGET_RATIO = 1.2


def _write(directory: Path, stem: tuple[str, str], ids: list[str], vectors: Any) -> None:
    from protocol.tasks.embedding.vector_file import header, id_lines

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / stem[0], "wb") as handle:
        handle.write(header(vectors.shape[1]))
        handle.write(vectors.astype("<f4").tobytes())
    (directory / stem[1]).write_text(id_lines(ids), encoding="utf-8")


def make_passes(root: Path, documents: int, queries: int, dimension: int = 384) -> tuple[Path, Path, Any]:
    """A reference pass and a candidate (reference + noise) in ``root``; the reference the checks use."""
    import numpy as np

    from protocol.tasks.embedding import EmbeddingReference
    from protocol.tasks.embedding.queries import Query

    rng = np.random.default_rng(0)
    ids = [f"doc-{i:07d}" for i in range(documents)]
    query_ids = [f"q-{i:05d}" for i in range(queries)]
    relevant = rng.integers(0, documents, size=queries)
    base = rng.standard_normal((documents, dimension), dtype=np.float32)
    noisy = base + rng.standard_normal((documents, dimension), dtype=np.float32) * 0.01
    asked = base[relevant] + rng.standard_normal((queries, dimension), dtype=np.float32)
    for name, vectors in (("reference", base), ("candidate", noisy)):
        _write(root / name, ("vectors.f32", "vector_ids.jsonl"), ids, vectors)
        _write(root / name, ("query_vectors.f32", "query_ids.jsonl"), query_ids, asked)
    reference = EmbeddingReference(ids=tuple(ids), dimension=dimension, queries=tuple(
        Query(q, "", (ids[int(r)],)) for q, r in zip(query_ids, relevant, strict=True)))
    return root / "reference", root / "candidate", reference


def ours(candidate_dir: Path, reference_pass: Any, reference: Any, study: Any) -> tuple[float, float]:
    from protocol.tasks.embedding import EMBEDDING

    outputs = EMBEDDING.read_pass(candidate_dir)
    check = EMBEDDING.check_pass(outputs, reference, study)
    agreement = EMBEDDING.agreement(outputs, reference_pass, study)
    if not check.accepted or agreement.agreement is None:
        raise AssertionError(f"the synthetic pass was not accepted: {check.reasons}")
    return float(check.metric_value or 0.0), agreement.agreement


def baseline(candidate_dir: Path, reference_rows: Any, reference_ids: list[str], relevant: Any) -> tuple[float, float]:
    """What a careful engineer writes with numpy to check the same pass."""
    import numpy as np

    ids = [json.loads(line)["id"] for line in (candidate_dir / "vector_ids.jsonl").open(encoding="utf-8")]
    if ids != reference_ids:
        raise AssertionError("ids differ")
    vectors = np.fromfile(candidate_dir / "vectors.f32", dtype="<f4", offset=16).reshape(len(ids), -1)
    queries = np.fromfile(candidate_dir / "query_vectors.f32", dtype="<f4", offset=16).reshape(len(relevant), -1)
    if not np.isfinite(vectors).all() or not np.isfinite(queries).all():
        raise AssertionError("non-finite values")
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    cosines = (vectors * reference_rows).sum(axis=1)
    agreement = float((cosines >= 0.999).mean())
    gains = []
    for start in range(0, len(queries), 64):
        scores = queries[start:start + 64] @ vectors.T
        top = np.argpartition(-scores, 9, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        top = np.take_along_axis(top, order, axis=1)
        for row, wanted in zip(top, relevant[start:start + 64], strict=True):
            hit = np.nonzero(row == wanted)[0]
            gains.append(1.0 / math.log2(hit[0] + 2) if len(hit) else 0.0)
    return float(np.mean(gains)), agreement


def run(documents: int = 100_000, queries: int = 1_000, pairs: int = 5, progress: Any = print) -> Row:
    import numpy as np

    from protocol.tasks.embedding import EMBEDDING

    title = f"check one embedding pass: {documents:,} vectors × 384 against the reference, nDCG@10 over {queries:,} " \
            "queries"
    study = SimpleNamespace(quality=SimpleNamespace(metric="ndcg@10", minimum=0.0, extra={"min_cosine": 0.999}))
    with tempfile.TemporaryDirectory(prefix="isocost-bench-embed-") as tmp:
        progress(f"  writing {documents:,} × 384 vectors twice and {queries:,} queries")
        reference_dir, candidate_dir, reference = make_passes(Path(tmp), documents, queries)
        reference_pass = EMBEDDING.read_pass(reference_dir)
        EMBEDDING.check_pass(reference_pass, reference, study)  # the reference variant's own verdict, first
        rows = reference_pass.normalised()
        ids = list(reference.ids)
        position = {ident: i for i, ident in enumerate(ids)}
        relevant = np.array([position[q.relevant[0]] for q in reference.queries])
        found: dict[str, Any] = {}

        def measure(side: str) -> float:
            gc.collect()
            if side == "ours":
                seconds, found[side] = timed(lambda: ours(candidate_dir, reference_pass, reference, study))
            else:
                seconds, found[side] = timed(lambda: baseline(candidate_dir, rows, ids, relevant))
            progress(f"  {side}: {seconds:.2f} s")
            return seconds

        ours_s, base_s = interleaved(pairs, lambda: measure("ours"), lambda: measure("baseline"))
    ratio = ratio_spread(ours_s, base_s)
    met, why = judge(ratio, TARGET_RATIO, higher_is_better=False)
    same = abs(found["ours"][0] - found["baseline"][0]) < 1e-6 and found["ours"][1] == found["baseline"][1]
    if not same:
        met, why = False, f"ours {found['ours']} and the baseline {found['baseline']} disagree: not the same work"
    return Row(key="7", title=title, measured=fmt_s(Spread(tuple(ours_s))) + " isocost",
               baseline=fmt_s(Spread(tuple(base_s))) + " numpy", ratio=f"{fmt_ratio(ratio)} ours/baseline time",
               target=f"≤ {TARGET_RATIO} × baseline", met=met, reason=why,
               details={"ours_s": list(ours_s), "baseline_s": list(base_s), "ratio": ratio.to_dict(),
                        "ndcg@10": found["ours"][0], "agreement": found["ours"][1], "documents": documents,
                        "queries": queries, "order": "ABBA"})
