"""``isocost decide`` and ``isocost period`` through click's CliRunner, on hand-written results directories.

Each directory is written in the campaign format (campaign.json, study.toml, corpus_index.csv, raw.csv,
events.jsonl, trials/<id>/predictions.jsonl) without running a model, so the verdicts decide re-derives
are known by construction.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from recordfiles import trial_status, write_campaign_record, write_status

from protocol.io.fingerprint import sha256_bytes
from protocol.records import codec
from protocol.records.raw_columns import RAW_COLUMNS, RAW_SCHEMA_VERSION
from protocol.records.raw_record import RawRecord
from protocol.records.stages import EVENT_SCHEMA_VERSION, CampaignRecord, HostFacts, InputFacts, Rental
from protocol.study.load import load_study
from runner.campaign_dir.appendlog import append_line
from runner.campaign_dir.layout import load_record
from runner.campaign_dir.raw_table import append_row
from runner.campaign_dir.rentals import record_rental
from runner.campaign_dir.seal import seal_values
from runner.cli import IsocostGroup, main
from runner.cli.decide import COMMANDS

IDS = [f"c-{i:03d}" for i in range(6)]
LABELS = ["x", "y", "x", "x", "y", "y"]
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def isocost() -> click.Group:
    """The real ``isocost`` group, or a copy that also holds decide/period until they are registered there."""
    if all(command.name in main.commands for command in COMMANDS):
        return main
    return IsocostGroup(name="isocost", commands={**main.commands, **{c.name: c for c in COMMANDS if c.name}})


def run(*args: str) -> Result:
    return CliRunner().invoke(isocost(), list(args))


def write_campaign(
    root: Path,
    study_text: str,
    passes: dict[str, list[str]],
    *,
    gpu: str | None = "rtx-4090",
    lots: int = 2,
    trial_s: float = 60.0,
    campaign_id: str = "c0ffee00c0ffee00",
    trial_texts: dict[str, str] | None = None,
) -> Path:
    """A finished campaign: each variant's list of statuses ('ok' = correct, complete predictions); ``trial_texts``
    (file name → text) written into every trial's directory before raw.csv seals it."""
    root.mkdir(parents=True)
    (root / "study.toml").write_text(study_text, encoding="utf-8")
    study = load_study(root / "study.toml")
    with open(root / "corpus_index.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "label", "n_tokens", "length_bucket"])
        for ident, label in zip(IDS, LABELS, strict=True):
            writer.writerow([ident, label, 5, "short"])
    variants = tuple(v for v in study.variants() if v.variant_id in passes)
    events = [{"at": T0.isoformat(), "event": "setup_start"},
              {"at": (T0 + timedelta(seconds=600)).isoformat(), "event": "setup_end"}]
    clock = T0 + timedelta(seconds=600)
    rows = []
    order = [(vid, rep, status) for rep in range(max(map(len, passes.values())))
             for vid, statuses in passes.items() if rep < len(statuses) for status in [statuses[rep]]]
    for index, (vid, rep, status) in enumerate(order, start=1):
        trial_id = f"{index:03d}-r{rep + 1}-{vid.replace('=', '-')}"
        trial_dir = root / "trials" / trial_id
        trial_dir.mkdir(parents=True)
        lines = IDS if status == "ok" else IDS[:2]
        (trial_dir / "predictions.jsonl").write_text(
            "".join(json.dumps({"id": i, "label": LABELS[IDS.index(i)], "score": 0.9}) + "\n" for i in lines),
            encoding="utf-8")
        write_status(trial_dir, trial_status(trial_id, status, completed=len(lines),
                                             expected=len(IDS), pass_s=2.0 + index / 10 if status == "ok" else None))
        for name, text in (trial_texts or {}).items():  # a status.json as a broken or older trial left it…
            (trial_dir / name).write_text(text, encoding="utf-8")
        row = {name: "" for name in RAW_COLUMNS}
        row.update({
            "trial_id": trial_id, "variant_id": vid, "repetition": str(rep + 1), "order_index": str(index),
            "attempt": "1", "status": status, "pass_s": repr(2.0 + index / 10) if status == "ok" else "",
            "expected_ids": "6", "observed_ids": str(len(lines)), "ids_match": str(status == "ok").lower(),
            "corpus_accepted": str(status == "ok").lower(), "peak_rss_bytes": str(400 * 2**20),
            "started_at": clock.isoformat(), "ended_at": (clock + timedelta(seconds=trial_s)).isoformat(),
            "predictions_path": f"trials/{trial_id}/predictions.jsonl", "launcher": "process",
            "empty_reasons": "peak_allocated_bytes: CPU trial: no GPU, so no device memory counters",
        })
        rows.append(row)
        events += [{"at": clock.isoformat(), "event": "trial_start", "trial_id": trial_id},
                   {"at": (clock + timedelta(seconds=trial_s)).isoformat(), "event": "trial_end",
                    "trial_id": trial_id}]
        clock += timedelta(seconds=trial_s)
    events.append({"at": clock.isoformat(), "event": "trials_end"})
    for event in events:  # chained, as `isocost run` appends them
        append_line(root / "events.jsonl", {**event, "schema_version": EVENT_SCHEMA_VERSION}, root=root, chained=True)
    write_campaign_record(root, CampaignRecord(
        campaign_id=campaign_id, created_at=T0.isoformat(), isocost_version="1.0.0",
        raw_schema_version=RAW_SCHEMA_VERSION,
        study_name=study.name, study_path=str(root / "study.toml"),
        study_sha256=sha256_bytes(study_text.encode("utf-8")), question=study.question,
        corpus=InputFacts("corpus.jsonl", study.corpus.fingerprint, inputs=len(IDS),
                          content_fingerprint="sha256:" + "c" * 64),
        tuning=InputFacts("tuning.jsonl", study.tuning.fingerprint, inputs=6),
        model=InputFacts("model", study.model.fingerprint),
        variants=variants, repetitions=max(map(len, passes.values())), order="rotate",
        launcher={"kind": "process"}, host=HostFacts("vm", 2),
        rental=Rental(gpu, lots) if gpu else None,
        empty_reasons={} if gpu else {
            "rental": "no --gpu given to `isocost run`: the plan this host is rented under is unknown"},
    ))
    for row in rows:  # sealing its trial's files, chained to campaign.json, as `isocost run` writes them
        seals = seal_values(root / "trials" / row["trial_id"], ("predictions.jsonl",))
        row.update({k: v or "" for k, v in seals.items()})
        append_row(root / "raw.csv", RawRecord.from_text(row))
    return root


@pytest.fixture
def two_variants(tmp_path: Path, study_text: Callable[..., str]) -> Path:
    return write_campaign(tmp_path / "rtx", study_text(minimum=0.5),
                          {"batch_size=1": ["ok", "ok", "ok"], "batch_size=4": ["ok", "oom", "ok"]})


def test_decide_prints_the_memo_and_writes_three_files(two_variants: Path, tmp_path: Path) -> None:
    target = tmp_path / "decision"
    result = run("decide", str(two_variants), "--out", str(target))
    assert result.exit_code == 0, result.output
    out = result.stdout
    lines = out.splitlines()
    assert lines[0] == "# Decision: tiny"
    assert ("**Chosen: batch_size=1 on rtx-4090 ×2 lots**: rtx-4090 7-day plan, 2 lot(s) × 110.00 USD = 220.00 USD; "
            "cost per validated corpus 220.00 USD (220.00 USD / 1).") in lines
    assert ("- ties on contracted cost (220.00 USD) with 1 other configuration(s); ranked first by fewer failed "
            "attempts (0 against 1 for batch_size=4 on rtx-4090 ×2 lots)") in lines
    assert ("| 1 | batch_size=1 on rtx-4090 ×2 lots | equivalent | 2.10 2.30 2.50 | 2.30 | 3 / 3 | 0 | 1 of 1 "
            "| 0.27 | 7-day × 2 | 220.00 | 220.00 | — |") in lines
    assert ("| 2 | batch_size=4 on rtx-4090 ×2 lots | equivalent | 2.20 ✗oom 2.60 | 2.40 | 2 / 3 | oom 1 | 1 of 1 "
            "| 0.27 | 7-day × 2 | 220.00 | 220.00 | — |") in lines
    assert "| 3 days | 72 | yes | — | 2 | — | no price for rtx-4090 for 3 days (catalog dated 2026-09-24" in out
    assert "| 7 days | 168 | yes | 110.00 | 2 | 220.00 | covers the needed period (167.73 h to spare) |" in out
    assert "Contracted: the 7-day plan, 220.00 USD." in out
    assert "the study declares no deadline table: no deadline check, no waiting period." in out
    assert "None given (pass a ledger with --expenses FILE)" in out
    assert f"Wrote {target / 'decision.md'}, {target / 'decision.json'} and " \
           f"{target / 'report.html'}" in result.stderr
    for name in ("decision.md", "decision.json", "report.html"):
        assert (target / name).exists() and not (two_variants / name).exists()
    assert (target / "decision.md").read_text(encoding="utf-8") == out
    assert not (two_variants / "verdicts.csv").exists()  # verdicts re-derived in memory, never written by decide


def test_decide_json(two_variants: Path) -> None:
    result = run("decide", str(two_variants), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["chosen"] == "batch_size=1 on rtx-4090 ×2 lots"
    assert data["ranking"] == ["batch_size=1 on rtx-4090 ×2 lots", "batch_size=4 on rtx-4090 ×2 lots"]
    assert data["configurations"][0]["cost"]["total_usd"] == "220.00"
    assert data["campaigns"][0]["period"]["used_s"] == 600 + 6 * 60
    assert data["catalog_source"] == "the dated snapshot shipped with isocost"


def test_decide_out_and_expenses_shown_apart(two_variants: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("date,description,amount_usd,evidence\n2026-09-30,object storage,12.50,invoice S-17\n",
                      encoding="utf-8")
    out = tmp_path / "decision"
    result = run("decide", str(two_variants), "--expenses", str(ledger), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"From {ledger}; shown apart, never added to a configuration's cost." in result.stdout
    assert "| 2026-09-30 | object storage | 12.50 | invoice S-17 |" in result.stdout
    assert "| | total | 12.50 | |" in result.stdout
    assert "220.00 USD (220.00 USD / 1)" in result.stdout  # not 232.50
    assert (out / "report.html").exists() and not (two_variants / "report.html").exists()


def test_campaigns_of_different_studies_are_refused_naming_the_difference(
    tmp_path: Path, study_text: Callable[..., str]
) -> None:
    a = write_campaign(tmp_path / "a", study_text(minimum=0.5), {"batch_size=1": ["ok"]}, campaign_id="aaaa")
    b = write_campaign(tmp_path / "b", study_text(minimum=0.6), {"batch_size=1": ["ok"]}, campaign_id="bbbb")
    result = run("decide", str(a), str(b))
    assert result.exit_code == 2
    sha_a = sha256_bytes(study_text(minimum=0.5).encode())
    sha_b = sha256_bytes(study_text(minimum=0.6).encode())
    assert result.stderr == (
        f"Error: results come from different studies: study sha256 differs ({a}: {sha_a}, {b}: {sha_b}) ({a}, {b}). "
        "isocost decide compares configurations of ONE study (same study file, corpus and model): pass only "
        "results directories of that study, or run decide on each study separately.\n"
    )
    assert not (a / "decision.md").exists()


def test_model_fingerprint_difference_is_named(tmp_path: Path, study_text: Callable[..., str]) -> None:
    a = write_campaign(tmp_path / "a", study_text(), {"batch_size=1": ["ok"]}, campaign_id="aaaa")
    b = write_campaign(tmp_path / "b", study_text(model_fp="sha256:" + "4" * 64), {"batch_size=1": ["ok"]},
                       campaign_id="bbbb")
    result = run("decide", str(a), str(b))
    assert result.exit_code == 2
    assert "study sha256 differs" in result.stderr
    assert f"model fingerprint differs ({a}: sha256:{'3' * 64}, {b}: sha256:{'4' * 64})" in result.stderr
    assert "corpus fingerprint differs" not in result.stderr


def test_unknown_gpu_is_listed_with_the_catalogs_error(tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "h100", study_text(), {"batch_size=1": ["ok", "ok"]}, gpu="h100", lots=1)
    result = run("decide", str(root))
    assert result.exit_code == 3, result.output
    assert "**No configuration is chosen.**" in result.stdout
    assert ("- batch_size=1 on h100 ×1 lot: contracted cost unknown: unknown GPU 'h100' (catalog dated 2026-09-24, "
            in result.stdout)
    assert "Known GPUs: b200, rtx-4090. Pick one, or load your own dated catalog with --catalog FILE." in result.stdout


def test_missing_price_names_the_gpu_and_days(tmp_path: Path, study_text: Callable[..., str]) -> None:
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source\n"
                       "l40s,1,30,900.00,USD,2026-10-01,vendor sheet\n", encoding="utf-8")
    root = write_campaign(tmp_path / "l40s", study_text(), {"batch_size=1": ["ok"]}, gpu="l40s", lots=1)
    result = run("decide", str(root), "--catalog", str(catalog))
    assert result.exit_code == 0, result.output
    # The 3- and 7-day plans would cover the period but have no price; the 30-day one is contracted.
    assert f"| 3 days | 72 | yes | — | 1 | — | no price for l40s for 3 days (catalog dated 2026-10-01, {catalog})." \
           in result.stdout
    assert "**Chosen: batch_size=1 on l40s ×1 lot**: l40s 30-day plan, 1 lot(s) × 900.00 USD = 900.00 USD" \
           in result.stdout


def test_no_rental_gives_an_empty_cost_with_the_reason(tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "cpu", study_text(), {"batch_size=1": ["ok"]}, gpu=None)
    result = run("decide", str(root), "--json")
    assert result.exit_code == 3, result.output
    config = json.loads(result.stdout)["configurations"][0]
    assert config["configuration_id"] == "batch_size=1 on host vm (no rental recorded)"
    assert config["cost"]["total_usd"] is None
    assert config["cost"]["empty_reason"] == (
        "no --gpu given to `isocost run`: the plan this host is rented under is unknown")


def test_bad_expenses_and_missing_dirs_are_user_errors(two_variants: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("date,description,amount_usd,evidence\n2026-09-30,storage,12.50,\n", encoding="utf-8")
    result = run("decide", str(two_variants), "--expenses", str(bad))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: evidence is empty ({bad}:2). Every expense needs its evidence")
    result = run("decide", str(two_variants), "--expenses", str(tmp_path / "nope.csv"))
    assert result.exit_code == 2 and "expenses ledger not found" in result.stderr
    result = run("decide", str(tmp_path))
    assert result.exit_code == 2 and "not a campaign directory (no campaign.json)" in result.stderr
    result = run("decide")
    assert result.exit_code == 2 and "Missing argument 'DIRS...'" in result.output


def test_deadline_from_the_study(tmp_path: Path, study_text: Callable[..., str]) -> None:
    text = study_text() + ('\n[deadline]\nstart = "2026-11-02T09:00"\nend = "2026-11-06T09:00"\n'
                           'tz = "Europe/Paris"\nwaiting_h = 95\n')
    root = write_campaign(tmp_path / "d", text, {"batch_size=1": ["ok", "ok"]}, trial_s=1800)
    result = run("decide", str(root))
    assert result.exit_code == 3, result.output
    # 600 s + 2 × 1800 s = 1.1667 h used + 95 h waiting = 96.17 h > 96 h.
    assert "- batch_size=1 on rtx-4090 ×2 lots: deadline: does not fit: needs 96.17 h > the deadline window's 96 h " \
           "(over by 0.17 h)" in result.stdout
    assert "Window 2026-11-02T09:00+01:00 → 2026-11-06T09:00+01:00 (Europe/Paris): 96 h real elapsed" in result.stdout


def test_period_command(two_variants: Path) -> None:
    result = run("period", str(two_variants))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "campaign c0ffee00c0ffee00, rented as rtx-4090 ×2 lot(s)",
        "from 2026-11-02T09:00:00.000Z to 2026-11-02T09:16:00.000Z",
        "  setup                          600.0 s      0.17 h  events.jsonl setup_start → setup_end (`isocost run` "
        "freezing the study: fingerprints, tokenization, schedule)",
    ]
    assert lines[3].startswith("  trials                         360.0 s       0.1 h  events.jsonl trial_start")
    assert lines[4].startswith("  evaluation                           —           —  not recorded: no "
                               "evaluation_start/evaluation_end events")
    assert "used: 0.27 h (1 session(s), 0 resume(s); overlaps counted once); idle between sessions: 0 h" in lines
    assert "needed period: 0.27 h (used + declared waiting)" in lines
    assert "plans for rtx-4090 ×2 lot(s) (catalog dated 2026-09-24, the dated snapshot shipped with isocost):" in lines
    assert "  7-day plan (168 h): covers; 220.00 USD; covers the needed period (167.73 h to spare)" in lines
    assert lines[-1] == "contracted: 7-day plan, 220.00 USD (whole plan price)"
    data = json.loads(run("period", str(two_variants), "--json").stdout)
    assert data["period"]["used_s"] == 960
    assert data["cost"]["total_usd"] == "220.00"


def test_decide_checks_each_directory_once(two_variants: Path, tmp_path: Path,
                                           study_text: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.campaign_dir.checks import CampaignChecks

    other = write_campaign(tmp_path / "b200", study_text(minimum=0.5), {"batch_size=1": ["ok", "ok"]},
                           gpu="b200", lots=1, campaign_id="b200b200b200b200")
    checked: list[Path] = []
    real = CampaignChecks.run

    def counting(self: CampaignChecks) -> None:
        checked.append(Path(self.root))
        real(self)

    monkeypatch.setattr(CampaignChecks, "run", counting)
    result = run("decide", str(two_variants), str(other))
    assert result.exit_code == 0, result.output
    assert sorted(checked) == sorted([two_variants, other])  # the evidence checks run once per directory


def inconsistent(root: Path) -> Path:
    """The frozen study copy edited after the start: the evidence checks refuse the directory."""
    study = root / "study.toml"
    study.write_text(study.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    return root


def test_period_refuses_an_inconsistent_directory_unless_allowed(two_variants: Path) -> None:
    from runner.campaign_dir.integrity import INCONSISTENT_BANNER

    inconsistent(two_variants)
    result = run("period", str(two_variants))
    assert result.exit_code == 2
    assert result.output.startswith("Error: the campaign directory is not consistent: study.toml: sha256")
    result = run("period", str(two_variants), "--allow-inconsistent")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(INCONSISTENT_BANNER) and "study.toml: sha256" in lines[0]
    assert lines[1] == "campaign c0ffee00c0ffee00, rented as rtx-4090 ×2 lot(s)"
    assert lines[-1] == "contracted: 7-day plan, 220.00 USD (whole plan price)"
    result = run("period", str(two_variants), "--allow-inconsistent", "--json")
    assert result.exit_code == 0, result.output
    first, _, rest = result.stdout.partition("\n")
    assert first.startswith(INCONSISTENT_BANNER)
    data = json.loads(rest)
    assert data["inconsistent"] == first and data["period"]["used_s"] == 960


def test_decide_allow_inconsistent_says_so_first(two_variants: Path) -> None:
    from runner.campaign_dir.integrity import INCONSISTENT_BANNER

    inconsistent(two_variants)
    assert run("decide", str(two_variants)).exit_code == 2
    for extra in ([], ["--json"]):
        result = run("decide", str(two_variants), "--allow-inconsistent", "--out", str(two_variants.parent / "d"),
                     *extra)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[0].startswith(INCONSISTENT_BANNER), extra
    data = json.loads((two_variants.parent / "d" / "decision.json").read_text(encoding="utf-8"))
    assert len(data["inconsistent"]) == 1 and data["inconsistent"][0].startswith(INCONSISTENT_BANNER)
    assert data["campaigns"][0]["notes"][0] == data["inconsistent"][0]


def test_period_without_rental(tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "cpu", study_text(), {"batch_size=1": ["ok"]}, gpu=None)
    result = run("period", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "campaign c0ffee00c0ffee00, rented as unknown (no rental recorded)"
    assert result.stdout.splitlines()[-1] == (
        "plans: none priced (no --gpu given to `isocost run`: the plan this host is rented under is unknown)")


def test_help_has_examples() -> None:
    for name in ("decide", "period"):
        result = run(name, "--help")
        assert result.exit_code == 0
        assert f"Example: isocost {name}" in result.output


def test_report_html_is_self_contained_with_every_pass_drawn(two_variants: Path) -> None:
    assert run("decide", str(two_variants), "--out", str(two_variants.parent / "d")).exit_code == 0
    html = (two_variants.parent / "d" / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert html.count('<svg class="plot ') == 3
    assert html.count('<circle class="pass accepted"') == 5  # 3 + 2 accepted passes
    assert html.count('<path class="pass failed"') == 1  # the OOM attempt, in the failure lane
    assert '<text x="' in html and ">oom 1</text>" in html
    assert html.count('<line class="median"') == 2
    assert html.count('<rect class="cost-bar"') == 2
    assert "220.00 USD · chosen" in html
    assert "host RAM capacity not recorded" in html
    assert "pass time per full pass over the corpus (s)" in html and "peak memory (MiB)" in html
    assert "http://" not in html and "https://" not in html and "<script" not in html


def test_report_draws_undefined_and_unknown_costs_as_empty_bars(tmp_path: Path, study_text: Callable[..., str]) -> None:
    failed = write_campaign(tmp_path / "failed", study_text(), {"batch_size=1": ["oom", "oom"]})
    assert run("decide", str(failed), "--out", str(tmp_path / "d1")).exit_code == 3
    html = (tmp_path / "d1" / "report.html").read_text(encoding="utf-8")
    assert html.count('<rect class="cost-empty"') == 1
    assert "undefined: no accepted corpus (spend 220.00 USD still stands)" in html
    assert "No configuration is chosen." in html
    unknown = write_campaign(tmp_path / "unknown", study_text(), {"batch_size=1": ["ok"]}, gpu=None)
    assert run("decide", str(unknown), "--out", str(tmp_path / "d2")).exit_code == 3
    html = (tmp_path / "d2" / "report.html").read_text(encoding="utf-8")
    assert "unknown: no --gpu given to `isocost run`" in html


def test_the_studys_own_catalog_is_found_next_to_the_original_study(
    tmp_path: Path, study_text: Callable[..., str]
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "own.csv").write_text(
        "gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source\n"
        "rtx-4090,1,3,45.00,USD,2026-10-01,vendor sheet\n", encoding="utf-8")
    text = study_text() + '\n[costing]\ncatalog = "../own.csv"\n'
    root = write_campaign(tmp_path / "camp", text, {"batch_size=1": ["ok"]})
    record = load_record(root)
    write_campaign_record(root, record, study_path=str(tmp_path / "a" / "b" / "study.toml"))  # the user's copy
    result = run("decide", str(root))
    assert result.exit_code == 0, result.output
    assert "rtx-4090 3-day plan, 2 lot(s) × 45.00 USD = 90.00 USD" in result.stdout
    assert f"(the study's [costing] catalog ({tmp_path / 'a' / 'own.csv'}))" in result.stdout
    write_campaign_record(root, record, study_path=str(tmp_path / "elsewhere" / "study.toml"))
    result = run("decide", str(root))
    assert result.exit_code == 2
    assert "the catalog named by the study's [costing] table is not found" in result.stderr
    assert "Pass the dated catalog with --catalog FILE." in result.stderr


def test_decide_format_csv_one_row_per_configuration(two_variants: Path) -> None:
    result = run("decide", str(two_variants), "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(result.stdout.splitlines()))
    assert [r["configuration_id"] for r in rows] == ["batch_size=1 on rtx-4090 ×2 lots",
                                                     "batch_size=4 on rtx-4090 ×2 lots"]
    assert [(r["campaign_rank"], r["campaign_cost_usd"], r["job_h"], r["pareto"]) for r in rows] == [
        ("1", "220.00", "", ""), ("2", "220.00", "", "")]  # no [job]: the job columns stay empty


def test_rentals_jsonl_names_the_rental(tmp_path: Path, study_text: Callable[..., str]) -> None:
    root = write_campaign(tmp_path / "b", study_text(minimum=0.5), {"batch_size=1": ["ok"]}, gpu=None)
    record_rental(root, "b200", 1)
    result = run("decide", str(root))
    assert result.exit_code == 0, result.output
    assert "**Chosen: batch_size=1 on b200 ×1 lot**: b200 7-day plan, 1 lot(s) × 2071.00 USD" in result.stdout


def test_a_job_over_campaigns_without_batches_is_refused_per_configuration(
        tmp_path: Path, study_text: Callable[..., str]) -> None:
    text = study_text(minimum=0.5) + "\n[job]\ninputs = 1000\nbootstrap_resamples = 100\n"
    root = write_campaign(tmp_path / "old", text, {"batch_size=1": ["ok", "ok"]})
    result = run("decide", str(root))
    assert result.exit_code == 3, result.output
    assert "**No configuration can do the declared job.**" in result.stdout
    assert "- batch_size=1 on rtx-4090 ×2 lots: not projected: no per-batch record: no batches.jsonl in " \
           in result.stdout
    assert "(the trial predates it)" in result.stdout



@pytest.mark.parametrize(("text", "problem"), [
    (json.dumps({"memory": {"device_total_bytes": None}}), "status.json has schema_version None; this isocost reads"),
    ("{not json", "not valid JSON"),
    (json.dumps({**codec.to_dict(trial_status("t")), "colour": "blue"}), "unknown key 'colour'"),
])
def test_decide_refuses_an_unreadable_status_json_naming_it(tmp_path: Path, study_text: Callable[..., str],
                                                             text: str, problem: str) -> None:
    """A status.json that is there but not a status is refused by name, never read as an empty status ({})."""
    root = write_campaign(tmp_path / "rtx", study_text(minimum=0.5), {"batch_size=1": ["ok"]},
                          trial_texts={"status.json": text})
    result = run("decide", str(root), "--allow-inconsistent")
    assert result.exit_code == 2, result.output
    assert problem in result.stderr and "status.json" in result.stderr


@pytest.mark.parametrize(("text", "problem"), [
    ("{not json", "not valid JSON"),
    (json.dumps({"device": {"gpu_memory_bytes": 8 * 2**30}}), "manifest.json has schema_version None"),
])
def test_decide_refuses_an_unreadable_manifest_json_naming_it(tmp_path: Path, study_text: Callable[..., str],
                                                               text: str, problem: str) -> None:
    """A manifest.json that is there but not a manifest is refused by name, never read as an empty one ({})."""
    root = write_campaign(tmp_path / "rtx", study_text(minimum=0.5), {"batch_size=1": ["ok"]},
                          trial_texts={"manifest.json": text})
    result = run("decide", str(root), "--allow-inconsistent")
    assert result.exit_code == 2, result.output
    assert problem in result.stderr and "manifest.json" in result.stderr


def batches_jsonl(seconds: float) -> str:
    """Six one-input batches of five short tokens each, ``seconds`` each."""
    return "".join(json.dumps({"index": i, "n_inputs": 1, "n_tokens": 5, "inputs_by_bucket": {"short": 1},
                               "tokens_by_bucket": {"short": 5}, "batch_s": seconds, "device_s": None}) + "\n"
                   for i in range(6))


def test_a_declared_job_no_plan_covers_writes_the_memo_saying_so_and_exits_3(
        tmp_path: Path, study_text: Callable[..., str]) -> None:
    """A tiny campaign whose declared job cannot fit: the memo and decision.json say that nothing fits, why, and
    what would cover it; the exit status (3, in --help) says the answer is not a choice."""
    text = study_text(minimum=0.5) + "\n[job]\ninputs = 10000000\nbootstrap_resamples = 100\n"
    root = write_campaign(tmp_path / "slow", text, {"batch_size=1": ["ok", "ok", "ok"]},
                          trial_texts={"batches.jsonl": batches_jsonl(0.3)})
    out = tmp_path / "decided"
    result = run("decide", str(root), "--out", str(out))
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and "Error:" not in result.output
    assert not (root / "decision.md").exists()  # decide never writes into the campaign it reads
    memo = (out / "decision.md").read_text(encoding="utf-8")
    assert "**Nothing fits:" in memo and "is short by" in memo
    assert "What would cover it:" in memo and "--lots" in memo and "hourly" in memo and "days)" in memo
    assert memo in result.stdout
    decision = json.loads((out / "decision.json").read_text(encoding="utf-8"))
    assert decision["job"]["chosen"] is None and decision["job"]["nothing_fits"]["remedies"]
    assert "nothing fits" in result.stderr.lower()
    assert "Nothing fits" in (out / "report.html").read_text(encoding="utf-8")
    without_out = run("decide", str(root))
    assert without_out.exit_code == 3 and "the memo above says why" in without_out.stderr, without_out.output
    assert "3" in run("decide", "--help").output and "nothing fits" in run("decide", "--help").output.lower()
