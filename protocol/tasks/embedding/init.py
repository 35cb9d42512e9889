"""``isocost init --task sentence-embedding`` (:data:`EMBEDDING_INIT`): the query sets, their split, ``[embedding]``.

With ``--queries FILE`` (JSONL id, text, relevant) and ``--tuning FILE --tuning-queries FILE`` the files are used
as they are; without ``--tuning``, a fifth of the queries (seeded) and the documents only they name become the
tuning split (``CORPUS.tuning.jsonl``, ``QUERIES.tuning.jsonl``), the rest the final corpus and queries
(``CORPUS.final.jsonl``, ``QUERIES.final.jsonl``), so the two never share a document. Pooling and normalisation
are read from a sentence-transformers checkpoint's own files when it has them (``1_Pooling/config.json``,
``modules.json``), else mean pooling, normalised; the dimension is config.json's ``hidden_size``. Every problem of
the query sets (a relevant id absent from its corpus, the tuning split overlapping the final queries, a pooling
the model cannot do) is reported at once, before the study is written.

Example::

    found = embedding_inputs(corpus, tuning, Path("encoder"), queries, tuning_queries)
    found.pooling, found.dimension      # "mean", 384
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.corpus import Record, check_disjoint
from protocol.errors import UserError
from protocol.hardware.memory import read_model_config
from protocol.io.fingerprint import fingerprint_path
from protocol.io.jsonio import loads_unique
from protocol.io.safe_write import write_handle
from protocol.study.init_text import line, untuned_quality
from protocol.study.reader import StudyErrors
from protocol.tasks.base import InitInputs, InitOption
from protocol.tasks.embedding.options import model_problems
from protocol.tasks.embedding.queries import Query, check_query_sets, read_queries

#: Share of the queries held out, with the documents only they name, as the tuning split.
TUNING_SHARE = 0.2


@dataclass(frozen=True)
class EmbeddingInputs:
    """What ``init`` writes into ``[embedding]``, and the query files it points at."""

    queries: Path
    tuning_queries: Path
    n_queries: int
    n_tuning_queries: int
    pooling: str
    normalize: bool
    dimension: int
    source: str  # where pooling and normalisation came from


def split_with_queries(corpus: Path, records: tuple[Record, ...], queries_path: Path,
                       out_dir: Path) -> tuple[Path, Path, Path, Path]:
    """Hold out a fifth of the queries and the documents only they name; (final, tuning, final queries, tuning
    queries) files written next to the study."""
    queries = read_queries(queries_path, "--queries")
    order = list(range(len(queries)))
    random.Random(0).shuffle(order)
    held = {queries[i].id for i in order[:max(1, round(TUNING_SHARE * len(queries)))]}
    final_docs = {r for q in queries if q.id not in held for r in q.relevant}
    tuning_docs = {r for q in queries if q.id in held for r in q.relevant} - final_docs
    tuning_queries = [q for q in queries if q.id in held and set(q.relevant) <= tuning_docs]
    final_queries = [q for q in queries if q.id not in held]
    if not tuning_queries or not final_queries:
        raise UserError(f"{len(queries)} queries cannot be split into a final and a tuning set that share no "
                        "document", str(queries_path), "Pass --tuning FILE and --tuning-queries FILE.")
    paths = (out_dir / f"{corpus.stem}.final.jsonl", out_dir / f"{corpus.stem}.tuning.jsonl",
             out_dir / f"{queries_path.stem}.final.jsonl", out_dir / f"{queries_path.stem}.tuning.jsonl")
    for path in paths:
        if path.exists():
            raise UserError("the split file already exists", str(path), "Move it away, or pass --tuning FILE and "
                            "--tuning-queries FILE.")
    _write(paths[0], [_row(r) for r in records if r.id not in tuning_docs])
    _write(paths[1], [_row(r) for r in records if r.id in tuning_docs])
    _write(paths[2], [_query_row(q) for q in final_queries])
    _write(paths[3], [_query_row(q) for q in tuning_queries])
    return paths


def _row(record: Record) -> dict[str, str]:
    return {"id": record.id, "text": record.text, **({"label": record.label} if record.label else {})}


def _query_row(query: Query) -> dict[str, Any]:
    return {"id": query.id, "text": query.text, "relevant": list(query.relevant)}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    with write_handle(path, fix="Choose a writable --out folder, or pass --tuning FILE.") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def embedding_inputs(corpus: tuple[Record, ...], tuning: tuple[Record, ...], model: Path, queries: Path,
                     tuning_queries: Path) -> EmbeddingInputs:
    """Read and check both query sets against the corpora and the model; every problem at once."""
    errors: list[UserError] = []
    sets: dict[str, tuple[Query, ...]] = {}
    for name, path in (("queries", queries), ("tuning_queries", tuning_queries)):
        try:
            sets[name] = read_queries(path, f"--{name.replace('_', '-')}")
        except UserError as exc:
            errors.append(exc)
    if len(sets) == 2:
        errors += check_query_sets(sets["queries"], sets["tuning_queries"], corpus, tuning,
                                   {"queries": f"{queries} (--queries)", "tuning_queries":
                                    f"{tuning_queries} (--tuning-queries)"})
    pooling, normalize, source = _pooling(model)
    try:
        dimension = _hidden_size(model)
    except UserError as exc:
        errors.append(exc)
        dimension = 0
    options = {"pooling": pooling, "dimension": dimension}
    errors += [e for e in model_problems(model, options, f"{model} (--task sentence-embedding)")
               if "hidden_size" not in e.what]
    if errors:
        raise errors[0] if len(errors) == 1 else StudyErrors(errors, "isocost init")
    return EmbeddingInputs(queries=queries, tuning_queries=tuning_queries, n_queries=len(sets["queries"]),
                           n_tuning_queries=len(sets["tuning_queries"]), pooling=pooling, normalize=normalize,
                           dimension=dimension, source=source)


def _hidden_size(model: Path) -> int:
    hidden = read_model_config(model).get("hidden_size")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or not 1 <= hidden <= 65536:
        raise UserError("config.json names no hidden_size: the vector dimension is unknown", str(model / "config.json"),
                        "Use an encoder checkpoint (AutoModel) whose config.json has hidden_size.")
    return hidden


def _pooling(model: Path) -> tuple[str, bool, str]:
    """(pooling, normalize, where they came from): a sentence-transformers checkpoint says; else mean, normalised."""
    pooling_config = _json(model / "1_Pooling" / "config.json")
    modules = _json(model / "modules.json")
    if not isinstance(pooling_config, dict):
        return "mean", True, "not declared by the checkpoint: mean pooling, normalised (check them)"
    pooling = "cls" if pooling_config.get("pooling_mode_cls_token") else "mean"
    normalize = isinstance(modules, list) and any(
        isinstance(m, dict) and str(m.get("type", "")).endswith("Normalize") for m in modules)
    return pooling, normalize, "read from the checkpoint's 1_Pooling/config.json and modules.json"


def _json(path: Path) -> Any:
    try:
        return loads_unique(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


class EmbeddingInit:
    """The sentence-embedding part of ``isocost init``: the query sets, their split, ``[embedding]``."""

    options: tuple[InitOption, ...] = (
        InitOption("--queries", "sentence-embedding: the final query set, JSONL id, text, relevant (ids of CORPUS "
                   "inputs).", kind="file"),
        InitOption("--tuning-queries", "sentence-embedding, with --tuning: the tuning split's own queries (default "
                   "without --tuning: a fifth of --queries and the documents only they name are held out).",
                   kind="file"),
    )
    verb = "embeds"

    def check_options(self, values: Mapping[str, Any]) -> None:
        if values["queries"] is None:
            raise UserError("a sentence-embedding study needs its query set", "--queries",
                            "Pass --queries FILE: JSONL with id, text and relevant (ids of corpus inputs).")
        if (values["tuning"] is None) != (values["tuning_queries"] is None):
            raise UserError("--tuning and --tuning-queries go together", "--tuning-queries",
                            "Pass both (the tuning split and its own queries), or neither: init then holds out a "
                            "fifth of the queries and the documents only they name.")

    def split(self, values: Mapping[str, Any], corpus: Path, records: tuple[Record, ...],
              out_dir: Path) -> tuple[Path, Path, tuple[Path, ...], Mapping[str, Any]] | None:
        paths = split_with_queries(corpus, records, values["queries"], out_dir)
        return paths[0], paths[1], paths, {**values, "queries": paths[2], "tuning_queries": paths[3]}

    def inputs(self, facts: InitInputs) -> EmbeddingInputs:
        check_disjoint(facts.records, facts.tuning_records, f"{facts.corpus} and {facts.tuning}")
        return embedding_inputs(facts.records, facts.tuning_records, facts.model, facts.values["queries"],
                                facts.values["tuning_queries"])

    def max_length(self, found: Any, lengths: tuple[int, ...], limit: int) -> int | None:
        return None

    def input_lines(self, found: EmbeddingInputs, facts: InitInputs) -> list[str]:
        """[embedding] and its two query sets, every key with its comment."""
        lines = ["", f"[embedding]  # pooling and normalisation {found.source}",
                 line("embedding.pooling", found.pooling), line("embedding.normalize", found.normalize),
                 line("embedding.dimension", found.dimension)]
        for table, path, count in (("queries", found.queries, found.n_queries),
                                   ("tuning_queries", found.tuning_queries, found.n_tuning_queries)):
            lines += ["", f"[embedding.{table}]  # {count} queries",
                      line(f"embedding.{table}.path", facts.rel(path)),
                      line(f"embedding.{table}.fingerprint", fingerprint_path(path))]
        return lines

    def table_lines(self, found: Any, facts: InitInputs) -> list[str]:
        return []

    def quality_lines(self, found: Any, facts: InitInputs) -> list[str]:
        return untuned_quality(facts.reference, "ndcg@10", ["length_bucket"], {"min_cosine": ...},
                            {"metric": ": ndcg@10, mrr@10 or recall@10 over the queries"})

    def report(self, found: EmbeddingInputs, facts: InitInputs) -> tuple[list[str], list[str], int, str]:
        e = found
        return ([f"queries: {e.n_queries} final, {e.n_tuning_queries} tuning, every relevant id in its corpus; "
                 f"vectors: {e.dimension} values, {e.pooling} pooling, normalize = {str(e.normalize).lower()} "
                 f"({e.source})"], [], e.n_tuning_queries, "queries")


EMBEDDING_INIT = EmbeddingInit()
