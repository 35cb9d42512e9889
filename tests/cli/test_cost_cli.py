"""``isocost cost`` and ``isocost window`` through click's CliRunner: exact output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from runner.cli import main

SOURCE = "IteraGPU catalog snapshot (2026-09-24 edition)"
HEADER = "gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_rtx_4090_two_lots_seven_days_exact_output() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "plan: rtx-4090, 7 days, 1 card per lot, 110.00 USD per lot (catalog 2026-09-24)\n"
        f"source: {SOURCE}\n"
        "lots: 2\n"
        "cards: 2 GPUs\n"
        "total: 220.00 USD (whole plan price, charged in full even if the work ends early)\n"
    )
    assert "per validated corpus" not in result.output


def test_b200_one_lot_is_two_cards_and_2071() -> None:
    result = run("cost", "--gpu", "b200", "--days", "7", "--lots", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "plan: b200, 7 days, 2 cards per lot, 2071.00 USD per lot (catalog 2026-09-24)\n"
        f"source: {SOURCE}\n"
        "lots: 1\n"
        "cards: 2 GPUs\n"
        "total: 2071.00 USD (whole plan price, charged in full even if the work ends early)\n"
    )


def test_accepted_results_adds_the_cost_per_validated_corpus() -> None:
    result = run("cost", "--gpu", "b200", "--days", "7", "--lots", "1", "--accepted-results", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "accepted results: 3",
        "cost per validated corpus: 690.33 USD (2071.00 USD / 3, rounded half-even "
        "(banker's rounding) to 0.01 USD)",
    ]


def test_zero_accepted_results_is_undefined_and_the_spend_stands() -> None:
    result = run(
        "cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "2", "--accepted-results", "0"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-3:] == [
        "total: 220.00 USD (whole plan price, charged in full even if the work ends early)",
        "accepted results: 0",
        "cost per validated corpus: undefined (no accepted corpus); "
        "the spend of 220.00 USD still stands",
    ]
    assert "cost per validated corpus: 0" not in result.stdout
    assert "inf" not in result.stdout.lower()


def test_json_money_is_strings_and_keys_are_sorted() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["total_usd"] == "220.00"
    assert data["cards"] == 2
    assert data["plan"]["price_usd_per_lot"] == "110.00"
    assert data["cost_per_validated_corpus_usd"] is None
    assert data["per_result_state"] == "not_requested"
    assert list(data) == sorted(data)
    zero = json.loads(
        run(
            "cost",
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--accepted-results",
            "0",
            "--json",
        ).stdout
    )
    assert zero["per_result_state"] == "undefined"
    assert zero["cost_per_validated_corpus_usd"] is None
    assert zero["total_usd"] == "2071.00"


def test_missing_price_is_an_error_naming_the_entry() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "30", "--lots", "1")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        "Error: no price for rtx-4090 for 30 days (catalog dated 2026-09-24"
    )
    assert "Plans that exist for rtx-4090: 7 days." in result.stderr


def test_unknown_gpu_lists_known_ones() -> None:
    result = run("cost", "--gpu", "h100", "--days", "7", "--lots", "1")
    assert result.exit_code == 2
    assert "Error: unknown GPU 'h100'" in result.stderr
    assert "Known GPUs: b200, rtx-4090." in result.stderr


def test_days_outside_the_choices_is_a_usage_error() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "14", "--lots", "1")
    assert result.exit_code == 2
    assert "Invalid value for '--days'" in result.stderr


def test_non_integer_lots_is_a_usage_error() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "two")
    assert result.exit_code == 2
    assert "Invalid value for '--lots'" in result.stderr


def test_zero_lots_and_negative_accepted_results_are_user_errors() -> None:
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "0")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: --lots must be a positive whole number, got 0 (--lots). "
        "Rent at least one lot, e.g. --lots 1.\n"
    )
    result = run(
        "cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "1", "--accepted-results", "-2"
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --accepted-results must be 0 or more, got -2")


def test_user_catalog(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text(HEADER + "\nl40s,1,3,45.50,USD,2026-10-01,my quote\n", encoding="utf-8")
    result = run("cost", "--gpu", "l40s", "--days", "3", "--lots", "3", "--catalog", str(path))
    assert result.exit_code == 0, result.output
    assert "total: 136.50 USD" in result.stdout
    assert "(catalog 2026-10-01)" in result.stdout


def test_invalid_user_catalog_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    row = "rtx-4090,1,7,110.00,USD,2026-09-24,a"
    path.write_text(f"{HEADER}\n{row}\n{row}\n", encoding="utf-8")
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "1", "--catalog", str(path))
    assert result.exit_code == 2
    assert "duplicate plan rtx-4090 for 7 days on lines 2 and 3" in result.stderr
    path.write_text(f"{HEADER}\nrtx-4090,1,7,110.00,EUR,2026-09-24,a\n", encoding="utf-8")
    result = run("cost", "--gpu", "rtx-4090", "--days", "7", "--lots", "1", "--catalog", str(path))
    assert result.exit_code == 2
    assert "unknown currency 'EUR'" in result.stderr


def test_window_monday_to_friday_exact_output() -> None:
    result = run(
        "window", "--start", "2026-11-02T09:00", "--end", "2026-11-06T09:00", "--tz", "Europe/Paris"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "window: 2026-11-02T09:00+01:00 -> 2026-11-06T09:00+01:00 (Europe/Paris)\n"
        "real elapsed: 96 h (aware datetimes, UTC arithmetic)\n"
        "wall clock: 96 h\n"
        "DST: no UTC offset change inside the window (+01:00 throughout)\n"
        "3-day plan (72 h): does not cover (short by 24 h)\n"
        "7-day plan (168 h): covers (72 h to spare)\n"
        "30-day plan (720 h): covers (624 h to spare)\n"
        "candidates: 7-day, 30-day plans. This says nothing about whether the work fits: "
        "durations must be measured.\n"
    )


def test_window_across_the_fall_back_change() -> None:
    result = run(
        "window", "--start", "2026-10-24T09:00", "--end", "2026-10-26T09:00", "--tz", "Europe/Paris"
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:5] == [
        "window: 2026-10-24T09:00+02:00 -> 2026-10-26T09:00+01:00 (Europe/Paris)",
        "real elapsed: 49 h (aware datetimes, UTC arithmetic)",
        "wall clock: 48 h",
        "DST: DST ends at 2026-10-25T01:00Z: clocks go back from 2026-10-25 03:00 to 02:00 "
        "(+02:00 -> +01:00)",
        "real elapsed differs from the wall clock by +1 h",
    ]
    assert "3-day plan (72 h): covers (23 h to spare)" in lines


def test_window_that_no_plan_covers() -> None:
    result = run(
        "window", "--start", "2026-11-01T00:00Z", "--end", "2026-12-01T01:00Z", "--tz", "UTC"
    )
    assert result.exit_code == 0, result.output
    assert "30-day plan (720 h): does not cover (short by 1 h)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "no plan covers 721 h: reschedule the work, or estimate the extra period explicitly "
        "(the longest plan, 30 days = 720 h, is short by 1 h); no automatic extension is assumed."
    )


def test_window_gap_and_ambiguity_errors() -> None:
    gap = run(
        "window", "--start", "2026-03-29T02:30", "--end", "2026-03-30T09:00", "--tz", "Europe/Paris"
    )
    assert gap.exit_code == 2
    assert gap.stderr.startswith(
        "Error: start 2026-03-29T02:30 does not exist in Europe/Paris: the clocks jump from "
        "02:00 to 03:00 (non-existent local time, spring-forward gap) (--start)."
    )
    ambiguous = run(
        "window", "--start", "2026-10-25T02:30", "--end", "2026-10-26T09:00", "--tz", "Europe/Paris"
    )
    assert ambiguous.exit_code == 2
    assert "ambiguous in Europe/Paris" in ambiguous.stderr
    assert "--fold 0" in ambiguous.stderr and "--fold 1" in ambiguous.stderr
    assert "2026-10-25T02:30+01:00" in ambiguous.stderr


def test_window_fold_and_explicit_offset_resolve_the_ambiguity() -> None:
    common = ("--end", "2026-10-26T09:00", "--tz", "Europe/Paris")
    first = run("window", "--start", "2026-10-25T02:30", "--fold", "0", *common)
    second = run("window", "--start", "2026-10-25T02:30", "--fold", "1", *common)
    explicit = run("window", "--start", "2026-10-25T02:30+01:00", *common)
    assert "real elapsed: 31.5 h (aware datetimes, UTC arithmetic)" in first.stdout
    assert "real elapsed: 30.5 h (aware datetimes, UTC arithmetic)" in second.stdout
    assert "real elapsed: 30.5 h (aware datetimes, UTC arithmetic)" in explicit.stdout
    bad = run("window", "--start", "2026-10-25T02:30", "--fold", "2", *common)
    assert bad.exit_code == 2
    assert "Invalid value for '--fold'" in bad.stderr


def test_window_user_errors() -> None:
    reversed_ = run(
        "window", "--start", "2026-11-06T09:00", "--end", "2026-11-02T09:00", "--tz", "UTC"
    )
    assert reversed_.exit_code == 2
    assert "is before its start" in reversed_.stderr
    zone = run(
        "window", "--start", "2026-11-02T09:00", "--end", "2026-11-06T09:00", "--tz", "Mars/X"
    )
    assert zone.exit_code == 2
    assert "Error: unknown time zone 'Mars/X' (--tz)." in zone.stderr
    naive = run("window", "--start", "2026-11-02T09:00", "--end", "2026-11-06T09:00")
    assert naive.exit_code == 2
    assert "no UTC offset and no time zone is given" in naive.stderr


def test_window_json() -> None:
    result = run(
        "window",
        "--start",
        "2026-10-24T09:00",
        "--end",
        "2026-10-26T09:00",
        "--tz",
        "Europe/Paris",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["window"]["elapsed_h"] == 49
    assert data["window"]["wall_clock_h"] == 48
    assert data["window"]["dst_change"] is True
    assert data["coverage"]["covering_days"] == [3, 7, 30]
    assert list(data) == sorted(data)


def test_help_texts_have_examples() -> None:
    for command in ("cost", "window"):
        result = run(command, "--help")
        assert result.exit_code == 0
        assert f"Example: isocost {command} " in result.stdout
