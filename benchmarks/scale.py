"""Benchmark 5: the analysis at scale.

- 5a, validate one 1,000,000-prediction pass: ``parse_predictions`` + ``check_pass`` (ids,
  duplicates, format of every line, accuracy and the two subgroup tables), against a
  straightforward baseline (``json.loads`` per line, plain Python sets, accuracy only); target:
  at most half the baseline's time;
- 5b, summarize a 100,000-row raw.csv: check its chain (sha256 of every row), read it into a typed
  frame and ``runner.analysis.stats.summarize`` it, against a naive pandas job from the same file
  (``pd.read_csv``, no chain check, then a group-by: median/min/max of accepted pass times, status
  counts, median metric per variant); target: at most 1.5 × the baseline, the chain check's share
  shown beside it. Both start from the file on disk and the same verdicts in memory.

Both are judged on the per-pair ratio ours/baseline, since on a shared machine an absolute time
means little.

The data are synthetic but well-formed: written the way the runner writes predictions, and a
raw.csv with every column, each row chained as ``append_row`` chains it. Ours and the baseline run
interleaved (ABBA), ``repeats`` pairs each.
"""

from __future__ import annotations

import gc
import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.common import Row, Spread, fmt_ratio, fmt_s, interleaved, judge, ratio_spread, timed
from protocol.records import codec
from protocol.records.raw_columns import RAW_COLUMNS
from protocol.records.stages import Variant
from protocol.tasks.classification import Reference, check_pass, parse_predictions
from runner.analysis.stats import SUMMARY_COLUMNS, summarize
from runner.campaign_dir.raw_format import genesis, row_digest, row_text
from runner.campaign_dir.raw_frame import typed_frame
from runner.campaign_dir.raw_table import check_chain

LABELS = ("business", "entertainment", "politics", "sport", "tech")
BUCKETS = ("short", "medium", "long")
#: Targets: ours at most this many times the baseline's time, pair by pair (same run, same machine).
VALIDATION_TARGET_RATIO = 0.5
SUMMARY_TARGET_RATIO = 1.5
#: The former absolute targets, kept in the details (on a noisy machine an absolute time means little).
VALIDATION_TARGET_S = 2.0
SUMMARY_TARGET_S = 1.0


# -- validation ---------------------------------------------------------------------------------


def make_pass(directory: Path, n: int, seed: int = 0) -> tuple[Path, Reference]:
    """A complete, accepted pass of ``n`` predictions (10 % wrong labels) and its reference."""
    rng = random.Random(seed)
    ids = tuple(f"doc-{i:07d}" for i in range(n))
    truth = {ident: rng.choice(LABELS) for ident in ids}
    buckets = {ident: rng.choice(BUCKETS) for ident in ids}
    reference = Reference(ids=ids, labels=truth, groups={"length_bucket": buckets, "label": dict(truth)})
    path = directory / "predictions.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        chunk = []
        for ident in ids:
            label = truth[ident] if rng.random() < 0.9 else rng.choice(LABELS)
            # Byte for byte what json.dumps({"id": …, "label": …, "score": …}) writes in the runner.
            chunk.append(json.dumps({"id": ident, "label": label, "score": rng.random()}) + "\n")
            if len(chunk) == 10_000:
                handle.write("".join(chunk))
                chunk.clear()
        handle.write("".join(chunk))
    return path, reference


def validate_ours(path: Path, reference: Reference) -> Any:
    return check_pass(parse_predictions(path), reference, "accuracy", 0.5)


def validate_baseline(path: Path, reference: Reference) -> dict[str, Any]:
    """What one would write first: json.loads per line, a set of ids, accuracy."""
    ids = []
    correct = 0
    truth = reference.labels
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            ids.append(item["id"])
            correct += item["label"] == truth.get(item["id"])
    seen = set(ids)
    return {"ids_match": seen == set(reference.ids), "duplicates": len(ids) - len(seen), "accuracy": correct / len(ids)}


# -- summary ------------------------------------------------------------------------------------


def make_raw_table(variants: int, repetitions: int, seed: int = 0) -> tuple[list[dict[str, str]], dict[str, Any],
                                                                          list[dict[str, Any]], Any]:
    """Rows (strings, every raw column), verdicts, variant order and quality rule of a big campaign."""
    rng = random.Random(seed)
    order: list[dict[str, Any]] = []
    for v in range(variants):
        order.append({"variant_id": f"v{v:05d}", "series": ["sweep"], "stack": "cuda", "device": "cuda",
                      "precision": rng.choice(["fp32", "bf16"]), "quantization": "none", "compile": False,
                      "attention": "sdpa", "batch_size": rng.choice([1, 4, 8, 16, 32]), "padding": "longest",
                      "max_length": 256, "length_grouping": "none", "resume": "none", "threads": 2, "seed": 0,
                      "deterministic": True, "schema_version": 1})
    rows: list[dict[str, str]] = []
    verdicts: dict[str, Any] = {}
    index = 0
    for repetition in range(1, repetitions + 1):
        shift = (repetition - 1) % variants
        for position in range(variants):
            variant = order[(position + shift) % variants]
            index += 1
            trial_id = f"{index:06d}-r{repetition}-{variant['variant_id']}"
            status = rng.choices(["ok", "oom", "error", "timeout"], weights=[96, 2, 1, 1])[0]
            ok = status == "ok"
            base = 10.0 + int(variant["variant_id"][1:]) * 7919 % 1000 / 10.0  # the same every run
            row: dict[str, str] = {column: "" for column in RAW_COLUMNS}
            row.update({
                "trial_id": trial_id, "variant_id": variant["variant_id"], "repetition": str(repetition),
                "order_index": str(index), "status": status,
                "pass_s": repr(base * rng.uniform(0.97, 1.05)) if ok else "",
                "expected_ids": "1000", "observed_ids": "1000" if ok else str(rng.randrange(1000)),
                "ids_match": "true" if ok else "false", "corpus_accepted": "true" if ok else "false",
                "notes": f"predictions: /results/trials/{trial_id}/predictions.jsonl", "attempt": "1",
                "completed": "1000" if ok else "17", "metric": "accuracy",
                "metric_value": repr(rng.uniform(0.9, 0.92)) if ok else "",
                "quality_verdict": "accepted" if ok else f"rejected: status {status}",
                **{k: str(variant[k]) for k in ("stack", "device", "precision", "quantization", "attention",
                                                 "batch_size", "padding", "max_length", "length_grouping",
                                                 "resume", "threads", "seed")},
                "compile": "false", "deterministic": "true",
                "verify_s": "0.12", "imports_s": "2.1", "load_s": "1.9", "warmup_s": "3.0",
                "gpu_pass_s": repr(base * 0.8) if ok else "", "write_s": "0.1", "trial_s": repr(base + 8),
                "launch_overhead_s": "1.4", "peak_rss_bytes": str(rng.randrange(400, 600) * 2**20),
                "peak_allocated_bytes": str(rng.randrange(1, 9) * 2**30),
                "peak_reserved_bytes": str(rng.randrange(9, 12) * 2**30),
                "device_used_bytes": str(12 * 2**30), "truncated_count": "12",
                "empty_reasons": "" if ok else f"pass_s: pass not completed (status {status})",
            })
            rows.append(row)
            metric = rng.uniform(0.9, 0.92)
            verdicts[trial_id] = {
                "corpus_accepted": ok, "metric_value": metric if ok else None,
                "agreement": rng.uniform(0.995, 1.0) if ok else None,
                "max_score_delta": rng.uniform(0, 1e-4) if ok else None,
                "subgroups": {"length_bucket": {b: metric for b in BUCKETS}, "label": {lb: metric for lb in LABELS}}
                if ok else {},
            }
    quality = SimpleNamespace(metric="accuracy", reference_variant=order[0]["variant_id"], max_metric_drop=0.005,
                              min_agreement=0.99)
    return rows, verdicts, order, quality


#: An empty cell's reason as a CPU trial writes it: with a comma, so its cell is quoted (the demo's rows all are).
QUOTED_REASON = "device_used_bytes: CPU trial: no GPU, so no device memory counters"


def write_raw_table(path: Path, rows: list[dict[str, str]], quoted: bool = False) -> None:
    """``rows`` as a raw.csv, every row chained and written as ``append_row`` writes it, with no campaign.json
    (the chain starts from ""). ``quoted``: every row's ``empty_reasons`` also holds :data:`QUOTED_REASON`."""
    previous = genesis(path)
    lines = [",".join(RAW_COLUMNS)]
    reasons = RAW_COLUMNS.index("empty_reasons")
    for row in rows:
        cells = [row[column] for column in RAW_COLUMNS[:-1]]
        if quoted:
            cells[reasons] = "; ".join(filter(None, (cells[reasons], QUOTED_REASON)))
        previous = row_digest(previous, cells)
        lines.append(f"{row_text(cells)},{previous}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def summary_ours(path: Path, verdicts: dict[str, Any], variants: Sequence[Variant], quality: Any,
                 phases: dict[str, list[float]] | None = None) -> Any:
    """What ``isocost summarize`` does with the table: check its chain, read it into a typed frame, summarize
    it (:func:`runner.campaign_dir.raw_frame.read_frame` is the first two). ``phases`` gets the wall seconds of
    each part ("chain", "frame", "summarize")."""
    chain_s, chain = timed(lambda: check_chain(path))
    frame_s, frame = timed(lambda: typed_frame(chain, SUMMARY_COLUMNS, str(path)))
    summarize_s, result = timed(lambda: summarize(frame, verdicts, variants, quality))
    if phases is not None:
        for name, seconds in (("chain", chain_s), ("frame", frame_s), ("summarize", summarize_s)):
            phases.setdefault(name, []).append(seconds)
    return result


def summary_baseline(path: Path, verdicts: dict[str, Any]) -> Any:
    """A naive pandas job of the same core figures from the same file: read_csv, then a group-by."""
    import pandas as pd

    frame = pd.read_csv(path)
    frame["accepted"] = frame["trial_id"].map(lambda t: bool(verdicts[t]["corpus_accepted"]))
    frame["metric_value"] = frame["trial_id"].map(lambda t: verdicts[t]["metric_value"])
    frame["pass"] = pd.to_numeric(frame["pass_s"], errors="coerce").where(frame["accepted"])
    groups = frame.groupby("variant_id", sort=False)
    table = groups["pass"].agg(["median", "min", "max", "count"])
    table["metric"] = groups["metric_value"].median()
    table["attempts"] = groups.size()
    statuses = frame.groupby(["variant_id", "status"]).size().unstack(fill_value=0)
    return table.join(statuses)


# -- the benchmark -------------------------------------------------------------------------------


def run(predictions: int = 1_000_000, variants: int = 20_000, repetitions: int = 5, pairs: int = 3,
        progress: Any = print) -> list[Row]:
    """Rows 5a (validation) and 5b (summary), each side by side with its baseline from the same run."""
    return [validation_row(predictions, pairs, progress), summary_row(variants, repetitions, pairs, progress)]


def _cpu_timed(function: Any, cpu: list[float]) -> float:
    """Wall seconds of ``function()`` after a full collection; its CPU seconds go to ``cpu``."""
    gc.collect()
    start = time.process_time()
    seconds = timed(function)[0]
    cpu.append(time.process_time() - start)
    return seconds


def _ratio_row(key: str, title: str, ours_s: list[float], cpu_s: list[float], base_s: list[float],
               baseline_name: str, target_ratio: float, details: dict[str, Any], note: str = "") -> Row:
    """A row judged on the per-pair ratio ours/baseline (each pair ran back to back, so drift cancels)."""
    ours_spread, base_spread, cpu_spread = Spread(tuple(ours_s)), Spread(tuple(base_s)), Spread(tuple(cpu_s))
    ratio = ratio_spread(ours_s, base_s)
    met, why = judge(ratio, target_ratio, higher_is_better=False)
    return Row(
        key=key, title=title, measured=f"{fmt_s(ours_spread)} (CPU {cpu_spread.median:.3f} s{note})",
        baseline=f"{fmt_s(base_spread)} {baseline_name}", ratio=fmt_ratio(ratio, 2) + " ours/baseline",
        target=f"≤ {target_ratio:g} × baseline", met=met, reason=why,
        details={"ours_s": ours_spread.to_dict(), "ours_cpu_s": cpu_spread.to_dict(),
                 "baseline_s": base_spread.to_dict(), "ratio_ours_over_baseline": ratio.to_dict(),
                 "absolute_target_s": details.pop("absolute_target_s"), **details},
    )


def validation_row(predictions: int, pairs: int, progress: Any = print) -> Row:
    """5a: parse + check a pass of ``predictions`` lines, against json.loads per line, interleaved."""
    with tempfile.TemporaryDirectory(prefix="isocost-bench-scale-") as tmp:
        progress(f"  generating a {predictions:,}-prediction pass")
        path, reference = make_pass(Path(tmp), predictions)
        check = validate_ours(path, reference)
        if not check.accepted or check.observed_ids != predictions:
            raise RuntimeError(f"the synthetic pass should be accepted: {check.verdict}")

        def fresh() -> Reference:
            # A new Reference object per run: nothing derived from it can carry over between runs.
            return Reference(ids=reference.ids, labels=reference.labels, groups=reference.groups)

        cpu: list[float] = []
        progress(f"  validating it, ours vs json.loads per line, {pairs} interleaved pairs")
        ours_s, base_s = interleaved(pairs, lambda: _cpu_timed(lambda: validate_ours(path, fresh()), cpu),
                                     lambda: _cpu_timed(lambda: validate_baseline(path, fresh()), []))
        size = path.stat().st_size
    return _ratio_row(
        "5a", f"validate {predictions:,} predictions (parse + check) vs json.loads per line", ours_s, cpu, base_s,
        "json.loads/line + sets", VALIDATION_TARGET_RATIO,
        {"absolute_target_s": VALIDATION_TARGET_S, "file_bytes": size,
         "checks": "ids (set equality, duplicates, missing, unexpected), format of every line, "
                   "label set, accuracy, subgroups length_bucket (3) and label (5)",
         "baseline_does": "json.loads per line, ids set equality, duplicate count, accuracy; no "
                          "format checks, no subgroups"})


def _other_tables(directory: Path, rows: list[dict[str, str]]) -> dict[str, Path]:
    """The same rows as one more table in ``directory``: "quoted", with a quoted cell in each row (as every row
    of a CPU trial has: :data:`QUOTED_REASON`)."""
    (directory / "quoted").mkdir()
    write_raw_table(directory / "quoted" / "raw.csv", rows, quoted=True)
    return {"quoted": directory / "quoted" / "raw.csv"}


def _chain_comparisons(path: Path, beside: dict[str, Path], pairs: int, progress: Any) -> dict[str, Any]:
    """Side by side, ``pairs`` interleaved runs each: the chain check + typed read of ``path`` and of its quoted
    copy (:func:`_other_tables`). (Until 1.0 this also timed the same rows chained as raw format 4, which 1.x no
    longer reads: format 5's check took 0.62 × format 4's, docs/performance.md.)"""
    progress(f"  checking and reading it with and without a quoted cell per row, {pairs} interleaved pairs")

    def read(table: Path) -> float:
        return timed(lambda: typed_frame(check_chain(table), SUMMARY_COLUMNS, str(table)))[0]

    plain_s, quoted_s = interleaved(pairs, lambda: read(path), lambda: read(beside["quoted"]))
    return {
        # The chain check + typed read of the same rows with one quoted cell each (every row of a CPU campaign).
        "chain_and_frame_s": Spread(tuple(plain_s)).to_dict(),
        "chain_and_frame_quoted_s": Spread(tuple(quoted_s)).to_dict(),
        "ratio_quoted_over_unquoted_chain_and_frame": ratio_spread(quoted_s, plain_s).to_dict(),
    }


def summary_row(variants: int, repetitions: int, pairs: int, progress: Any = print) -> Row:
    """5b: read and summarize a raw.csv of ``variants`` × ``repetitions`` rows, against pandas from the same
    file, interleaved."""
    progress(f"  generating a {variants * repetitions:,}-row raw table ({variants:,} variants × {repetitions})")
    rows, verdicts, order, quality = make_raw_table(variants, repetitions)
    typed_variants = [codec.from_dict(Variant, v) for v in order]  # campaign.json, read before the table
    title = f"summarize {len(rows):,} raw rows ({variants:,} variants × {repetitions}) vs pandas group-by"
    cpu: list[float] = []
    phases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="isocost-bench-summary-") as tmp:
        path = Path(tmp) / "raw.csv"
        write_raw_table(path, rows)
        beside = _other_tables(Path(tmp), rows)
        del rows

        def ours() -> float:
            return _cpu_timed(lambda: summary_ours(path, verdicts, typed_variants, quality, phases), cpu)

        progress(f"  reading and summarizing it, ours vs pandas, {pairs} interleaved pairs")
        ours_s, base_s = interleaved(pairs, ours, lambda: _cpu_timed(lambda: summary_baseline(path, verdicts), []))
        result = summary_ours(path, verdicts, typed_variants, quality)
        size = path.stat().st_size
        compared = _chain_comparisons(path, beside, pairs, progress)
    chain_share = ratio_spread(phases["chain"][:pairs], ours_s)
    return _ratio_row(
        "5b", title, ours_s, cpu, base_s, "pandas read_csv + group-by", SUMMARY_TARGET_RATIO,
        {"absolute_target_s": SUMMARY_TARGET_S, "warnings": len(result.warnings), "file_bytes": size,
         # Where ours goes: the chain check (sha256 of every row), the typed frame, the summary.
         **{f"ours_{name}_s": Spread(tuple(phases[name][:pairs])).to_dict() for name in ("chain", "frame",
                                                                                         "summarize")},
         "chain_share_of_ours": chain_share.to_dict(),
         "ratio_ours_without_chain_over_baseline": ratio_spread(
             [total - chain for total, chain in zip(ours_s, phases["chain"][:pairs], strict=True)], base_s).to_dict(),
         # What the target leaves to the summary itself: the chain check and the typed read alone, per baseline.
         "ratio_chain_and_frame_over_baseline": ratio_spread(
             [chain + frame for chain, frame in zip(phases["chain"][:pairs], phases["frame"][:pairs], strict=True)],
             base_s).to_dict(),
         **compared,
         "summary_does": "read raw.csv and check its chain; per variant: raw times, median/min/max, statuses, "
                         "median metric, subgroup medians, agreement, equivalence, memory peaks; "
                         "spread-vs-difference warnings",
         "baseline_does": "pd.read_csv of raw.csv (no chain check); median/min/max/count of accepted pass "
                          "times, median metric, status counts"},
        note=f"; chain check {Spread(tuple(phases['chain'][:pairs])).median:.3f} s, {chain_share.median:.0%} of ours")
