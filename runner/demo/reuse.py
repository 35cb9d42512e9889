"""Reusing an earlier demo build, and clearing one that cannot be reused.

A build writes ``demo.json`` last; it records the builder version, the
parameters (seed, sizes, tuning size, template hashes), the package versions
and the fingerprint of every file it wrote. An earlier build is reused only
when all of these match and every file still has its recorded fingerprint;
otherwise the builder removes what it wrote before (only its own files) and
builds again.

Example::

    from runner.demo.reuse import reusable_record

    record = reusable_record(Path(".isocost-demo"), parameters, packages)
    print("reuse" if record is not None else "rebuild")
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from protocol.io.fingerprint import fingerprint_path
from protocol.io.jsonio import loads_unique

#: Bump when the builder writes something different from the same parameters: older builds are rebuilt.
BUILDER_VERSION = "4"  # 4: the embedding demo is a part of its own (embedding.json)


def reusable_record(
    out_dir: Path, parameters: Mapping[str, Any], packages: Mapping[str, str | None], name: str = "demo.json",
    builder_version: str = BUILDER_VERSION,
) -> dict[str, Any] | None:
    """The record ``name`` (``demo.json``, or another part's) of an earlier, intact build with these parameters and
    packages; else ``None``."""
    path = out_dir / name
    if not path.is_file():
        return None
    try:
        record = loads_unique(path.read_text(encoding="utf-8"))  # a key named twice: not an intact build
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    if (
        record.get("builder_version") != builder_version
        or record.get("parameters") != parameters
        or record.get("packages") != packages
    ):
        return None
    files = record.get("files")
    if not isinstance(files, dict) or not files:
        return None
    return record if _files_intact(out_dir, files) else None


def _files_intact(out_dir: Path, files: Mapping[str, str]) -> bool:
    """Every recorded file exists and still has its recorded fingerprint."""
    for relative, recorded in files.items():
        target = out_dir / relative
        if not target.exists():
            return False
        try:
            if fingerprint_path(target) != recorded:
                return False
        except (OSError, ValueError):
            return False
    return True


def remove_outputs(out_dir: Path, names: Iterable[str]) -> None:
    """Remove what an earlier classification build left, only files this builder writes (the embedding and
    generation parts keep theirs)."""
    (out_dir / "demo.json").unlink(missing_ok=True)
    for path in [out_dir / "tuning.jsonl", out_dir / "training.jsonl"] + [
        p for name in names for p in (out_dir / f"corpus-{name}.jsonl", out_dir / f"{name}.toml")
    ]:
        path.unlink(missing_ok=True)
    for folder in ("model",):
        if (out_dir / folder).is_dir():
            shutil.rmtree(out_dir / folder)


def make_readable(root: Path) -> None:
    """transformers saves weights as 0600; a container's non-root user must be able to read the inputs."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)
