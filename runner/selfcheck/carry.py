"""The files a GPU machine without network needs, and the check run there (``make gpu-carry``, ``make gpu-check``).

``prepare`` (here, after ``make demo``) writes ``CARRY/``: the demo model with its weights stored as fp16
safetensors (the fp32 file, 87 MiB, would not travel: the repository and its carried folders get 64
MiB in all), its config and tokenizer; the demo corpora; the demo's study files with the model
fingerprint of the fp16 copy, so ``isocost run CARRY/quick-cuda.toml --launcher process`` also works
there; a pure-Python click wheel for a python that lacks it; ``carry.json`` with every file's sha256
and the fp16 rounding error. It refuses a carry that, with the work tree, exceeds the limit.

``check`` (there) verifies ``carry.json``, runs the checks of ``isocost selfcheck`` with the machine's
own torch (:func:`runner.selfcheck.host.run_selfcheck`: needs no click and no venv), prints the
report and, with ``--return-to``, copies ``selfcheck.json``, ``selfcheck.txt``, ``selfcheck.log`` and a
tarball of the checks' trials (no weights) there, flat. Its exit status is the selfcheck's.

Example::

    .venv/bin/python -m runner.selfcheck.carry prepare --demo .isocost-demo --out .gpu-carry
    python3 -m runner.selfcheck.carry check --carry .gpu-carry --out results/gpu-check --return-to "$OUT"
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_file
from protocol.io.jsonio import read_json, write_json_atomic
from protocol.io.tomledit import set_table_keys
from protocol.records.selfcheck import exit_code, render_text

ROOT = Path(__file__).resolve().parents[2]
LIMIT_MIB = 64.0
FP16_MAX = 65504.0
CARRY_SCHEMA_VERSION = 1
CARRY_FILES = ("corpus-quick.jsonl", "corpus-classify-1000.jsonl", "tuning.jsonl")
STUDIES = ("quick-cuda.toml", "quick-rocm.toml", "gpu-cuda.toml", "gpu-rocm.toml")


def fp16_copy(source: Path, target: Path) -> dict[str, Any]:
    """``source/model.safetensors`` (fp32) as fp16 in ``target``; every other file copied. Returns the rounding."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    weights = source / "model.safetensors"
    if not weights.is_file():
        raise UserError("no model.safetensors", str(source), "Build the demo first: make demo.")
    with safe_open(str(weights), framework="np") as handle:
        metadata = handle.metadata() or {}
    tensors, halves, worst = load_file(str(weights)), {}, 0.0
    for name, array in tensors.items():
        if array.dtype != np.float32:
            halves[name] = array
            continue
        if np.abs(array).max(initial=0.0) > FP16_MAX:
            raise UserError(f"{name} holds values beyond the fp16 range", str(weights),
                            "This model cannot travel as fp16; carry a smaller model.")
        halves[name] = array.astype(np.float16)
        worst = max(worst, float(np.abs(halves[name].astype(np.float32) - array).max(initial=0.0)))
    target.mkdir(parents=True)
    save_file(halves, str(target / "model.safetensors"), metadata={**metadata, "format": "pt"})
    (target / "model.safetensors").chmod(0o644)
    for path in sorted(source.iterdir()):
        if path.is_file() and path.name != "model.safetensors":
            shutil.copyfile(path, target / path.name)
    return {"tensors": len(halves), "max_abs_rounding_error": worst}


def _studies(demo: Path, carry: Path, fingerprint: str) -> list[str]:
    written = []
    for name in STUDIES:
        if (demo / name).is_file():
            text = (demo / name).read_text(encoding="utf-8")
            note = "the fp16 copy carried to the GPU machine (runner/selfcheck/carry.py)"
            text = set_table_keys(text, "model", {"fingerprint": fingerprint}, {"fingerprint": note})
            (carry / name).write_text(text, encoding="utf-8")
            written.append(name)
    return written


def _click_wheel(carry: Path) -> str:
    """A pure-Python click wheel (the device's python may lack click); '' with a notice when pip cannot get it."""
    from importlib import metadata

    wheels = carry / "wheels"
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d",
               str(wheels), f"click=={metadata.version('click')}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    found = sorted(wheels.glob("click-*.whl")) if wheels.is_dir() else []
    if result.returncode != 0 or not found:
        print(f"notice: no click wheel carried ({result.stderr.strip()[-200:]}); the check itself needs none")
        return ""
    return found[0].name


def _head() -> str:
    """This checkout's commit, '' where there is no git (a GPU machine gets a copy of the work tree)."""
    try:
        result = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def tree_bytes(root: Path = ROOT) -> int:
    """Bytes of the work tree that travels (tracked and untracked-but-not-ignored files)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"],
                            capture_output=True, timeout=60, check=False).stdout.split(b"\0")
    return sum((root / name.decode()).stat().st_size for name in listed if name and (root / name.decode()).is_file())


def prepare(demo: Path, carry: Path, limit_mib: float = LIMIT_MIB, wheel: bool = True) -> dict[str, Any]:
    """Write the carry; returns carry.json's content."""
    if not (demo / "model" / "config.json").is_file():
        raise UserError("no demo model", str(demo), "Build the demo first: make demo.")
    if carry.exists():
        if not (carry / "carry.json").is_file():
            raise UserError("exists and was not made by this command", str(carry), "Choose another --out.")
        shutil.rmtree(carry)
    rounding = fp16_copy(demo / "model", carry / "model")
    for name in CARRY_FILES:
        if (demo / name).is_file():
            shutil.copyfile(demo / name, carry / name)
    fingerprint = fingerprint_path(carry / "model")
    info: dict[str, Any] = {
        "schema_version": CARRY_SCHEMA_VERSION, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_fingerprint": fingerprint, "original_model_fingerprint": fingerprint_path(demo / "model"),
        "repo_commit": _head(), "fp16": rounding, "studies": _studies(demo, carry, fingerprint),
        "click_wheel": _click_wheel(carry) if wheel else "",
    }
    info["files"] = {p.relative_to(carry).as_posix(): sha256_file(p) for p in sorted(carry.rglob("*")) if p.is_file()}
    carry_bytes = sum(p.stat().st_size for p in carry.rglob("*") if p.is_file())
    info["carry_mib"], info["tree_mib"] = round(carry_bytes / 2**20, 1), round(tree_bytes() / 2**20, 1)
    write_json_atomic(carry / "carry.json", info)
    if info["carry_mib"] + info["tree_mib"] > limit_mib:
        shutil.rmtree(carry)  # never leave a carry behind that would not travel
        raise UserError(f"carry {info['carry_mib']} MiB + work tree {info['tree_mib']} MiB exceed {limit_mib:g} MiB",
                        str(carry), "Carry a smaller model, or clean untracked files from the work tree.")
    return info


def verify(carry: Path) -> dict[str, Any]:
    """Every file of carry.json present with its sha256 (a carry changed or cut in transit is refused)."""
    info = read_json(carry / "carry.json")
    bad = [name for name, digest in info["files"].items()
           if not (carry / name).is_file() or sha256_file(carry / name) != digest]
    if bad:
        raise UserError(f"carry incomplete or changed in transit: {bad[:5]}", str(carry),
                        "Prepare it again: make gpu-carry.")
    return dict(info)


def _return(out: Path, to: Path) -> None:
    """The results, flat (the device returns at most 8 files, 2 folders down): 3 files and one tarball."""
    to.mkdir(parents=True, exist_ok=True)
    for name in ("selfcheck.json", "selfcheck.txt", "selfcheck.log"):
        if (out / name).is_file():
            shutil.copyfile(out / name, to / name)
    with tarfile.open(to / "selfcheck-trials.tar.gz", "w:gz") as tar:
        tar.add(out, arcname=out.name, filter=lambda m: None if m.name.endswith(".safetensors") else m)


def check(carry: Path, out: Path, device: str, budget_s: float, return_to: Path | None) -> int:
    from runner.selfcheck.host import Request, run_selfcheck

    info = verify(carry)
    print(f"carry intact: {len(info['files'])} files match carry.json (made {info['created_at']} at commit "
          f"{info.get('repo_commit') or '?'}; this checkout: {_head() or '?'}); model fp16, "
          f"max rounding error {info['fp16']['max_abs_rounding_error']:.1e}")
    request = Request(device=device, out=out, budget_s=budget_s, model=carry / "model",
                      corpus=carry / "corpus-quick.jsonl")
    report = run_selfcheck(request)
    print(render_text(report), end="")
    if return_to is not None:
        _return(out, return_to)
        print(f"returned to {return_to}: {', '.join(sorted(p.name for p in return_to.iterdir()))}")
    return exit_code(report)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.selfcheck.carry")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("prepare", help="write the carry (here)")
    make.add_argument("--demo", type=Path, default=Path(".isocost-demo"))
    make.add_argument("--out", type=Path, default=Path(".gpu-carry"))
    make.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    run = sub.add_parser("check", help="verify the carry and run the selfcheck (on the GPU machine)")
    run.add_argument("--carry", type=Path, default=Path(".gpu-carry"))
    run.add_argument("--out", type=Path, default=Path("results/gpu-check"))
    run.add_argument("--device", choices=("auto", "cuda", "rocm", "cpu"), default="cuda")
    run.add_argument("--budget-s", type=float, default=300.0)
    run.add_argument("--return-to", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            info = prepare(args.demo, args.out, args.limit_mib)
            print(json.dumps({k: v for k, v in info.items() if k != "files"}, indent=1, sort_keys=True))
            print(f"{args.out}: {info['carry_mib']} MiB carried + {info['tree_mib']} MiB work tree "
                  f"(limit {args.limit_mib:g} MiB); {len(info['files'])} files")
            return 0
        return check(args.carry, args.out, args.device, args.budget_s, args.return_to)
    except UserError as exc:
        print(f"Error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
