"""summary.md's device-use section: the share of the measured pass the device was busy, per variant, over
accepted passes only, and an empty figure with its reason, never a zero."""

from __future__ import annotations

from typing import Any

from protocol.records.raw_record import RawRecord
from runner.analysis.device_use import device_use, device_use_lines
from runner.campaign_dir.raw_frame import frame_of


def row(trial: str, variant: str, share: float | None, reasons: str = "") -> RawRecord:
    return RawRecord.from_values({"trial_id": trial, "variant_id": variant, "status": "ok",
                                  "device_busy_share": share, "empty_reasons": reasons})


def verdicts(*accepted: str, rejected: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    found = {t: {"corpus_accepted": True} for t in accepted}
    found.update({t: {"corpus_accepted": False} for t in rejected})
    return found


def test_median_min_max_over_accepted_passes_only() -> None:
    rows = [row("1", "a", 0.9), row("2", "a", 0.5), row("3", "a", 0.7), row("4", "a", 0.01)]
    figures = device_use(frame_of(rows), verdicts("1", "2", "3", rejected=("4",)), ["a"])
    assert figures["a"] == {"median": 0.7, "min": 0.5, "max": 0.9, "passes": 3, "reason": ""}
    assert "- a: median 70% over 3 accepted pass(es) (min 50%, max 90%)" in device_use_lines(figures)


def test_cpu_trials_are_empty_with_the_rows_reason_not_zero() -> None:
    rows = [row("1", "cpu", None, "peak_allocated_bytes: CPU trial; device_busy_share: CPU trial: no device time")]
    figures = device_use(frame_of(rows), verdicts("1"), ["cpu"])
    assert figures["cpu"]["median"] is None and figures["cpu"]["passes"] == 0
    assert "- cpu: empty (CPU trial: no device time)" in device_use_lines(figures)


def test_a_variant_without_an_accepted_pass_says_so_in_report_order() -> None:
    rows = [row("1", "b", 0.8), row("2", "a", 0.4)]
    figures = device_use(frame_of(rows), verdicts("2", rejected=("1",)), ["b", "a"])
    assert list(figures) == ["b", "a"]
    assert figures["b"]["reason"] == "no accepted pass"
    assert figures["a"]["median"] == 0.4
