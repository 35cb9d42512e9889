"""Sentence embeddings: one float32 vector per input, gated by shape, finiteness, retrieval and cosine agreement.

A pass writes ``vectors.f32`` + ``vector_ids.jsonl`` (the corpus) and, after the measured pass,
``query_vectors.f32`` + ``query_ids.jsonl`` (the study's queries, embedded by the same variant:
:mod:`protocol.tasks.embedding.vector_file`). The pass check, fixed before timing and every part reported: the exact id
set; the shape (one row of ``dimension`` values per input, the file not cut); every value finite; the query
vectors complete; the retrieval metric (``ndcg@10``, ``mrr@10`` or ``recall@10``,
:mod:`protocol.tasks.embedding.retrieval`) over the queries at least ``[quality] minimum``. Two passes agree on an input
when the cosine of their vectors is at least ``[quality] min_cosine`` (default 0.999); the agreement is the
share of inputs that do, beside the lowest and mean cosine, the top-10 overlap of the two passes' rankings and
both passes' metric (``details``). Everything is computed in float32, whatever precision the pass ran in.
:data:`EMBEDDING` is the task as :mod:`protocol.tasks` registers it.

Example::

    task = EMBEDDING
    outputs = task.read_pass(Path("trials/t"))
    task.check_pass(outputs, task.reference(index_rows, study), study).metric_value   # 0.93
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from protocol.corpus import Record
from protocol.errors import UserError
from protocol.study.schema import KEYS, StudyKey
from protocol.tasks.base import TaskExample, TaskInit
from protocol.tasks.embedding import options, retrieval
from protocol.tasks.embedding.init import EMBEDDING_INIT
from protocol.tasks.embedding.keys import STUDY_KEYS
from protocol.tasks.embedding.queries import Query
from protocol.tasks.embedding.vector_file import VectorFile, read_vectors
from protocol.tasks.output_checks import norm_problems
from protocol.tasks.pass_check import Agreement, PassCheck, check_ids, id_problems

VECTORS, VECTOR_IDS = "vectors.f32", "vector_ids.jsonl"
QUERY_VECTORS, QUERY_IDS = "query_vectors.f32", "query_ids.jsonl"


@dataclass(frozen=True)
class EmbeddingReference:
    """What a pass is checked against: the corpus ids in order, the declared dimension, the queries and the
    subgroups (query → the length bucket of its first relevant document)."""

    ids: tuple[str, ...]
    dimension: int
    queries: tuple[Query, ...]
    groups: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def query_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.queries)


class EmbeddingPass:
    """One pass's vectors as written; rankings and normalised rows are computed once and kept."""

    def __init__(self, documents: VectorFile, queries: VectorFile) -> None:
        self.documents = documents
        self.queries = queries
        self._normalised: Any = None
        self._rankings: Any = None
        self._scores: dict[str, Any] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        return self.documents.ids

    @property
    def format_errors(self) -> list[str]:
        return self.documents.problems + self.queries.problems

    def normalised(self) -> Any:
        if self._normalised is None:
            self._normalised = retrieval.normalised(self.documents.vectors)
        return self._normalised

    def rankings(self) -> Any:
        """Each query's top 10 document indices (in this pass's id order)."""
        if self._rankings is None:
            self._rankings = retrieval.top_k(retrieval.normalised(self.queries.vectors), self.normalised())
        return self._rankings

    def per_query(self, metric: str, reference: EmbeddingReference) -> Any:
        if metric not in self._scores:
            position = {ident: i for i, ident in enumerate(self.ids)}
            relevant = [[position[r] for r in q.relevant if r in position] for q in reference.queries]
            self._scores[metric] = retrieval.per_query(metric, self.rankings(), relevant)
        return self._scores[metric]


def _shape_problems(outputs: EmbeddingPass, reference: EmbeddingReference, normalized: bool = False) -> list[str]:
    """Dimension, finiteness, the norm a normalising study declares (:mod:`protocol.tasks.output_checks`) and the
    query vectors: what makes the vectors unusable beyond their ids."""
    import numpy as np

    problems = []
    for what, found in (("vectors", outputs.documents), ("query vectors", outputs.queries)):
        if found.dimension is not None and found.dimension != reference.dimension:
            problems.append(f"{what}: dimension {found.dimension}, the study declares {reference.dimension}")
        elif found.vectors is not None:
            bad = ~np.isfinite(found.vectors).all(axis=1)
            if bad.any():
                first = found.ids[int(np.argmax(bad))]
                problems.append(f"{what}: {int(bad.sum())} vector(s) with NaN or inf values, e.g. id {first!r}")
            elif normalized:
                problems += norm_problems(found.vectors, found.ids, what)
    if outputs.queries.ids != reference.query_ids and not outputs.queries.problems:
        problems.append(f"query vectors: {len(outputs.queries.ids)} query ids, not the study's "
                        f"{len(reference.query_ids)} queries in order")
    return problems


def check_pass(outputs: EmbeddingPass, reference: EmbeddingReference, metric: str, minimum: float,
               normalized: bool = False) -> PassCheck:
    """The verdict on one pass: ids, shape, finite values (of norm 1 where the study normalises: ``normalized``),
    query vectors, and the retrieval metric ≥ minimum."""
    ids = check_ids(outputs.ids, reference.ids)
    format_errors = outputs.format_errors
    reasons = id_problems(format_errors, ids)
    shape = _shape_problems(outputs, reference, normalized) if not format_errors else []
    reasons += shape
    complete = not reasons
    metric_value: float | None = None
    subgroups: dict[str, dict[str, float]] = {}
    if complete:
        scores = outputs.per_query(metric, reference)
        metric_value = retrieval.mean(scores)
        subgroups = {name: _by_group(scores, reference, membership) for name, membership in reference.groups.items()}
        if metric_value < minimum:
            reasons.append(f"{metric} {metric_value:.4f} below the study's minimum {minimum}")
    else:
        reasons.append("incomplete or malformed pass: quality not computed")
    return PassCheck(
        expected_ids=len(reference.ids), observed_ids=len(outputs.ids), ids_match=ids.ids_match,
        duplicate_ids=len(ids.duplicates), missing_ids=len(ids.missing), unexpected_ids=len(ids.unexpected),
        format_errors=len(format_errors) + len(shape), metric=metric, metric_value=metric_value,
        subgroups=subgroups, accepted=complete and metric_value is not None and metric_value >= minimum,
        reasons=tuple(reasons),
    )


def _by_group(scores: Any, reference: EmbeddingReference, membership: dict[str, str]) -> dict[str, float]:
    groups: dict[str, list[int]] = {}
    for index, query in enumerate(reference.queries):
        groups.setdefault(membership.get(query.id, ""), []).append(index)
    return {name: retrieval.mean(scores, indices) for name, indices in sorted(groups.items())}


def compare_passes(candidate: EmbeddingPass, reference: EmbeddingPass, min_cosine: float) -> Agreement:
    """Cosine agreement by id, the lowest cosine as ``1 − max_score_delta``, bit identity, and the rankings'
    top-10 overlap; all None when the two passes do not hold the same ids or their vectors are unusable."""
    import numpy as np

    ours, theirs = candidate.documents, reference.documents
    if ours.vectors is None or theirs.vectors is None or not ours.ids or set(ours.ids) != set(theirs.ids) \
            or len(set(ours.ids)) != len(ours.ids) or ours.vectors.shape != theirs.vectors.shape:
        return Agreement(None, None, None)
    if ours.ids == theirs.ids:
        order: Any = slice(None)
    else:
        position = {ident: i for i, ident in enumerate(theirs.ids)}
        order = np.array([position[i] for i in ours.ids])
    cos = retrieval.cosines(candidate.normalised(), reference.normalised()[order])
    if not np.isfinite(cos).all():
        return Agreement(None, None, None)
    details: dict[str, Any] = {"min_cosine_rule": min_cosine, "lowest_cosine": float(cos.min()),
                               "mean_cosine": float(cos.mean()),
                               "inputs_below_min_cosine": int((cos < min_cosine).sum())}
    details.update(_ranking_details(candidate, reference, order))
    below = tuple(ident for ident, value in zip(ours.ids, cos.tolist(), strict=True) if value < min_cosine)
    return Agreement(agreement=float((cos >= min_cosine).mean()), max_score_delta=max(0.0, 1.0 - float(cos.min())),
                     identical=bool(np.array_equal(ours.vectors, theirs.vectors[order])), details=details,
                     differing_ids=below)


def _ranking_details(candidate: EmbeddingPass, reference: EmbeddingPass, order: Any) -> dict[str, Any]:
    """The top-10 overlap with the reference's rankings, when both passes' query vectors are usable."""
    if candidate.queries.vectors is None or reference.queries.vectors is None \
            or candidate.queries.ids != reference.queries.ids:
        return {}
    import numpy as np

    ours = candidate.rankings()
    if not isinstance(order, slice):  # our document indices into the reference's id order
        ours = np.asarray(order)[ours]
    return {"top10_overlap": retrieval.overlap(ours, reference.rankings())}


class SentenceEmbedding:
    """The sentence-embedding task (see the module docstring)."""

    name: str = "sentence-embedding"
    output_files: tuple[str, ...] = (VECTORS, VECTOR_IDS, QUERY_VECTORS, QUERY_IDS)
    trial_module: str = "protocol.tasks.embedding.trial"
    study_keys: tuple[StudyKey, ...] = STUDY_KEYS
    init: TaskInit = EMBEDDING_INIT
    docs: Mapping[str, str] = MappingProxyType({
        "yields": 'a float32 vector', "model": 'any `AutoModel` encoder',
        "metrics": '`ndcg@10`, `mrr@10`, `recall@10` over declared queries',
        "agreement": 'share of inputs whose cosine is ≥ `min_cosine`'})
    metrics: tuple[str, ...] = retrieval.METRICS
    labels_required: bool = False
    corpus_fields: tuple[str, ...] = ()
    subgroups: tuple[str, ...] = ("length_bucket",)
    option_tables: Mapping[str, str] = MappingProxyType(
        {"embedding": "table: pooling, normalize, dimension, [embedding.queries], [embedding.tuning_queries]"})
    #: How the summary and the memo name the outputs and the agreement.
    words: Mapping[str, str] = MappingProxyType({
        "outputs": "vectors", "done": "embedded", "units": "queries",
        "agreement": "share of inputs whose vector has a cosine ≥ min_cosine with the reference variant's"})

    def parse_options(self, top: Any, base_dir: Path) -> dict[str, Any]:
        return options.parse_options(top, base_dir)

    def parse_quality_extras(self, quality: Any) -> dict[str, Any]:
        return options.parse_quality_extras(quality)

    def check_inputs(self, study: Any, corpus: Sequence[Record], tuning: Sequence[Record]) -> None:
        options.check_inputs(study, corpus, tuning)

    def frozen_files(self, study: Any) -> dict[str, Path]:
        return {options.FROZEN_QUERIES: Path(study.task_options["queries"]["path"])}

    def tuning_study(self, study: Any) -> Any:
        return replace(study, task_options=options.tuning_options(study))

    def reference(self, index_rows: Sequence[Mapping[str, str]], study: Any,
                  subgroups: Sequence[str] | None = None) -> EmbeddingReference:
        """The corpus ids, the dimension and the queries of the study (UserError when they are unreadable)."""
        queries = study.task_options["queries"]
        if "items" not in queries:
            raise UserError("the query set is not readable with the study's fingerprint", f"{queries['path']} "
                            f"({study.path}, key embedding.queries)", "Restore the query file the study names "
                            "(`isocost check STUDY` says what differs).")
        parsed = tuple(Query.from_item(item) for item in queries["items"])
        bucket = {row["id"]: row.get("length_bucket", "") for row in index_rows}
        groups = {}
        if "length_bucket" in (study.quality.subgroups if subgroups is None else subgroups):
            groups["length_bucket"] = {q.id: bucket.get(q.relevant[0], "") for q in parsed}
        return EmbeddingReference(ids=tuple(row["id"] for row in index_rows),
                                  dimension=int(study.task_options["dimension"]), queries=parsed, groups=groups)

    def read_pass(self, trial_dir: Path) -> EmbeddingPass:
        return EmbeddingPass(read_vectors(trial_dir / VECTORS, trial_dir / VECTOR_IDS, "vectors"),
                             read_vectors(trial_dir / QUERY_VECTORS, trial_dir / QUERY_IDS, "query vectors"))

    def check_pass(self, outputs: EmbeddingPass, reference: EmbeddingReference, study: Any) -> PassCheck:
        return check_pass(outputs, reference, study.quality.metric, study.quality.minimum,
                          getattr(study, "task_options", {}).get("normalize") is True)

    def agreement(self, candidate: EmbeddingPass, reference: EmbeddingPass, study: Any) -> Agreement:
        minimum = study.quality.extra.get("min_cosine", KEYS["quality.min_cosine"].value)
        return compare_passes(candidate, reference, float(minimum))

    def is_proportion(self, metric: str) -> bool:
        return False  # a mean of per-query scores: a seeded bootstrap over the queries

    def check_model(self, model_dir: Path, records: Sequence[Any], study: Any, where: str) -> tuple[str, ...]:
        return ()  # pooling and dimension against the checkpoint: check_inputs, which names the keys

    def pass_figures(self, trial_dir: Path, pass_s: float | None) -> dict[str, Any]:
        return {}

    def scored_units(self, reference: EmbeddingReference) -> int:
        return len(reference.queries)

    def resampled_metric(self, outputs: EmbeddingPass, reference: EmbeddingReference,
                         study: Any) -> Callable[[Sequence[int]], float]:
        """The metric over a resample of the queries (indices into the study's query order)."""
        scores = outputs.per_query(study.quality.metric, reference)
        return lambda indices: retrieval.mean(scores, indices) if len(indices) else math.nan


    def example(self) -> TaskExample:
        import numpy as np

        rows = tuple({"id": f"e{i}", "label": "", "n_tokens": "4", "length_bucket": "all"} for i in range(3))
        vectors = np.eye(3, dtype=np.float32)
        queries = {"path": "queries.jsonl", "items": [["q0", "first", ["e0"]], ["q1", "second", ["e1"]]]}
        renamed = {VECTORS: QUERY_VECTORS, VECTOR_IDS: QUERY_IDS}
        return TaskExample("ndcg@10", 0.9, {"min_cosine": 0.999},
                           {"pooling": "mean", "normalize": True, "dimension": 3, "queries": queries}, rows, vectors,
                           after=((renamed, ("q0", "q1"), vectors[:2]),))

EMBEDDING = TASK = SentenceEmbedding()
