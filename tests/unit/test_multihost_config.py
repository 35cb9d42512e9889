"""Hosts as configuration, engine URLs, host-side hashing and the per-host progress board (no engine)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from recordfiles import host_entry as entry
from recordfiles import hosts_file

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_tree
from protocol.records.codec import write_record
from runner.hosts.board import HostBoard
from runner.hosts.record import HOSTS_JSON, expand_campaign_dirs, hosts_without_campaign
from runner.hosts.spec import load_hosts_file, merge_hosts, parse_host_option
from runner.launch.daemon.address import DaemonAddress, parse_daemon_url
from runner.launch.kinds.docker.transfer import HASH_SCRIPT, tree_fingerprint


def test_host_option_and_engine_urls():
    host = parse_host_option("b200=ssh://ubuntu@203.0.113.7:2222")
    assert (host.name, host.url, host.rental) == ("b200", "ssh://ubuntu@203.0.113.7:2222", None)
    assert parse_host_option("local=local").url == "local"
    assert parse_daemon_url("unix:///run/docker.sock", "x") == "unix:///run/docker.sock"
    assert parse_daemon_url("ssh://u@h/", "x") == "ssh://u@h"
    for bad in ("b200", "=ssh://u@h", "x="):
        with pytest.raises(UserError, match="NAME=URL"):
            parse_host_option(bad)
    with pytest.raises(UserError, match="ssh only"):
        parse_daemon_url("tcp://203.0.113.7:2375", "--host")
    with pytest.raises(UserError, match="password"):
        parse_daemon_url("ssh://u:secret@h", "--host")
    with pytest.raises(UserError, match="results folder"):
        parse_host_option("../etc=local")


def test_ssh_command_carries_our_options():
    address = DaemonAddress("ssh://ubuntu@203.0.113.7:2222", ssh_config=Path("/k/config"))
    command = address.ssh_command("docker system dial-stdio")
    assert command[:3] == ["ssh", "-F", "/k/config"]
    assert "BatchMode=yes" in command and "ServerAliveInterval=5" in command
    assert command[-5:] == ["-p", "2222", "--", "203.0.113.7", "docker system dial-stdio"]
    assert command[command.index("-l") + 1] == "ubuntu"


def test_hosts_file(tmp_path: Path):
    path = tmp_path / "hosts.toml"
    path.write_text(
        'schema_version = 1\n'
        '[[host]]\nname = "rtx4090"\nurl = "ssh://ubuntu@198.51.100.4"\nstack = "cuda"\n'
        'ssh_config = "ssh/rented.conf"\nreconnect_s = 30\nrental = { gpu = "RTX-4090", lots = 2 }\n'
        '[[host]]\nname = "local"\nurl = "local"\n',
        encoding="utf-8",
    )
    first, second = load_hosts_file(path)
    assert first.stack == "cuda" and first.rental is not None
    assert (first.rental.gpu, first.rental.lots) == ("rtx-4090", 2)
    assert first.ssh_config == (tmp_path / "ssh/rented.conf").resolve()
    assert first.reconnect_s == 30
    assert second.url == "local" and second.rental is None
    assert [h.name for h in merge_hosts(["extra=local"], path)] == ["rtx4090", "local", "extra"]
    with pytest.raises(UserError, match="named twice"):
        merge_hosts(["local=local"], path)
    # What hosts.json records reads back as the same host.
    assert type(first).from_dict(first.to_dict(), "hosts.json") == first
    with pytest.raises(UserError, match=r"unknown keys \['colour'\] \(hosts.json\)"):
        type(first).from_dict({**first.to_dict(), "colour": "blue"}, "hosts.json")


@pytest.mark.parametrize(("text", "message"), [
    ('schema_version = 2\n[[host]]\nname = "a"\nurl = "local"\n', "schema_version"),
    ("schema_version = 1\n", "no \\[\\[host\\]\\]"),
    ('schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\ngpu = "x"\n', "unknown keys"),
    ('schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nstack = "tpu"\n', "unknown stack"),
    ('schema_version = 1\n[[host]]\nname = "a"\nurl = "local"\nrental = { gpu = "b200", lots = 0 }\n', "lots"),
    ('schema_version = 1\n[[host]]\nname = "a"\n', "required"),
    ("schema_version = 1\n[[host]\n", "not valid TOML"),
])
def test_hosts_file_errors_say_what_to_fix(tmp_path: Path, text: str, message: str):
    path = tmp_path / "hosts.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        load_hosts_file(path)


def test_host_side_hash_listing_gives_the_studys_fingerprint(tmp_path: Path):
    """The helper script (run in the image's python3 on the host) and protocol.io.fingerprint agree."""
    (tmp_path / "model" / "sub").mkdir(parents=True)
    (tmp_path / "model" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "model" / "sub" / "w.bin").write_bytes(b"\0" * 1000)
    (tmp_path / "corpus.jsonl").write_text('{"id": "1"}\n', encoding="utf-8")
    listing = json.loads(subprocess.run([sys.executable, "-c", HASH_SCRIPT, str(tmp_path)], check=True,
                                        capture_output=True, text=True).stdout)
    assert sorted(listing) == ["corpus.jsonl", "model/config.json", "model/sub/w.bin"]
    assert tree_fingerprint(listing, "model") == sha256_tree(tmp_path / "model")


def test_board_plain_lines_and_tty_block():
    plain = io.StringIO()
    board = HostBoard(["a", "b200"], stream=plain, tty=False)
    board.reporter("a")("[1/4] 001-r1-batch_size-1: running (batch_size=1, repetition 1)")
    board.reporter("b200")("[1/4] 001-r1-batch_size-1: ok, 0.30 s, accepted")
    board.finish("b200", "lost", "the engine stopped answering")
    assert plain.getvalue().splitlines() == [
        "[a] [1/4] 001-r1-batch_size-1: running (batch_size=1, repetition 1)",
        "[b200] [1/4] 001-r1-batch_size-1: ok, 0.30 s, accepted",
        "[b200] LOST: the engine stopped answering",
    ]
    screen = io.StringIO()
    board = HostBoard(["a", "b200"], stream=screen, tty=True)
    board.reporter("a")("[2/4] 002-r1-batch_size-4: oom, no pass time, rejected: status oom")
    board.reporter("a")("[3/4] 003-r1-batch_size-1: ok, 0.2 s, accepted")
    lines = board.snapshot()
    assert lines[0].startswith("a    [##########..........]   2/4   00:00 1 failed  [3/4] 003")
    assert lines[1].startswith("b200 [....................]   0/?")
    assert "\x1b[2F" in screen.getvalue()  # the block is redrawn in place


def test_expand_campaign_dirs(tmp_path: Path):
    single = tmp_path / "single"
    single.mkdir()
    multi = tmp_path / "multi"
    for name in ("a", "b"):
        (multi / name).mkdir(parents=True)
    (multi / "a" / "campaign.json").write_text("{}", encoding="utf-8")
    write_record(multi / HOSTS_JSON, hosts_file(entry("a", state="complete"),
                                                entry("b", state="unreachable", reason="Connection refused")))
    assert expand_campaign_dirs([multi, single]) == [multi / "a", single]
    assert hosts_without_campaign(multi) == [("b", "unreachable", "Connection refused")]
