"""The query set of a sentence-embedding study: what the retrieval metric of every pass is measured on.

A query file is JSONL, one ``{"id": …, "text": …, "relevant": [document id, …]}`` object a line (other keys
are ignored). Ids are unique, texts non-empty, every query names at least one relevant document; the study
fingerprints the file (``[embedding.queries]``, ``[embedding.tuning_queries]``). :func:`check_query_sets`
holds the rules across files, each problem an error naming the file and key: every relevant id is an input of
the corpus the queries search (the final corpus, or the tuning split), and the final queries are disjoint from
the tuning split (no id or text in common with the tuning queries, no text equal to a tuning input).

Example::

    queries = read_queries(Path("queries.jsonl"), "study.toml, key embedding.queries.path")
    queries[0].relevant      # ('bbc-tech-012-full',)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.corpus import MAX_ID_CHARS, Record, id_form, normalise_text
from protocol.errors import UserError
from protocol.io.jsonio import json_problem, loads_unique
from protocol.io.safe_read import decode_text, read_bytes

#: A query file of a million headlines is about 100 MiB.
MAX_QUERY_FILE_BYTES = 2**28
#: How many problems one error lists before "and N more".
SHOWN_PROBLEMS = 5


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: tuple[str, ...]

    def to_item(self) -> list[Any]:
        """The JSON-ready form a trial spec carries: ``[id, text, [relevant…]]``."""
        return [self.id, self.text, list(self.relevant)]

    @classmethod
    def from_item(cls, item: Sequence[Any]) -> Query:
        return cls(str(item[0]), str(item[1]), tuple(str(r) for r in item[2]))


def read_queries(path: Path, where: str) -> tuple[Query, ...]:
    """Read and check one query file; every malformed line is listed in one error naming the file."""
    fix = "Write one {\"id\": …, \"text\": …, \"relevant\": [document id, …]} object per line (JSONL)."
    if path.suffix.lower() != ".jsonl":
        raise UserError(f"a query file must be .jsonl, got {path.suffix or 'no suffix'!r}", where, fix)
    data = read_bytes(path, "query file", max_bytes=MAX_QUERY_FILE_BYTES, fix=fix)
    text = decode_text(data, "query file", str(path)).removeprefix("\ufeff")
    queries: list[Query] = []
    problems: list[str] = []
    seen: set[str] = set()
    forms: dict[str, int] = {}  # the NFC form of each query id → its line (café twice is ambiguous)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        query, problem = _query(line, seen)
        if query is not None and not problem and forms.setdefault(id_form(query.id), number) != number:
            problem = (f"query id {ascii(query.id)} differs from the id on line {forms[id_form(query.id)]} only by "
                       "Unicode normalisation (write each id in one form, NFC)")
        if problem:
            problems.append(f"line {number}: {problem}")
        elif query is not None:
            seen.add(query.id)
            queries.append(query)
    if problems:
        raise UserError(_listed(f"{len(problems)} malformed query line(s)", problems), f"{path} ({where})", fix)
    if not queries:
        raise UserError("the query file holds no query", f"{path} ({where})", fix)
    return tuple(queries)


def _query(line: str, seen: set[str]) -> tuple[Query | None, str]:
    try:
        item = loads_unique(line)
    except (ValueError, RecursionError) as exc:
        return None, json_problem(exc)
    if not isinstance(item, dict):
        return None, "not a JSON object"
    ident, text, relevant = item.get("id"), item.get("text"), item.get("relevant")
    if not isinstance(ident, str) or not ident or len(ident) > MAX_ID_CHARS or not ident.isprintable():
        return None, f"id must be a printable string of 1 to {MAX_ID_CHARS} characters, got {ident!r:.60}"
    if ident in seen:
        return None, f"duplicate query id {ident!r}"
    if not isinstance(text, str) or not text.strip():
        return None, f"query {ident!r}: text must be a non-empty string"
    if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) and r for r in relevant):
        return None, f"query {ident!r}: relevant must be a non-empty list of document ids"
    if len(set(relevant)) != len(relevant):
        return None, f"query {ident!r}: a relevant document is named twice"
    return Query(ident, text, tuple(relevant)), ""


def _listed(head: str, problems: Sequence[str]) -> str:
    shown = "; ".join(problems[:SHOWN_PROBLEMS])
    more = f" (and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
    return f"{head}: {shown}{more}"


def relevance_problems(queries: Iterable[Query], corpus_ids: set[str]) -> list[str]:
    """Each relevant id that is not an input of the corpus, as ``query 'q': document 'd'``."""
    forms = {id_form(i): i for i in corpus_ids}
    return [f"query {q.id!r} names document {r!r}" + (
        f" (the corpus has {ascii(forms[id_form(r)])}: the same text in another Unicode normalisation form)"
        if id_form(r) in forms else "") for q in queries for r in q.relevant if r not in corpus_ids]


def check_query_sets(final: Sequence[Query], tuning_queries: Sequence[Query], corpus: Sequence[Record],
                     tuning: Sequence[Record], where: dict[str, str]) -> list[UserError]:
    """The rules across the query files and the corpora; ``where`` names ``queries`` and ``tuning_queries``."""
    errors: list[UserError] = []
    missing = relevance_problems(final, {r.id for r in corpus})
    if missing:
        errors.append(UserError(_listed(f"{len(missing)} relevant document(s) absent from the final corpus",
                                        missing), where["queries"],
                                "Every relevant id must be an input of [corpus]: fix the query file or the corpus."))
    missing = relevance_problems(tuning_queries, {r.id for r in tuning})
    if missing:
        errors.append(UserError(_listed(f"{len(missing)} relevant document(s) absent from the tuning split",
                                        missing), where["tuning_queries"],
                                "Every relevant id of a tuning query must be an input of [tuning]."))
    overlap = _overlap(final, tuning_queries, tuning)
    if overlap:
        errors.append(UserError(_listed(f"the final query set overlaps the tuning split ({len(overlap)})", overlap),
                                where["queries"],
                                "Keep the final queries apart from the tuning data: a threshold tuned on the queries "
                                "it is judged on is no threshold."))
    return errors


def _overlap(final: Sequence[Query], tuning_queries: Sequence[Query], tuning: Sequence[Record]) -> list[str]:
    tuning_ids = {q.id for q in tuning_queries}
    tuning_texts = {normalise_text(q.text): q.id for q in tuning_queries}
    input_texts = {normalise_text(r.text): r.id for r in tuning}
    input_ids = {r.id for r in tuning}
    found = []
    for query in final:
        text = normalise_text(query.text)
        if query.id in tuning_ids:
            found.append(f"query id {query.id!r} is also a tuning query's")
        elif text in tuning_texts:
            found.append(f"query {query.id!r} has the text of tuning query {tuning_texts[text]!r}")
        elif text in input_texts:
            found.append(f"query {query.id!r} has the text of tuning input {input_texts[text]!r}")
        found += [f"query {query.id!r} names tuning input {r!r}" for r in query.relevant if r in input_ids]
    return found
