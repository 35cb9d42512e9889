from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import UserError
from protocol.io.paths import ALLOWED_ROOTS_ENV, allowed_roots, check_allowed_root, check_safe_name


def test_roots_come_from_the_option_and_the_environment_in_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    env = {ALLOWED_ROOTS_ENV: f"{b}{os.pathsep}{a}{os.pathsep}"}
    assert allowed_roots([a], env) == (a.resolve(), b.resolve())  # deduplicated, empty parts ignored
    assert allowed_roots([], {}) == ()
    assert allowed_roots([], {ALLOWED_ROOTS_ENV: "  "}) == ()


def test_no_roots_means_no_restriction(tmp_path):
    assert check_allowed_root(tmp_path / "x" / ".." / "study.toml", ()) == (tmp_path / "study.toml").resolve()


def test_a_path_under_a_root_is_returned_resolved(tmp_path):
    root = tmp_path / "studies"
    (root / "q").mkdir(parents=True)
    assert check_allowed_root(root / "q" / "study.toml", [root]) == (root / "q" / "study.toml").resolve()
    assert check_allowed_root(root, [root]) == root.resolve()


def test_a_path_outside_every_root_is_refused_with_the_fix(tmp_path):
    root = tmp_path / "studies"
    root.mkdir()
    with pytest.raises(UserError) as caught:
        check_allowed_root(Path("/etc/passwd"), [root], what="study path", where="isocost run")
    assert caught.value.what == f"the study path /etc/passwd is outside the allowed roots ({root.resolve()})"
    assert caught.value.where == "isocost run"
    assert "--allowed-root" in caught.value.fix and ALLOWED_ROOTS_ENV in caught.value.fix


def test_a_sibling_sharing_the_root_prefix_is_outside(tmp_path):
    root, sibling = tmp_path / "data", tmp_path / "data-evil"
    root.mkdir()
    sibling.mkdir()
    with pytest.raises(UserError, match="outside the allowed roots"):
        check_allowed_root(sibling / "study.toml", [root])


def test_dot_dot_cannot_climb_out(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    with pytest.raises(UserError, match="outside the allowed roots"):
        check_allowed_root(root / ".." / "secret.toml", [root])


def test_a_symlink_inside_the_root_pointing_outside_is_refused(tmp_path):
    root, outside = tmp_path / "data", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "corpus.jsonl").write_text("{}\n")
    (root / "link").symlink_to(outside)
    with pytest.raises(UserError, match="outside the allowed roots"):
        check_allowed_root(root / "link" / "corpus.jsonl", [root])


def test_a_nul_byte_is_a_user_error_not_a_crash(tmp_path):
    with pytest.raises(UserError, match="NUL"):
        check_allowed_root("a\x00b", [tmp_path])
    with pytest.raises(UserError, match="NUL"):
        allowed_roots(["a\x00"], {})


@pytest.mark.parametrize("name", ["001-r1-batch_size-1", "a.b_c-D9", "x", "002-r1-batch_size-4-a2", "v1.0"])
def test_safe_names_pass(name):
    assert check_safe_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "...", "a/b", "../x", "/abs", "a b", "a\n", "trial\x00", "é",
                                  "a\\b", "x" * 201, 7, None])
def test_unsafe_names_are_refused(name):
    with pytest.raises(UserError, match="is not a safe name"):
        check_safe_name(name, what="trial id", where="raw.csv")
