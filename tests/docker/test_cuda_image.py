"""The CUDA image on a machine without a GPU (issue 48): built from its hashed PyPI lock on the local base, it runs a
real classification campaign on the CPU (``stack = "cuda"``, ``device = "cpu"``) through the docker launcher, its
rows and manifests saying device cpu and the image's CUDA torch, and a ``device = "cuda"`` variant in it is refused
before anything runs, naming what the host lacks.

The image is 5.4 GB and takes about 14 minutes to build on a cold 2-core machine, so this is the images tier:
``make test-images`` (``ISOCOST_CUDA_IMAGE_TESTS=1``) builds it and runs these tests; elsewhere they skip, saying
so. CONTRIBUTING.md says when to run it (every change to images/, the trial runner or an engine).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import BASE_IMAGE

pytestmark = pytest.mark.docker

TIER_ENV = "ISOCOST_CUDA_IMAGE_TESTS"
ON_CPU = 'stack = "cuda"\ndevice = "cpu"'


@pytest.fixture(scope="module")
def cuda_image(docker_client: Any, images_lock: Path) -> Any:
    """The cuda image, built (or found in the engine's layer cache) from images/cuda's lock."""
    if os.environ.get(TIER_ENV) != "1":
        pytest.skip(f"the CUDA image tier: make test-images ({TIER_ENV}=1) builds the 5.4 GB image and runs it")
    from runner.images.build import build_image

    return build_image("cuda", BASE_IMAGE, lock_path=images_lock)


def _study(workspace: Any, name: str, device: str) -> Path:
    path = workspace.study(name)
    text = path.read_text(encoding="utf-8")
    assert 'stack = "cpu"\ndevice = "cpu"' in text
    path.write_text(text.replace('stack = "cpu"\ndevice = "cpu"', f'stack = "cuda"\ndevice = "{device}"'),
                    encoding="utf-8")
    return path


def _run(study: Path, out: Path, image: str, images_lock: Path) -> Any:
    from runner.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        return CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", "docker",
                                         "--image", image])


def test_a_cpu_campaign_runs_in_the_cuda_image_and_says_so(cuda_image: Any, images_lock: Path, workspace: Any,
                                                           files: Any, tmp_path: Path) -> None:
    assert cuda_image.stack == "cuda" and cuda_image.image_id.startswith("sha256:")
    out = tmp_path / "out"
    result = _run(_study(workspace, "cuda-on-cpu", "cpu"), out, cuda_image.image_id, images_lock)
    assert result.exit_code == 0, result.output
    rows = files.rows(out)
    assert len(rows) == 2 and all(row["status"] == "ok" and row["corpus_accepted"] == "true" for row in rows), rows
    for row in rows:
        assert (row["stack"], row["device"], row["image_id"]) == ("cuda", "cpu", cuda_image.image_id), row
        assert "no GPU" in row["empty_reasons"]  # the GPU columns are empty, with the reason
    for trial in files.trials(out):
        manifest = json.loads((trial / "manifest.json").read_text())
        assert manifest["software"]["torch"] == "2.13.0+cu130", manifest["software"]
        assert manifest["image_id"] == cuda_image.image_id


def test_a_gpu_variant_in_the_cuda_image_is_refused_before_anything_runs(cuda_image: Any, images_lock: Path,
                                                                         workspace: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = _run(_study(workspace, "cuda-on-gpu", "cuda"), out, cuda_image.image_id, images_lock)
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert "the cuda stack needs NVIDIA GPUs inside containers" in result.output, result.output
    assert not (out / "raw.csv").exists()
