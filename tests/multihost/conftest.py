"""Fixtures for the multi-host tests: a second Docker Engine behind a real sshd, on 127.0.0.1 only.

Without the set-up (root, dockerd, sshd, paramiko, the registry on 127.0.0.1:5000, the local base
image) these tests skip with the reason; with ``ISOCOST_REQUIRE_DOCKER=1`` (CI) they fail
instead. ``bash .ci/docker-setup.sh && bash .ci/multihost-setup.sh`` prepares everything; the
second engine and sshd are started here and stopped at the end of the session.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import image_lock
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loopback import Loopback, SetupMissing, start, stop  # noqa: E402

from protocol.io.fingerprint import fingerprint_path  # noqa: E402

REQUIRE_ENV = "ISOCOST_REQUIRE_DOCKER"
BASE_IMAGE = os.environ.get("ISOCOST_BASE_IMAGE", "isocost-base/bookworm:local")
REGISTRY = os.environ.get("ISOCOST_REGISTRY", "127.0.0.1:5000")
WORDS = "market vote film match chip bank party actor goal phone shares minister album team software".split()


def pytest_configure(config: pytest.Config) -> None:
    # Also in pyproject's markers; registered here so --strict-markers accepts it either way.
    config.addinivalue_line("markers", "multihost: drives campaigns on a second engine through ssh (loopback)")


def unavailable(reason: str) -> None:
    """Skip, or fail when CI demands the docker tests."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def local_engine() -> Iterator[Any]:
    try:
        import docker
        import docker.errors
    except ImportError:
        unavailable("the docker Python SDK is not installed")
    from runner.launch.daemon.client import daemon_answers

    ok, why = daemon_answers(timeout_s=10)
    if not ok:
        unavailable(f"no Docker engine answers ({why}); run `bash .ci/docker-setup.sh`")
    client = docker.from_env(timeout=600)
    before = {v.name for v in client.volumes.list(filters={"label": "org.isocost.kind=inputs"})}
    yield client
    # The inputs volumes these tests shipped to the local engine (the second engine is emptied by stop()).
    for volume in client.volumes.list(filters={"label": "org.isocost.kind=inputs"}):
        if volume.name not in before:
            try:
                volume.remove(force=True)
            except docker.errors.APIError:
                pass
    client.close()


@pytest.fixture(scope="session")
def loopback(local_engine: Any) -> Iterator[Loopback]:
    """The second engine, reachable as ssh://isocost-mh@127.0.0.1:PORT; stopped after the session."""
    root = Path(tempfile.mkdtemp(prefix="isocost-mh-", dir="/tmp"))
    try:
        box = start(root)
    except SetupMissing as exc:
        shutil.rmtree(root, ignore_errors=True)
        unavailable(f"no loopback ssh host: {exc}")
    try:
        yield box
    finally:
        stop(box)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pushed_image(local_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The CPU image of this checkout, built (layer cache) and pushed once: hosts pull it by digest."""
    import docker.errors

    from runner.images.build import build_image, push_image

    try:
        local_engine.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"base image {BASE_IMAGE} is not in the engine; run `bash .ci/docker-setup.sh`")
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=3).read()
    except OSError as exc:
        unavailable(f"no registry answers on {REGISTRY} ({exc}); run `bash .ci/docker-setup.sh`")
    lock = tmp_path_factory.mktemp("mh-lock") / "images.lock"
    with image_lock.held("shared"):  # not while another worker's test has removed it (tests/image_lock.py)
        build_image("cpu", BASE_IMAGE, lock_path=lock)
        return push_image("cpu", REGISTRY, lock_path=lock)


def _write_corpus(path: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 6, 40]))) + f" {prefix}{i}"
            handle.write(json.dumps({"id": f"{prefix}-{i:03d}", "text": text, "label": rng.choice(["x", "y"])}) + "\n")


@dataclass(frozen=True)
class Workspace:
    root: Path

    def study(self, name: str, batches: str = "[1, 4]", repetitions: int = 1) -> Path:
        """A study named ``name`` (one file per name: its hash is what a campaign freezes)."""
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from workspace import STUDY_TEMPLATE

        path = self.root / f"{name}.toml"
        text = STUDY_TEMPLATE.format(
            corpus_fp=fingerprint_path(self.root / "corpus.jsonl"),
            tuning_fp=fingerprint_path(self.root / "tuning.jsonl"),
            model_fp=fingerprint_path(self.root / "model"),
            minimum=0.0, repetitions=repetitions, batches=batches, timeout=300,
            reference=batches.strip("[]").split(",")[0].strip(),
        ).replace('name = "tiny"', f'name = "{name}"')
        path.write_text(text, encoding="utf-8")
        return path

    def hosts_file(self, name: str, loopback: Loopback, *, reconnect_s: float = 60, extra: str = "") -> Path:
        path = self.root / f"{name}-hosts.toml"
        path.write_text(
            "schema_version = 1\n\n"
            '[[host]]\nname = "a"\nurl = "local"\nstack = "cpu"\nrental = { gpu = "rtx-4090", lots = 1 }\n\n'
            f'[[host]]\nname = "b"\nurl = "{loopback.url}"\nstack = "cpu"\nssh_config = "{loopback.ssh_config}"\n'
            f'reconnect_s = {reconnect_s}\nrental = {{ gpu = "b200", lots = 1 }}\n' + extra,
            encoding="utf-8",
        )
        return path


@pytest.fixture(scope="session")
def mh_workspace(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Workspace:
    """Corpus (12 texts), tuning split and the tiny MiniLM classifier; readable by anyone."""
    root = tmp_path_factory.mktemp("mh-ws")
    _write_corpus(root / "corpus.jsonl", "c", 12, seed=1)
    _write_corpus(root / "tuning.jsonl", "t", 6, seed=2)
    shutil.copytree(tiny_model, root / "model")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return Workspace(root)
