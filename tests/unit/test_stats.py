from __future__ import annotations

from types import SimpleNamespace

from protocol.records.codec import to_dict
from protocol.records.raw_record import RawRecord
from runner.analysis.stats import summarize as summarize_frame
from runner.campaign_dir.raw_frame import frame_of

QUALITY = SimpleNamespace(metric="accuracy", reference_variant="b1", max_metric_drop=0.01, min_agreement=0.99)
VARIANTS = [{"variant_id": "b1", "series": ["batch"], "batch_size": 1},
            {"variant_id": "b8", "series": ["batch"], "batch_size": 8}]


def summarize(rows, *args):
    return summarize_frame(frame_of(rows), *args)


def row(trial, variant, order, status="ok", pass_s="", rss="100"):
    return RawRecord.from_text(cells(trial, variant, order, status, pass_s, rss))


def cells(trial, variant, order, status="ok", pass_s="", rss="100"):
    return {"trial_id": trial, "variant_id": variant, "order_index": str(order), "attempt": "1", "status": status,
            "pass_s": pass_s, "peak_rss_bytes": rss, "peak_allocated_bytes": "", "peak_reserved_bytes": "",
            "truncated_count": "2", "empty_reasons": "peak_allocated_bytes: CPU trial: no GPU"}


def verdict(accepted, metric=0.9, agreement=1.0, delta=0.0):
    return {"corpus_accepted": accepted, "metric_value": metric if accepted else None, "agreement": agreement,
            "max_score_delta": delta, "subgroups": {"length_bucket": {"short": metric}} if accepted else {}}


def test_raw_times_median_min_max_and_failures():
    rows = [row("t1", "b1", 1, pass_s="10.0"), row("t2", "b8", 2, pass_s="5.0"),
            row("t3", "b8", 3, status="oom"), row("t4", "b1", 4, pass_s="12.0"),
            row("t5", "b1", 5, pass_s="11.0"), row("t6", "b8", 6, pass_s="6.0")]
    verdicts = {"t1": verdict(True), "t2": verdict(True), "t3": verdict(False), "t4": verdict(True),
                "t5": verdict(True), "t6": verdict(True)}
    summary = summarize(rows, verdicts, VARIANTS, QUALITY)
    b1, b8 = summary.variants
    assert b1.pass_s == (10.0, 12.0, 11.0)
    assert (b1.median_pass_s, b1.min_pass_s, b1.max_pass_s) == (11.0, 10.0, 12.0)
    assert b8.pass_s == (5.0, None, 6.0)  # the OOM attempt stays visible as "no pass"
    assert (b8.accepted, b8.failed, b8.statuses) == (2, 1, {"ok": 2, "oom": 1})
    assert b8.median_pass_s == 5.5
    assert b1.peak_allocated_bytes is None
    assert b1.empty_reasons["peak_allocated_bytes"] == "CPU trial: no GPU"
    assert not any("cannot yet discriminate" in w for w in summary.warnings)
    assert any("b8: only 2 accepted" in w for w in summary.warnings)
    assert "p95" not in str(to_dict(summary))


def test_spread_comparable_to_difference_warns():
    rows = [row("t1", "b1", 1, pass_s="10.0"), row("t2", "b8", 2, pass_s="10.5"),
            row("t3", "b1", 3, pass_s="11.0"), row("t4", "b8", 4, pass_s="9.8"),
            row("t5", "b1", 5, pass_s="10.2"), row("t6", "b8", 6, pass_s="10.9")]
    verdicts = {f"t{i}": verdict(True) for i in range(1, 7)}
    summary = summarize(rows, verdicts, VARIANTS, QUALITY)
    assert any("cannot yet discriminate" in w and "more repetitions" in w for w in summary.warnings)


def test_equivalence_uses_metric_drop_and_agreement():
    rows = [row("t1", "b1", 1, pass_s="1"), row("t2", "b8", 2, pass_s="1")]
    ok = summarize(rows, {"t1": verdict(True, 0.90), "t2": verdict(True, 0.895, 0.995)}, VARIANTS, QUALITY)
    assert ok.variants[1].equivalent is True
    low = summarize(rows, {"t1": verdict(True, 0.90), "t2": verdict(True, 0.88, 1.0)}, VARIANTS, QUALITY)
    assert low.variants[1].equivalent is False
    assert "0.0200 below the reference" in low.variants[1].equivalence_reason
    disagree = summarize(rows, {"t1": verdict(True, 0.90), "t2": verdict(True, 0.90, 0.9)}, VARIANTS, QUALITY)
    assert disagree.variants[1].equivalent is False
    assert "agreement" in disagree.variants[1].equivalence_reason


def test_no_accepted_pass_is_not_equivalent_and_has_no_median():
    rows = [row("t1", "b1", 1, pass_s="1"), row("t2", "b8", 2, status="error")]
    summary = summarize(rows, {"t1": verdict(True), "t2": verdict(False)}, VARIANTS, QUALITY)
    b8 = summary.variants[1]
    assert b8.median_pass_s is None and b8.empty_reasons["median_pass_s"] == "no accepted pass"
    assert b8.equivalent is False
    assert any("b8: no accepted pass" in w for w in summary.warnings)


def test_rows_read_from_cells_and_rows_built_from_values_give_the_same_summary():
    rows = [cells("t1", "b1", 1, pass_s="10.0"), cells("t2", "b8", 2, pass_s="5.0"),
            cells("t3", "b8", 3, status="oom"), cells("t4", "b1", 4, pass_s="12.0", rss="")]
    verdicts = {"t1": verdict(True), "t2": verdict(True), "t3": verdict(False), "t4": verdict(True, 0.88)}
    read = [RawRecord.from_text(r) for r in rows]
    built = [RawRecord.from_values(r.values) for r in read]
    assert summarize(read, verdicts, VARIANTS, QUALITY) == summarize(built, verdicts, VARIANTS, QUALITY)
    assert summarize(read, verdicts, VARIANTS, QUALITY).variants[0].peak_rss_bytes == 100


def test_subgroup_medians_per_variant_whether_or_not_every_pass_scored_the_same_subgroups():
    rows = [row("t1", "b1", 1, pass_s="1"), row("t2", "b8", 2, pass_s="1"), row("t3", "b1", 3, pass_s="1"),
            row("t4", "b8", 4, pass_s="1"), row("t5", "b1", 5, pass_s="1")]
    same = {f"t{i}": verdict(True, 0.9 + i / 100) for i in range(1, 6)}
    summary = summarize(rows, same, VARIANTS, QUALITY)
    assert summary.variants[0].subgroups == {"length_bucket": {"short": 0.93}}  # t1, t3, t5
    assert summary.variants[1].subgroups == {"length_bucket": {"short": 0.93}}  # t2, t4: (0.92 + 0.94) / 2
    mixed = dict(same, t4={**verdict(True, 0.5), "subgroups": {"label": {"x": 0.5}, "length_bucket": {"short": 0.6}}})
    summary = summarize(rows, mixed, VARIANTS, QUALITY)
    assert summary.variants[0].subgroups == {"length_bucket": {"short": 0.93}}
    assert summary.variants[1].subgroups == {"length_bucket": {"short": 0.76}, "label": {"x": 0.5}}


def _scored(tables):
    """Five accepted passes (b1: t1 t3 t5, b8: t2 t4), pass ``i`` scoring ``tables[i - 1]``."""
    rows = [row(f"t{i}", "b1" if i % 2 else "b8", i, pass_s="1") for i in range(1, 6)]
    verdicts = {f"t{i}": {**verdict(True), "subgroups": table} for i, table in enumerate(tables, start=1)}
    return [v.subgroups for v in summarize(rows, verdicts, VARIANTS, QUALITY).variants]


def test_subgroup_medians_keep_each_variants_first_order_when_a_later_pass_orders_them_otherwise():
    first = {"length_bucket": {"short": 0.1, "long": 0.2}, "label": {"x": 0.3}}
    swapped = {"label": {"x": 0.5}, "length_bucket": {"long": 0.6, "short": 0.7}}
    b1, b8 = _scored([first, first, swapped, first, first])  # t3 (b1's second pass) lists them the other way
    assert b1 == {"length_bucket": {"short": 0.1, "long": 0.2}, "label": {"x": 0.3}}
    assert list(b1) == ["length_bucket", "label"] and list(b1["length_bucket"]) == ["short", "long"]
    b1, b8 = _scored([first, swapped, first, first, first])  # b8's first pass lists them the other way
    assert list(b8) == ["label", "length_bucket"] and list(b8["length_bucket"]) == ["long", "short"]
    assert b8 == {"label": {"x": 0.4}, "length_bucket": {"long": 0.4, "short": (0.7 + 0.1) / 2}}
    assert list(b1) == ["length_bucket", "label"]
    groups_only = {"label": {"x": 0.5}, "length_bucket": {"short": 0.7, "long": 0.6}}
    b1, b8 = _scored([first, groups_only, first, first, first])  # b8's first pass: the groups the other way
    assert list(b8) == ["label", "length_bucket"] and list(b8["length_bucket"]) == ["short", "long"]


def test_subgroup_medians_of_passes_that_scored_other_values_of_the_same_count():
    b1, b8 = _scored([{"g": {"a": 0.1}}, {"g": {"a": 0.2}}, {"g": {"b": 0.3}}, {"g": {"a": 0.4}}, {"g": {"a": 0.5}}])
    assert b1 == {"g": {"a": 0.3, "b": 0.3}}  # t1 and t5 scored a, t3 scored b
    assert b8 == {"g": {"a": (0.2 + 0.4) / 2}}
    b1, b8 = _scored([{"g": {"a": 0.1}}, {"g": {"a": None}}, {}, {"g": {"a": 0.4}}, {"g": {"a": 0.5}}])
    assert b1 == {"g": {"a": 0.3}} and b8 == {"g": {"a": 0.4}}  # a pass without a score, one of none
