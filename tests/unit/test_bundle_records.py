"""Bundle records round-trip and refuse what they cannot read; the archive-layout helpers they share."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes, sha256_file, sha256_tree, tree_files
from protocol.records import codec
from protocol.records.stages import CampaignRecord, InputFacts
from runner.bundle.pack import FIXED_MTIME, PackedFile, write_deterministic_tar
from runner.bundle.records import (
    BUNDLE_SCHEMA_VERSION,
    INPUT_KINDS,
    BundleManifest,
    FileEntry,
    InputRecord,
    VerifyReport,
    campaign_input,
    creation_time,
    input_archive_path,
    tree_fingerprint,
)
from runner.campaign_dir.findings import Discrepancy


def _manifest() -> BundleManifest:
    model_files = (FileEntry("config.json", "sha256:11", 12), FileEntry("weights/model.bin", "sha256:22", 3400))
    return BundleManifest(
        campaign_id="c1", study_name="quick", study_sha256="sha256:aa", created_at="2026-01-01T00:00:00+00:00",
        isocost_version="0.1.0", ledger={"host": "h1", "rental": None, "empty_reasons": {}},
        inputs=(
            InputRecord("corpus", "/data/c.csv", "sha256:bb", True, "inputs/corpus/c.csv",
                        (FileEntry("c.csv", "sha256:bb", 10),)),
            InputRecord("tuning", "/data/t.csv", "sha256:cc", False, "", (), "not readable on the bundling host"),
            InputRecord("model", "/models/m", "sha256:dd", False, "", model_files, "not included"),
        ),
        trials=("001-r1-a", "002-r1-b"), unfinished_slots=("003-r1-a",), catalog="catalog/plans.csv",
        images_lock="", files=(FileEntry("campaign/raw.csv", "sha256:ee", 99),),
        empty_reasons={"images_lock": "no images lock at None"},
    )


def test_the_manifest_round_trips_through_its_dict():
    manifest = _manifest()
    data = codec.to_dict(manifest)
    assert data["schema_version"] == BUNDLE_SCHEMA_VERSION
    assert codec.from_dict(BundleManifest, data) == manifest
    assert manifest.input("model") is manifest.inputs[2]
    assert manifest.input("nothing") is None


def test_an_input_record_without_empty_reason_reads_as_empty():
    data = codec.to_dict(_manifest().inputs[0])
    del data["empty_reason"]
    assert codec.from_dict(InputRecord, data).empty_reason == ""


@pytest.mark.parametrize("data, what", [
    ([], "BUNDLE.json must be a JSON object, got a list"),
    ({"schema_version": 99}, "BUNDLE.json has schema_version 99; this isocost reads 1"),
    ({"schema_version": 1, "campaign_id": "c1"}, "key 'study_name' is missing"),
    ({**codec.to_dict(_manifest()), "trials": "001-r1-a"}, "key 'trials' must be a list, got '001-r1-a'"),
    ({**codec.to_dict(_manifest()), "files": [{"path": "p", "sha256": "s", "size_bytes": "9"}]},
     "key 'files[0].size_bytes' must be an integer, got '9'"),
    ({**codec.to_dict(_manifest()), "signed_by": "x"}, "unknown key 'signed_by'"),
])
def test_the_manifest_refuses_what_it_cannot_read(data, what):
    with pytest.raises(UserError) as caught:
        codec.from_dict(BundleManifest, data)
    assert caught.value.what == what
    if "schema_version" not in what and "unknown key" not in what:  # a content error says what to do with a bundle
        assert caught.value.fix.startswith("This bundle was not written by this isocost version, or was edited")


def test_the_verify_report_names_its_first_discrepancy():
    problems = (Discrepancy("a", "sha256", "x"), Discrepancy("b", "presence", "y"))
    report = VerifyReport("b.tar.gz", False, problems, 3, 120, "c1", "sha256:aa", 2, ("corpus",))
    assert report.first == problems[0]
    data = codec.to_dict(report)
    assert data["discrepancies"] == [codec.to_dict(p) for p in problems]
    assert data["inputs_included"] == ["corpus"]
    assert VerifyReport("b", True, (), 0, 0, "", "", 0, ()).first is None


def test_inputs_live_under_fixed_archive_paths():
    assert INPUT_KINDS == ("corpus", "tuning", "model")
    assert input_archive_path("model", Path("/models/minilm")) == "inputs/model"
    assert input_archive_path("corpus", Path("/data/news.csv")) == "inputs/corpus/news.csv"
    assert input_archive_path("tuning", Path("rel/tune.csv")) == "inputs/tuning/tune.csv"


def test_the_tree_fingerprint_from_hashes_equals_the_one_from_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "sub" / "w.bin").write_bytes(b"\x00\x01")
    pairs = [(p.relative_to(tmp_path).as_posix(), sha256_file(p)) for p in tree_files(tmp_path)]
    assert tree_fingerprint(list(reversed(pairs))) == sha256_tree(tmp_path)


def test_creation_time_honours_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "946684800")
    assert creation_time() == "2000-01-01T00:00:00+00:00"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a number")
    assert creation_time().endswith("+00:00") and creation_time() != "2000-01-01T00:00:00+00:00"


def test_the_deterministic_tar_depends_on_names_and_bytes_only(tmp_path):
    disk = tmp_path / "raw.csv"
    disk.write_bytes(b"trial_id\n001\n")
    sources = [PackedFile("BUNDLE.json", data=b"{}"), PackedFile("campaign/raw.csv", disk=disk)]
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    write_deterministic_tar(first, sources)
    disk.touch()  # a new mtime on disk changes nothing in the archive
    write_deterministic_tar(second, sources)
    assert sha256_file(first) == sha256_file(second)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first.read_bytes()))) as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["BUNDLE.json", "campaign/raw.csv"]
        assert {(m.mtime, m.mode, m.uid, m.gid, m.uname, m.gname, m.type) for m in members} == {
            (FIXED_MTIME, 0o644, 0, 0, "", "", tarfile.REGTYPE)}
        raw = tar.extractfile("campaign/raw.csv")
        assert raw is not None and sha256_bytes(raw.read()) == sha256_bytes(b"trial_id\n001\n")


def test_campaign_input_gives_the_facts_of_input_kinds_only():
    corpus = InputFacts(path="/data/c.csv", fingerprint="sha256:bb", inputs=6)
    campaign = CampaignRecord(campaign_id="c1", corpus=corpus)
    assert campaign_input(campaign, "corpus") is corpus
    assert campaign_input(campaign, "model") is None  # not recorded
    assert campaign_input(campaign, "campaign_id") is None  # a field, not an input kind
