"""The 1.0 versions of the files that carry no version of their own.

Every file isocost writes has one declared 1.0 version (docs/formats.md lists them all, with the constant each
comes from). Most carry it inside (``schema_version``, campaign.json's ``raw_schema_version``); the files below
do not: a trial's output files, the campaign's frozen tables and the catalog CSV are plain lines and columns whose
layout is fixed here. A change to one of these layouts bumps its constant, and the reader that refuses the other
layout names it. The promise for all of them: every isocost 1.x reads every file a 1.x wrote.

Example::

    from protocol.records.versions import TRIAL_OUTPUTS_VERSION   # 1: predictions.jsonl, vectors.f32 …, batches.jsonl
"""

from __future__ import annotations

#: A trial's output files: predictions.jsonl, vectors.f32 + vector_ids.jsonl, query_vectors.f32 + query_ids.jsonl,
#: generations.jsonl (each task's, as its spec.json asks) and batches.jsonl; sealed by raw.csv's ``*_sha256``
#: columns.
TRIAL_OUTPUTS_VERSION = 1
#: The campaign's frozen tables and validate's table: corpus_index.csv, schedule.csv, queries.jsonl (an
#: embedding study's frozen query sets) and verdicts.csv.
CAMPAIGN_TABLES_VERSION = 1
#: The dated plan catalog as CSV (protocol/data/catalog-*.csv, a campaign's frozen catalog.csv).
CATALOG_CSV_VERSION = 1
#: The evaluations ledger (``.isocost/evaluations.jsonl``: final corpora already evaluated, with their rule).
EVALUATIONS_LEDGER_VERSION = 1
