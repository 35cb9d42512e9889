"""``isocost init``: a complete, commented study for the user's own corpus and checkpoint.

Nothing is hidden: every key is written with its default and a one-line
comment (from :mod:`protocol.study_keys`). Computed here: the three
fingerprints, length buckets from the model's own tokenizer over the corpus
(with their counts), the corpus labels against the model's ``id2label``, a
batch series and a precision series suited to the stack, the reference
variant (the full-precision base). The quality minimum is left for
``isocost tune``, which measures it on the tuning split.

Example::

    report = init_study(Path("texts.jsonl"), Path("my-model"), out=Path("study.toml"), stack="cpu")
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.corpus import Record, check_disjoint, read_corpus, token_lengths
from protocol.errors import UserError
from protocol.fingerprint import fingerprint_path
from protocol.jsonio import DUPLICATE_KEY_FIX, DuplicateKeyError, loads_unique
from protocol.labels import check_labels
from protocol.safe_write import check_writable_target, make_dirs, write_handle, write_text_atomic
from protocol.study import load_study
from protocol.study_keys import KEYS
from protocol.tasks import DEFAULT_TASK, read_task_corpus, task_named
from runner.own import init_generation
from runner.own.init_embedding import EmbeddingInputs, embedding_inputs, split_with_queries
from runner.own.init_generation import GenerationChoice

#: Series per stack: batch sizes and precisions worth comparing there (fp16 is GPU-only).
STACK_SERIES: dict[str, dict[str, Any]] = {
    "cpu": {"device": "cpu", "batches": (1, 8, 32), "precisions": ("fp32", "bf16")},
    "cuda": {"device": "cuda", "batches": (8, 32, 128), "precisions": ("fp32", "bf16", "fp16")},
    "rocm": {"device": "cuda", "batches": (8, 32, 128), "precisions": ("fp32", "bf16", "fp16")},
}
#: Length buckets: short up to this share of the corpus, medium up to the next; long is open-ended.
BUCKET_QUANTILES = (("short", 0.6), ("medium", 0.9))
#: Share of the corpus held out as the tuning split when no --tuning file is given.
TUNING_SHARE = 0.2


@dataclass(frozen=True)
class InitReport:
    study: Path
    buckets: tuple[tuple[str, int | None, int], ...]  # name, max_tokens, count
    labels: tuple[str, ...]
    extra_model_labels: tuple[str, ...]
    written: tuple[Path, ...]  # split files written when no --tuning was given
    reference_variant: str
    variants: int
    tuning_inputs: int = 0
    task: str = DEFAULT_TASK
    embedding: EmbeddingInputs | None = None


def _quantile(sorted_values: list[int], share: float) -> int:
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(share * len(sorted_values)) - 1))]


def length_buckets(lengths: list[int]) -> list[tuple[str, int | None, int]]:
    """short ≤ the 60th percentile, medium ≤ the 90th, long open-ended; empty or equal bounds collapse."""
    ordered = sorted(lengths)
    buckets: list[tuple[str, int | None, int]] = []
    previous = 0
    for name, share in BUCKET_QUANTILES:
        bound = _quantile(ordered, share)
        if bound > previous and bound < ordered[-1]:
            buckets.append((name, bound, sum(1 for n in lengths if previous < n <= bound)))
            previous = bound
    buckets.append(("long" if buckets else "all", None, sum(1 for n in lengths if n > previous)))
    return buckets


def _model_limit(model: Path) -> int:
    limits = []
    for name, key in (("config.json", "max_position_embeddings"), ("tokenizer_config.json", "model_max_length")):
        try:
            value = loads_unique((model / name).read_text(encoding="utf-8")).get(key)
        except DuplicateKeyError as exc:
            raise UserError(str(exc), str(model / name), DUPLICATE_KEY_FIX) from None
        except (OSError, ValueError, RecursionError, AttributeError):
            continue
        if isinstance(value, int) and 0 < value < 10**6:
            limits.append(value)
    return min(limits) if limits else 512


def _split(corpus: Path, records: tuple[Record, ...], out_dir: Path) -> tuple[Path, Path]:
    if len(records) < 2:
        raise UserError("the corpus has one input: nothing is left for a tuning split", str(corpus),
                        "Pass a separate tuning file with --tuning FILE.")
    order = list(range(len(records)))
    random.Random(0).shuffle(order)
    n_tuning = max(1, round(TUNING_SHARE * len(records)))
    tuning_ids = set(order[:n_tuning])
    final_path = out_dir / f"{corpus.stem}.final.jsonl"
    tuning_path = out_dir / f"{corpus.stem}.tuning.jsonl"
    for path, keep in ((final_path, False), (tuning_path, True)):
        if path.exists():
            raise UserError("the split file already exists", str(path), "Move it away, or pass --tuning FILE.")
        with write_handle(path, fix="Choose a writable --out folder, or pass --tuning FILE.") as handle:
            for i, r in enumerate(records):
                if (i in tuning_ids) == keep:
                    row = {"id": r.id, "text": r.text, **({"label": r.label} if r.label else {}), **dict(r.fields)}
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return final_path, tuning_path


def _c(key: str) -> str:
    entry = KEYS[key]
    if entry.required:
        default = ""
    elif entry.default.startswith("required"):  # "required in [deadline]": the table is optional, the key is not
        default = f" ({entry.default})"
    else:
        default = f" (default {entry.default})"
    return f"  # {entry.meaning}{default}"


def _line(key: str, value: Any = ..., note: str = "") -> str:
    """``leaf = value  # meaning (default …)`` for the declared ``key``; ``value`` omitted: its declared default.

    Example: ``_line("warmup.runs") == "runs = 1  # warm-up runs over those inputs … (default 1)"``.
    """
    return f"{key.rpartition('.')[2]} = {KEYS[key].default if value is ... else _toml(value)}{_c(key)}{note}"


def _table(table: str, values: dict[str, Any], *, commented: tuple[str, ...] = (),
           notes: dict[str, str] | None = None) -> list[str]:
    """``[table]`` with one :func:`_line` per key (``...``: the declared default; ``commented``: written as a
    comment), then a blank line."""
    return [f"[{table}]", *(("# " if key in commented else "") + _line(f"{table}.{key}", value, (notes or {})
                                                                       .get(key, "")) for key, value in
                            values.items()), ""]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


@dataclass(frozen=True)
class _Facts:
    """What ``init`` computed, everything the study text is written from."""

    out: Path
    corpus: Path
    tuning: Path
    model: Path
    stack: str
    records: int  # corpus inputs
    tuning_inputs: int
    labels: tuple[str, ...]
    extra_model_labels: tuple[str, ...]
    lengths: tuple[int, ...]
    buckets: tuple[tuple[str, int | None, int], ...]
    limit: int  # the model's own maximum length
    max_length: int
    task: str = DEFAULT_TASK
    embedding: EmbeddingInputs | None = None
    generation: GenerationChoice | None = None  # a text-generation study's template, max_new_tokens, score

    @property
    def series(self) -> dict[str, Any]:
        return STACK_SERIES[self.stack]

    @property
    def reference(self) -> str:
        return f"precision={self.series['precisions'][0]}"

    def rel(self, path: Path) -> str:
        """``path`` relative to the study file's folder."""
        return os.path.relpath(Path(path).resolve(), self.out.parent)


def init_study(corpus: Path, model: Path, *, out: Path, tuning: Path | None = None, stack: str = "cpu",
               force: bool = False, task: str = DEFAULT_TASK, queries: Path | None = None,
               tuning_queries: Path | None = None, generation: GenerationChoice | None = None) -> InitReport:
    """Write a complete study to ``out`` for this corpus and checkpoint; return what was computed (a
    sentence-embedding study needs ``queries``, and ``tuning_queries`` with ``tuning``; a text-generation study
    takes ``generation``'s template, max_new_tokens and score)."""
    _check_arguments(model, out, stack, force)
    _check_task_arguments(task, tuning, queries, tuning_queries)
    chosen = task_named(task, "--task")
    if chosen.name == "text-generation":
        generation = generation or GenerationChoice()
        generation.check()
    else:
        generation = None
    check_writable_target(out, fix="Name the study file itself with --out, not a link to it.")
    out = out.parent.resolve() / out.name  # the folder as the user named it; the file itself never a link
    make_dirs(out.parent, fix="Choose a writable --out.")
    records = read_task_corpus(corpus, chosen)
    written: tuple[Path, ...] = ()
    if tuning is None and queries is not None:
        corpus, tuning, queries, tuning_queries = written = split_with_queries(corpus, records, queries, out.parent)
        records = read_corpus(corpus, require_label=False)
    elif tuning is None:
        corpus, tuning = _split(corpus, records, out.parent)
        written = (corpus, tuning)
        records = read_task_corpus(corpus, chosen)
    facts = _facts(out, corpus, tuning, model, stack, records, chosen.name, (queries, tuning_queries), generation)
    lines = [*_header_lines(facts), *_input_lines(facts), *_bucket_lines(facts), *_task_lines(facts),
             *_quality_lines(facts), *_base_lines(facts), *_series_lines(facts), *_optional_lines(facts)]
    write_text_atomic(out, "\n".join(lines), fix="Choose a writable --out.")
    study = load_study(out)  # what init writes must be a valid study
    if chosen.name != DEFAULT_TASK:  # the checkpoint against the study as written (a causal LM, its context…)
        chosen.check_model(model, records, study, str(out))
    return InitReport(study=out, buckets=facts.buckets, labels=facts.labels,
                      extra_model_labels=facts.extra_model_labels, written=written,
                      reference_variant=facts.reference, variants=len(study.variants()),
                      tuning_inputs=facts.tuning_inputs, task=task, embedding=facts.embedding)


def _check_task_arguments(task: str, tuning: Path | None, queries: Path | None, tuning_queries: Path | None) -> None:
    """--queries belongs to (and is required by) --task sentence-embedding; --tuning-queries goes with --tuning."""
    task_named(task, "--task")
    if task != "sentence-embedding":
        if queries is not None or tuning_queries is not None:
            raise UserError("--queries and --tuning-queries are for --task sentence-embedding", "--queries",
                            "Add --task sentence-embedding, or leave the query files out.")
        return
    if queries is None:
        raise UserError("a sentence-embedding study needs its query set", "--queries",
                        "Pass --queries FILE: JSONL with id, text and relevant (ids of corpus inputs).")
    if (tuning is None) != (tuning_queries is None):
        raise UserError("--tuning and --tuning-queries go together", "--tuning-queries",
                        "Pass both (the tuning split and its own queries), or neither: init then holds out a fifth "
                        "of the queries and the documents only they name.")


def _check_arguments(model: Path, out: Path, stack: str, force: bool) -> None:
    if stack not in STACK_SERIES:
        raise UserError(f"unknown stack {stack!r}", "--stack", f"Use one of: {', '.join(STACK_SERIES)}.")
    if out.exists() and not force:
        raise UserError("the study file already exists", str(out), "Choose another --out, or pass --force.")
    if not model.is_dir():
        raise UserError("the model is not a checkpoint directory", str(model),
                        "Pass the directory written by save_pretrained.")


def _facts(out: Path, corpus: Path, tuning: Path, model: Path, stack: str, records: tuple[Record, ...],
           task: str = DEFAULT_TASK, query_files: tuple[Path | None, Path | None] = (None, None),
           generation: GenerationChoice | None = None) -> _Facts:
    """Labels against the model (or the query sets), token lengths and buckets, the maximum length."""
    chosen = task_named(task)
    tuning_records = read_task_corpus(tuning, chosen)
    extra: tuple[str, ...] = ()
    embedding = None
    if chosen.labels_required:
        extra = check_labels([r.label for r in (*records, *tuning_records)], model, f"{corpus} and {tuning}")
    elif chosen.name == "sentence-embedding":
        check_disjoint(records, tuning_records, f"{corpus} and {tuning}")
        embedding = embedding_inputs(records, tuning_records, model, *query_files)  # type: ignore[arg-type]
    lengths = token_lengths(model, [r.text for r in records])
    limit = _model_limit(model)
    longest = (min(limit, 8 * math.ceil(max(lengths) / 8)) if generation is None
               else init_generation.max_length(tuple(lengths), limit, generation.max_new_tokens))
    return _Facts(
        out=out, corpus=corpus, tuning=tuning, model=model, stack=stack, records=len(records),
        tuning_inputs=len(tuning_records), labels=tuple(sorted({r.label for r in records} - {""})),
        extra_model_labels=tuple(extra), lengths=tuple(lengths), buckets=tuple(length_buckets(lengths)),
        limit=limit, max_length=longest, task=task, embedding=embedding, generation=generation,
    )


def _header_lines(f: _Facts) -> list[str]:
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in f.corpus.stem).strip("-") or "study"
    verb = {"sentence-embedding": "embeds", "text-generation": "generates the outputs of"}.get(f.task, "classifies")
    question = (f"Which configuration {verb} all {f.records} inputs of {f.corpus.name}, meets the quality "
                "rule, finishes before the deadline and costs the least?")
    return [
        "# Study written by `isocost init`: every key with its default and meaning (docs/study.md: study keys).",
        "# Paths are relative to this file. Next: `isocost tune` sets the quality minimum on the tuning split,",
        "# `isocost check` checks everything without timing, `isocost run` runs the campaign.",
        _line("schema_version", 1), _line("task", f.task), _line("name", name), _line("question", question),
        _line("scenario", "offline"), _line("expected_artifacts"),
        "",
    ]


def _input_lines(f: _Facts) -> list[str]:
    lines = []
    for table, path in (("corpus", f.corpus), ("tuning", f.tuning), ("model", f.model)):
        lines += [
            f"[{table}]",
            _line(f"{table}.path", f.rel(path)),
            _line(f"{table}.fingerprint", fingerprint_path(path)),
            "",
        ]
    if f.embedding is not None:
        return lines[:-1] + _embedding_lines(f, f.embedding)
    lines[-1] = (f"# labels: {', '.join(f.labels)} (all known to the model's id2label)" if f.generation is None
                 else "# every input carries its reference text (the task score is measured against it)")
    if f.extra_model_labels:
        lines.append(f"# warning: the model also predicts {', '.join(f.extra_model_labels)}, absent from the "
                     "corpus: any such prediction rejects a pass")
    return lines


def _embedding_lines(f: _Facts, e: EmbeddingInputs) -> list[str]:
    """[embedding] and its two query sets, every key with its comment."""
    lines = [
        "",
        f"[embedding]  # pooling and normalisation {e.source}",
        _line("embedding.pooling", e.pooling),
        _line("embedding.normalize", e.normalize),
        _line("embedding.dimension", e.dimension),
    ]
    for table, path, count in (("queries", e.queries, e.n_queries), ("tuning_queries", e.tuning_queries,
                                                                       e.n_tuning_queries)):
        lines += [
            "",
            f"[embedding.{table}]  # {count} queries",
            _line(f"embedding.{table}.path", f.rel(path)),
            _line(f"embedding.{table}.fingerprint", fingerprint_path(path)),
        ]
    return lines


def _bucket_lines(f: _Facts) -> list[str]:
    lines = ["", f"# Length buckets, tokens of the model's tokenizer over the {f.records} corpus inputs "
                 f"(short ≤ 60th percentile, medium ≤ 90th, long open-ended; longest input {max(f.lengths)} tokens):"]
    for bucket_name, max_tokens, count in f.buckets:
        lines += ["[[length_buckets]]", _line("length_buckets[].name", bucket_name)]
        if max_tokens is not None:
            lines.append(_line("length_buckets[].max_tokens", max_tokens, f": {count} inputs"))
        else:
            lines.append(f"# max_tokens omitted: open-ended  ({count} inputs)")
        lines.append("")
    return lines


def _task_lines(f: _Facts) -> list[str]:
    """A task's own table (text-generation: [generation])."""
    return [] if f.generation is None else init_generation.generation_lines(f.model, f.generation, _c, _toml)


def _quality_lines(f: _Facts) -> list[str]:
    rule = ([] if f.generation is None
            else init_generation.quality_lines(f.generation, f.reference, _c, _toml))
    return (rule or _classification_rule(f)) + _run_lines(f)


def _classification_rule(f: _Facts) -> list[str]:
    """[quality] of a classification or sentence-embedding study (left for `isocost tune`)."""
    embedding = f.embedding is not None
    values = {"metric": "ndcg@10" if embedding else "accuracy", "minimum": 0.0, "tuned_on": "not tuned yet",
              "reference_variant": f.reference, "max_metric_drop": ..., "min_agreement": ...,
              **({"min_cosine": ...} if embedding else {}),
              "subgroups": ["length_bucket"] if embedding else ["label", "length_bucket"], "replay": "quality",
              "max_score_delta": 0.01}
    notes = {"minimum": "; NOT TUNED YET",
             **({"metric": ": ndcg@10, mrr@10 or recall@10 over the queries"} if embedding else {})}
    return _table("quality", values, commented=("max_score_delta",), notes=notes)


def _run_lines(f: _Facts) -> list[str]:
    warmup = _table("warmup", {"source": ..., "inputs": min(8, f.tuning_inputs), "runs": ..., "recompilation": ...})
    return warmup + _table("campaign", {
        "repetitions": ..., "order": ..., "trial_timeout_s": 3600, "seeds": ..., "memory_limit_bytes": 8589934592,
        "cpu_limit": 2.0, "output_file_limit_bytes": 4294967296,
    }, commented=("trial_timeout_s", "memory_limit_bytes", "cpu_limit", "output_file_limit_bytes"))


def _base_lines(f: _Facts) -> list[str]:
    truncated = sum(1 for n in f.lengths if n > f.max_length)
    threads = os.cpu_count() or 1
    return _table("base", {
        "stack": f.stack, "device": f.series["device"], "precision": f.series["precisions"][0], "quantization": "none",
        "compile": False, "attention": "sdpa", "batch_size": f.series["batches"][0], "padding": "longest",
        "max_length": f.max_length, "length_grouping": "none", "resume": "none", "threads": threads, "seed": 0,
        "deterministic": True,
    }, notes={"max_length": f"; model limit {f.limit}, {truncated} corpus input(s) longer",
              "threads": f"; this machine has {threads} CPU(s)"})


def _series_lines(f: _Facts) -> list[str]:
    return [
        "[[series]]",
        _line("series[].name", "precision"),
        _line("series[].field", "precision"),
        _line("series[].values", list(f.series["precisions"])),
        "",
        "[[series]]",
        'name = "batch"',
        'field = "batch_size"',
        f"values = {_toml(list(f.series['batches']))}",
        "",
    ]


def _optional_lines(f: _Facts) -> list[str]:
    """Tables left out (commented), with their keys and meanings: deadline, costing, images, job."""
    return [
        "# [deadline]  # the access window the whole campaign must fit (omitted: no deadline check)",
        *(f"# {_line(f'deadline.{key}', value)}" for key, value in
          (("start", "2026-12-07T09:00"), ("end", "2026-12-11T09:00"), ("tz", "UTC"), ("waiting_h", ...))),
        "",
        "# [costing]",
        f"# {_line('costing.catalog', 'my-catalog.csv')}",
        "",
        "# [images]",
        f'# {f.stack} = "REPO@sha256:…"{_c("images.cpu / images.cuda / images.rocm")}',
        "",
        *_job_lines(f),
    ]


def _job_lines(f: _Facts) -> list[str]:
    """The [job] table left out (commented): decide then prices the campaign itself (docs/job.md)."""
    shares = _hundredths([count for _, _, count in f.buckets], f.records)
    mix = ", ".join(f"{name} = {share:.2f}" for (name, _, _), share in zip(f.buckets, shares, strict=True))
    return [
        "# [job]  # the real job this study is benchmarked for (omitted: decide prices the campaign itself)",
        f"# {_line('job.inputs', 1000000)}",
        "# # or, instead of inputs (never both):",
        f"# # {_line('job.inputs_per_day', 100000)}",
        f"# # {_line('job.days', 10)}",
        *(f"# {_line(f'job.{key}', value)}" for key, value in
          (("corpora", 1), ("cards_per_lot", 1), ("fit_level", ...), ("bootstrap_resamples", ...),
           ("bootstrap_seed", ...))),
        f"# mix = {{ {mix} }}{_c('job.mix')}",
        "",
    ]


def _hundredths(counts: list[int], total: int) -> list[float]:
    """Each count's share of ``total`` in hundredths that sum to exactly 1 (largest remainders round up)."""
    exact = [100 * count / total for count in counts]
    cents = [int(value) for value in exact]
    by_remainder = sorted(range(len(counts)), key=lambda i: exact[i] - cents[i], reverse=True)
    for i in by_remainder[: 100 - sum(cents)]:
        cents[i] += 1
    return [cent / 100 for cent in cents]
