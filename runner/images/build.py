"""Pinned images: lock the Python dependencies, build, push, and record every image by digest.

Two identities of one image, never to be confused:

- **image ID** (``image_id``, ``sha256:…``): the digest of the image's config JSON. Every local
  image has one from the moment it is built. It cannot be pulled from a registry.
- **repo digest** (``repo_digest``, ``REPO@sha256:…``): the digest of the registry manifest. It
  exists only after the image was pushed to (or pulled from) a registry, and it is what another
  host pulls to replay a trial exactly (``isocost run … --image REPO@sha256:…``).

Both are recorded in ``images/images.lock`` (sorted JSON, ``schema_version``), one entry per
stack, together with the base image (name and digest), the build arguments (including a
``--base`` override), the git revision, the build time and the image size.

Python dependencies come from ``images/<stack>/requirements.lock`` (exact versions, sha256
hashes), generated from ``requirements.in`` by :func:`lock_requirements`; the wheels it names are
downloaded on the host into a wheelhouse and installed in the image with ``--no-index``, so the
build needs no network inside the engine.

This module is a library (no click). It imports the docker SDK lazily.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.jsonio import read_json, write_json_atomic
from runner.launch.engine import connect_engine, engine_facts, image_store

#: images.lock format. History: 1 (0.1.0): first version.
LOCK_SCHEMA_VERSION = 1

#: Repository name of locally built images; a push prefixes the registry.
IMAGE_REPOSITORY = "isocost/{stack}"

#: Where a wheelhouse is cached; default ``images/<stack>/wheels`` in the checkout.
WHEEL_CACHE_ENV = "ISOCOST_WHEEL_CACHE"

#: Overrides the default ``images/images.lock`` (tests, CI).
LOCK_ENV = "ISOCOST_IMAGES_LOCK"

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


@dataclass(frozen=True)
class StackSpec:
    """What a stack's image is built from. The default base lives in its Dockerfile (one source)."""

    name: str
    pythons: tuple[str, ...]  # interpreter versions (major.minor) the wheelhouse must serve
    glibc: tuple[int, int]  # newest glibc of the base: manylinux wheels up to this one are accepted
    gpu: str  # "" (none), "nvidia" or "amd"


STACKS: dict[str, StackSpec] = {
    # python:3.11-slim-bookworm (glibc 2.36); the debootstrap override is bookworm's python 3.11 too.
    "cpu": StackSpec("cpu", ("3.11",), (2, 36), ""),
    # pytorch/pytorch CUDA 12.8 runtime (Ubuntu 22.04, conda python); 3.12 served as well in case
    # the base moved to it: both wheels of each package are in the lock, pip picks the one that fits.
    "cuda": StackSpec("cuda", ("3.11", "3.12"), (2, 35), "nvidia"),
    # rocm/pytorch ROCm 7.2.4, Ubuntu 24.04 (glibc 2.39), python 3.12.
    "rocm": StackSpec("rocm", ("3.12",), (2, 39), "amd"),
}


def stack_spec(stack: str) -> StackSpec:
    if stack not in STACKS:
        raise UserError(f"unknown stack {stack!r}", "--stack", f"Use one of: {', '.join(STACKS)}.")
    return STACKS[stack]


# -- where things are --------------------------------------------------------------------------


def repo_root(root: Path | None = None) -> Path:
    """The source checkout images are built from (the directory holding pyproject.toml and images/)."""
    candidate = root or Path(__file__).resolve().parents[2]
    if not (candidate / "pyproject.toml").exists() or not (candidate / "images").is_dir():
        raise UserError(
            "images are built from a source checkout, and none was found",
            str(candidate),
            "Run isocost from a clone of the repository (pyproject.toml and images/ at its top).",
        )
    return candidate


def default_lock_path(root: Path | None = None) -> Path:
    if os.environ.get(LOCK_ENV):
        return Path(os.environ[LOCK_ENV])
    base = root or Path(__file__).resolve().parents[2]
    return base / "images" / "images.lock"


def dockerfile_path(stack: str, root: Path) -> Path:
    return root / "images" / stack / "Dockerfile"


def requirements_paths(stack: str, root: Path) -> tuple[Path, Path]:
    """(requirements.in, requirements.lock) of a stack."""
    folder = root / "images" / stack
    return folder / "requirements.in", folder / "requirements.lock"


def wheelhouse_path(stack: str, root: Path) -> Path:
    cache = os.environ.get(WHEEL_CACHE_ENV)
    return Path(cache) / stack if cache else root / "images" / stack / "wheels"


_ARG_BASE = re.compile(r"^ARG\s+BASE_IMAGE=(\S+)\s*$", re.MULTILINE)
_ARG_BASE_DIGEST = re.compile(r"^ARG\s+BASE_DIGEST=(\S+)\s*$", re.MULTILINE)


def default_base(stack: str, root: Path) -> str:
    """The official base a stack's Dockerfile pins (``ARG BASE_IMAGE=name@sha256:…``)."""
    text = dockerfile_path(stack, root).read_text(encoding="utf-8")
    match = _ARG_BASE.search(text)
    if match is None or "@sha256:" not in match.group(1):
        raise UserError("the Dockerfile pins no base by digest", str(dockerfile_path(stack, root)),
                        "Declare `ARG BASE_IMAGE=name:tag@sha256:…` before FROM.")
    return match.group(1)


# -- the dependency lock -----------------------------------------------------------------------


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


def format_lock(packages: Iterable[LockedPackage], header: str) -> str:
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for package in sorted(packages, key=lambda p: p.name):
        lines.append(f"{package.name}=={package.version} \\")
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


def lock_requirements(stack: str, *, root: Path | None = None, progress: Progress = _quiet) -> Path:
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
                constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(versions.items())), encoding="utf-8")
                args += ["-c", str(constraints)]
            progress(f"resolving {source.relative_to(root)} for python {python}")
            _pip(args, f"resolve {source} for python {python}")
            for wheel in sorted(dest.glob("*.whl")):
                name, version = wheel_name_version(wheel.name)
                if versions.setdefault(name, version) != version:
                    raise UserError(f"{name} resolves to {versions[name]} and {version} for different pythons",
                                    str(source), f"Pin {name} in requirements.in.")
                hashes.setdefault(name, set()).add(sha256_of(wheel))
                shutil.copy2(wheel, wheels / wheel.name)
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
    )
    lock_path.write_text(format_lock(packages, header), encoding="utf-8")
    progress(f"wrote {lock_path.relative_to(root)} ({len(packages)} packages)")
    return lock_path


def ensure_wheelhouse(stack: str, *, root: Path | None = None, progress: Progress = _quiet) -> list[Path]:
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
        for python in spec.pythons:
            _pip(["download", "--quiet", "--no-deps", "--require-hashes", "--dest", str(wheels), "-r", str(lock_path),
                  *_pip_target_args(spec, python)], f"download the wheels {lock_path} pins")
        found, missing = matching()
        if missing:
            names = sorted({wanted[h].name for h in missing})
            raise UserError(f"no wheel file matching the lock's hashes for {', '.join(names)}", str(wheels),
                            f"Regenerate the lock with `isocost images lock --stack {stack}`.")
    return found


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageRecord:
    """One built (and maybe pushed) image, as kept in images.lock."""

    stack: str
    tag: str  # local name, e.g. isocost/cpu:0.1.0-3f2c…
    image_id: str  # sha256 of the config JSON (Image ID); local, not pullable
    repo_digest: str  # REPO@sha256:<manifest digest> after a push or pull; "" before
    base: str  # base image reference the build used (the pinned default or --base)
    base_digest: str  # sha256:… of the base (see base_digest_kind)
    base_digest_kind: str  # "repo-digest" (registry manifest) or "image-id" (a local base, never pushed)
    base_override: bool  # True when --base replaced the Dockerfile's pinned default
    build_args: dict[str, str]
    revision: str  # git commit of the sources baked in ("…-dirty" with uncommitted changes)
    requirements_sha256: str  # of requirements.lock
    built_at: str
    build_s: float
    size_bytes: int
    engine: dict[str, str] = field(default_factory=dict)  # version, storage driver, image store
    registry: str = ""
    pushed_at: str = ""

    @property
    def image_ref(self) -> str:
        """What to run: the repo digest once pushed, the image ID before (both exact)."""
        return self.repo_digest or self.image_id

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["image_ref"] = self.image_ref
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImageRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def read_lock(path: Path) -> dict[str, ImageRecord]:
    """Stack → record; an absent file is an empty lock."""
    if not path.exists():
        return {}
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema_version") != LOCK_SCHEMA_VERSION:
        raise UserError(
            f"images lock has schema_version {data.get('schema_version') if isinstance(data, dict) else None!r}, "
            f"this isocost reads {LOCK_SCHEMA_VERSION}",
            str(path),
            "Rebuild the images with `isocost images build`, or use the isocost version that wrote it.",
        )
    return {stack: ImageRecord.from_dict(entry) for stack, entry in sorted(data.get("images", {}).items())}


def write_lock(path: Path, records: dict[str, ImageRecord]) -> None:
    write_json_atomic(path, {
        "schema_version": LOCK_SCHEMA_VERSION,
        "about": "image_id = sha256 of the image config (Image ID, local only); repo_digest = REPO@sha256 of the "
                 "registry manifest (after push/pull; what another host pulls). image_ref = repo_digest or image_id.",
        "images": {stack: records[stack].to_dict() for stack in sorted(records)},
    })


def update_lock(path: Path, record: ImageRecord) -> None:
    records = read_lock(path)
    records[record.stack] = record
    write_lock(path, records)


def locked_image(stack: str, lock_path: Path | None = None) -> ImageRecord | None:
    try:
        return read_lock(lock_path or default_lock_path()).get(stack)
    except UserError:
        return None


# -- building -----------------------------------------------------------------------------------


def git_revision(root: Path) -> str:
    """HEAD's commit, ``-dirty`` when the work tree differs; ``uncommitted`` without any commit."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)

    try:
        head = git("rev-parse", "--verify", "HEAD")
    except FileNotFoundError:
        return "unknown (git not installed)"
    if head.returncode != 0:
        return "uncommitted"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def git_source(root: Path) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True,
                              text=True, check=False)
    except FileNotFoundError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


_SOURCE_ITEMS = ("pyproject.toml", "README.md", "LICENSE", "protocol", "runner")


def _assemble_context(ctx: Path, stack: str, root: Path, wheels: list[Path]) -> None:
    """Dockerfile, requirements.lock, the locked wheels (hard links when possible) and the sources."""
    shutil.copy2(dockerfile_path(stack, root), ctx / "Dockerfile")
    shutil.copy2(requirements_paths(stack, root)[1], ctx / "requirements.lock")
    (ctx / "wheels").mkdir()
    for wheel in wheels:
        target = ctx / "wheels" / wheel.name
        try:
            os.link(wheel, target)
        except OSError:
            shutil.copy2(wheel, target)
    src = ctx / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".mypy_cache", ".pytest_cache")
    for item in _SOURCE_ITEMS:
        path = root / item
        if path.is_dir():
            shutil.copytree(path, src / item, ignore=ignore)
        elif path.is_file():
            shutil.copy2(path, src / item)


@dataclass(frozen=True)
class BaseFacts:
    ref: str
    digest: str
    digest_kind: str
    image_id: str


def _base_facts(client: Any, ref: str, *, override: bool, progress: Progress) -> BaseFacts:
    """The base must be present locally, or pullable; say clearly when it is neither."""
    import docker.errors

    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        progress(f"base {ref} not present locally: pulling it")
        try:
            image = client.images.pull(ref)
        except docker.errors.APIError as exc:
            raise UserError(
                f"the base image {ref} is not present locally and could not be pulled (no registry reachable "
                f"from this engine, or the reference is unknown: {exc.explanation or exc})",
                "--base" if override else "Dockerfile ARG BASE_IMAGE",
                "Pull it on a host with registry access and move it here (docker save | docker load), or build "
                "on a local base with --base IMAGE (e.g. isocost-base/bookworm:local from .ci/docker-setup.sh; "
                "the override is recorded)."
            ) from None
    repo_digests = sorted(image.attrs.get("RepoDigests") or [])
    if "@sha256:" in ref:
        digest, kind = "sha256:" + ref.split("@sha256:", 1)[1], "repo-digest"
    elif repo_digests:
        digest, kind = repo_digests[0].split("@", 1)[1], "repo-digest"
    else:
        digest, kind = image.id, "image-id"
    return BaseFacts(ref=ref, digest=digest, digest_kind=kind, image_id=image.id)


def _docker_build(client: Any, ctx: Path, tag: str, build_args: dict[str, str], progress: Progress,
                  no_cache: bool) -> str:
    """Build with the engine's classic builder, streaming its steps; returns the image ID."""
    import docker.errors

    image_id = ""
    tail: list[str] = []
    try:
        # network_mode none: every input is in the build context (the hashed wheelhouse), so no RUN step
        # may reach a network; this also builds on engines without a default bridge.
        stream = client.api.build(path=str(ctx), tag=tag, buildargs=build_args, rm=True, forcerm=True, pull=False,
                                  nocache=no_cache, decode=True, timeout=3600, network_mode="none")
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise UserError(f"the image build failed: {detail.strip()}\n" + "".join(tail[-15:]),
                                str(ctx / "Dockerfile"), "Fix the step above and build again.")
            text = chunk.get("stream", "")
            if text:
                tail.append(text)
                if text.startswith("Step "):
                    progress(text.strip())
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
    except docker.errors.APIError as exc:
        raise UserError(f"the engine refused the build: {exc.explanation or exc}", tag) from None
    if not image_id:
        image_id = client.images.get(tag).id
    return image_id


def build_image(
    stack: str,
    base_override: str | None = None,
    *,
    root: Path | None = None,
    lock_path: Path | None = None,
    client: Any = None,
    no_cache: bool = False,
    progress: Progress = _quiet,
) -> ImageRecord:
    """Build a stack's image and record it in the images lock; returns the record.

    ``base_override`` replaces the Dockerfile's pinned base (air-gapped hosts, CI); it is passed as
    the ``BASE_IMAGE`` build argument, kept as a label and recorded as ``base_override``.
    """
    root = repo_root(root)
    spec = stack_spec(stack)
    lock_path = lock_path or default_lock_path(root)
    base = base_override or default_base(spec.name, root)
    client = client or connect_engine(timeout_s=3600)
    base_facts = _base_facts(client, base, override=bool(base_override), progress=progress)
    wheels = ensure_wheelhouse(stack, root=root, progress=progress)
    revision = git_revision(root)
    from protocol import __version__

    short = revision[:12] if re.match(r"^[0-9a-f]{40}", revision) else "dev"
    tag = f"{IMAGE_REPOSITORY.format(stack=stack)}:{__version__}-{short}"
    requirements_sha = sha256_of(requirements_paths(stack, root)[1])
    build_args = {
        "BASE_IMAGE": base,
        "BASE_DIGEST": base_facts.digest,
        "BASE_OVERRIDE": "true" if base_override else "false",
        "REVISION": revision,
        "SOURCE": git_source(root),
        "REQUIREMENTS_SHA256": requirements_sha,
    }
    progress(f"building {tag} on {base}" + (" (base override)" if base_override else ""))
    with tempfile.TemporaryDirectory(prefix="isocost-build-") as tmp:
        ctx = Path(tmp)
        _assemble_context(ctx, stack, root, wheels)
        start = time.perf_counter()
        image_id = _docker_build(client, ctx, tag, build_args, progress, no_cache)
        build_s = time.perf_counter() - start
    image = client.images.get(image_id)
    record = ImageRecord(
        stack=stack,
        tag=tag,
        image_id=image.id,
        repo_digest="",
        base=base,
        base_digest=base_facts.digest,
        base_digest_kind=base_facts.digest_kind,
        base_override=bool(base_override),
        build_args=build_args,
        revision=revision,
        requirements_sha256=requirements_sha,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        build_s=round(build_s, 3),
        size_bytes=int(image.attrs.get("Size") or 0),
        engine=engine_facts(client),
    )
    update_lock(lock_path, record)
    progress(f"built {tag}: image ID {record.image_id}, {record.size_bytes / 1e9:.2f} GB, {build_s:.1f} s")
    return record


# -- pushing ------------------------------------------------------------------------------------

_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


def push_image(
    stack: str,
    registry: str,
    *,
    lock_path: Path | None = None,
    client: Any = None,
    progress: Progress = _quiet,
) -> ImageRecord:
    """Tag the locked image as REGISTRY/isocost/STACK:TAG, push it, record its repo digest."""
    import docker.errors

    if not _REGISTRY.match(registry):
        raise UserError(f"{registry!r} is not HOST[:PORT]", "--registry", "Example: --registry 127.0.0.1:5000.")
    lock_path = lock_path or default_lock_path()
    record = read_lock(lock_path).get(stack)
    if record is None:
        raise UserError(f"no image for stack {stack!r} in the lock", str(lock_path),
                        f"Build it first: isocost images build --stack {stack}.")
    client = client or connect_engine(timeout_s=3600)
    try:
        image = client.images.get(record.image_id)
    except docker.errors.ImageNotFound:
        raise UserError(f"the locked image {record.image_id} is not in this engine", str(lock_path),
                        f"Rebuild it: isocost images build --stack {stack}.") from None
    repository = f"{registry}/{IMAGE_REPOSITORY.format(stack=stack)}"
    tag = record.tag.rsplit(":", 1)[1]
    image.tag(repository, tag)
    progress(f"pushing {repository}:{tag}")
    pushed = ""
    try:
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise UserError(f"the push to {registry} failed: {detail}", "--registry",
                                "Check that a registry answers there (.ci/docker-setup.sh starts one on "
                                "127.0.0.1:5000).")
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                pushed = aux["Digest"]
    except docker.errors.APIError as exc:
        raise UserError(f"the push to {registry} failed: {exc.explanation or exc}", "--registry") from None
    image.reload()
    digests = [d for d in image.attrs.get("RepoDigests") or [] if d.startswith(repository + "@")]
    repo_digest = f"{repository}@{pushed}" if pushed else (digests[0] if digests else "")
    if not repo_digest or (digests and repo_digest not in digests):
        raise UserError(f"the engine reports no repo digest for {repository} after the push (seen: {digests})",
                        "--registry")
    updated = dataclasses.replace(record, repo_digest=repo_digest, registry=registry,
                                  pushed_at=datetime.now(UTC).isoformat(timespec="seconds"))
    update_lock(lock_path, updated)
    progress(f"pushed: repo digest {repo_digest} (image ID {record.image_id})")
    return updated


def list_images(lock_path: Path | None = None) -> list[ImageRecord]:
    return list(read_lock(lock_path or default_lock_path()).values())


__all__ = [
    "STACKS",
    "ImageRecord",
    "build_image",
    "default_lock_path",
    "ensure_wheelhouse",
    "image_store",
    "list_images",
    "lock_requirements",
    "push_image",
    "read_lock",
]
