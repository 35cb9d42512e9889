"""A multi-host results directory: every campaign in it is a host hosts.json lists, each host's folder a plain name
inside it (issue 20: a host removed from hosts.json dropped its campaign from the decision without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.hosts.record import HOSTS_JSON, HOSTS_SCHEMA_VERSION, expand_campaign_dirs


def _out(tmp_path: Path, hosts: object, campaigns: tuple[str, ...] = ("a", "b")) -> Path:
    out = tmp_path / "out"
    for name in campaigns:
        (out / name).mkdir(parents=True)
        (out / name / "campaign.json").write_text("{}", encoding="utf-8")
    (out / HOSTS_JSON).write_text(json.dumps({"schema_version": HOSTS_SCHEMA_VERSION, "hosts": hosts}),
                                  encoding="utf-8")
    return out


def test_every_listed_host_with_a_campaign_is_read(tmp_path: Path) -> None:
    out = _out(tmp_path, [{"name": "a", "dir": "a"}, {"name": "b", "dir": "b"}])
    assert expand_campaign_dirs([out]) == [out / "a", out / "b"]


def test_a_campaign_no_host_lists_is_refused(tmp_path: Path) -> None:
    out = _out(tmp_path, [{"name": "a", "dir": "a"}])
    with pytest.raises(UserError, match=r"b/ holds a campaign that hosts.json lists for no host"):
        expand_campaign_dirs([out])


@pytest.mark.parametrize("hosts", [
    [{"name": "a", "dir": "../elsewhere"}, {"name": "b", "dir": "b"}],
    [{"name": "a", "dir": "/etc"}],
])
def test_a_host_folder_outside_the_directory_is_refused(tmp_path: Path, hosts: object) -> None:
    with pytest.raises(UserError, match="hosts.json dir of host 'a'"):
        expand_campaign_dirs([_out(tmp_path, hosts)])


@pytest.mark.parametrize("hosts", [None, "a", [{"name": "a"}], [["a", "a"]], [{"name": 1, "dir": "a"}]])
def test_a_malformed_host_list_is_an_error_not_a_traceback(tmp_path: Path, hosts: object) -> None:
    with pytest.raises(UserError, match="hosts.json key hosts is not a list of hosts"):
        expand_campaign_dirs([_out(tmp_path, hosts)])
