"""A build the disk cannot hold is refused before it starts, with the space it needs (issue 48, bad input: the
CUDA image's cold build took about 19 GB beside its 2.8 GB of wheels). A stand-in daemon on this machine whose data
root is a folder here; the free space is the real figure of that disk, or one made smaller."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from protocol.errors import UserError
from runner.images import build


def _client(root: Path) -> SimpleNamespace:
    return SimpleNamespace(api=SimpleNamespace(base_url="http+docker://localhost"),
                           info=lambda: {"DockerRootDir": str(root)})


def test_a_build_the_disk_cannot_hold_is_refused_naming_the_space(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.disk_usage

    def small(path: object) -> object:
        return real(path)._replace(free=10 * 10**9)

    monkeypatch.setattr(shutil, "disk_usage", small)
    build.check_build_space(_client(tmp_path), "cpu", 1 * 10**9)  # 8 GB on one disk: fits in 10
    with pytest.raises(UserError) as refused:
        build.check_build_space(_client(tmp_path), "cuda", int(2.8 * 10**9))
    assert "building the cuda image needs about 22.4 GB free" in refused.value.what
    assert "2.8 GB of wheels" in refused.value.what and "10.0 GB are free" in refused.value.what
    assert "docker image prune" in refused.value.fix
    # the same lock's image in the engine: its layers are cached, the daemon needs room for the context only
    build.check_build_space(_client(tmp_path), "cuda", int(2.8 * 10**9), cached=True)  # 5.6 GB: fits in 10


def test_a_remote_daemon_is_not_asked_for_its_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = SimpleNamespace(api=SimpleNamespace(base_url="https://gpu-host:2376"),
                             info=lambda: {"DockerRootDir": str(tmp_path)})
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: real(path)._replace(free=3 * 10**9))
    build.check_build_space(remote, "cuda", int(2.8 * 10**9))  # only the context here: 2.8 GB
