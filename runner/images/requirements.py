"""A stack's Python dependencies: ``requirements.lock`` (exact versions, sha256 hashes) and its wheelhouse.

:func:`lock_requirements` resolves ``requirements.in`` into the lock for every Python and
platform the stack serves; :func:`ensure_wheelhouse` downloads the wheels it names on the host
(checked by hash), so the image installs them with ``--no-index`` and its build needs no network.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from protocol.errors import UserError
from protocol.io.safe_write import copy_file, write_text_atomic
from runner.images.stacks import (
    Progress,
    StackSpec,
    quiet,
    repo_root,
    requirements_paths,
    stack_spec,
    wheelhouse_path,
)


@dataclass(frozen=True)
class LockedPackage:
    name: str  # normalised (PEP 503)
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>", sorted


def normalise_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name_version(filename: str) -> tuple[str, str]:
    """(normalised name, version) of a wheel file name (``name-version(-build)?-py-abi-plat.whl``)."""
    if not filename.endswith(".whl"):
        raise ValueError(f"not a wheel: {filename}")
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise ValueError(f"not a wheel file name: {filename}")
    return normalise_name(parts[0]), parts[1]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def parse_lock(text: str) -> tuple[LockedPackage, ...]:
    """Read a hashed requirements lock (``name==version --hash=sha256:…`` with ``\\`` continuations)."""
    joined = re.sub(r"\\\s*\n", " ", text)
    packages: list[LockedPackage] = []
    for raw in joined.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        requirement = tokens[0]
        if "==" not in requirement:
            raise ValueError(f"lock line is not pinned with ==: {raw.strip()}")
        name, version = requirement.split("==", 1)
        hashes = tuple(sorted(t.removeprefix("--hash=") for t in tokens[1:] if t.startswith("--hash=")))
        if not hashes:
            raise ValueError(f"lock line has no --hash: {raw.strip()}")
        packages.append(LockedPackage(normalise_name(name), version, hashes))
    return tuple(sorted(packages, key=lambda p: p.name))


def format_lock(packages: Iterable[LockedPackage], header: str, operator: str = "==") -> str:
    """The lock's text; ``operator="==="`` pins each version exactly, so that pip never takes a local build of it
    (``2.13.0+cpu`` from a find-links folder for ``torch==2.13.0``), as the download by hash needs."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for package in sorted(packages, key=lambda p: p.name):
        lines.append(f"{package.name}{operator}{package.version} \\")
        for i, digest in enumerate(package.hashes):
            end = " \\" if i < len(package.hashes) - 1 else ""
            lines.append(f"    --hash={digest}{end}")
    return "\n".join(lines) + "\n"


def _pip_target_args(spec: StackSpec, python: str) -> list[str]:
    """Ask pip for wheels of the image's interpreter and platform, not of this host."""
    platforms = [f"manylinux_{spec.glibc[0]}_{minor}_x86_64" for minor in range(spec.glibc[1], 16, -1)]
    platforms += ["manylinux2014_x86_64", "linux_x86_64"]
    args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python]
    for platform in platforms:
        args += ["--platform", platform]
    return args


def _pip(args: list[str], what: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise UserError(
            f"pip could not {what}:\n{tail}\n",
            " ".join(command[:6]) + " …",
            "Check that this host reaches the package index (PIP_INDEX_URL / PIP_FIND_LINKS / "
            "PIP_EXTRA_INDEX_URL; the CPU stack needs torch==2.13.0+cpu, the CPU build of torch).",
        )


def lock_requirements(stack: str, *, root: Path | None = None, progress: Progress = quiet) -> Path:
    """Resolve ``requirements.in`` into ``requirements.lock`` (every dependency, exact, hashed).

    Resolution happens once per target interpreter; later interpreters are constrained to the
    versions the first one chose, so each package has one version and one hash per wheel file.
    The wheels land in the stack's wheelhouse, ready for :func:`build_image`.
    """
    root = repo_root(root)
    spec = stack_spec(stack)
    source, lock_path = requirements_paths(stack, root)
    wheels = wheelhouse_path(stack, root)
    wheels.mkdir(parents=True, exist_ok=True)
    versions: dict[str, str] = {}
    hashes: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="isocost-lock-") as tmp:
        for python in spec.pythons:
            dest = Path(tmp) / python
            args = ["download", "--quiet", "--dest", str(dest), "-r", str(source), *_pip_target_args(spec, python)]
            if versions:
                constraints = Path(tmp) / "constraints.txt"
                constraints.write_text("".join(f"{n}==={v}\n" for n, v in sorted(versions.items())), encoding="utf-8")
                args += ["-c", str(constraints)]
            progress(f"resolving {source.relative_to(root)} for python {python}")
            _pip(args, f"resolve {source} for python {python}")
            for wheel in sorted(dest.glob("*.whl")):
                name, version = wheel_name_version(wheel.name)
                if name in spec.excluded:
                    progress(f"left out {wheel.name} (the lock header says why)")
                    continue
                if versions.setdefault(name, version) != version:
                    raise UserError(f"{name} resolves to {versions[name]} and {version} for different pythons",
                                    str(source), f"Pin {name} in requirements.in.")
                hashes.setdefault(name, set()).add(sha256_of(wheel))
                copy_file(wheel, wheels / wheel.name, wheels)
    packages = [LockedPackage(n, versions[n], tuple(sorted(hashes[n]))) for n in sorted(versions)]
    pip_version = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True,
                                 check=False).stdout.split(" from ")[0].strip()
    header = (
        f"isocost {stack} image: every Python package, exact version, sha256 of each wheel file.\n"
        f"Generated by `isocost images lock --stack {stack}` from requirements.in on "
        f"{datetime.now(UTC).date().isoformat()}\n"
        f"(python {', '.join(spec.pythons)}, manylinux x86_64 up to glibc {spec.glibc[0]}.{spec.glibc[1]}, "
        f"{pip_version}).\n"
        "The image installs it with: pip install --no-index --find-links WHEELS --require-hashes --no-deps "
        "-r requirements.lock"
        + (f"\nLeft out: {', '.join(spec.excluded)} ({spec.excluded_why})." if spec.excluded else "")
    )
    write_text_atomic(lock_path, format_lock(packages, header))
    progress(f"wrote {lock_path.relative_to(root)} ({len(packages)} packages)")
    return lock_path


def ensure_wheelhouse(stack: str, *, root: Path | None = None, progress: Progress = quiet) -> list[Path]:
    """Make sure every wheel file the lock names is in the wheelhouse; return exactly those files.

    Missing wheels are downloaded with ``pip download --require-hashes`` (so a changed file on the
    index is refused). Files whose hash the lock does not list are ignored, never copied.
    """
    root = repo_root(root)
    spec = stack_spec(stack)
    _, lock_path = requirements_paths(stack, root)
    if not lock_path.exists():
        raise UserError("no requirements.lock for this stack", str(lock_path),
                        f"Create it with `isocost images lock --stack {stack}`.")
    packages = parse_lock(lock_path.read_text(encoding="utf-8"))
    wheels = wheelhouse_path(stack, root)
    wheels.mkdir(parents=True, exist_ok=True)

    wanted = {h: p for p in packages for h in p.hashes}

    def matching() -> tuple[list[Path], set[str]]:
        found: list[Path] = []
        seen: set[str] = set()
        for wheel in sorted(wheels.glob("*.whl")):
            try:
                name, version = wheel_name_version(wheel.name)
            except ValueError:
                continue
            if not any(p.name == name and p.version == version for p in packages):
                continue
            digest = sha256_of(wheel)
            if digest in wanted and digest not in seen:
                found.append(wheel)
                seen.add(digest)
        return found, set(wanted) - seen

    found, missing = matching()
    if missing:
        progress(f"downloading {len(missing)} locked wheel file(s) into {wheels}")
        with tempfile.TemporaryDirectory(prefix="isocost-wheels-") as tmp:
            exact = Path(tmp) / "requirements.txt"
            exact.write_text(format_lock(packages, "", operator="==="), encoding="utf-8")
            for python in spec.pythons:
                _pip(["download", "--quiet", "--no-deps", "--require-hashes", "--dest", str(wheels), "-r", str(exact),
                      *_pip_target_args(spec, python)], f"download the wheels {lock_path} pins")
        found, missing = matching()
        if missing:
            names = sorted({wanted[h].name for h in missing})
            raise UserError(f"no wheel file matching the lock's hashes for {', '.join(names)}", str(wheels),
                            f"Regenerate the lock with `isocost images lock --stack {stack}`.")
    return found


