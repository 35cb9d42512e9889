"""Freeze a campaign before its first trial: check every input, write what the campaign will hold to.

:func:`freeze` checks the corpus, tuning corpus and model against the study's fingerprints, the
labels against the model, and the warm-up against the tuning corpus; then writes into the
campaign directory the study copy, the plan catalog snapshot, ``corpus_index.csv`` (ids, labels,
token counts, length buckets), the task's own frozen inputs (an embedding's ``queries.jsonl``),
``schedule.csv`` (the rotated order) and ``campaign.json``
(:class:`~protocol.records.stages.CampaignRecord`). Nothing in them changes afterwards.

Example::

    record = freeze(study, CampaignPaths(out), launcher, progress=print)
    record.campaign_id      # 32 hex digits
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from protocol import __version__
from protocol.corpus import Record, check_disjoint, content_fingerprint, token_lengths
from protocol.costing.catalog_file import load_catalog
from protocol.costing.plans import default_catalog_path
from protocol.errors import UserError
from protocol.io.csvio import csv_writer
from protocol.io.fingerprint import fingerprint_path, tree_files
from protocol.io.safe_write import copy_file, make_dirs, write_handle
from protocol.records.codec import write_record
from protocol.records.raw_columns import RAW_SCHEMA_VERSION
from protocol.records.stages import (
    CAMPAIGN_SCHEMA_VERSION,
    CampaignRecord,
    CatalogFacts,
    HostFacts,
    InputFacts,
    Rental,
    Variant,
)
from protocol.study.load import Study
from protocol.study.model import bucket_for
from protocol.study.schedule import rotated_schedule
from protocol.tasks import index_fields, read_task_corpus, study_task
from runner.campaign.seen import check_and_record
from runner.campaign_dir.layout import FROZEN_CATALOG, CampaignPaths, now_iso
from runner.campaign_dir.raw_format import SEALED_HOSTS_KEY
from runner.launch.launcher import Launcher

Progress = Callable[[str], None]

_NO_RENTAL = "no --gpu given to `isocost run`: the plan this host is rented under is unknown"


def stat_snapshot(path: Path) -> list[tuple[str, int, int]]:
    """(file, size, mtime) of every file of ``path``: a cheap way to see that an input changed on disk."""
    files = tree_files(path) if path.is_dir() else [path]
    return [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def check_fingerprint(kind: str, path: Path, expected: str, where: str) -> None:
    """Refuse an input that is missing or whose fingerprint is not the study's."""
    if not path.exists():
        raise UserError(f"{kind} not found at {path}", where,
                        f"Fix [{kind}] path in the study (relative to the study file).")
    actual = fingerprint_path(path)
    if actual != expected:
        raise UserError(
            f"{kind} fingerprint {actual} differs from the study's {expected}",
            where,
            f"The {kind} on disk is not the one the study was written for: restore it, or update "
            f"[{kind}] fingerprint knowingly (this makes a new study).",
        )


def freeze(
    study: Study, paths: CampaignPaths, launcher: Launcher, progress: Progress, rental: Rental | None = None,
    acknowledge_reuse: bool = False, setup_started_at: str | None = None, ledger_dir: Path | None = None,
    campaign_hosts: tuple[str, ...] = (),
) -> CampaignRecord:
    """Check every input and write the frozen campaign description; returns what campaign.json holds.
    ``campaign_hosts``: in a multi-host run, the names of all its hosts, sealed into the launcher facts (and so into
    raw.csv's anchor, :data:`~runner.campaign_dir.raw_format.SEALED_HOSTS_KEY`)."""
    corpus, tuning = _checked_inputs(study, progress)
    progress(f"counting tokens of {len(corpus)} inputs with the model's tokenizer")
    lengths = token_lengths(study.model.path, [r.text for r in corpus])
    make_dirs(paths.root)
    copy_file(study.path, paths.study, paths.root)
    catalog = _freeze_catalog(study, paths)
    _write_corpus_index(paths.corpus_index, study, corpus, lengths)
    for name, source in study_task(study).frozen_files(study).items():  # the task's inputs, as checked above
        copy_file(source, paths.root / name, paths.root)
    variants = study.variants()
    _write_schedule(paths.schedule, variants, study.campaign.repetitions)
    content_fp = content_fingerprint(corpus)
    record = CampaignRecord(
        campaign_id=uuid.uuid4().hex,
        created_at=now_iso(),
        setup_started_at=setup_started_at,
        isocost_version=__version__,
        raw_schema_version=RAW_SCHEMA_VERSION,
        study_name=study.name,
        study_path=str(study.path),
        study_sha256=study.sha256,
        question=study.question,
        corpus=InputFacts(path=str(study.corpus.path), fingerprint=study.corpus.fingerprint, inputs=len(corpus),
                          content_fingerprint=content_fp, index_sha256=fingerprint_path(paths.corpus_index)),
        tuning=InputFacts(path=str(study.tuning.path), fingerprint=study.tuning.fingerprint, inputs=len(tuning)),
        model=InputFacts(path=str(study.model.path), fingerprint=study.model.fingerprint),
        warmup=study.warmup,
        warmup_texts=tuple(r.text for r in tuning[: study.warmup.inputs]),
        warmup_ids=tuple(r.id for r in tuning[: study.warmup.inputs]),
        variants=variants,
        repetitions=study.campaign.repetitions,
        order=study.campaign.order,
        launcher={**launcher.describe(), **({SEALED_HOSTS_KEY: list(campaign_hosts)} if campaign_hosts else {})},
        host=HostFacts(hostname=os.uname().nodename, cpu_count=os.cpu_count()),
        rental=rental,
        catalog=catalog,
        empty_reasons={} if rental is not None else {"rental": _NO_RENTAL},
        schema_version=CAMPAIGN_SCHEMA_VERSION,
    )
    reused = check_and_record(study, content_fp, record.campaign_id, paths.root, acknowledge_reuse, ledger_dir)
    record = dataclasses.replace(record, seen_corpus_reuse=reused)
    write_record(paths.campaign, record, paths.root)
    return record


def _checked_inputs(study: Study, progress: Progress) -> tuple[tuple[Record, ...], tuple[Record, ...]]:
    """The corpus and tuning corpus, refused unless fingerprints, labels and the warm-up's needs hold."""
    where = str(study.path)
    progress("checking corpus, tuning corpus and model fingerprints")
    check_fingerprint("corpus", study.corpus.path, study.corpus.fingerprint, where)
    check_fingerprint("tuning", study.tuning.path, study.tuning.fingerprint, where)
    check_fingerprint("model", study.model.path, study.model.fingerprint, where)
    task = study_task(study)
    corpus = read_task_corpus(study.corpus.path, task)
    tuning = read_task_corpus(study.tuning.path, task)
    check_disjoint(corpus, tuning, where)
    task.check_model(study.model.path, (*corpus, *tuning), study, f"{where}, corpus and tuning labels")
    task.check_inputs(study, corpus, tuning)
    check_warmup(study, tuning)
    return corpus, tuning


def check_warmup(study: Study, tuning: Sequence[Record]) -> None:
    """The warm-up draws its inputs from the tuning split: refuse a split smaller than ``warmup.inputs``."""
    if len(tuning) < study.warmup.inputs:
        raise UserError(
            f"the warm-up needs {study.warmup.inputs} inputs but the tuning corpus has {len(tuning)}",
            f"{study.path}, key warmup.inputs",
            "Lower warmup.inputs or add tuning data.",
        )


def checked_catalog(study: Study) -> Path:
    """The plan catalog in force (the study's, or the shipped snapshot), read: refused now, not after the campaign."""
    catalog_source = Path(study.costing.catalog or default_catalog_path())
    if not catalog_source.is_file():
        raise UserError("the plan catalog named by the study is not found", f"{study.path}, key costing.catalog",
                        "Fix the path, or remove [costing] to use the shipped dated snapshot.")
    load_catalog(catalog_source)
    return catalog_source


def _freeze_catalog(study: Study, paths: CampaignPaths) -> CatalogFacts:
    """Copy the plan catalog in force (the study's, or the shipped snapshot) into the campaign directory."""
    catalog_source = checked_catalog(study)
    copy_file(Path(catalog_source), paths.root / FROZEN_CATALOG, paths.root)
    return CatalogFacts(snapshot=FROZEN_CATALOG, source=str(catalog_source),
                        sha256=fingerprint_path(paths.root / FROZEN_CATALOG))


def _write_corpus_index(path: Path, study: Study, corpus: Sequence[Record], lengths: Sequence[int]) -> None:
    """id, label, n_tokens, length_bucket, then the task's own fields (a generation's ``reference``) as JSON
    strings, so that validation re-derives every score from the campaign directory alone."""
    fields = study_task(study).corpus_fields
    with write_handle(path, path.parent) as handle:
        writer = csv_writer(handle)  # a label or field that starts like a formula is shown, never run
        writer.writerow(["id", "label", "n_tokens", "length_bucket", *fields])
        for record, n_tokens in zip(corpus, lengths, strict=False):
            bucket = bucket_for(n_tokens, study.length_buckets) if study.length_buckets else ""
            writer.writerow([record.id, record.label, n_tokens, bucket, *index_fields(record, fields)])


def _write_schedule(path: Path, variants: tuple[Variant, ...], repetitions: int) -> None:
    with write_handle(path, path.parent) as handle:
        writer = csv_writer(handle)
        writer.writerow(["order_index", "trial_id", "variant_id", "repetition"])
        for slot in rotated_schedule(variants, repetitions):
            writer.writerow([slot.order_index, slot.trial_id, slot.variant_id, slot.repetition])
