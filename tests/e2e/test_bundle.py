"""End-to-end: a real tiny campaign → bundle → verify (clean and tampered) → replay.

One campaign (6 inputs, batch 1 and 4, one pass each, real MiniLM model, fresh processes) is
shared by the module; tampering works on copies of the bundle's bytes.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from workspace import write_workspace

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes
from protocol.records import codec
from runner.analysis.summarize import summarize_campaign
from runner.bundle.pack import PackedFile, create_bundle, write_deterministic_tar
from runner.bundle.records import MANIFEST_NAME, BundleManifest
from runner.bundle.replay import replay_bundle
from runner.bundle.verify import verify_bundle
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_rows
from runner.cli import IsocostGroup
from runner.cli.bundle import COMMANDS
from runner.launch.kinds.process.launcher import ProcessLauncher

pytestmark = pytest.mark.e2e

cli = IsocostGroup(commands={command.name: command for command in COMMANDS})


@dataclass(frozen=True)
class Campaign:
    root: Path  # holds ws/ (study, corpus, model), out/ (the campaign) and the bundles
    study: Path
    out: Path
    plain: Path  # bundle with hashes only
    full: Path  # bundle with --include-inputs

    def trial_ids(self) -> list[str]:
        return [row.trial_id for row in read_rows(self.out / "raw.csv")]


@pytest.fixture(scope="module")
def campaign(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    root = tmp_path_factory.mktemp("bundle")
    study = write_workspace(root / "ws", tiny_model, n=6, repetitions=1, batches="[1, 4]")
    out = root / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_HOME", str(root / "home"))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        run_campaign(study, out, ProcessLauncher())
        summarize_campaign(out)
        patch.setenv("SOURCE_DATE_EPOCH", "1700000000")
        create_bundle(out, root / "plain.tar.gz")
        create_bundle(out, root / "full.tar.gz", include_inputs=True)
    return Campaign(root, study, out, root / "plain.tar.gz", root / "full.tar.gz")


# -- helpers to forge bundles ---------------------------------------------------------------------


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def repack(files: dict[str, bytes], output: Path, *, rehash: bool = False) -> Path:
    """Write a bundle from member bytes; with ``rehash`` BUNDLE.json is updated to match (a careful forger)."""
    files = dict(files)
    if rehash:
        manifest = json.loads(files[MANIFEST_NAME])
        manifest["files"] = [{"path": name, "sha256": sha256_bytes(data), "size_bytes": len(data)}
                             for name, data in sorted(files.items()) if name != MANIFEST_NAME]
        files[MANIFEST_NAME] = json.dumps(manifest).encode()
    names = [MANIFEST_NAME, *sorted(n for n in files if n != MANIFEST_NAME)]
    write_deterministic_tar(output, [PackedFile(name, data=files[name]) for name in names])
    return output


def first(bundle: Path) -> str:
    report = verify_bundle(bundle)
    assert not report.ok
    return str(report.first)


# -- bundle and verify ----------------------------------------------------------------------------


def test_bundle_holds_every_record_and_verifies(campaign):
    result = CliRunner().invoke(cli, ["verify", str(campaign.plain)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"OK: {campaign.plain}: ")
    assert "every SHA-256 matches BUNDLE.json, nothing missing or extra" in result.output
    assert "consistent: 2 trial(s)" in result.output

    files = members(campaign.plain)
    manifest = codec.from_dict(BundleManifest, json.loads(files[MANIFEST_NAME]))
    description = json.loads((campaign.out / "campaign.json").read_text())
    assert manifest.campaign_id == description["campaign_id"]
    assert manifest.study_sha256 == description["study_sha256"] == sha256_bytes(files["campaign/study.toml"])
    assert manifest.created_at == "2023-11-14T22:13:20+00:00"  # SOURCE_DATE_EPOCH
    assert manifest.ledger["host"] == description["host"]
    assert manifest.ledger["rental"] is None and "rental" in manifest.ledger["empty_reasons"]
    assert manifest.ledger["first_event_at"] <= manifest.ledger["last_event_at"]
    assert manifest.trials == tuple(sorted(campaign.trial_ids()))
    assert manifest.catalog == "catalog/catalog-2026-09-24.csv"
    listed = {entry.path: entry for entry in manifest.files}
    assert set(listed) == set(files) - {MANIFEST_NAME}
    for name, data in files.items():
        if name != MANIFEST_NAME:
            assert listed[name].sha256 == sha256_bytes(data) and listed[name].size_bytes == len(data)
    for trial_id in campaign.trial_ids():
        for leaf in ("spec.json", "manifest.json", "predictions.jsonl", "status.json", "trial.log", "launcher.json"):
            assert f"campaign/trials/{trial_id}/{leaf}" in files
    for leaf in ("raw.csv", "verdicts.csv", "summary.md", "schedule.csv", "events.jsonl", "corpus_index.csv"):
        assert f"campaign/{leaf}" in files
    model = manifest.input("model")
    assert model is not None and not model.included and model.fingerprint == description["model"]["fingerprint"]
    assert {f.path for f in model.files} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert not any(name.startswith("inputs/") for name in files)


def test_the_archive_is_deterministic_and_plain(campaign, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    again = create_bundle(campaign.out, campaign.root / "again.tar.gz")
    assert (campaign.root / "again.tar.gz").read_bytes() == campaign.plain.read_bytes()
    assert again.created_at == "2023-11-14T22:13:20+00:00"
    with tarfile.open(campaign.plain) as tar:
        infos = tar.getmembers()
    names = [info.name for info in infos]
    assert names[0] == MANIFEST_NAME and names[1:] == sorted(names[1:])
    assert all(info.isreg() and info.mtime == 946684800 and info.uid == info.gid == 0 and info.mode == 0o644
               for info in infos)


def test_bundle_refuses_to_overwrite_and_to_pack_an_inconsistent_campaign(campaign, tmp_path):
    with pytest.raises(UserError, match="already exists"):
        create_bundle(campaign.out, campaign.plain)
    copy = tmp_path / "copy"
    shutil.copytree(campaign.out, copy)
    lines = (copy / "raw.csv").read_text().splitlines(keepends=True)
    (copy / "raw.csv").write_text("".join(lines[:-1]))
    last = campaign.trial_ids()[-1]
    with pytest.raises(UserError, match=rf"not internally consistent: trials/{last}/: raw row: this trial directory "
                                        "has no row in raw.csv"):
        create_bundle(copy, tmp_path / "x.tar.gz")
    assert not (tmp_path / "x.tar.gz").exists()


def test_a_flipped_byte_in_predictions_is_named(campaign, tmp_path):
    files = members(campaign.plain)
    target = f"campaign/trials/{campaign.trial_ids()[1]}/predictions.jsonl"
    data = bytearray(files[target])
    data[40] ^= 0x01
    files[target] = bytes(data)
    forged = repack(files, tmp_path / "byte.tar.gz")
    result = CliRunner().invoke(cli, ["verify", str(forged)])
    assert result.exit_code == 1
    assert result.output.startswith(f"FAILED: {forged}: {target}: sha256: sha256:")
    assert "in the archive, BUNDLE.json says" in result.output


def test_a_deleted_row_is_named_even_with_rehashed_files(campaign, tmp_path):
    files = members(campaign.plain)
    lines = files["campaign/raw.csv"].decode().splitlines(keepends=True)
    files["campaign/raw.csv"] = "".join(lines[:2]).encode()  # header + first row
    forged = repack(files, tmp_path / "row.tar.gz", rehash=True)
    second = campaign.trial_ids()[1]
    assert first(forged) == f"campaign/trials/{second}/: raw row: this trial directory has no row in raw.csv"


def test_a_changed_manifest_field_is_named(campaign, tmp_path):
    files = members(campaign.plain)
    trial_id = campaign.trial_ids()[0]
    name = f"campaign/trials/{trial_id}/manifest.json"
    manifest = json.loads(files[name])
    manifest["variant"]["variant_id"] = "batch_size=4"
    files[name] = json.dumps(manifest).encode()
    forged = repack(files, tmp_path / "manifest.tar.gz", rehash=True)
    assert first(forged) == (f"{name}: variant.variant_id: 'batch_size=4', raw.csv row of {trial_id} says "
                             "'batch_size=1'")


def test_a_dropped_prediction_line_is_named(campaign, tmp_path):
    files = members(campaign.plain)
    trial_id = campaign.trial_ids()[0]
    name = f"campaign/trials/{trial_id}/predictions.jsonl"
    files[name] = b"".join(files[name].splitlines(keepends=True)[1:])
    forged = repack(files, tmp_path / "line.tar.gz", rehash=True)
    assert first(forged) == (f"{name}: observed_ids: re-derived '5' from the file, raw.csv row 1 ({trial_id}) "
                             "column observed_ids says '6'")


def test_extra_missing_and_hostile_members_are_named(campaign, tmp_path):
    files = members(campaign.plain)
    files["campaign/notes.txt"] = b"added later"
    assert first(repack(files, tmp_path / "extra.tar.gz")) == (
        "campaign/notes.txt: presence: in the archive but not listed in BUNDLE.json")
    files = members(campaign.plain)
    del files["campaign/summary.md"]
    assert first(repack(files, tmp_path / "missing.tar.gz")) == (
        "campaign/summary.md: presence: listed in BUNDLE.json but missing from the archive")
    files = members(campaign.plain)
    files["campaign/../../escape.txt"] = b"x"
    report = verify_bundle(repack(files, tmp_path / "hostile.tar.gz"))
    assert str(report.first) == "'campaign/../../escape.txt': archive: member path climbs out with '..'"
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_changed_study_is_named(campaign, tmp_path):
    files = members(campaign.plain)
    files["campaign/study.toml"] = files["campaign/study.toml"].replace(b"minimum = 0.0", b"minimum = 0.1")
    forged = repack(files, tmp_path / "study.tar.gz", rehash=True)
    assert first(forged).startswith("campaign/study.toml: sha256: the file hashes to sha256:")
    assert "campaign.json field study_sha256 says" in first(forged)


def test_a_campaign_with_a_failed_trial_bundles_verifies_and_is_not_replayed(make_workspace, tmp_path,
                                                                              monkeypatch):
    study = make_workspace(n=6, repetitions=1, batches="[4]")
    out = tmp_path / "out"
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "oom-at-batch:1")
    run_campaign(study, out, ProcessLauncher())
    monkeypatch.delenv("ISOCOST_FAULT_INJECT")
    summarize_campaign(out)
    [row] = read_rows(out / "raw.csv")
    assert (row.status, row.completed) == ("oom", 4)
    create_bundle(out, tmp_path / "oom.tar.gz")
    report = verify_bundle(tmp_path / "oom.tar.gz")
    assert report.ok, report.first  # a failure is evidence too: kept, and consistent
    with pytest.raises(UserError, match="was not an accepted pass .status oom"):
        replay_bundle(tmp_path / "oom.tar.gz", trial_ids=[row.trial_id])
    with pytest.raises(UserError, match="holds no accepted pass to replay"):
        replay_bundle(tmp_path / "oom.tar.gz")


# -- replay ---------------------------------------------------------------------------------------


def test_replay_one_trial_with_the_process_launcher_is_identical(campaign):
    trial_id = campaign.trial_ids()[0]
    before = campaign.full.read_bytes()
    out = campaign.root / "replay-one"
    result = CliRunner().invoke(cli, ["replay", str(campaign.full), "--trial", trial_id, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Replay rule (quality.replay): identical." in result.output
    assert f"- {trial_id} (batch_size=1): status ok, label agreement 1.0000, max |Δscore| 0, identical true: " \
           "MATCHES" in result.output
    assert "Result: the replay MATCHES (identical)." in result.output
    report = json.loads((out / "replay.json").read_text())
    assert report["matches"] is True and report["mode"] == "identical"
    assert [i["source"] for i in report["inputs"]] == ["bundle", "bundle"]
    assert report["launcher"] == {"kind": "process", "original": "process", "exact": True, "image": "", "note": ""}
    [trial] = report["trials"]
    assert trial["trial_id"] == trial_id and trial["identical"] is True and trial["max_score_delta"] == 0.0
    assert (out / "trials" / trial_id / "predictions.jsonl").read_bytes() == (
        campaign.out / "trials" / trial_id / "predictions.jsonl").read_bytes()
    assert campaign.full.read_bytes() == before  # the original is never written


def test_replay_refuses_a_model_whose_hash_differs(campaign, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    shutil.copy(campaign.study.parent / "corpus.jsonl", inputs / "corpus.jsonl")
    shutil.copytree(campaign.study.parent / "model", inputs / "model")
    config = inputs / "model" / "config.json"
    config.write_text(config.read_text().replace('"x"', '"X"'))
    with pytest.raises(UserError) as caught:
        replay_bundle(campaign.plain, inputs_dir=inputs, out=tmp_path / "replay")
    assert caught.value.what.startswith(f"the model at {inputs / 'model'} has fingerprint sha256:")
    assert caught.value.what.endswith("; first difference: config.json has other content")
    assert caught.value.where == "model (--inputs)"
    assert not (tmp_path / "replay").exists()  # refused before anything ran; the extraction is removed


def test_replay_refuses_a_tampered_bundle_and_bad_trial_ids(campaign, tmp_path):
    files = members(campaign.plain)
    files["campaign/raw.csv"] = files["campaign/raw.csv"] + b"\n"
    forged = repack(files, tmp_path / "forged.tar.gz")
    with pytest.raises(UserError, match="the bundle does not verify: campaign/raw.csv: size_bytes: "):
        replay_bundle(forged)
    assert not any(p.name.startswith("forged.replay-") for p in tmp_path.iterdir())
    for bad in ("../../etc", "no-such-trial"):
        result = CliRunner().invoke(cli, ["replay", str(campaign.plain), "--trial", bad,
                                          "--out", str(tmp_path / bad.replace("/", "_"))])
        assert result.exit_code == 2
        assert "Error:" in result.output and "--trial" in result.output


def test_replay_never_writes_into_a_used_folder(campaign, tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="exists and is not empty"):
        replay_bundle(campaign.plain, out=used)
    assert sorted(p.name for p in used.iterdir()) == ["keep.txt"]


def test_the_full_bundle_holds_the_inputs(campaign):
    report = verify_bundle(campaign.full)
    assert report.ok, report.first
    assert report.inputs_included == ("corpus", "tuning", "model")
    with tarfile.open(campaign.full) as tar:
        names = tar.getnames()
    assert "inputs/corpus/corpus.jsonl" in names and "inputs/model/config.json" in names



@pytest.mark.parametrize("which", ["plain", "full"])
def test_an_edited_memory_estimate_is_re_derived_from_the_model_and_named(campaign, tmp_path, which):
    """The full bundle holds the model; the plain one finds it at the path campaign.json recorded: either way the
    estimates are re-derived (no caveat) and an estimate edited in summary.json (hashes recomputed) fails verify."""
    bundle, model = getattr(campaign, which), campaign.root / "ws" / "model"
    files = members(bundle)
    summary = json.loads(files["campaign/summary.json"])
    recorded = next(v for _, v in sorted(summary["memory_estimates"].items()) if v is not None)
    recorded["total_bytes"] //= 2
    files["campaign/summary.json"] = (json.dumps(summary, sort_keys=True, indent=2, ensure_ascii=False)
                                      + "\n").encode()
    forged = repack(files, tmp_path / "estimate.tar.gz", rehash=True)
    if which == "full":  # only the bundled copy is left to re-derive from
        model.rename(model.with_name("model.away"))
    try:
        assert verify_bundle(bundle).caveats == ()
        assert first(forged).startswith("campaign/summary.json: line ")
    finally:
        if which == "full":
            model.with_name("model.away").rename(model)

def test_a_bundle_pointing_an_input_outside_itself_is_named(campaign, tmp_path):
    files = members(campaign.full)
    manifest = json.loads(files[MANIFEST_NAME])
    model = next(i for i in manifest["inputs"] if i["kind"] == "model")
    model["archive_path"] = "../../home/someone/model"
    files[MANIFEST_NAME] = json.dumps(manifest).encode()
    assert first(repack(files, tmp_path / "outside.tar.gz")) == (
        "BUNDLE.json: inputs.model.archive_path: '../../home/someone/model', expected 'inputs/model'")


def test_the_bundle_command_says_what_it_wrote(campaign, tmp_path):
    output = tmp_path / "cli.tar.gz"
    result = CliRunner().invoke(cli, ["bundle", str(campaign.out), "-o", str(output)])
    assert result.exit_code == 0, result.output
    manifest = codec.from_dict(BundleManifest, json.loads(members(output)[MANIFEST_NAME]))
    assert f"wrote {output} (" in result.output
    assert f"files): campaign {manifest.campaign_id}, 2 trial(s), study {manifest.study_sha256}" in result.output
    assert "inputs: hashes only (replay needs the original files or --inputs DIR)" in result.output
    assert f"bundle sha256: {sha256_bytes(output.read_bytes())}" in result.output
    again = CliRunner().invoke(cli, ["bundle", str(campaign.out), "-o", str(output)])
    assert again.exit_code == 2 and "Error: the bundle file already exists" in again.output
    helped = CliRunner().invoke(cli, ["bundle", "--help"])
    assert "copyrighted" in " ".join(helped.output.split())


def test_verify_json_lists_every_discrepancy(campaign, tmp_path):
    files = members(campaign.plain)
    files["campaign/notes.txt"] = b"x"
    del files["campaign/summary.md"]
    forged = repack(files, tmp_path / "two.tar.gz")
    result = CliRunner().invoke(cli, ["verify", str(forged), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False
    assert [d["file"] for d in report["discrepancies"]] == ["campaign/notes.txt", "campaign/summary.md"]
    listed = CliRunner().invoke(cli, ["verify", str(forged), "--all"])
    assert "  also: campaign/summary.md: presence: listed in BUNDLE.json but missing from the archive" in listed.output
