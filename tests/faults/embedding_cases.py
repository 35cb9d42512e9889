"""Fault cases of the sentence-embedding task (issue 22): a real small embedding campaign, one fault each.

The encoder is the fault suite's own tiny checkpoint loaded as an ``AutoModel`` (its MiniLM encoder; the head is
ignored), so no other model is needed. Rows lost is attempts made minus rows kept, as for every case.

Example: ``EMBEDDING_CASES["embedding-killed-mid-pass"](process_context(root, model))``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cases import Context, Outcome, fault, rows_lost, run_killing_first_trial  # noqa: I001 (tests/faults on the path)
from embedworkspace import write_embed_workspace

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.tasks.embedding.vector_file import read_vectors
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw


def _study(ctx: Context, **options: object) -> Path:
    study = write_embed_workspace(ctx.root / "ws", model=ctx.model, **options)  # type: ignore[arg-type]
    for path in [study.parent, *study.parent.rglob("*")]:  # a container's non-root user reads the inputs
        path.chmod(0o755 if path.is_dir() else 0o644)
    return study


def case_killed_mid_pass(ctx: Context) -> Outcome:
    """SIGKILL once three vectors are written: the row is kept, and so is every completed vector."""
    study = _study(ctx, n=12, batches="[1]")
    out = ctx.root / "out"
    first = out / "trials" / "001-r1-batch_size-1"
    run_killing_first_trial(ctx, study, out, "vector_ids.jsonl", lines=3, sleep_s=0.4)
    row = read_raw(out / "raw.csv")[0]
    kept = read_vectors(first / "vectors.f32", first / "vector_ids.jsonl")
    completed = int(row["completed"] or 0)
    ok = (row["status"] == "interrupted" and completed >= 3 and row["corpus_accepted"] == "false"
          and len(kept.ids) >= completed and kept.rows >= len(kept.ids) and not (first / "query_vectors.f32").exists())
    return Outcome("embedding trial killed mid-pass (SIGKILL)", ctx.launcher_name,
                   "interrupted, completed vectors kept in vectors.f32", f"{row['status']}, completed {completed}, "
                   f"{kept.rows} vector rows and {len(kept.ids)} ids kept", rows_lost(out), ok, row["notes"][:120])


def _corrupt(kind: str, reason: str) -> Callable[[Context], Outcome]:
    def case(ctx: Context) -> Outcome:
        study = _study(ctx, n=6, batches="[2]")
        out = ctx.root / "out"
        with fault(f"corrupt:{kind}"):
            run_campaign(study, out, ctx.launcher_factory())
        row = read_raw(out / "raw.csv")[0]
        ok = row["status"] == "ok" and row["corpus_accepted"] == "false" and reason in row["quality_verdict"]
        return Outcome(f"embedding ids file: {kind}", ctx.launcher_name, f"rejected: {reason}",
                       row["quality_verdict"][:90], rows_lost(out), ok, row["notes"][:120])

    return case


def case_query_absent_from_corpus(ctx: Context) -> Outcome:
    """A query naming a document the corpus lacks: refused before the first trial, naming file and key."""
    study = _study(ctx, n=6, batches="[1]")
    queries = study.parent / "queries.jsonl"
    with open(queries, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "qx", "text": "nowhere", "relevant": ["c-404"]}) + "\n")
    text = study.read_text()
    old = text.split('path = "queries.jsonl"\nfingerprint = "')[1][:71]
    study.write_text(text.replace(old, fingerprint_path(queries)))
    out = ctx.root / "out"
    try:
        run_campaign(study, out, ctx.launcher_factory())
        message = "started"
    except UserError as exc:
        message = exc.message
    ok = "query 'qx' names document 'c-404'" in message and "key embedding.queries" in message \
        and not (out / "raw.csv").exists()
    return Outcome("query names a document absent from the corpus", ctx.launcher_name,
                   "refused at start, naming file and key; no trial", message[:90], 0, ok, message[:160])


EMBEDDING_CASES: dict[str, Callable[[Context], Outcome]] = {
    "embedding-killed-mid-pass": case_killed_mid_pass,
    "embedding-duplicate-ids": _corrupt("duplicate", "duplicate id(s)"),
    "embedding-truncated-ids": _corrupt("truncate", "cut short (no line end)"),
    "embedding-query-absent": case_query_absent_from_corpus,
}
#: The cases run again with trials in containers where an engine answers.
EMBEDDING_DOCKER_CASES = ("embedding-killed-mid-pass", "embedding-duplicate-ids")
