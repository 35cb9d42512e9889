"""Deterministic raw tables and verdicts for the summary's golden test (tests/unit/test_summary_golden.py).

Each case is what ``summarize`` reads: raw rows (cell text by column, as raw.csv holds them), the verdicts by
trial id, the campaign's variants in report order, the quality rule and the reference of each variant. The
golden file ``tests/data/summary_golden.json`` holds what the summary code before issue 25 (protocol/records/summary.py,
columnar) made of them; ``python tests/summary_cases.py`` rewrites it with the code of the checkout.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "data" / "summary_golden.json"
STATUSES = ("ok", "ok", "ok", "ok", "ok", "oom", "error", "timeout")
BUCKETS = ("short", "medium", "long")
LABELS = ("business", "sport", "tech")


def _quality(reference: str, **extra: Any) -> SimpleNamespace:
    return SimpleNamespace(metric="accuracy", reference_variant=reference, max_metric_drop=0.01,
                           min_agreement=0.99, extra=extra)


def _variants(count: int, prefix: str = "v") -> list[dict[str, Any]]:
    return [{"variant_id": f"{prefix}{i}", "series": ["batch"], "stack": "cpu", "device": "cpu",
             "precision": "fp32", "quantization": "none", "compile": False, "attention": "sdpa",
             "batch_size": 2 ** i, "padding": "longest", "max_length": 128, "length_grouping": "none",
             "resume": "none", "threads": 1, "seed": i % 2, "deterministic": True} for i in range(count)]


def _row(rng: random.Random, trial: str, variant: str, order: int, attempt: int, status: str) -> dict[str, str]:
    ok = status == "ok"
    gpu = rng.random() < 0.5
    reasons = [] if ok else [f"pass_s: pass not completed (status {status})"]
    if not gpu:
        reasons += ["peak_allocated_bytes: CPU trial: no GPU", "peak_reserved_bytes: CPU trial: no GPU"]
    rss = "" if rng.random() < 0.1 else str(rng.randrange(100, 900) * 2**20)
    if not rss:
        reasons.append("peak_rss_bytes: not sampled")
    return {"trial_id": trial, "variant_id": variant, "repetition": str(order), "order_index": str(order),
            "attempt": str(attempt), "status": status,
            "pass_s": repr(round(rng.uniform(5, 15), rng.choice([1, 3, 12]))) if ok else "",
            "peak_rss_bytes": rss, "peak_allocated_bytes": str(rng.randrange(1, 9) * 2**30) if gpu else "",
            "peak_reserved_bytes": str(rng.randrange(9, 12) * 2**30) if gpu else "",
            "truncated_count": "" if rng.random() < 0.2 else str(rng.randrange(0, 5)),
            "oom_events": "" if rng.random() < 0.5 else str(rng.randrange(0, 3)),
            "corpus_accepted": "true" if ok else "false", "metric": "accuracy",
            "empty_reasons": "; ".join(reasons)}


def _verdict(rng: random.Random, status: str, shape: str) -> dict[str, Any] | None:
    if rng.random() < 0.05:
        return None  # a row without a verdict
    accepted = status == "ok" and rng.random() < 0.9
    metric = round(rng.uniform(0.88, 0.92), rng.choice([2, 4, 15]))
    verdict: dict[str, Any] = {"corpus_accepted": accepted, "metric_value": metric if accepted else None,
                               "agreement": None, "max_score_delta": None}
    if status == "ok":
        verdict["agreement"] = round(rng.uniform(0.985, 1.0), 4)
        verdict["max_score_delta"] = rng.uniform(0, 1e-3)
        if rng.random() < 0.05:
            verdict["agreement_failures"] = ["length window: 3 outputs too long", "near ties: 2 ids"][
                :rng.randrange(1, 3)]
    if accepted:
        groups = {"length_bucket": {b: round(rng.uniform(0.8, 1), 3) for b in BUCKETS},
                  "label": {lb: round(rng.uniform(0.8, 1), 3) for lb in LABELS}}
        if shape == "mixed" and rng.random() < 0.3:
            groups = {"label": {lb: round(rng.uniform(0.8, 1), 3) for lb in reversed(LABELS)}}
        verdict["subgroups"] = groups
    return verdict


def _table(seed: int, variants: list[dict[str, Any]], repetitions: int, shape: str,
           extra_variant: bool = False) -> tuple[list[dict[str, str]], dict[str, Any]]:
    rng = random.Random(seed)
    ids = [v["variant_id"] for v in variants] + (["stray"] if extra_variant else [])
    rows: list[dict[str, str]] = []
    verdicts: dict[str, Any] = {}
    order = 0
    for repetition in range(repetitions):
        for position in range(len(ids)):
            variant = ids[(position + repetition) % len(ids)]
            order += 1
            attempts = 2 if rng.random() < 0.1 else 1
            for attempt in range(1, attempts + 1):
                status = rng.choice(STATUSES) if attempt == attempts else "oom"
                trial = f"{order:04d}-a{attempt}-{variant}"
                rows.append(_row(rng, trial, variant, order, attempt, status))
                verdict = _verdict(rng, status, shape)
                if verdict is not None:
                    verdicts[trial] = verdict
    rows.reverse()  # the summary orders the rows itself (order_index, attempt)
    return rows, verdicts


def cases() -> dict[str, dict[str, Any]]:
    """Case name → rows, verdicts, variants, quality, references (variant → its reference variant)."""
    found: dict[str, dict[str, Any]] = {}
    variants = _variants(6)
    rows, verdicts = _table(1, variants[:5], 5, "same", extra_variant=True)  # v5: reported, never run
    found["mixed"] = {"rows": rows, "verdicts": verdicts, "variants": variants, "quality": _quality("v0"),
                      "references": {v["variant_id"]: "v0" if v["seed"] == 0 else "v1" for v in variants}}
    rows, verdicts = _table(2, variants, 4, "mixed")
    found["mixed_subgroups"] = {"rows": rows, "verdicts": verdicts, "variants": variants,
                                "quality": _quality("v1", min_score_share=0.999), "references": None}
    many = _variants(40, prefix="w")
    rows, verdicts = _table(3, many, 6, "same")
    found["many"] = {"rows": rows, "verdicts": verdicts, "variants": many, "quality": _quality("w3"),
                     "references": None}
    found["no_rows"] = {"rows": [], "verdicts": {}, "variants": variants[:2], "quality": _quality("v0"),
                        "references": None}
    return found


def summary_text(summary: Any) -> str:
    """A summary as the golden file holds it: as JSON in the layout summary.json had when the golden files were
    recorded (its keys in that order; floats written exactly), each variant as :mod:`protocol.records.codec` writes
    it."""
    from protocol.records.codec import to_dict

    data = {"schema_version": 1, "reference_variant": summary.reference_variant,
            "variants": [to_dict(variant) for variant in summary.variants], "warnings": list(summary.warnings)}
    return json.dumps(data, indent=1, ensure_ascii=False)


def _write_golden() -> None:  # the code of this checkout: run it only to record what that code makes
    sys.path.insert(0, str(TESTS.parent))
    from protocol.records.raw_record import RawRecord
    from protocol.records.summary import summarize

    golden = {}
    for name, case in cases().items():
        references = case["references"]
        summary = summarize([RawRecord.from_text(row) for row in case["rows"]], case["verdicts"],
                            case["variants"], case["quality"], references.__getitem__ if references else None)
        golden[name] = json.loads(summary_text(summary))
    GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    _write_golden()
