"""``isocost init``: a complete, commented study for the user's own corpus and checkpoint.

Nothing is hidden: every key is written with its default and a one-line
comment (from :mod:`protocol.study.schema`). Computed here: the three
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.corpus import Record, token_lengths
from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.io.jsonio import DUPLICATE_KEY_FIX, DuplicateKeyError, loads_unique
from protocol.io.safe_write import check_writable_target, make_dirs, write_handle, write_text_atomic
from protocol.study.init_text import comment as _c
from protocol.study.init_text import line as _line
from protocol.study.init_text import table as _table
from protocol.study.init_text import toml as _toml
from protocol.study.load import load_study
from protocol.tasks import DEFAULT_TASK, all_tasks, read_task_corpus, task_named
from protocol.tasks.base import InitInputs, Task

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
    written: tuple[Path, ...]  # split files written when no --tuning was given
    reference_variant: str
    variants: int
    task: str = DEFAULT_TASK
    lines: tuple[str, ...] = ()  # what the task says of its inputs (labels, queries, template)
    warnings: tuple[str, ...] = ()
    tuning_units: int = 0  # what `isocost tune` scores on the tuning split, and their word
    units_word: str = "input(s)"


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


@dataclass(frozen=True)
class _Facts:
    """What ``init`` computed, everything the study text is written from."""

    inputs: InitInputs
    stack: str
    lengths: tuple[int, ...]
    buckets: tuple[tuple[str, int | None, int], ...]
    limit: int  # the model's own maximum length
    max_length: int
    task: Task
    found: Any  # what the task's init found (its checks of the inputs)

    @property
    def series(self) -> dict[str, Any]:
        return STACK_SERIES[self.stack]

    @property
    def records(self) -> int:
        return len(self.inputs.records)


def _reference(stack: str) -> str:
    return f"precision={STACK_SERIES[stack]['precisions'][0]}"


def init_study(corpus: Path, model: Path, *, out: Path, tuning: Path | None = None, stack: str = "cpu",
               force: bool = False, task: str = DEFAULT_TASK, options: Mapping[str, Any] | None = None) -> InitReport:
    """Write a complete study to ``out`` for this corpus and checkpoint; return what was computed. ``options``:
    the values of the tasks' own options of ``isocost init`` (``Task.init.options``, by key; None: not given),
    an option of another task refused."""
    _check_arguments(model, out, stack, force)
    chosen = task_named(task, "--task")
    values = _task_values(chosen, dict(options or {}), tuning)
    check_writable_target(out, fix="Name the study file itself with --out, not a link to it.")
    out = out.parent.resolve() / out.name  # the folder as the user named it; the file itself never a link
    make_dirs(out.parent, fix="Choose a writable --out.")
    records = read_task_corpus(corpus, chosen)
    written: tuple[Path, ...] = ()
    if tuning is None:
        split = chosen.init.split(values, corpus, records, out.parent)
        if split is None:
            corpus, tuning = written = _split(corpus, records, out.parent)
        else:
            corpus, tuning, written, values = split[0], split[1], split[2], dict(split[3])
        records = read_task_corpus(corpus, chosen)
    inputs = InitInputs(out, corpus, tuning, model, records, read_task_corpus(tuning, chosen), _reference(stack),
                        values)
    facts = _facts(inputs, stack, chosen)
    lines = [*_header_lines(facts), *_input_lines(facts), *_bucket_lines(facts),
             *chosen.init.table_lines(facts.found, inputs), *chosen.init.quality_lines(facts.found, inputs),
             *_run_lines(facts), *_base_lines(facts), *_series_lines(facts), *_optional_lines(facts)]
    write_text_atomic(out, "\n".join(lines), fix="Choose a writable --out.")
    study = load_study(out)  # what init writes must be a valid study
    chosen.check_model(model, records, study, str(out))  # the checkpoint against the study as written
    said, warnings, units, word = chosen.init.report(facts.found, inputs)
    return InitReport(study=out, buckets=facts.buckets, written=written, reference_variant=inputs.reference,
                      variants=len(study.variants()), task=task, lines=tuple(said), warnings=tuple(warnings),
                      tuning_units=units, units_word=word)


def _task_values(chosen: Task, given: dict[str, Any], tuning: Path | None) -> dict[str, Any]:
    """The chosen task's option values (its defaults where not given); another task's option is refused."""
    own = {option.key: option for option in chosen.init.options}
    for key, value in given.items():
        if value is not None and key not in own:
            flag = "--" + key.replace("_", "-")
            owners = [t.name for t in all_tasks() if key in {o.key for o in t.init.options}]
            raise UserError(f"{flag} is for --task {' or '.join(owners) or '(none)'}", flag,
                            f"Add --task {owners[0] if owners else '…'}, or leave {flag} out.")
    values = {key: option.default if given.get(key) is None else given[key] for key, option in own.items()}
    values["tuning"] = tuning
    chosen.init.check_options(values)
    return values


def _check_arguments(model: Path, out: Path, stack: str, force: bool) -> None:
    if stack not in STACK_SERIES:
        raise UserError(f"unknown stack {stack!r}", "--stack", f"Use one of: {', '.join(STACK_SERIES)}.")
    if out.exists() and not force:
        raise UserError("the study file already exists", str(out), "Choose another --out, or pass --force.")
    if not model.is_dir():
        raise UserError("the model is not a checkpoint directory", str(model),
                        "Pass the directory written by save_pretrained.")


def _facts(inputs: InitInputs, stack: str, chosen: Task) -> _Facts:
    """The task's checks of the inputs, token lengths and buckets, the maximum length."""
    found = chosen.init.inputs(inputs)
    lengths = tuple(token_lengths(inputs.model, [r.text for r in inputs.records]))
    limit = _model_limit(inputs.model)
    longest = chosen.init.max_length(found, lengths, limit)
    if longest is None:
        longest = min(limit, 8 * math.ceil(max(lengths) / 8))
    return _Facts(inputs=inputs, stack=stack, lengths=lengths, buckets=tuple(length_buckets(list(lengths))),
                  limit=limit, max_length=longest, task=chosen, found=found)


def _header_lines(f: _Facts) -> list[str]:
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in f.inputs.corpus.stem).strip("-") or "study"
    question = (f"Which configuration {f.task.init.verb} all {f.records} inputs of {f.inputs.corpus.name}, meets "
                "the quality rule, finishes before the deadline and costs the least?")
    return [
        "# Study written by `isocost init`: every key with its default and meaning (docs/study.md: study keys).",
        "# Paths are relative to this file. Next: `isocost tune` sets the quality minimum on the tuning split,",
        "# `isocost check` checks everything without timing, `isocost run` runs the campaign.",
        _line("schema_version", 1), _line("task", f.task.name), _line("name", name), _line("question", question),
        _line("scenario", "offline"), _line("expected_artifacts"),
        "",
    ]


def _input_lines(f: _Facts) -> list[str]:
    lines = []
    for table, path in (("corpus", f.inputs.corpus), ("tuning", f.inputs.tuning), ("model", f.inputs.model)):
        lines += [
            f"[{table}]",
            _line(f"{table}.path", f.inputs.rel(path)),
            _line(f"{table}.fingerprint", fingerprint_path(path)),
            "",
        ]
    return lines[:-1] + f.task.init.input_lines(f.found, f.inputs)


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


def _run_lines(f: _Facts) -> list[str]:
    warmup = _table("warmup", {"source": ..., "inputs": min(8, len(f.inputs.tuning_records)), "runs": ...,
                               "recompilation": ...})
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
        "deterministic": True, "engine": "transformers",
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
        f"# {_line('engines', {})}",
        "",
        f"# {_line('traffic', {})}",
        '# # with scenario = "server": rate_qps (or rates_qps = [2.0, 4.0]: each configuration once per rate), '
        "min_query_count, latency_bound_ms … (docs/serving.md)",
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
