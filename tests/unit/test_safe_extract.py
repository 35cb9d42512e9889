"""Hostile archives: nothing outside the destination, no links, no devices, no bombs."""

from __future__ import annotations

import gzip
import hashlib
import io
import stat
import tarfile
from pathlib import Path

import pytest

from protocol.io.safe_extract import (
    ArchiveError,
    ExtractLimits,
    UnsafeArchive,
    check_member_name,
    read_archive,
    safe_extract,
    scan,
)


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def test_a_clean_archive_is_extracted_and_hashed(tmp_path):
    folder = tarfile.TarInfo("dir")
    folder.type = tarfile.DIRTYPE
    folder.mode = 0o777
    archive = make_tar(tmp_path / "ok.tar.gz", [
        (folder, None),
        _file("dir/a.txt", b"alpha", mode=0o4777),  # setuid + world-writable in the archive: ignored
        _file("b.json", b"{}"),
    ])
    dest = tmp_path / "out"
    digests = safe_extract(archive, dest)
    assert (dest / "dir" / "a.txt").read_bytes() == b"alpha"
    assert digests["dir/a.txt"].sha256 == "sha256:" + hashlib.sha256(b"alpha").hexdigest()
    assert digests["dir/a.txt"].size_bytes == 5
    assert set(digests) == {"dir/a.txt", "b.json"}
    assert stat.S_IMODE((dest / "dir" / "a.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((dest / "dir").stat().st_mode) & 0o022 == 0
    assert scan(archive) == ["dir", "dir/a.txt", "b.json"]


@pytest.mark.parametrize("name, what", [
    ("/etc/cron.d/evil", "absolute member path"),
    ("../evil", "climbs out"),
    ("a/../../evil", "climbs out"),
    ("a/./b", "empty or '.' component"),
    ("a//b", "empty or '.' component"),
    ("C:/windows/evil", "absolute member path"),
    ("a\\..\\evil", "backslash"),
    ("a\nb", "control character"),
])
def test_hostile_names_are_refused_before_anything_is_written(tmp_path, name, what):
    archive = make_tar(tmp_path / "bad.tar.gz", [_file("fine.txt"), _file(name)])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchive, match=what):
        safe_extract(archive, dest)
    assert not dest.exists()  # checked in full before the first byte was written
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("kind, linkname, what", [
    (tarfile.SYMTYPE, "/etc/passwd", "a symbolic link"),
    (tarfile.SYMTYPE, "inside.txt", "a symbolic link"),  # even pointing inside
    (tarfile.LNKTYPE, "inside.txt", "a hard link"),
    (tarfile.LNKTYPE, "../../etc/passwd", "a hard link"),
    (tarfile.CHRTYPE, "", "a character device"),
    (tarfile.BLKTYPE, "", "a block device"),
    (tarfile.FIFOTYPE, "", "a FIFO"),
])
def test_links_devices_and_fifos_are_refused(tmp_path, kind, linkname, what):
    archive = make_tar(tmp_path / "bad.tar.gz", [_file("inside.txt"), _special("thing", kind, linkname)])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchive, match=what):
        safe_extract(archive, dest)
    assert not dest.exists()


def test_a_leading_dot_slash_is_the_same_name(tmp_path):
    top = tarfile.TarInfo("./")
    top.type = tarfile.DIRTYPE
    archive = make_tar(tmp_path / "dot.tar.gz", [(top, None), _file("./a.txt", b"abc"), _file("./d/b.txt")])
    digests = safe_extract(archive, tmp_path / "out")
    assert set(digests) == {"a.txt", "d/b.txt"}
    assert (tmp_path / "out" / "a.txt").read_bytes() == b"abc"
    duplicate = make_tar(tmp_path / "dup.tar.gz", [_file("a.txt"), _file("./a.txt")])
    with pytest.raises(UnsafeArchive, match="holds this name twice"):
        scan(duplicate)


def test_a_repeated_name_is_refused(tmp_path):
    archive = make_tar(tmp_path / "dup.tar.gz", [_file("BUNDLE.json", b"honest"), _file("BUNDLE.json", b"forged")])
    with pytest.raises(UnsafeArchive, match="holds this name twice"):
        scan(archive)


def test_a_member_below_a_file_is_refused(tmp_path):
    archive = make_tar(tmp_path / "clash.tar.gz", [_file("a"), _file("a/b")])
    with pytest.raises(UnsafeArchive, match="which is a file"):
        scan(archive)


def test_too_many_members_is_refused(tmp_path):
    archive = make_tar(tmp_path / "many.tar.gz", [_file(f"f{i}") for i in range(5)])
    with pytest.raises(UnsafeArchive, match="more than 4 members"):
        safe_extract(archive, tmp_path / "out", ExtractLimits(max_members=4))
    assert len(scan(archive, ExtractLimits(max_members=5))) == 5


def test_a_decompression_bomb_stops_at_the_bound_before_writing(tmp_path):
    archive = tmp_path / "bomb.tar.gz"
    zeros = b"\0" * (4 * 2**20)
    make_tar(archive, [_file("zeros.bin", zeros)])
    assert archive.stat().st_size < 64 * 2**10  # small on disk, 4 MiB expanded
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchive, match=f"expands to more than {2**20} bytes"):
        safe_extract(archive, dest, ExtractLimits(max_total_bytes=2**20))
    assert not dest.exists()


def test_deep_paths_and_long_names_are_refused():
    with pytest.raises(UnsafeArchive, match="deeper than 3 levels"):
        check_member_name("a/b/c/d", limits=ExtractLimits(max_depth=3))
    with pytest.raises(UnsafeArchive, match="longer than 10 characters"):
        check_member_name("x" * 11, limits=ExtractLimits(max_name_chars=10))
    assert check_member_name("dir/", is_dir=True) == "dir"


def test_the_destination_must_be_new_or_empty(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [_file("a.txt")])
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old").write_text("keep me")
    with pytest.raises(Exception, match="exists and is not empty"):
        safe_extract(archive, dest)
    assert (dest / "old").read_text() == "keep me"


@pytest.mark.parametrize("content", [b"", b"not a tar at all", gzip.compress(b"still not a tar" * 100, mtime=0)])
def test_garbage_is_an_archive_error(tmp_path, content):
    archive = tmp_path / "garbage.tar.gz"
    archive.write_bytes(content)
    with pytest.raises(ArchiveError):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_truncated_archive_is_an_archive_error_and_leaves_nothing(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [_file("a.bin", bytes(range(256)) * 4096)])
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArchiveError):
        safe_extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_verification_pass_writes_nothing(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [_file("a.txt", b"abc"), _file("b/c.txt", b"def")])
    digests = read_archive(archive)
    assert {name: d.size_bytes for name, d in digests.items()} == {"a.txt": 3, "b/c.txt": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.tar.gz"]


def test_selected_members_only_are_written(tmp_path):
    archive = make_tar(tmp_path / "ok.tar.gz", [_file("keep/a.txt", b"abc"), _file("skip/b.txt", b"def")])
    dest = tmp_path / "out"
    dest.mkdir()
    digests = read_archive(archive, dest=dest, select=lambda name: name.startswith("keep/"))
    assert set(digests) == {"keep/a.txt", "skip/b.txt"}  # every file hashed
    assert (dest / "keep" / "a.txt").exists() and not (dest / "skip").exists()


# -- sparse members and bounds counted before any write (issue 11, defect 4) ----------------------

#: Apparent size of the sparse test file: large enough to show the expansion, small enough that the
#: test cannot fill a disk if the check regresses (the defect wrote 3 GB from a 347-byte archive).
SPARSE_APPARENT_BYTES = 64 * 2**20


def _sparse_source(folder: Path) -> Path:
    """A sparse file of 64 MiB apparent size, a few bytes of data, next to nothing on disk."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "campaign" / "big.bin"
    source.parent.mkdir(exist_ok=True)
    with open(source, "wb") as handle:
        handle.truncate(SPARSE_APPARENT_BYTES)
        handle.seek(SPARSE_APPARENT_BYTES // 2)
        handle.write(b"payload")
    return source


TAR_SPARSE_FORMATS = {
    "pax-0.0": ["--format=posix", "--sparse-version=0.0"],
    "pax-0.1": ["--format=posix", "--sparse-version=0.1"],
    "pax-1.0": ["--format=posix", "--sparse-version=1.0"],
    "gnu": ["--format=gnu"],
    "oldgnu": ["--format=oldgnu"],
}


def _tar_sparse(tmp_path: Path, options: list[str]) -> Path:
    import shutil
    import subprocess

    if shutil.which("tar") is None:
        pytest.skip("GNU tar is not installed (it writes the sparse formats)")
    source = _sparse_source(tmp_path / "src")
    archive = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", *options, "--sparse", "-czf", str(archive), "-C", str(source.parents[1]),
                    "campaign/big.bin"], check=True, capture_output=True)
    assert archive.stat().st_size < 4096  # tiny on disk, 64 MiB once expanded
    return archive


@pytest.mark.parametrize("fmt", sorted(TAR_SPARSE_FORMATS))
def test_sparse_members_of_every_tar_format_are_refused(tmp_path, fmt):
    archive = _tar_sparse(tmp_path, TAR_SPARSE_FORMATS[fmt])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchive, match="sparse"):
        scan(archive)
    with pytest.raises(UnsafeArchive, match="sparse"):
        safe_extract(archive, dest)
    assert not dest.exists()
    dest.mkdir()
    with pytest.raises(UnsafeArchive, match="sparse"):
        read_archive(archive, dest=dest)  # the verification path: nothing written either
    assert list(dest.iterdir()) == []


def test_a_pax_sparse_header_written_by_hand_is_refused(tmp_path):
    """No GNU tar needed: the GNU.sparse.* pax keys alone make a member sparse."""
    info = tarfile.TarInfo("GNUSparseFile.0/a.bin")
    info.size = 4
    info.pax_headers = {"GNU.sparse.map": "0,4", "GNU.sparse.size": str(2**33), "GNU.sparse.name": "a.bin",
                        "GNU.sparse.numblocks": "1"}
    archive = make_tar(tmp_path / "hand.tar.gz", [(info, b"data")])
    with pytest.raises(UnsafeArchive, match="sparse"):
        scan(archive)


def test_verify_refuses_a_sparse_bundle_member_without_expanding_it(tmp_path):
    from runner.bundle.verify import verify_bundle

    archive = _tar_sparse(tmp_path, TAR_SPARSE_FORMATS["pax-1.0"])
    report = verify_bundle(archive)
    assert not report.ok
    assert "sparse" in report.first.message


def test_bounds_are_counted_before_the_first_file_is_written(tmp_path):
    archive = make_tar(tmp_path / "many.tar.gz", [_file(f"f{i}") for i in range(5)])
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(UnsafeArchive, match="more than 4 members"):
        read_archive(archive, dest=dest, limits=ExtractLimits(max_members=4))
    assert list(dest.iterdir()) == []
    big = make_tar(tmp_path / "big.tar.gz", [_file("a", b"x" * 10), _file("b", b"y" * 10)])
    with pytest.raises(UnsafeArchive, match="expands to more than 15 bytes"):
        read_archive(big, dest=dest, limits=ExtractLimits(max_total_bytes=15))
    assert list(dest.iterdir()) == []
    deep = make_tar(tmp_path / "deep.tar.gz", [_file("ok"), _file("a/b/c/d")])
    with pytest.raises(UnsafeArchive, match="deeper than 3 levels"):
        read_archive(deep, dest=dest, limits=ExtractLimits(max_depth=3))
    assert list(dest.iterdir()) == []
