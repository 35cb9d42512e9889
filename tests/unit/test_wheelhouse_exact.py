"""The download by hash takes the locked version itself, never a local build of it (issue 48): with a find-links
folder holding ``torch-2.13.0+cpu`` (this machine's pip config does), ``torch==2.13.0`` would pick the ``+cpu``
file and fail on its hash, so the CUDA stack's PyPI torch could never be fetched for a build. A real pip, two real
wheels of one version, one of them a local build."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from runner.images import requirements
from runner.images.stacks import StackSpec


def _wheel(folder: Path, version: str) -> Path:
    """A minimal valid wheel of package ``demo-pkg`` at ``version``."""
    name = f"demo_pkg-{version}-py3-none-any.whl"
    info = f"demo_pkg-{version}.dist-info"
    files = {"demo_pkg/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(folder / name, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return folder / name


def test_the_download_by_hash_never_takes_a_local_build_of_the_locked_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    links = tmp_path / "links"
    links.mkdir()
    plain = _wheel(links, "1.0")
    _wheel(links, "1.0+cpu")  # sorts above 1.0, and `==1.0` admits it
    root = tmp_path / "checkout"
    (root / "images" / "demo").mkdir(parents=True)
    (root / "pyproject.toml").write_text("", encoding="utf-8")
    digest = "sha256:" + hashlib.sha256(plain.read_bytes()).hexdigest()
    (root / "images" / "demo" / "requirements.lock").write_text(
        requirements.format_lock([requirements.LockedPackage("demo-pkg", "1.0", (digest,))], "test"),
        encoding="utf-8")
    monkeypatch.setattr(requirements, "stack_spec", lambda stack: StackSpec(stack, ("3.11",), (2, 36), ""))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.delenv("ISOCOST_WHEEL_CACHE", raising=False)
    found = requirements.ensure_wheelhouse("demo", root=root)
    assert [wheel.name for wheel in found] == ["demo_pkg-1.0-py3-none-any.whl"]
