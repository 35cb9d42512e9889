"""Engine vLLM in real containers of the ``cpu-vllm`` image (issue 35): SmolLM2 in fp32, each trial a fresh
locked-down container (network none, read-only root, non-root, cap-drop ALL) with the /dev/shm the engine declares.

The tokens are the transformers engine's, token for token (that reference runs as a local process of the same
workspace: its image is the ``cpu`` one, and one campaign runs one image); the manifest records the engine, its
version and settings, and the image the row names; no container is left behind. (vLLM in bf16, its identity and
near-tie shares, is tested with the trials as processes: tests/e2e/test_vllm_campaign.py. Each engine start costs
about 35 s of CI here.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import BASE_IMAGE, unavailable
from generation_workspace import write_generation_workspace
from workspace import series_toml

from runner.campaign_dir.layout import read_raw

pytestmark = pytest.mark.docker

PRECISION_SERIES = '[[series]]\nname = "precision"\nfield = "precision"\nvalues = ["fp32"]\n'
SETTINGS = "\n[engines.vllm]\nmax_model_len = 512\nmax_num_seqs = 8\n"


@pytest.fixture(scope="module")
def cpu_vllm_image(docker_client: Any, images_lock: Path) -> Any:
    """The cpu-vllm image, built once (the engine's layer cache makes a rebuild take seconds)."""
    import docker.errors

    from runner.images.build import build_image

    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"base image {BASE_IMAGE} is not in the engine; run `bash .ci/docker-setup.sh`")
    return build_image("cpu-vllm", BASE_IMAGE, lock_path=images_lock)


def _readable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the container's non-root user reads the inputs


def _run(study: Path, out: Path, images_lock: Path, launcher: str) -> str:
    from runner.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ISOCOST_IMAGES_LOCK", str(images_lock))
        patch.delenv("ISOCOST_FAULT_INJECT", raising=False)
        result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--launcher", launcher])
    assert result.exit_code == 0, result.output
    return result.output


def _tokens(out: Path, row: dict[str, str]) -> list[list[int]]:
    lines = (out / "trials" / row["trial_id"] / "generations.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["tokens"] for line in lines]


def test_vllm_in_containers_gives_the_transformers_tokens_in_fp32(cpu_vllm_image: Any, images_lock: Path,
                                                                   docker_client: Any, smollm2: Any,
                                                                   tmp_path: Path) -> None:
    study = write_generation_workspace(tmp_path / "ws", smollm2, n=6, batches="[3]", max_new_tokens=12, replace={
        series_toml("[3]"): PRECISION_SERIES, "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n',
        'reference_variant = "batch_size=3"': 'reference_variant = "precision=fp32"'}, extra=SETTINGS)
    _readable(study.parent)
    assert os.access(smollm2.path, os.R_OK)
    out = tmp_path / "out"
    output = _run(study, out, images_lock, "docker")
    assert f"image {cpu_vllm_image.image_id}" in output or "@sha256:" in output, output
    rows = {row["variant_id"]: row for row in read_raw(out / "raw.csv")}
    assert sorted(rows) == ["precision=fp32"]  # rows lost 0
    for row in rows.values():
        assert (row["status"], row["launcher"], row["engine"]) == ("ok", "docker", "vllm"), row["notes"]
        assert row["image_id"] == cpu_vllm_image.image_id
        manifest = json.loads((out / "trials" / row["trial_id"] / "manifest.json").read_text())
        assert manifest["image_id"] == cpu_vllm_image.image_id
        assert (manifest["engine"]["name"], manifest["engine"]["version"]) == ("vllm", "0.32.0")
        assert manifest["engine"]["dtype"] == "float32"
        assert manifest["engine"]["settings"]["max_model_len"] == 512
        processes = manifest["engine"]["processes"]  # vLLM's engine core (and worker), beside the trial process
        assert processes["count"] >= 1 and processes["peak_rss_bytes_sum"] > 0 and processes["why"] == "", processes
    assert rows["precision=fp32"]["corpus_accepted"] == "true"
    leftover = docker_client.containers.list(all=True, filters={"label": "org.isocost.trial_dir"})
    assert [c.name for c in leftover if str(out) in json.dumps(c.labels)] == [], "a trial container was left behind"

    # The reference engine, transformers, on the same workspace: a local process (its image is the cpu one).
    reference = study.parent / "transformers.toml"
    reference.write_text(study.read_text().replace('engine = "vllm"\n', "").replace(SETTINGS, ""))
    ref_out = tmp_path / "out-transformers"
    _run(reference, ref_out, images_lock, "process")
    ref_rows = {row["variant_id"]: row for row in read_raw(ref_out / "raw.csv")}
    assert _tokens(out, rows["precision=fp32"]) == _tokens(ref_out, ref_rows["precision=fp32"])
    from runner.cli import main

    validated = CliRunner().invoke(main, ["validate", str(out)])
    assert validated.exit_code == 0, validated.output


def test_an_image_without_an_engines_module_is_refused_before_anything_runs(cpu_image: Any,
                                                                            cpu_vllm_image: Any) -> None:
    """`check` and `run` ask the image (a helper container) for the modules each engine requires."""
    from runner.launch.kinds.docker.launcher import DockerLauncher

    cpu = DockerLauncher(cpu_image.image_id, stack="cpu")
    assert cpu.engine_problems({"transformers", "onnxruntime"}) == []
    (error,) = cpu.engine_problems({"transformers", "vllm"})
    assert error.what == f"engine vllm needs the Python module(s) vllm, which image {cpu_image.image_id} lacks"
    assert "isocost images build --stack cpu" in error.fix
    vllm = DockerLauncher(cpu_vllm_image.image_id, stack="cpu-vllm")
    assert vllm.engine_problems({"vllm", "transformers"}) == []
    (error,) = vllm.engine_problems({"onnxruntime"})  # the cpu-vllm image carries no ONNX Runtime
    assert "onnx, onnxruntime" in error.what
    server: Any = SimpleNamespace(traffic=object(), scenario="server")
    assert cpu.scenario_problems(server) == [] and vllm.scenario_problems(server) == []  # both carry LoadGen
    assert cpu.scenario_problems(SimpleNamespace(traffic=None, scenario="offline")) == []


def test_an_image_without_loadgen_is_refused_for_a_server_study(docker_client: Any) -> None:
    from runner.launch.kinds.docker.image_modules import missing_in_image

    base = docker_client.images.get(BASE_IMAGE).id  # bookworm's python3, nothing of isocost's
    (error,) = missing_in_image(docker_client, base, "65534:65534", (), "cpu", ("server", ("mlperf_loadgen",)))
    assert error.what == f"scenario server needs the Python module(s) mlperf_loadgen, which image {base} lacks"


def test_vllm_http_server_serves_inside_a_locked_down_container(cpu_vllm_image: Any, images_lock: Path,
                                                                docker_client: Any, smollm2: Any,
                                                                tmp_path: Path) -> None:
    """``server = true`` in a server study: the trial starts vLLM's HTTP server on the container's loopback (the
    container has no network otherwise) and LoadGen's queries reach it as streaming requests, each sent as it
    arrives (``batch_size = 1``, ``max_batches_in_flight = 3``: the server batches them continuously); every answer
    is kept, the server's log and per-request times are in the trial directory, nothing is left behind."""
    from serving_study import GENERATION_TRAFFIC

    study = write_generation_workspace(tmp_path / "ws", smollm2, n=6, batches="[1]", max_new_tokens=6, replace={
        "deterministic = true\n": 'deterministic = true\nengine = "vllm"\n',
        'scenario = "offline"': 'scenario = "server"'},
        extra=SETTINGS + "server = true\n" + GENERATION_TRAFFIC + "max_batches_in_flight = 3\n")
    _readable(study.parent)
    out = tmp_path / "out"
    _run(study, out, images_lock, "docker")
    (row,) = read_raw(out / "raw.csv")
    assert (row["status"], row["launcher"], row["engine"]) == ("ok", "docker", "vllm"), row["notes"]
    trial = out / "trials" / row["trial_id"]
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["engine"]["settings"]["server"] is True
    assert manifest["engine"]["server"]["address"].startswith("127.0.0.1:")
    serving = manifest["serving"]
    assert serving["queries"] == 12 and serving["unanswered"] == 0 and serving["answers"]["written"] == 6, serving
    assert (serving["max_batch"], serving["max_batches_in_flight"]) == (1, 3)  # each query sent as it arrives
    queries = [json.loads(line) for line in (trial / "queries.jsonl").read_text().splitlines()]
    assert all(q["started_ns"] < q["first_token_ns"] < q["completed_ns"] for q in queries), queries
    spans = sorted((q["started_ns"], q["completed_ns"]) for q in queries)
    overlapping = sum(1 for (_, end), (start, _) in zip(spans, spans[1:], strict=False) if start < end)
    print(f"vllm server in a container: {overlapping} of {len(queries) - 1} queries started before the one before "
          f"ended; LoadGen {serving['result']}, completed {serving['completed_qps']:.2f} qps")
    assert max(q["batch_size"] for q in queries) == 1
    assert serving["output_tokens"] == sum(q["n_tokens"] for q in queries) > 0
    assert serving["ttft_at_percentile_ms"] is not None and serving["result"] in ("VALID", "INVALID")
    assert "Application startup complete" in (trial / "vllm_server.log").read_text()
    assert len((trial / "vllm_requests.jsonl").read_text().splitlines()) >= 12
    leftover = docker_client.containers.list(all=True, filters={"label": "org.isocost.trial_dir"})
    assert [c.name for c in leftover if str(out) in json.dumps(c.labels)] == [], "a trial container was left behind"
