"""Fixtures for tests against a real Docker engine: one CPU image and one tiny workspace per session.

Without an engine these tests skip with the reason; with ``ISOCOST_REQUIRE_DOCKER=1`` (CI) they
fail instead, so a CI whose engine did not start cannot pass silently. ``bash .ci/docker-setup.sh``
prepares everything (engine, registry on 127.0.0.1:5000, local base image, CPU image).
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import image_lock
import pytest
from workspace import STUDY_TEMPLATE, write_corpus

from protocol.io.fingerprint import fingerprint_path

REQUIRE_ENV = "ISOCOST_REQUIRE_DOCKER"
BASE_IMAGE = os.environ.get("ISOCOST_BASE_IMAGE", "isocost-base/bookworm:local")
REGISTRY = os.environ.get("ISOCOST_REGISTRY", "127.0.0.1:5000")

def unavailable(reason: str) -> None:
    """Skip, or fail when CI demands the engine."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        import docker
    except ImportError:
        unavailable("the docker Python SDK is not installed (pip install 'docker>=7')")
    from runner.launch.daemon.client import daemon_answers

    ok, why = daemon_answers(timeout_s=10)
    if not ok:
        unavailable(f"no Docker engine answers ({why}); run `bash .ci/docker-setup.sh`")
    client = docker.from_env(timeout=600)
    yield client
    client.close()


@pytest.fixture(scope="session")
def images_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-private images lock: the tests never touch images/images.lock."""
    return tmp_path_factory.mktemp("lock") / "images.lock"


@pytest.fixture(scope="session")
def cpu_image(docker_client: Any, images_lock: Path) -> Any:
    """The CPU image, built once (the engine's layer cache makes a rebuild take seconds)."""
    import docker.errors

    from runner.images.build import build_image

    base = BASE_IMAGE
    try:
        docker_client.images.get(base)
    except docker.errors.ImageNotFound:
        unavailable(f"base image {base} is not in the engine; run `bash .ci/docker-setup.sh` (debootstrap base)")
    with image_lock.held("shared"):  # not while another worker's test has removed it (tests/image_lock.py)
        return build_image("cpu", base, lock_path=images_lock)


@pytest.fixture(scope="session")
def registry() -> str:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=3).read()
    except OSError as exc:
        unavailable(f"no registry answers on {REGISTRY} ({exc}); run `bash .ci/docker-setup.sh`")
    return REGISTRY


@dataclass(frozen=True)
class Workspace:
    root: Path

    def study(self, name: str, batches: str = "[1, 4]", timeout: int = 300) -> Path:
        path = self.root / f"{name}.toml"
        if not path.exists():
            text = STUDY_TEMPLATE.format(
                corpus_fp=fingerprint_path(self.root / "corpus.jsonl"),
                tuning_fp=fingerprint_path(self.root / "tuning.jsonl"),
                model_fp=fingerprint_path(self.root / "model"),
                reference=batches.strip("[]").split(",")[0].strip(),
                batches=batches,
                timeout=timeout,
                minimum=0.0,
                repetitions=1,
            )
            path.write_text(text.replace('name = "tiny"', f'name = "{name}"', 1), encoding="utf-8")
        return path


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Workspace:
    """Corpus, tuning split and the tiny MiniLM classifier, readable by the containers' user.

    transformers writes model.safetensors with mode 0600; the containers run as a non-root user,
    so the copy is made world-readable (modes are not part of the fingerprint).
    """
    root = tmp_path_factory.mktemp("docker-ws")
    write_corpus(root / "corpus.jsonl", "c", 12, seed=1)
    write_corpus(root / "tuning.jsonl", "t", 6, seed=2)
    shutil.copytree(tiny_model, root / "model")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return Workspace(root)


class CampaignFiles:
    """Readers for a campaign directory (a fixture, so test modules need not import this conftest)."""

    @staticmethod
    def trials(campaign: Path) -> list[Path]:
        return sorted(p for p in (campaign / "trials").iterdir() if p.is_dir())

    @staticmethod
    def rows(campaign: Path) -> list[dict[str, str]]:
        import csv

        with open(campaign / "raw.csv", encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle))


@pytest.fixture(scope="session")
def files() -> type[CampaignFiles]:
    return CampaignFiles
