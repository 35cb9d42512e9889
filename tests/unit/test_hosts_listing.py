"""A multi-host results directory: every campaign in it is a host hosts.json lists, each host's folder a plain name
inside it (issue 20: a host removed from hosts.json dropped its campaign from the decision without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recordfiles import host_entry as entry
from recordfiles import hosts_file

from protocol.errors import UserError
from protocol.records.codec import to_dict, write_record
from runner.hosts.record import HOSTS_JSON, HostEntry, expand_campaign_dirs, hosts_without_campaign, load_hosts_json


def _out(tmp_path: Path, hosts: object, campaigns: tuple[str, ...] = ("a", "b")) -> Path:
    """A multi-host directory whose hosts.json lists ``hosts`` (HostEntry records, or any JSON value)."""
    out = tmp_path / "out"
    for name in campaigns:
        (out / name).mkdir(parents=True)
        (out / name / "campaign.json").write_text("{}", encoding="utf-8")
    if isinstance(hosts, list) and all(isinstance(h, HostEntry) for h in hosts):
        write_record(out / HOSTS_JSON, hosts_file(*hosts))
    else:
        (out / HOSTS_JSON).write_text(json.dumps({**to_dict(hosts_file()), "hosts": hosts}), encoding="utf-8")
    return out


def test_every_listed_host_with_a_campaign_is_read(tmp_path: Path) -> None:
    out = _out(tmp_path, [entry("a"), entry("b")])
    assert expand_campaign_dirs([out]) == [out / "a", out / "b"]


def test_a_campaign_no_host_lists_is_refused(tmp_path: Path) -> None:
    out = _out(tmp_path, [entry("a")])
    with pytest.raises(UserError, match=r"b/ holds a campaign that hosts.json lists for no host"):
        expand_campaign_dirs([out])


@pytest.mark.parametrize("hosts", [
    [entry("a", "../elsewhere"), entry("b")],
    [entry("a", "/etc")],
])
def test_a_host_folder_outside_the_directory_is_refused(tmp_path: Path, hosts: object) -> None:
    with pytest.raises(UserError, match="hosts.json dir of host 'a'"):
        expand_campaign_dirs([_out(tmp_path, hosts)])


@pytest.mark.parametrize("hosts", [None, "a", [{"name": "a"}], [["a", "a"]], [{"name": 1, "dir": "a"}]])
def test_a_malformed_host_list_is_an_error_not_a_traceback(tmp_path: Path, hosts: object) -> None:
    with pytest.raises(UserError, match="hosts.json key hosts is not a list of hosts"):
        expand_campaign_dirs([_out(tmp_path, hosts)])


def test_a_written_hosts_json_reads_back_as_the_same_record(tmp_path: Path) -> None:
    hosts = [entry("a", state="complete", rows=4, slots=4, campaign=True, wall_s=1.5, engine={"engine_id": "E"}),
             entry("b", state="unreachable", reason="Connection refused")]
    out = _out(tmp_path, hosts, campaigns=("a",))
    assert load_hosts_json(out) == hosts_file(*hosts)
    assert "resumed_at" not in json.loads((out / HOSTS_JSON).read_text(encoding="utf-8"))  # None: not written
    assert hosts_without_campaign(out) == [("b", "unreachable", "Connection refused")]


@pytest.mark.parametrize(("edit", "key"), [
    (lambda d: d.update(colour="blue"), "'colour'"),
    (lambda d: d["hosts"][0].update(colour="blue"), "'hosts[0].colour'"),
    (lambda d: d.update(study_sha256=7), "'study_sha256'"),
    (lambda d: d["hosts"][0].update(rows="four"), "'hosts[0].rows'"),
    (lambda d: d["hosts"][1].update(state="sleeping"), "'hosts[1]'"),
    (lambda d: d["image"].pop("ref"), "'image.ref'"),
    (lambda d: d.pop("stack"), "'stack'"),
])
def test_a_hostile_hosts_json_is_refused_naming_the_file_and_the_key(tmp_path: Path, edit, key: str) -> None:
    out = _out(tmp_path, [entry("a"), entry("b")])
    data = json.loads((out / HOSTS_JSON).read_text(encoding="utf-8"))
    edit(data)
    (out / HOSTS_JSON).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        expand_campaign_dirs([out])
    assert key in caught.value.what and caught.value.where == str(out / HOSTS_JSON)


@pytest.mark.parametrize("version", [2, None, "1", True])
def test_a_hosts_json_of_another_version_is_refused_saying_what_this_isocost_reads(tmp_path: Path, version) -> None:
    out = _out(tmp_path, [entry("a"), entry("b")])
    data = json.loads((out / HOSTS_JSON).read_text(encoding="utf-8"))
    data["schema_version"] = version
    (out / HOSTS_JSON).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match=r"hosts.json has schema_version .*This isocost reads 1"):
        expand_campaign_dirs([out])


def test_the_record_rewritten_as_hosts_go_and_taken_up_again_on_resume(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from runner.hosts.record import HostsRecord, prepare_hosts_record

    out = _out(tmp_path, [entry("a"), entry("b")], campaigns=())
    live = HostsRecord(out, load_hosts_json(out))
    live.update("a", state="running", engine={"engine_id": "E1"})
    live.finish(ended_at="2026-12-01T01:00:00.000+00:00", wall_s=3.5)
    written = load_hosts_json(out)
    first, second = written.hosts
    assert (first.state, first.engine, second.state) == ("running", {"engine_id": "E1"}, "pending")
    assert (written.ended_at, written.wall_s) == ("2026-12-01T01:00:00.000+00:00", 3.5)
    study = SimpleNamespace(sha256="0" * 64, path=tmp_path / "study.toml")
    resumed, hosts = prepare_hosts_record(study, out, [], "cpu", None, True, None)
    assert [h.name for h in hosts] == ["a", "b"] and resumed.ended_at is None and len(resumed.resumed_at or ()) == 1
    with pytest.raises(UserError, match="the study changed since this campaign started"):
        prepare_hosts_record(SimpleNamespace(sha256="1" * 64, path=study.path), out, [], "cpu", None, True, None)
    with pytest.raises(UserError, match="this campaign runs image img@sha256"):
        prepare_hosts_record(study, out, [], "cpu", "other:latest", True, None)


@pytest.mark.parametrize(("hosts", "campaigns", "message"), [
    # an invented host, or a failed one dressed up: it says it ran a campaign, its folder holds none
    ([entry("a", campaign=True), entry("b", state="complete", campaign=True)], ("a",),
     r"host 'b': hosts.json says it started a campaign in b/, which holds none"),
    ([entry("a"), entry("b", state="complete")], ("a",),
     r"host 'b': hosts.json says it is complete, and b/ holds no campaign"),
    # a host that ran, recorded as one that never started (its results would be weighed under a false note)
    ([entry("a"), entry("b", state="unreachable", reason="Connection refused", campaign=False)], ("a", "b"),
     r"host 'b': hosts.json says it started no campaign, and b/ holds one"),
    # two hosts on one folder: one campaign counted twice, another host's hidden
    ([entry("a"), entry("b", "a")], ("a",), r"host 'b': hosts.json gives it the folder a/ of host 'a'"),
])
def test_a_hosts_json_that_disagrees_with_the_folders_is_refused_naming_the_host(
        tmp_path: Path, hosts: list[HostEntry], campaigns: tuple[str, ...], message: str) -> None:
    out = _out(tmp_path, hosts, campaigns=campaigns)
    for read in (expand_campaign_dirs, lambda roots: hosts_without_campaign(roots[0])):
        with pytest.raises(UserError, match=message) as caught:
            read([out])
        assert caught.value.where == str(out / HOSTS_JSON)


def _seal_hosts(out: Path, names: list[str], campaigns: tuple[str, ...] = ("a",)) -> None:
    """What a multi-host run writes into each started host's campaign.json: every host's name, at the start."""
    from runner.hosts.record import SEALED_HOSTS_KEY

    for name in campaigns:
        (out / name / "campaign.json").write_text(json.dumps({"launcher": {SEALED_HOSTS_KEY: names}}),
                                                  encoding="utf-8")


@pytest.mark.parametrize(("hosts", "message"), [
    # a host that never started (no folder) deleted from hosts.json: its "unreachable" note would vanish
    ([entry("a")], r"host 'c': hosts.json does not list it, and a/campaign.json sealed the hosts a, c at the start"),
    # a host invented in hosts.json, with no folder to disagree
    ([entry("a"), entry("c", state="unreachable"), entry("d", state="unreachable", reason="invented")],
     r"host 'd': hosts.json lists it, and a/campaign.json sealed the hosts a, c, without it at the start"),
])
def test_a_host_without_a_folder_deleted_or_invented_is_refused_naming_it(
        tmp_path: Path, hosts: list[HostEntry], message: str) -> None:
    out = _out(tmp_path, hosts, campaigns=("a",))
    _seal_hosts(out, ["a", "c"])
    for read in (expand_campaign_dirs, lambda roots: hosts_without_campaign(roots[0])):
        with pytest.raises(UserError, match=message) as caught:
            read([out])
        assert caught.value.where == str(out / HOSTS_JSON)


def test_the_sealed_host_list_agreeing_with_hosts_json_is_read(tmp_path: Path) -> None:
    out = _out(tmp_path, [entry("a"), entry("c", state="unreachable", reason="Connection refused")],
               campaigns=("a",))
    _seal_hosts(out, ["a", "c"])
    assert expand_campaign_dirs([out]) == [out / "a"]
    assert hosts_without_campaign(out) == [("c", "unreachable", "Connection refused")]


def test_the_sealed_host_list_is_in_the_raw_chain_anchor(tmp_path: Path) -> None:
    """Editing the host list a campaign.json sealed breaks raw.csv's first row; a campaign without one (a single
    host, or a multi-host one from before) keeps the anchor it always had."""
    from protocol.records.raw_columns import RAW_SCHEMA_VERSION
    from runner.campaign_dir.raw_format import genesis
    from runner.hosts.record import SEALED_HOSTS_KEY

    record = {"campaign_id": "x", "raw_schema_version": RAW_SCHEMA_VERSION, "launcher": {"kind": "docker"}}
    (tmp_path / "campaign.json").write_text(json.dumps(record), encoding="utf-8")
    plain = genesis(tmp_path / "raw.csv")
    record["launcher"][SEALED_HOSTS_KEY] = ["a", "c"]
    (tmp_path / "campaign.json").write_text(json.dumps(record), encoding="utf-8")
    sealed = genesis(tmp_path / "raw.csv")
    record["launcher"][SEALED_HOSTS_KEY] = ["a"]
    (tmp_path / "campaign.json").write_text(json.dumps(record), encoding="utf-8")
    assert len({plain, sealed, genesis(tmp_path / "raw.csv")}) == 3
    record["launcher"] = {"kind": "docker", "other": "fact"}  # the launcher's other facts are not in the anchor
    (tmp_path / "campaign.json").write_text(json.dumps(record), encoding="utf-8")
    assert genesis(tmp_path / "raw.csv") == plain


def test_a_host_campaign_seals_every_host_of_the_run_into_its_chain(tmp_path: Path) -> None:
    """A multi-host run's host campaign (real host code, fake trials) records every host at the start, in raw.csv's
    anchor: the campaign opens consistent, and an edit of that list breaks row 1."""
    from fakecampaign import FakeLauncher, fake_workspace

    from runner.campaign.run import run_campaign
    from runner.campaign_dir.campaign import open_campaign
    from runner.hosts.record import SEALED_HOSTS_KEY

    out = tmp_path / "multi"
    run_campaign(fake_workspace(tmp_path / "ws", repetitions=1, batches="[1]"), out / "a", FakeLauncher(),
                 campaign_hosts=("a", "c"))
    assert open_campaign(out / "a").record.launcher[SEALED_HOSTS_KEY] == ["a", "c"]
    write_record(out / HOSTS_JSON, hosts_file(entry("a", campaign=True), entry("c", state="unreachable")))
    assert expand_campaign_dirs([out]) == [out / "a"]
    data = json.loads((out / "a" / "campaign.json").read_text(encoding="utf-8"))
    data["launcher"][SEALED_HOSTS_KEY] = ["a"]  # c dropped from the seal as well as from hosts.json
    (out / "a" / "campaign.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match=r"raw.csv row 1 .* does not match its chain digest"):
        open_campaign(out / "a")


def test_resume_refuses_a_hosts_json_that_lost_a_sealed_host(tmp_path: Path) -> None:
    """`run --resume` reads hosts.json too: a host deleted from it would never be continued, without a word."""
    from types import SimpleNamespace

    from runner.hosts.record import prepare_hosts_record

    out = _out(tmp_path, [entry("a")], campaigns=("a",))
    _seal_hosts(out, ["a", "c"])
    study = SimpleNamespace(sha256="0" * 64, path=tmp_path / "study.toml")
    with pytest.raises(UserError, match=r"host 'c': hosts.json does not list it"):
        prepare_hosts_record(study, out, [], "cpu", None, True, None)
