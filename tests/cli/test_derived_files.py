"""Derived files re-derived or sealed (issue 38, class 1): `verify` re-derives verdicts, summary and decision from
a bundle's sealed evidence and names the first derived file that disagrees, even when BUNDLE.json's hashes were
recomputed after the edit (a careful forger). The replay-directory case is in tests/unit/test_replay_rederived.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bundle_forge import bundle_members, repack
from click.testing import CliRunner

from runner.cli import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_campaign"


def _invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden campaign with its decision files (decided with --out, then copied in) bundled; it verifies."""
    tmp = tmp_path_factory.mktemp("derived")
    campaign = tmp / "campaign"
    shutil.copytree(GOLDEN, campaign)
    code, output = _invoke(["decide", str(campaign), "--out", str(tmp / "decision")])
    assert code == 3, output  # no rental recorded: the memo answers no, and is written
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp / "decision" / name, campaign / name)
    bundle = tmp / "bundle.tar.gz"
    code, output = _invoke(["bundle", str(campaign), "-o", str(bundle)])
    assert code == 0, output
    return bundle


def test_a_bundle_whose_derived_files_follow_from_its_evidence_verifies(bundled):
    code, output = _invoke(["verify", str(bundled)])
    assert code == 0, output
    assert "verdicts, summary and decision re-derived" in output


def test_a_decision_changed_to_choose_another_configuration_fails_verify(bundled, tmp_path):
    files = bundle_members(bundled)
    decision = json.loads(files["campaign/decision.json"])
    labels = [entry["configuration_id"] for entry in decision["configurations"]]
    other = next(label for label in labels if label != decision["chosen"])
    memo = files["campaign/decision.md"].decode()
    files["campaign/decision.md"] = (f"Chosen: {other}\n\n" + memo).encode()
    decision["chosen"] = other
    files["campaign/decision.json"] = (json.dumps(decision, sort_keys=True, indent=2, ensure_ascii=False)
                                       + "\n").encode()
    code, output = _invoke(["verify", str(repack(files, tmp_path / "forged.tar.gz"))])
    assert code == 1, output
    assert output.startswith(f"FAILED: {tmp_path / 'forged.tar.gz'}: campaign/decision.json: line "), output
    assert "does not follow from the sealed evidence" in output


@pytest.mark.parametrize("name, before, after", [
    ("summary.md", "feasible, completed", "feasible (forged), completed"),
    ("summary.json", '"accepted": 3', '"accepted": 2'),
    ("verdicts.csv", ",true,", ",false,"),
    ("verdicts.json", '"corpus_accepted": true', '"corpus_accepted": false'),
    ("report.html", "<html", "<html data-forged"),
])
def test_an_edited_derived_file_with_recomputed_hashes_is_named(bundled, tmp_path, name, before, after):
    files = bundle_members(bundled)
    text = files[f"campaign/{name}"].decode()
    assert before in text, text[:400]
    files[f"campaign/{name}"] = text.replace(before, after, 1).encode()
    code, output = _invoke(["verify", str(repack(files, tmp_path / "forged.tar.gz"))])
    assert code == 1, output
    assert f": campaign/{name}: " in output.splitlines()[0], output


def test_bundle_never_packs_a_file_an_edited_decision_json_names_as_its_catalog(tmp_path):
    """decision.json is derived: its catalog_source naming a file that is not a catalog packs nothing from it."""
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    secret = tmp_path / "secret.txt"
    secret.write_text("token=do-not-pack\n", encoding="utf-8")
    (campaign / "decision.json").write_text(json.dumps({"catalog_source": f"--catalog {secret}"}), encoding="utf-8")
    bundle = tmp_path / "b.tar.gz"
    code, output = _invoke(["bundle", str(campaign), "-o", str(bundle)])
    assert code == 0, output
    packed = bundle_members(bundle)
    assert not any(b"do-not-pack" in data for data in packed.values())
    assert "catalog/secret.txt" not in packed


def test_memory_estimates_that_cannot_be_re_derived_are_named_as_a_caveat_not_accepted_silently(bundled, tmp_path):
    """The golden model is not on this host and not in the bundle: an estimate a careful forger put into
    summary.json (and summary.md, consistently) cannot be checked, so verify says so instead of vouching for it."""
    from protocol.hardware.memory import ModelShape, estimate
    from protocol.io.jsonio import dumps
    from protocol.records.codec import to_dict
    from runner.analysis.summarize import derive_summary
    from runner.analysis.verdicts import derive_verdicts
    from runner.campaign_dir.campaign import open_campaign

    files = bundle_members(bundled)
    root = tmp_path / "x"
    for name, data in files.items():
        if name.startswith("campaign/"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
    campaign = open_campaign(root / "campaign")
    shape = ModelShape(parameters=10**9, linear_parameters=10**9, hidden_size=1024, layers=24, heads=16,
                       intermediate_size=4096)
    forged = {v.variant_id: estimate(shape, v.precision, v.quantization, v.batch_size, v.max_length, v.attention)
              for v in campaign.record.variants}
    record, markdown = derive_summary(campaign, derive_verdicts(campaign), estimates=forged)
    files["campaign/summary.json"] = dumps(to_dict(record)).encode()
    files["campaign/summary.md"] = markdown.encode()
    forged_bundle = repack(files, tmp_path / "estimates.tar.gz")
    code, output = _invoke(["verify", str(forged_bundle)])
    assert "caveat: campaign/summary.json: memory_estimates: not re-derived" in output, output
    assert "the model is not on this host" in output, output
    assert "summary and decision re-derived" not in output or "except the memory estimates" in output, output
    code, output = _invoke(["verify", "--json", str(forged_bundle)])
    assert json.loads(output)["caveats"], output


def test_a_decision_made_with_a_relative_dir_verifies(tmp_path, monkeypatch):
    """``decide campaign`` (a relative DIR, as typed in a shell) names the campaign by that DIR but its frozen
    catalog by the absolute path: verify writes both back (the longer first) and passes the honest bundle."""
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    monkeypatch.chdir(tmp_path)
    code, output = _invoke(["decide", "campaign", "--out", "decision"])
    assert code == 3, output
    recorded = json.loads((tmp_path / "decision" / "decision.json").read_text())
    assert recorded["campaigns"][0]["label"] == "campaign" and recorded["catalog_path"] == str(campaign / "catalog.csv")
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "decision" / name, campaign / name)
    code, output = _invoke(["bundle", "campaign", "-o", "bundle.tar.gz"])
    assert code == 0, output
    code, output = _invoke(["verify", "bundle.tar.gz"])
    assert code == 0, output
    assert "summary and decision re-derived" in output


def test_a_decision_priced_across_providers_is_named_as_not_re_derivable(tmp_path, monkeypatch):
    """``decide --market`` weighs market catalogs and a GPU map a bundle does not hold: ``verify`` says so, rather
    than reporting the bundle's honest decision.json as a byte discrepancy. The market rows are MADE-UP."""
    campaign = tmp_path / "campaign"
    shutil.copytree(GOLDEN, campaign)
    market = tmp_path / "market.csv"
    market.write_text("gpu,cards_per_lot,plan_days,price_usd_per_lot,currency,catalog_date,source,billing,minimum_s,"
                      "increment_s,provider,region,instance_type,accelerator,card_memory_gib,spot_usd_per_lot\n"
                      "rtx-4090,1,,0.50,USD,2026-11-20,MADE-UP row,hourly,3600,3600,acme,r1,1x_4090,RTX 4090,24,\n",
                      encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, output = _invoke(["decide", "campaign", "--market", str(market), "--out", "decision"])
    assert code == 3, output
    assert json.loads((tmp_path / "decision" / "decision.json").read_text())["market"]["catalogs"]
    for name in ("decision.json", "decision.md", "report.html"):
        shutil.copyfile(tmp_path / "decision" / name, campaign / name)
    code, output = _invoke(["bundle", "campaign", "-o", "bundle.tar.gz"])
    assert code == 0, output
    code, output = _invoke(["verify", "bundle.tar.gz"])
    assert code == 1, output
    assert "campaign/decision.json: re-derivation: it was priced across providers (decide --market)" in output
