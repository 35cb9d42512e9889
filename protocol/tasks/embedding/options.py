"""The study tables of a sentence-embedding study, and the input checks made before anything runs.

``[embedding]`` declares how a vector is made and what it is checked on::

    [embedding]
    pooling = "mean"          # "mean" over the attention mask, or "cls" (the first token's hidden state)
    normalize = true          # L2-normalise each vector in the trial (similarities are cosines either way)
    dimension = 384           # the model's hidden size: every vector has this many float32 values
    [embedding.queries]       # the final query set: JSONL id, text, relevant (ids of final corpus inputs)
    path = "queries.jsonl"
    fingerprint = "sha256:…"
    [embedding.tuning_queries] # the tuning query set: relevant ids are inputs of the tuning split
    path = "tuning-queries.jsonl"
    fingerprint = "sha256:…"

and ``[quality] min_cosine`` (default 0.999, in (0, 1]) the cosine to the reference variant's vector an input
needs to agree. :func:`parse_options` gives the JSON-ready ``task_options`` every trial spec carries: the
final queries (id, text, relevant ids) are read into it when their file is readable with the study's
fingerprint, so each trial embeds them. A campaign keeps a byte copy of the final query file
(:data:`FROZEN_QUERIES`, checked against the study's fingerprint), read when the frozen ``study.toml`` of the
campaign directory is parsed. :func:`check_inputs` makes every input check at once (files, fingerprints,
relevant ids in their corpus, final queries apart from the tuning split, the model's hidden size and tokenizer).

Example::

    options = parse_options(TableReader("study.toml", data, ""), Path("."))
    options["pooling"], len(options["queries"]["items"])    # "mean", 300
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.corpus import Record
from protocol.errors import UserError
from protocol.hardware.memory import read_model_config
from protocol.io.fingerprint import fingerprint_path
from protocol.study.model import DataRef
from protocol.study.reader import ErrorCollector, StudyErrors, TableReader, resolved_path
from protocol.tasks.embedding.queries import Query, check_query_sets, read_queries

POOLINGS = ("mean", "cls")
#: A campaign's byte copy of the final query file, beside its frozen study.toml.
FROZEN_QUERIES = "queries.jsonl"
QUERY_SETS = ("queries", "tuning_queries")
_TABLE_FIX = ('Add the table with path = "…" and fingerprint = "sha256:…" (or start from `isocost init CORPUS MODEL '
              "--task sentence-embedding --queries FILE`).")


def parse_options(top: TableReader, base_dir: Path) -> dict[str, Any]:
    """``[embedding]`` as ``task_options``; every problem of the table at once (StudyErrors)."""
    table = sub_table(top, "embedding", "Add a table [embedding] with pooling, normalize, dimension, "
                      "[embedding.queries] and [embedding.tuning_queries] (or start from `isocost init CORPUS MODEL "
                      "--task sentence-embedding --queries FILE`).")
    check = ErrorCollector()
    check.attempt(table.require, ("pooling", "normalize", "dimension", *QUERY_SETS))
    present = set(table.table)
    options: dict[str, Any] = {
        "pooling": check.attempt(table.choice, "pooling", POOLINGS) if "pooling" in present else None,
        "normalize": check.attempt(table.declared, "normalize") if "normalize" in present else None,
        "dimension": check.attempt(table.declared, "dimension") if "dimension" in present else None,
    }
    for name in QUERY_SETS:
        options[name] = check.attempt(_data_ref, table, name, base_dir) if name in present else None
    check.attempt(table.finish, {"pooling": "", "normalize": "", "dimension": "", "queries": "", "tuning_queries": ""})
    final, tuning = options["queries"], options["tuning_queries"]
    if final is not None and tuning is not None and final.path == tuning.path:
        check.errors.append(UserError("the final and the tuning query sets are the same file",
                                      table.where("tuning_queries.path"), "Give the tuning split its own queries."))
    errors = check.errors
    if errors:
        raise errors[0] if len(errors) == 1 else StudyErrors(errors, top.source)
    for name in QUERY_SETS:
        ref = options[name]
        options[name] = {"path": str(ref.path), "fingerprint": ref.fingerprint}
    items = _readable_items(options["queries"], base_dir)
    if items is not None:
        options["queries"]["items"] = items
    return options


def sub_table(top: TableReader, key: str, fix: str = "") -> TableReader:
    """A table inside ``top``, its keys named with their full dotted path (``embedding.queries.path``)."""
    return TableReader(top.source, top.get(key, dict, fix=fix or _TABLE_FIX), f"{top.prefix}{key}.")


def _data_ref(table: TableReader, key: str, base_dir: Path) -> DataRef:
    """``[embedding.<key>]``: path (relative to the study) and fingerprint, as [corpus] has them."""
    ref = sub_table(table, key)
    ref.require(("path", "fingerprint"))
    rel = str(ref.path("path"))
    fingerprint = ref.declared("fingerprint")
    if not fingerprint.startswith("sha256:") or len(fingerprint) != 71:
        raise UserError("fingerprint must be 'sha256:' followed by 64 hex digits", ref.where("fingerprint"),
                        "Compute it with `isocost fingerprint PATH`.")
    ref.finish({"path": "", "fingerprint": ""})
    path = Path(rel) if Path(rel).is_absolute() else resolved_path(base_dir / rel, ref.where("path"))
    return DataRef(path=path, fingerprint=fingerprint)


def parse_quality_extras(quality: TableReader) -> dict[str, Any]:
    """``[quality] min_cosine``, as :data:`protocol.study.schema.KEYS` declares it."""
    return {"min_cosine": quality.declared("min_cosine")}


def query_file(options: dict[str, Any], base_dir: Path | None = None) -> Path:
    """Where a query set is read from: the campaign's frozen copy when ``base_dir`` is a campaign directory,
    else the path the study names."""
    if base_dir is not None and (base_dir / "campaign.json").is_file() and (base_dir / FROZEN_QUERIES).is_file():
        return base_dir / FROZEN_QUERIES
    return Path(options["path"])


def _readable_items(ref: dict[str, Any], base_dir: Path) -> list[list[Any]] | None:
    """The query items of a readable file with the study's fingerprint; None otherwise (check_inputs says why)."""
    path = query_file(ref, base_dir)
    try:
        if fingerprint_path(path) != ref["fingerprint"]:
            return None
        return [q.to_item() for q in read_queries(path, "embedding.queries")]
    except UserError:
        return None


def load_query_set(study: Any, name: str) -> tuple[Query, ...]:
    """One query set of the study, read and checked: the file exists and has the study's fingerprint."""
    ref = study.task_options[name]
    path = Path(ref["path"])
    where = f"{study.path}, key embedding.{name}"
    if not path.is_file():
        raise UserError(f"query file not found at {path}", f"{where}.path", f"Fix [embedding.{name}] path.")
    actual = fingerprint_path(path)
    if actual != ref["fingerprint"]:
        raise UserError(f"query file fingerprint {actual} differs from the study's {ref['fingerprint']}",
                        f"{where}.fingerprint", f"Restore {path.name}, or update the fingerprint knowingly "
                        "(`isocost fingerprint PATH`: this makes a new study).")
    return read_queries(path, f"{where}.path")


def check_inputs(study: Any, corpus: Sequence[Record], tuning: Sequence[Record]) -> None:
    """Every input check of an embedding study, all at once: query files, relevant ids, the tuning split kept
    apart, the model's hidden size and its tokenizer's [CLS] token for ``pooling = "cls"``."""
    errors: list[UserError] = []
    sets: dict[str, tuple[Query, ...]] = {}
    for name in QUERY_SETS:
        try:
            sets[name] = load_query_set(study, name)
        except UserError as exc:
            errors.append(exc)
    if len(sets) == len(QUERY_SETS):
        where = {name: f"{study.task_options[name]['path']} ({study.path}, key embedding.{name})"
                 for name in QUERY_SETS}
        errors += check_query_sets(sets["queries"], sets["tuning_queries"], corpus, tuning, where)
    errors += model_problems(study.model.path, study.task_options, str(study.path))
    if errors:
        raise errors[0] if len(errors) == 1 else StudyErrors(errors, str(study.path))


def model_problems(model_dir: Path, options: dict[str, Any], source: str) -> list[UserError]:
    """The checkpoint against ``[embedding]``: config.json's hidden_size is the dimension, and a [CLS] token
    exists for cls pooling (read from the files, no torch)."""
    errors: list[UserError] = []
    try:
        config = read_model_config(model_dir)
    except UserError as exc:
        return [exc]
    hidden = config.get("hidden_size")
    if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden != options["dimension"]:
        errors.append(UserError(f"the model's hidden_size is {hidden}, the study declares dimension "
                                f"{options['dimension']}", f"{source}, key embedding.dimension",
                                f"Set dimension = {hidden} (config.json of {model_dir})."))
    if options["pooling"] == "cls" and not _has_cls_token(model_dir):
        errors.append(UserError("pooling = \"cls\" needs a [CLS] token, and the model's tokenizer has none "
                                "(tokenizer_config.json and special_tokens_map.json name no cls_token)",
                                f"{source}, key embedding.pooling",
                                'Use pooling = "mean", or a checkpoint whose tokenizer starts every input with a '
                                "[CLS] token."))
    return errors


def _has_cls_token(model_dir: Path) -> bool:
    from protocol.io.jsonio import loads_unique

    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        try:
            data = loads_unique((Path(model_dir) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("cls_token"):
            return True
    return False


def tuning_options(study: Any) -> dict[str, Any]:
    """The study's ``task_options`` for a pass over the tuning split: its queries are the tuning queries."""
    ref = study.task_options["tuning_queries"]
    items = [q.to_item() for q in load_query_set(study, "tuning_queries")]
    return {**study.task_options, "queries": {**ref, "items": items}}
