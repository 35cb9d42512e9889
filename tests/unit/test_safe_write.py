"""protocol.io.safe_write and the campaign directory's writers: nothing is written through a symbolic link.

Issue 20, defect 1: `isocost rental DIR` followed a symlinked DIR/rentals.jsonl and appended to what it
pointed at. Each writer here is pointed at a link to a file outside the directory: it must refuse by name,
and the outside file must keep its bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.io.jsonio import write_json_atomic
from protocol.io.safe_write import (
    append_handle,
    check_directories,
    copy_file,
    make_dirs,
    open_append,
    write_handle,
    write_text_atomic,
)
from protocol.records.raw_record import RawRecord
from runner.campaign_dir.appendlog import append_line, quarantine_cut, read_log
from runner.campaign_dir.layout import CampaignPaths, log_event, writer_lock
from runner.campaign_dir.raw_table import append_row

OUTSIDE = b"root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "passwd"
    target.parent.mkdir()
    target.write_bytes(OUTSIDE)
    return target


def _link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


WRITERS = {
    "write_text_atomic": lambda p, root: write_text_atomic(p, "x", root),
    "write_json_atomic": lambda p, root: write_json_atomic(p, {"a": 1}, root),
    "write_handle": lambda p, root: write_handle(p, root).__enter__(),
    "append_handle": lambda p, root: append_handle(p, root).__enter__(),
    "open_append": lambda p, root: open_append(p, root),
    "copy_file": lambda p, root: copy_file(Path(__file__), p, root),
    "append_line": lambda p, root: append_line(p, {"a": 1}, root=root, chained=True),
    "append_row": lambda p, root: append_row(p, RawRecord.from_values({"trial_id": "t"})),
}


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_no_writer_follows_a_link_to_a_file_outside(tmp_path: Path, outside: Path, writer: str) -> None:
    root = tmp_path / "campaign"
    link = _link(root / "raw.csv", outside)
    with pytest.raises(UserError, match="raw.csv is a symbolic link"):
        WRITERS[writer](link, root)
    assert outside.read_bytes() == OUTSIDE
    assert link.is_symlink()  # the link is refused, not replaced


@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "append_row"])  # raw.csv sits in the root itself
def test_no_writer_goes_through_a_linked_directory_below_the_root(tmp_path: Path, writer: str) -> None:
    root = tmp_path / "campaign"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _link(root / "trials", elsewhere)
    with pytest.raises(UserError, match="trials is a symbolic link"):
        WRITERS[writer](root / "trials" / "raw.csv", root)
    assert list(elsewhere.iterdir()) == []


def test_the_root_itself_may_be_a_link(tmp_path: Path) -> None:
    """The directory the user names is taken as given (a link to a disk of their choosing)."""
    real = tmp_path / "disk"
    real.mkdir()
    root = _link(tmp_path / "results", real)
    write_text_atomic(root / "summary.md", "ok\n", root)
    assert (real / "summary.md").read_text() == "ok\n"


def test_a_directory_fifo_or_file_in_the_way_is_named(tmp_path: Path) -> None:
    (tmp_path / "rentals.jsonl").mkdir()
    with pytest.raises(UserError, match="rentals.jsonl is a directory, where isocost writes a file"):
        open_append(tmp_path / "rentals.jsonl", tmp_path)
    os.mkfifo(tmp_path / "events.jsonl")
    with pytest.raises(UserError, match="events.jsonl is a FIFO"):
        open_append(tmp_path / "events.jsonl", tmp_path)  # never opened: no hang
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="file is not a regular file|file is a regular file|where isocost needs"):
        make_dirs(tmp_path / "file" / "sub", tmp_path)


def test_an_unwritable_path_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    with pytest.raises(UserError) as caught:
        write_text_atomic(tmp_path / "plain" / "decision.md", "x", fix="Choose a writable --out.")
    assert "is not a directory" in caught.value.message and "Choose a writable --out." in caught.value.message
    with pytest.raises(UserError, match="is not a directory"):
        make_dirs(tmp_path / "plain" / "out")


def test_check_directories_ignores_paths_outside_the_root(tmp_path: Path) -> None:
    check_directories(Path("/etc"), tmp_path)  # nothing to check: not below the root


def test_rental_log_event_and_lock_refuse_links(tmp_path: Path, outside: Path) -> None:
    paths = CampaignPaths(tmp_path / "c")
    _link(paths.events, outside)
    with pytest.raises(UserError, match="events.jsonl is a symbolic link"):
        log_event(paths, "resume")  # best effort for a full disk, never for a link
    _link(paths.root / ".lock", outside)
    with pytest.raises(UserError, match=".lock is a symbolic link"), writer_lock(paths.root):
        pass
    assert outside.read_bytes() == OUTSIDE


def test_a_cut_last_line_is_kept_aside_by_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    append_line(path, {"at": "1", "event": "a"}, root=tmp_path, chained=True)
    with open(path, "ab") as handle:
        handle.write(b'{"at": "2", "ev')
    read = read_log(path, "events.jsonl", chained=True)
    assert (len(read.entries), read.cut, read.cut_line) == (1, b'{"at": "2", "ev', 2)
    _, side = append_line(path, {"at": "3", "event": "b"}, root=tmp_path, chained=True)
    assert side == tmp_path / "events.jsonl.partial-1" and side.read_bytes() == b'{"at": "2", "ev'
    assert [e["event"] for e in read_log(path, "events.jsonl", chained=True).entries] == ["a", "b"]
    assert quarantine_cut(path) is None  # nothing cut now


def _hard_link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.link(target, path)
    return path


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_no_writer_writes_a_file_hard_linked_outside(tmp_path: Path, outside: Path, writer: str) -> None:
    """Issue 38 class 4: a hard link is a second name of the outside file; writing it writes there."""
    root = tmp_path / "campaign"
    outside.write_bytes(b"")  # the named case: rentals.jsonl hard-linked to an empty file outside the campaign
    link = _hard_link(root / "raw.csv", outside)
    with pytest.raises(UserError, match="raw.csv has 2 hard links"):
        WRITERS[writer](link, root)
    assert outside.read_bytes() == b""
    assert os.stat(link).st_nlink == 2  # refused, not replaced

