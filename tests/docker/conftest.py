"""Fixtures for tests against a real Docker engine: one CPU image and one tiny workspace per session.

Without an engine these tests skip with the reason; with ``ISOCOST_REQUIRE_DOCKER=1`` (CI) they
fail instead, so a CI whose engine did not start cannot pass silently. ``bash .ci/docker-setup.sh``
prepares everything (engine, registry on 127.0.0.1:5000, local base image, CPU image).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from protocol.fingerprint import fingerprint_path

REQUIRE_ENV = "ISOCOST_REQUIRE_DOCKER"
BASE_IMAGE = os.environ.get("ISOCOST_BASE_IMAGE", "isocost-base/bookworm:local")
REGISTRY = os.environ.get("ISOCOST_REGISTRY", "127.0.0.1:5000")

STUDY = """\
schema_version = 1
name = "{name}"
question = "Which batch size classifies every tiny input in a container, meets the rule, and costs least?"
scenario = "offline"

[corpus]
path = "corpus.jsonl"
fingerprint = "{corpus_fp}"

[tuning]
path = "tuning.jsonl"
fingerprint = "{tuning_fp}"

[model]
path = "model"
fingerprint = "{model_fp}"

[[length_buckets]]
name = "short"
max_tokens = 16

[[length_buckets]]
name = "long"

[quality]
metric = "accuracy"
minimum = 0.0
tuned_on = "tuning"
reference_variant = "batch_size={reference}"
max_metric_drop = 0.01
min_agreement = 0.99
subgroups = ["length_bucket", "label"]

[warmup]
inputs = 2
runs = 1

[campaign]
repetitions = 1
trial_timeout_s = {timeout}

[base]
stack = "cpu"
device = "cpu"
precision = "fp32"
quantization = "none"
compile = false
attention = "sdpa"
batch_size = 1
padding = "longest"
max_length = 32
length_grouping = "none"
resume = "none"
threads = 1
seed = 0
deterministic = true

[[series]]
name = "batch"
field = "batch_size"
values = {batches}
"""

WORDS = "market vote film match chip bank party actor goal phone shares minister album team software".split()


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
    from runner.launch.docker import engine_answers

    ok, why = engine_answers(timeout_s=10)
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

    from runner.images import build_image

    base = BASE_IMAGE
    try:
        docker_client.images.get(base)
    except docker.errors.ImageNotFound:
        unavailable(f"base image {base} is not in the engine; run `bash .ci/docker-setup.sh` (debootstrap base)")
    return build_image("cpu", base, lock_path=images_lock)


@pytest.fixture(scope="session")
def registry() -> str:
    try:
        urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=3).read()
    except OSError as exc:
        unavailable(f"no registry answers on {REGISTRY} ({exc}); run `bash .ci/docker-setup.sh`")
    return REGISTRY


def _write_corpus(path: Path, prefix: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            length = rng.choice([3, 6, 40])
            text = " ".join(rng.choice(WORDS) for _ in range(length)) + f" {prefix}{i}"
            handle.write(json.dumps({"id": f"{prefix}-{i:03d}", "text": text, "label": rng.choice(["x", "y"])}) + "\n")


@dataclass(frozen=True)
class Workspace:
    root: Path

    def study(self, name: str, batches: str = "[1, 4]", timeout: int = 300) -> Path:
        path = self.root / f"{name}.toml"
        if not path.exists():
            path.write_text(STUDY.format(
                name=name,
                corpus_fp=fingerprint_path(self.root / "corpus.jsonl"),
                tuning_fp=fingerprint_path(self.root / "tuning.jsonl"),
                model_fp=fingerprint_path(self.root / "model"),
                reference=batches.strip("[]").split(",")[0].strip(),
                batches=batches,
                timeout=timeout,
            ), encoding="utf-8")
        return path


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Workspace:
    """Corpus, tuning split and the tiny MiniLM classifier, readable by the containers' user.

    transformers writes model.safetensors with mode 0600; the containers run as a non-root user,
    so the copy is made world-readable (modes are not part of the fingerprint).
    """
    root = tmp_path_factory.mktemp("docker-ws")
    _write_corpus(root / "corpus.jsonl", "c", 12, seed=1)
    _write_corpus(root / "tuning.jsonl", "t", 6, seed=2)
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
