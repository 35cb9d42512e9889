"""Study file (TOML) → frozen, validated :class:`~protocol.study.model.Study`.

A study is one decision question, fixed before anything is timed: the corpus,
the model, the quality rule, the warm-up rule, the variants. Unknown keys are
errors; every error names the file, the key and the fix, and every problem of
one file is reported at once.

This module reads the file and runs the checks in order; the records are in
:mod:`protocol.study.model` (with the variant expansion), each table's
parser in :mod:`protocol.study.tables`, and the key-by-key reader that
keeps every error in :mod:`protocol.study.reader`.

Example: ``load_study("study.toml").variants()`` lists one variant per distinct series value.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from protocol.costing.job import parse_job
from protocol.engines import engine_named
from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes
from protocol.io.names import check_plain_text
from protocol.io.safe_read import decode_text, read_bytes
from protocol.study.model import LengthBucket, Study
from protocol.study.reader import ErrorCollector, StudyErrors, TableReader, check_bound, sub_table
from protocol.study.schema import table_keys
from protocol.study.tables import (
    parse_base,
    parse_campaign,
    parse_costing,
    parse_data_ref,
    parse_deadline,
    parse_engines,
    parse_images,
    parse_length_buckets,
    parse_quality,
    parse_series,
    parse_warmup,
)
from protocol.study.traffic import Traffic, parse_traffic
from protocol.tasks import DEFAULT_TASK, Task, task_named, task_names

STUDY_SCHEMA_VERSION = 1
#: ``offline``: one pass over the corpus; ``server``: requests under MLPerf LoadGen's Server scenario (``[traffic]``).
SCENARIOS = ("offline", "server")
#: The tasks a server study serves (runner/trial/serving: each answer judged by the task's gate; generation with
#: LoadGen's first-token and per-output-token latencies).
SERVED_TASKS = ("text-classification", "sentence-embedding", "text-generation")


#: The top-level keys and tables every study accepts, as declared (a task adds its own tables, ``option_tables``).
_TOP_KEYS = dict.fromkeys(table_keys("", DEFAULT_TASK), "")


#: A study is a page of TOML; a larger file is a mistake (or an attack on the parser).
MAX_STUDY_BYTES = 2**20
MAX_NAME_CHARS = 100


def load_study(path: Path | str) -> Study:
    """Read and validate a study file (a regular file of UTF-8 TOML, BOM accepted, at most 1 MiB)."""
    path = Path(path)
    fix = "Check the path, or run `isocost demo prepare`."
    return study_from_bytes(read_bytes(path, "study file", max_bytes=MAX_STUDY_BYTES, fix=fix), path)


def study_from_bytes(raw_bytes: bytes, path: Path) -> Study:
    """The study in ``raw_bytes`` (the file at ``path``, read already): what :func:`load_study` parses."""
    text = decode_text(raw_bytes, "study file", str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"not valid TOML: {exc}", str(path), "Fix the syntax at that line.") from None
    except RecursionError:
        raise UserError("not valid TOML: nested too deeply", str(path), "A study nests tables a few levels deep.") \
            from None
    except ValueError as exc:  # an integer of thousands of digits (int max_str_digits), a date out of range
        raise UserError(f"not valid TOML: {str(exc)[:160]}", str(path), "Fix the value.") from None
    return parse_study(data, path=path.resolve(), sha256=sha256_bytes(raw_bytes))


def parse_study(data: dict[str, Any], *, path: Path, sha256: str) -> Study:
    """Validate every part of the study; all problems are reported together (:class:`StudyErrors`).

    Each table is parsed by its own step (:mod:`protocol.study.tables`); a failing step is kept and the
    next one runs, so one run of ``isocost check`` lists every problem.
    """
    source = str(path)
    top = TableReader(source, data, "")
    version = top.declared("schema_version")
    if version != STUDY_SCHEMA_VERSION:
        raise UserError(
            f"study schema_version {version} is not supported (this isocost reads {STUDY_SCHEMA_VERSION})",
            top.where("schema_version"),
            f"Set `schema_version = {STUDY_SCHEMA_VERSION}` and check the keys against docs/study.md.",
        )
    check = ErrorCollector()
    fields = {**_identity(top, check), **_data_refs(top, check, path.parent)}
    task = task_named(fields["task"] or DEFAULT_TASK)
    fields.update(_rules(top, check, task))
    fields["task_options"] = check.attempt(task.parse_options, top, path.parent) or {}
    fields["traffic"] = check.attempt(_traffic, top, fields["scenario"], task, path.parent)
    fields.update(_plans(top, check, data, path.parent, fields["length_buckets"], fields["expected_artifacts"]))
    _other_tasks_tables(top, task, check)
    check.attempt(top.finish, {**_TOP_KEYS, **task.option_tables})
    if check.errors:
        raise check.errors[0] if len(check.errors) == 1 else StudyErrors(check.errors, source)
    study = Study(path=path, sha256=sha256, **fields)
    _check_variants(study, source)
    return study


def _identity(top: TableReader, check: ErrorCollector) -> dict[str, Any]:
    """The top-level scalars: name, question, scenario, expected_artifacts."""
    return {
        "name": check.attempt(_name, top),
        "question": check.attempt(_question, top),
        "scenario": check.attempt(_scenario, top),
        "expected_artifacts": check.attempt(top.declared, "expected_artifacts"),
        "task": check.attempt(_task, top),
    }


def _data_refs(top: TableReader, check: ErrorCollector, base_dir: Path) -> dict[str, Any]:
    """[corpus], [tuning] and [model], and the rule that tuning data is not the final corpus."""
    corpus = check.attempt(parse_data_ref, top, "corpus", base_dir)
    tuning = check.attempt(parse_data_ref, top, "tuning", base_dir)
    model = check.attempt(parse_data_ref, top, "model", base_dir)
    if corpus is not None and tuning is not None and corpus.path == tuning.path:
        check.errors.append(UserError(
            "the tuning corpus is the final corpus",
            top.where("tuning.path"),
            "Tuning data must stay separate from the final comparison corpus.",
        ))
    return {"corpus": corpus, "tuning": tuning, "model": model}


def _other_tasks_tables(top: TableReader, task: Task, check: ErrorCollector) -> None:
    """A table another task reads is named as such, not as an unknown key."""
    for other in task_names():
        if other == task.name:
            continue
        for table in task_named(other).option_tables:
            if table in top.table and table not in task.option_tables:
                top.used.add(table)
                check.errors.append(UserError(f"[{table}] is read by task {other!r}, and this study's task is "
                                              f"{task.name!r}", top.where(table),
                                              f'Remove [{table}], or set task = "{other}".'))


def _rules(top: TableReader, check: ErrorCollector, task: Task) -> dict[str, Any]:
    """[[length_buckets]], [warmup], [campaign], [base], [[series]] and [quality], in that order."""
    buckets = check.attempt(parse_length_buckets, top)  # None: the buckets are wrong, already reported
    warmup = check.attempt(parse_warmup, top)
    campaign = check.attempt(parse_campaign, top)
    base = check.attempt(parse_base, top)
    series = check.attempt(parse_series, top, base)
    quality = check.attempt(parse_quality, top, buckets, task)
    engines = check.attempt(parse_engines, top) or {}
    return {"length_buckets": buckets, "warmup": warmup, "campaign": campaign, "base": base, "series": series,
            "quality": quality, "engine_settings": engines}


def _plans(
    top: TableReader, check: ErrorCollector, data: dict[str, Any], base_dir: Path,
    buckets: tuple[LengthBucket, ...] | None, expected_artifacts: int | None,
) -> dict[str, Any]:
    """What the campaign is planned and priced against: [deadline], [costing], [images], [job]."""
    deadline = check.attempt(parse_deadline, top)
    costing = check.attempt(parse_costing, top, base_dir)
    images = check.attempt(parse_images, top)
    top.used.add("job")
    job = check.attempt(parse_job, data.get("job"), top.source, tuple(b.name for b in buckets or ()),
                        expected_artifacts)
    return {"deadline": deadline, "costing": costing, "images": images, "job": job}


def _check_variants(study: Study, source: str) -> None:
    """Across tables: one way to set seeds, a bounded number of passes, a reference that is a variant."""
    campaign, quality = study.campaign, study.quality
    if campaign.seeds and any(s.field == "seed" for s in study.series):
        raise UserError(
            "campaign.seeds and a series over `seed` both set seeds",
            f"{source}, key campaign.seeds",
            "Use one of them: common seeds for every variant, or a seed series.",
        )
    ids = [v.variant_id for v in study.series_variants()]
    rates = len(study.traffic.rates_qps) if study.traffic is not None and study.traffic.rates_qps else 1
    passes = len(ids) * rates * max(1, len(campaign.seeds)) * campaign.repetitions
    per_rate = f" x {rates} rates" if rates > 1 else ""
    check_bound("passes", passes, f"{source}, keys series and campaign.repetitions",
                shown=f"the planned passes ({len(ids)} variants{per_rate} x {max(1, len(campaign.seeds))} seeds x "
                      f"{campaign.repetitions} repetitions)")
    if quality.reference_variant not in ids:
        raise UserError(
            f"reference variant {quality.reference_variant!r} is not one of the variants",
            f"{source}, key quality.reference_variant",
            f"Use one of: {', '.join(ids)}.",
        )
    _check_engines(study, source)


def _check_engines(study: Study, source: str) -> None:
    """Every variant's engine runs the study's task with the variant's settings; every [engines.NAME] table is of an
    engine some variant runs."""
    used = set()
    for variant in study.series_variants():
        engine = engine_named(variant.engine, f"{source}, key base.engine")
        used.add(engine.name)
        refusal = engine.refusal(study.task, variant.config())
        if refusal:
            where = "series" if any(s.field == "engine" for s in study.series) else "base.engine"
            raise UserError(f"variant {variant.variant_id}: {refusal}", f"{source}, key {where}",
                            "Run this engine in variants it can run (docs/engines.md), or drop it from the study.")
    _check_in_flight(study, source)
    for name in study.engine_settings:
        if name not in used:
            raise UserError(f"[engines.{name}] is declared but no variant runs engine {name}",
                            f"{source}, key engines.{name}", "Remove the table, or run the engine in a variant.")


def _check_in_flight(study: Study, source: str) -> None:
    """``[traffic] max_batches_in_flight`` above 1 only where every variant's engine runs batches concurrently."""
    if study.traffic is None or study.traffic.max_batches_in_flight <= 1:
        return
    for variant in study.series_variants():
        engine = engine_named(variant.engine, f"{source}, key base.engine")
        if not engine.concurrent or not study.settings_of(engine.name).get(engine.concurrent):
            able = engine.concurrent and f"; engine {engine.name} does with {engine.concurrent} = true"
            raise UserError(
                f"max_batches_in_flight = {study.traffic.max_batches_in_flight} needs an engine that runs batches at "
                f"once; variant {variant.variant_id}'s engine {engine.name} runs one batch at a time{able or ''}",
                f"{source}, key traffic.max_batches_in_flight",
                "Set max_batches_in_flight = 1, or serve with an engine that batches continuously (engine vllm "
                "with server = true in [engines.vllm]), the others in a study of their own.")


def _name(top: TableReader) -> str:
    name = top.declared("name")
    if not name or len(name) > MAX_NAME_CHARS or not name[0].isalnum() \
            or not all(c.isalnum() or c in "-_." for c in name):
        raise UserError(f"name must be 1 to {MAX_NAME_CHARS} letters, digits, '-', '_' or '.', starting with a letter "
                        "or digit", top.where("name"))
    return str(name)


def _question(top: TableReader) -> str:
    question = str(top.declared("question")).strip()
    if not question:
        raise UserError("the question is empty", top.where("question"), "Write the decision question first.")
    # It heads the summary, the memo and the report, and is printed on terminals: no control characters.
    return check_plain_text(question, "the question", top.where("question"), max_chars=2000, newlines=True)


def _task(top: TableReader) -> str:
    name = top.declared("task")
    return task_named(str(name), top.where("task")).name


def _scenario(top: TableReader) -> str:
    scenario = top.declared("scenario")
    if scenario not in SCENARIOS:
        raise UserError(
            f"scenario {scenario!r} is not one of {', '.join(map(repr, SCENARIOS))}",
            top.where("scenario"),
            'Use "offline" (a pass over the corpus) or "server" (requests at a declared rate under MLPerf '
            "LoadGen's Server scenario, with a [traffic] table: docs/serving.md).",
        )
    return str(scenario)


def _traffic(top: TableReader, scenario: str | None, task: Task, base_dir: Path) -> Traffic | None:
    """The ``[traffic]`` table of a ``scenario = "server"`` study (None for offline): one without the other is
    refused, and so (in this release) are a trace and a task outside :data:`SERVED_TASKS`. A series of rates makes
    one variant of each configuration per rate (:meth:`~protocol.study.model.Study.rated_variants`)."""
    top.used.add("traffic")
    if scenario is None:  # the scenario is wrong: already reported
        return None
    declared = "traffic" in top.table
    if scenario == "offline":
        if declared:
            raise UserError('[traffic] is declared but scenario = "offline" sends no requests', top.where("traffic"),
                            'Set scenario = "server" to serve requests at the [traffic] rate, or remove [traffic].')
        return None
    if not declared:
        raise UserError('scenario = "server" needs a [traffic] table', top.where("scenario"),
                        "Add [traffic] with rate_qps, min_query_count and latency_bound_ms (docs/serving.md), or "
                        'use scenario = "offline".')
    if task.name not in SERVED_TASKS:
        raise UserError(f'scenario = "server" is not wired for task {task.name!r} yet', top.where("scenario"),
                        f"Serve a study of {', '.join(SERVED_TASKS)}, or run this one with scenario = \"offline\" "
                        "(docs/serving.md).")
    traffic = parse_traffic(sub_table(top, "traffic"), task.name, base_dir)
    if traffic.arrivals == "trace":
        raise UserError('arrivals = "trace" is not wired yet: LoadGen\'s Server scenario draws its own Poisson '
                        "arrivals", top.where("traffic.arrivals"), 'Use arrivals = "poisson" with one rate_qps.')
    return traffic

