"""The Docker launcher's decisions, against a fake engine: no Docker needed.

What a real engine does is covered in tests/docker; here: the container options, the env
allow-list, OOM / timeout / Ctrl-C / an engine that stops mid-trial, image identity checks,
GPU preflight and the launcher choice.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

docker = pytest.importorskip("docker")
requests = pytest.importorskip("requests")

from recordfiles import trial_status, write_status  # noqa: E402
from workspace import base_toml, series_toml  # noqa: E402

from protocol.errors import UserError  # noqa: E402
from runner.campaign.launcher_choice import choose_launcher  # noqa: E402
from runner.campaign_dir.raw_table import HOST_STOP_NOTE  # noqa: E402
from runner.launch.daemon.client import resolve_image  # noqa: E402
from runner.launch.daemon.gpu import gpu_options  # noqa: E402
from runner.launch.daemon.limits import ContainerLimits  # noqa: E402
from runner.launch.kinds.docker.bind_mounts import unreadable_for  # noqa: E402
from runner.launch.kinds.docker.launcher import DockerLauncher  # noqa: E402
from runner.launch.launcher import HostInterrupt, TrialPaths  # noqa: E402

IMAGE_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64
DIGEST = "127.0.0.1:5000/isocost/cpu@sha256:" + "c" * 64


class FakeImage:
    def __init__(self, image_id: str = IMAGE_ID, digests: list[str] | None = None, stack: str = "cpu") -> None:
        self.id = image_id
        self.attrs = {"RepoDigests": digests or [],
                      "Config": {"Labels": {"org.isocost.stack": stack, "org.isocost.uid": "10001"}}}


class FakeImages:
    def __init__(self, images: dict[str, FakeImage], pullable: dict[str, FakeImage] | None = None) -> None:
        self.images = images
        self.pullable = pullable or {}
        self.pulled: list[str] = []

    def get(self, ref: str) -> FakeImage:
        if ref in self.images:
            return self.images[ref]
        raise docker.errors.ImageNotFound(ref)

    def pull(self, ref: str) -> FakeImage:
        if ref not in self.pullable:
            raise docker.errors.APIError("manifest unknown")
        self.pulled.append(ref)
        self.images[ref] = self.pullable[ref]
        return self.pullable[ref]


class FakeContainer:
    def __init__(self, client: FakeClient, kwargs: dict[str, Any]) -> None:
        self.client = client
        self.kwargs = kwargs
        self.id = "f" * 64
        self.name = kwargs["name"]
        self.attrs: dict[str, Any] = {"Image": client.container_image,
                                      "State": {"Status": "created", "ExitCode": 0, "OOMKilled": False, "Error": ""}}
        self.stopped = False
        self.removed = False
        self.waits = list(client.wait_script)

    def start(self) -> None:
        self.attrs["State"]["Status"] = "running"

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        step = self.waits.pop(0) if self.waits else {"StatusCode": self.client.exit_code}
        if isinstance(step, requests.exceptions.ReadTimeout):
            time.sleep(min(timeout or 0.0, 0.5))  # a poll that times out takes its time
        if isinstance(step, BaseException):
            raise step
        if self.stopped:
            return {"StatusCode": 143}
        return step

    def stop(self, timeout: int = 10) -> None:
        self.stopped = True
        self.waits = []

    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        return b"trial output\n"

    def reload(self) -> None:
        self.attrs["State"].update(self.client.final_state)

    def remove(self, force: bool = False) -> None:
        self.removed = True


class FakeContainers:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.created: list[FakeContainer] = []

    def create(self, **kwargs: Any) -> FakeContainer:
        container = FakeContainer(self.client, kwargs)
        self.created.append(container)
        return container


class FakeApi:
    base_url = "http+docker://localhost"


class FakeClient:
    def __init__(self, images: dict[str, FakeImage] | None = None, runtimes: dict[str, Any] | None = None) -> None:
        self.images = FakeImages(images if images is not None else {IMAGE_ID: FakeImage()})
        self.containers = FakeContainers(self)
        self.api = FakeApi()
        self.runtimes = runtimes if runtimes is not None else {"runc": {}}
        self.container_image = IMAGE_ID
        self.wait_script: list[Any] = []
        self.exit_code = 0
        self.final_state: dict[str, Any] = {"Status": "exited", "ExitCode": 0}
        self.ping_ok = True
        self.machine: dict[str, Any] = {"NCPU": 4, "MemTotal": 16 * 2**30}

    def info(self) -> dict[str, Any]:
        return {"ServerVersion": "20.10.24", "Driver": "overlay2", "Runtimes": self.runtimes, "DriverStatus": [],
                "CgroupDriver": "cgroupfs", "CgroupVersion": "1", **self.machine}

    def ping(self) -> bool:
        if not self.ping_ok:
            raise requests.exceptions.ConnectionError("connection refused")
        return True

    def version(self) -> dict[str, str]:
        return {"Version": "20.10.24"}

    def close(self) -> None:
        pass


@pytest.fixture
def trial(tmp_path: Path) -> TrialPaths:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "x", "label": "y"}\n')
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    trial_dir = tmp_path / "trials" / "001-r1-batch_size-1"
    trial_dir.mkdir(parents=True)
    (trial_dir / "spec.json").write_text("{}")
    return TrialPaths(trial_dir=trial_dir, corpus=corpus, model=model)


def launcher(client: FakeClient, **kwargs: Any) -> DockerLauncher:
    return DockerLauncher(IMAGE_ID, client=client, user="10001:10001", **kwargs)


# -- container options ------------------------------------------------------------------------


def test_create_options_lock_the_container_down(trial: TrialPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "sleep-per-batch:0.1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never")
    monkeypatch.setenv("LANG", "C.UTF-8")
    client = FakeClient()
    result = launcher(client, limits=ContainerLimits(mem_limit="2g", pids_limit=128)).run(trial, None)
    [container] = client.containers.created
    kw = container.kwargs
    assert kw["image"] == IMAGE_ID
    assert kw["command"] == ["/out/spec.json", "/out"]
    assert kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["cap_drop"] == ["ALL"]
    assert kw["security_opt"] == ["no-new-privileges"]
    assert kw["pids_limit"] == 128
    assert kw["mem_limit"] == kw["memswap_limit"] == "2g"
    assert kw["user"] == "10001:10001"
    assert "size=256m" in kw["tmpfs"]["/tmp"]
    mounts = {m["Target"]: m for m in kw["mounts"]}
    assert mounts["/in/corpus.jsonl"]["ReadOnly"] is True
    assert mounts["/in/model"]["ReadOnly"] is True
    assert mounts["/out"]["ReadOnly"] is False and mounts["/out"]["Source"] == str(trial.trial_dir.resolve())
    env = kw["environment"]
    assert env["ISOCOST_FAULT_INJECT"] == "sleep-per-batch:0.1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["LANG"] == "C.UTF-8" and env["HOME"] == "/tmp"
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PATH" not in env
    assert result.exit_code == 0 and result.image_id == IMAGE_ID
    assert container.removed
    assert (trial.trial_dir / "trial.log").read_bytes() == b"trial output\n"
    record = json.loads((trial.trial_dir / "launcher.json").read_text())
    assert record["container_id"] == container.id and record["state"]["ExitCode"] == 0


def test_default_limits_are_derived_from_the_engine_machine(trial: TrialPaths) -> None:
    """No limit in the study: memory and CPUs come from `docker info` of the engine that runs the trial."""
    client = FakeClient()
    client.machine = {"NCPU": 4, "MemTotal": 16 * 2**30}
    chosen = launcher(client)
    chosen.run(trial, None)
    kw = client.containers.created[0].kwargs
    expected_memory = 16 * 2**30 - 2 * 2**30  # keeps max(1 GiB, 1/8) for the host CLI, engine and kernel
    assert kw["mem_limit"] == kw["memswap_limit"] == str(expected_memory)
    assert kw["nano_cpus"] == 4 * 10**9
    facts = chosen.describe()
    assert facts["mem_limit"] == str(expected_memory)
    assert "derived" in facts["mem_limit_source"] and str(16 * 2**30) in facts["mem_limit_source"]
    assert facts["cpus"] == "4" and "derived" in facts["cpus_source"]
    record = json.loads((trial.trial_dir / "launcher.json").read_text())
    assert record["limits"]["mem_limit"] == str(expected_memory) and record["limits"]["cpus"] == "4"
    small = FakeClient()
    small.machine = {"NCPU": 1, "MemTotal": 1536 * 2**20}
    assert launcher(small).limits.mem_limit == str(1536 * 2**20 - 2**30)


def test_the_study_limits_win_over_the_derived_ones(trial: TrialPaths) -> None:
    client = FakeClient()
    chosen = launcher(client, limits=ContainerLimits(mem_limit="2147483648", cpus=1.5, file_size_bytes=2**20))
    chosen.run(trial, None)
    kw = client.containers.created[0].kwargs
    assert kw["mem_limit"] == "2147483648" and kw["nano_cpus"] == 1_500_000_000
    assert chosen.describe()["mem_limit_source"] == "study" and chosen.describe()["cpus_source"] == "study"
    [fsize] = [u for u in kw["ulimits"] if u["Name"] == "fsize"]
    assert fsize["Soft"] == fsize["Hard"] == 2**20


def test_an_engine_that_reports_no_machine_gives_no_limit_with_the_reason(trial: TrialPaths) -> None:
    client = FakeClient()
    client.machine = {}
    chosen = launcher(client)
    chosen.run(trial, None)
    kw = client.containers.created[0].kwargs
    assert "mem_limit" not in kw and "nano_cpus" not in kw  # never a made-up 0
    assert chosen.describe()["mem_limit"] == "none"
    assert "reported no" in chosen.describe()["mem_limit_source"]
    unsupported = FakeClient()
    unsupported.machine = {"NCPU": 4, "MemTotal": 2**34, "MemoryLimit": False, "CpuCfsQuota": False}
    limited = launcher(unsupported)
    assert limited.limits.mem_limit is None and limited.limits.cpus is None  # no create error on such a kernel
    assert "MemoryLimit false" in limited.describe()["mem_limit_source"]
    assert "CpuCfsQuota false" in limited.describe()["cpus_source"]


def test_what_a_trial_may_write_is_bounded(trial: TrialPaths) -> None:
    client = FakeClient()
    chosen = launcher(client)
    chosen.run(trial, None)
    kw = client.containers.created[0].kwargs
    options = kw["tmpfs"]["/tmp"].split(",")
    assert {"noexec", "nosuid", "nodev", "size=256m"} <= set(options)
    [fsize] = [u for u in kw["ulimits"] if u["Name"] == "fsize"]
    assert fsize["Soft"] == fsize["Hard"] == ContainerLimits().file_size_bytes > 0
    assert kw["log_config"]["Type"] == "json-file"
    assert kw["log_config"]["Config"]["max-size"] == str(ContainerLimits().log_max_bytes)
    facts = chosen.describe()
    assert facts["file_size_limit_bytes"] == str(ContainerLimits().file_size_bytes)
    assert "noexec" in facts["tmpfs"]


def test_trial_view_uses_fixed_container_paths(trial: TrialPaths) -> None:
    assert launcher(FakeClient()).trial_view(trial) == ("/in/corpus.jsonl", "/in/model", "/out")


def test_refuses_root_user() -> None:
    with pytest.raises(UserError, match="never run as root"):
        DockerLauncher(IMAGE_ID, client=FakeClient(), user="0:0")


def test_unreadable_inputs_are_refused_before_any_trial(trial: TrialPaths) -> None:
    secret = trial.model / "model.safetensors"
    secret.write_bytes(b"w")
    secret.chmod(0o600)
    assert unreadable_for(trial.model, uid=10001, gids={10001}) == [secret]
    assert unreadable_for(trial.model, uid=secret.stat().st_uid, gids=set()) == []
    with pytest.raises(UserError, match="chmod -R a\\+rX"):
        launcher(FakeClient()).trial_view(trial)


# -- how trials end ---------------------------------------------------------------------------


def test_oom_killed_is_reported(trial: TrialPaths) -> None:
    client = FakeClient()
    client.exit_code = 137
    client.final_state = {"Status": "exited", "ExitCode": 137, "OOMKilled": True}
    result = launcher(client, limits=ContainerLimits(mem_limit="1g")).run(trial, None)
    assert result.oom_killed and result.exit_code == 137
    assert any("OOMKilled" in note and "1g" in note for note in result.notes)


def test_engine_lost_mid_trial_keeps_the_row(trial: TrialPaths) -> None:
    client = FakeClient()
    client.wait_script = [requests.exceptions.ConnectionError("Connection aborted")]
    client.ping_ok = False
    result = launcher(client).run(trial, None)
    assert result.exit_code is None
    assert not result.timed_out and not result.interrupted
    assert any("stopped answering" in note for note in result.notes)
    assert result.image_id == IMAGE_ID


def test_poll_timeouts_are_not_engine_failures(trial: TrialPaths) -> None:
    client = FakeClient()
    client.wait_script = [requests.exceptions.ReadTimeout("read timed out")] * 2 + [{"StatusCode": 0}]
    result = launcher(client).run(trial, None)
    assert result.exit_code == 0 and result.notes == ()


def test_time_limit_stops_the_container(trial: TrialPaths) -> None:
    client = FakeClient()
    client.wait_script = [requests.exceptions.ReadTimeout("read timed out")] * 100
    client.final_state = {"Status": "exited", "ExitCode": 143}
    result = launcher(client, kill_grace_s=1).run(trial, 0.2)
    [container] = client.containers.created
    assert result.timed_out and container.stopped and container.removed
    assert result.exit_code == 143
    assert any("time limit" in note for note in result.notes)


def test_ctrl_c_stops_the_container_and_raises(trial: TrialPaths) -> None:
    client = FakeClient()
    client.wait_script = [KeyboardInterrupt()]
    with pytest.raises(HostInterrupt) as caught:
        launcher(client).run(trial, None)
    [container] = client.containers.created
    assert container.stopped and container.removed
    assert caught.value.result.interrupted
    assert any(HOST_STOP_NOTE in note for note in caught.value.result.notes)


def test_container_of_another_image_is_not_run(trial: TrialPaths) -> None:
    client = FakeClient()
    client.container_image = OTHER_ID
    result = launcher(client).run(trial, None)
    [container] = client.containers.created
    assert result.exit_code is None and container.removed
    assert container.attrs["State"]["Status"] == "created"  # never started
    assert any("differs from the requested" in note for note in result.notes)


def test_create_failure_gives_a_result(trial: TrialPaths) -> None:
    client = FakeClient()

    def refuse(**kwargs: Any) -> None:
        raise docker.errors.APIError("no space left on device")

    client.containers.create = refuse  # type: ignore[method-assign,assignment]
    result = launcher(client).run(trial, None)
    assert result.exit_code is None and "could not create" in result.notes[0]


def test_overhead_from_the_trials_own_clock(trial: TrialPaths) -> None:
    client = FakeClient()
    original = client.containers.create

    def create(**kwargs: Any) -> FakeContainer:
        write_status(trial.trial_dir, trial_status("t", started_at="2999-01-01T00:00:00+00:00"))
        return original(**kwargs)

    client.containers.create = create  # type: ignore[method-assign]
    result = launcher(client).run(trial, None)
    assert result.launch_overhead_s is not None and result.launch_overhead_s > 0
    assert result.wall_s is not None


# -- naming the image -------------------------------------------------------------------------


def test_tags_are_refused() -> None:
    with pytest.raises(UserError, match="tags move"):
        resolve_image(FakeClient(), "isocost/cpu:latest")


def test_unknown_image_id_says_it_cannot_be_pulled() -> None:
    with pytest.raises(UserError, match="cannot be pulled"):
        resolve_image(FakeClient(images={}), OTHER_ID)


def test_digest_is_pulled_when_absent_and_checked() -> None:
    client = FakeClient(images={})
    client.images.pullable = {DIGEST: FakeImage(digests=[DIGEST])}
    image = resolve_image(client, DIGEST)
    assert image.pulled and image.ref == DIGEST and image.repo_digest == DIGEST and image.image_id == IMAGE_ID
    assert client.images.pulled == [DIGEST]


def test_digest_mismatch_is_refused() -> None:
    client = FakeClient(images={DIGEST: FakeImage(digests=["127.0.0.1:5000/isocost/cpu@sha256:" + "d" * 64])})
    with pytest.raises(UserError, match="other repo digests"):
        resolve_image(client, DIGEST)


def test_image_id_reports_its_repo_digest() -> None:
    client = FakeClient(images={IMAGE_ID: FakeImage(digests=[DIGEST])})
    launched = launcher(client)
    assert launched.image_fields() == (IMAGE_ID, IMAGE_ID, DIGEST)
    assert launched.describe()["image_digest"] == DIGEST


def test_stack_of_image_must_match_study() -> None:
    client = FakeClient(images={IMAGE_ID: FakeImage(stack="rocm")})
    with pytest.raises(UserError, match="built for stack 'rocm'"):
        launcher(client)


# -- GPU preflight ----------------------------------------------------------------------------


def test_cuda_without_toolkit_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(UserError, match="NVIDIA Container Toolkit"):
        gpu_options("cuda", FakeClient())


def test_cuda_with_toolkit_requests_one_specific_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # Was "requests all GPUs" (Count -1): issue 12 defect 4, the trial's card must be one named card.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    options = gpu_options("cuda", FakeClient(runtimes={"runc": {}, "nvidia": {}}))
    [request] = options["device_requests"]
    assert request["DeviceIDs"] == ["0"] and request["Capabilities"] == [["gpu"]]
    assert options["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"


def test_rocm_without_kfd_fails_fast() -> None:
    if Path("/dev/kfd").exists():
        pytest.skip("this host has /dev/kfd")
    with pytest.raises(UserError, match="/dev/kfd"):
        gpu_options("rocm", FakeClient())


def test_cpu_needs_no_devices() -> None:
    assert gpu_options("cpu", FakeClient()) == {}


# -- choosing the launcher --------------------------------------------------------------------

STUDY = """\
schema_version = 1
name = "pick"
question = "Which launcher?"
scenario = "offline"
[corpus]
path = "c.jsonl"
fingerprint = "sha256:{z}"
[tuning]
path = "t.jsonl"
fingerprint = "sha256:{z}"
[model]
path = "m"
fingerprint = "sha256:{z}"
[quality]
metric = "accuracy"
minimum = 0.5
tuned_on = "tuning"
reference_variant = "batch_size=1"
max_metric_drop = 0.01
min_agreement = 0.99
[warmup]
inputs = 1
runs = 1
[campaign]
repetitions = 1
""" + base_toml(32) + series_toml("[1]")


@pytest.fixture
def study(tmp_path: Path) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(STUDY.format(z="0" * 64))
    return path


def test_process_when_asked(study: Path) -> None:
    choice = choose_launcher(study, "process")
    assert choice.launcher.name == "process" and "--launcher process" in choice.notice


def test_image_with_process_is_refused(study: Path) -> None:
    with pytest.raises(UserError, match="--image needs a container launcher"):
        choose_launcher(study, "process", IMAGE_ID)


def test_auto_without_engine_falls_back_with_notice(study: Path, tmp_path: Path) -> None:
    choice = choose_launcher(study, "auto", lock_path=tmp_path / "none.lock",
                             answers=lambda timeout: (False, "connection refused"))
    assert choice.launcher.name == "process"
    assert "no Docker engine answers (connection refused)" in choice.notice


def test_auto_without_image_falls_back_with_notice(study: Path, tmp_path: Path) -> None:
    choice = choose_launcher(study, "auto", lock_path=tmp_path / "none.lock", answers=lambda timeout: (True, "20.10"))
    assert choice.launcher.name == "process"
    assert "no cpu image is known" in choice.notice and "isocost images build --stack cpu" in choice.notice


def test_docker_without_engine_is_an_error(study: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no Docker engine answers"):
        choose_launcher(study, "docker", lock_path=tmp_path / "none.lock", answers=lambda timeout: (False, "down"))


def test_docker_without_image_is_an_error(study: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no cpu image is known"):
        choose_launcher(study, "docker", lock_path=tmp_path / "none.lock", answers=lambda timeout: (True, "20.10"))


def test_unknown_launcher(study: Path) -> None:
    with pytest.raises(UserError, match="unknown launcher"):
        choose_launcher(study, "ssh")


def test_ctrl_c_before_the_trial_started_removes_the_container(trial: TrialPaths) -> None:
    client = FakeClient()
    original = client.containers.create

    def create(**kwargs: Any) -> FakeContainer:
        container = original(**kwargs)

        def interrupted() -> None:
            raise KeyboardInterrupt

        container.start = interrupted  # type: ignore[method-assign]
        return container

    client.containers.create = create  # type: ignore[method-assign]
    with pytest.raises(HostInterrupt) as caught:
        launcher(client).run(trial, None)
    [container] = client.containers.created
    assert container.removed and caught.value.result.interrupted and caught.value.result.exit_code is None


def test_a_leftover_container_is_found_by_its_label_when_launcher_json_never_named_it(tmp_path: Path) -> None:
    """The host died between create and launcher.json: --resume still finds the container by label."""
    from runner.launch.daemon.containers import TRIAL_DIR_LABEL, remove_leftover_containers

    trial_dir = tmp_path / "trials" / "t1"
    trial_dir.mkdir(parents=True)

    class Leftover:
        def __init__(self, cid: str, labels: dict[str, str]) -> None:
            self.id, self.labels, self.removed = cid, labels, False

        def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
            return f"output of {self.id[:4]}\n".encode()

        def remove(self, force: bool = False) -> None:
            assert force  # a running leftover is killed, not waited for
            self.removed = True

    mine = Leftover("a" * 64, {TRIAL_DIR_LABEL: str(trial_dir.resolve())})
    other = Leftover("b" * 64, {TRIAL_DIR_LABEL: str(tmp_path / "trials" / "t2")})

    class Containers:
        def list(self, all: bool = False, filters: dict[str, Any] | None = None) -> list[Leftover]:
            assert all  # created-but-never-started containers count too
            wanted = (filters or {})["label"]
            return [c for c in (mine, other) if f"{TRIAL_DIR_LABEL}={c.labels[TRIAL_DIR_LABEL]}" == wanted]

        def get(self, cid: str) -> Leftover:
            raise docker.errors.NotFound(cid)

    class Client:
        containers = Containers()

    assert remove_leftover_containers(trial_dir, client=Client()) == ["a" * 64]
    assert mine.removed and not other.removed
    assert (trial_dir / "trial.log").read_bytes() == b"output of aaaa\n"


def test_every_trial_container_carries_its_trial_directory_label(trial: TrialPaths) -> None:
    from runner.launch.daemon.containers import TRIAL_DIR_LABEL

    client = FakeClient()
    DockerLauncher(IMAGE_ID, client=client, user="10001:10001").run(trial, None)
    assert client.containers.created[-1].kwargs["labels"][TRIAL_DIR_LABEL] == str(trial.trial_dir.resolve())
