"""GPU device requests and group ids reaching ``containers.create``, with fake local and remote engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

docker = pytest.importorskip("docker")

from test_docker_launcher_logic import IMAGE_ID, FakeClient, FakeContainer, FakeImage  # noqa: E402

from runner.launch.daemon.amd_cards import read_topology  # noqa: E402
from runner.launch.daemon.gpu import gpu_options  # noqa: E402
from runner.launch.kinds.docker.launcher import DockerLauncher  # noqa: E402
from runner.launch.launcher import TrialPaths  # noqa: E402

HOST_GIDS = {"/dev/kfd": 993, "/dev/dri/card0": 44, "/dev/dri/card1": 44, "/dev/dri/renderD128": 109,
             "/dev/dri/renderD129": 110}
#: Two cards behind a CPU node, as the amdgpu driver lists them in /sys/class/kfd/kfd/topology/nodes.
HOST_TOPOLOGY = {
    "0": {"gpu_id": "0\n", "properties": "cpu_cores_count 64\nsimd_count 0\ndrm_render_minor 0\n"},
    "1": {"gpu_id": "4321\n", "properties": "simd_count 304\ndrm_render_minor 128\nunique_id 11400704181476294833\n"},
    "2": {"gpu_id": "8765\n", "properties": "simd_count 304\ndrm_render_minor 129\nunique_id 42\n"},
}


class GroupHelper(FakeContainer):
    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        if self.kwargs.get("labels", {}).get("org.isocost.kind") == "gpu-groups":
            facts = {"gids": self.client.host_gids, "topology": self.client.host_topology}
            return (json.dumps(facts) + "\n").encode() if stdout else b""
        return super().logs(stdout, stderr)


class RemoteApi:
    base_url = "http+docker://ssh"  # what docker-py sets for ssh:// daemons


class FakeRemote(FakeClient):
    def __init__(self, host_gids: dict[str, int], topology: dict[str, dict[str, str]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(images={IMAGE_ID: FakeImage(stack=kwargs.pop("stack", "rocm"))}, **kwargs)
        self.api = RemoteApi()
        self.host_gids = host_gids
        self.host_topology = HOST_TOPOLOGY if topology is None else topology
        self.containers.create = self._create  # type: ignore[method-assign]

    def _create(self, **kwargs: Any) -> GroupHelper:
        container = GroupHelper(self, kwargs)
        self.containers.created.append(container)
        return container


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


@pytest.fixture(autouse=True)
def no_host_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def test_remote_rocm_groups_are_the_hosts_numeric_gids_read_on_that_host(trial: TrialPaths) -> None:
    client = FakeRemote(HOST_GIDS)
    launched = DockerLauncher(IMAGE_ID, client=client, stack="rocm", user="10001:10001")
    [helper] = client.containers.created
    kw = helper.kwargs
    # the helper: the trial image, the GPU nodes as devices, locked down, runs as the trial's user
    assert kw["image"] == IMAGE_ID and kw["user"] == "10001:10001"
    assert kw["devices"] == ["/dev/kfd:/dev/kfd:r", "/dev/dri:/dev/dri:r"]
    assert kw["network_mode"] == "none" and kw["read_only"] is True and kw["cap_drop"] == ["ALL"]
    assert helper.removed
    launched.run(trial, None)
    created = client.containers.created[-1].kwargs
    assert created["group_add"] == ["109", "993"]  # numbers, never the names "video"/"render"
    # card 0 only: /dev/kfd and its one render node, not the whole of /dev/dri
    assert created["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD128:/dev/dri/renderD128:rwm"]
    assert "seccomp=unconfined" in created["security_opt"]
    assert launched.describe()["gpu_devices"] == "0 (/dev/dri/renderD128)"


def test_shipping_launcher_reads_remote_groups_before_any_trial() -> None:
    client = FakeRemote(HOST_GIDS)
    options = gpu_options("rocm", client, image_ref=IMAGE_ID, user="10001:10001")
    assert options["group_add"] == ["109", "993"]


def test_remote_rocm_without_kfd_fails_fast_naming_it() -> None:
    from protocol.errors import UserError

    with pytest.raises(UserError, match="no readable /dev/kfd"):
        gpu_options("rocm", FakeRemote({"/dev/dri/card0": 44}), image_ref=IMAGE_ID, user="10001:10001")


def test_local_rocm_groups_come_from_the_device_nodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    for name in ("kfd", "dri/card0", "dri/renderD128"):
        (dev / name).write_text("")
    os.chown(dev / "kfd", -1, 993)
    os.chown(dev / "dri/card0", -1, 44)
    os.chown(dev / "dri/renderD128", -1, 993)
    real = Path

    def fake_path(text: str = "", *more: str) -> Path:
        return real(str(dev) + text[len("/dev"):]) if text.startswith("/dev/") else real(text, *more)

    monkeypatch.setattr("runner.launch.daemon.gpu.Path", fake_path)
    nodes = tmp_path / "sys" / "nodes"
    for node, files in HOST_TOPOLOGY.items():
        (nodes / node).mkdir(parents=True)
        for name, text in files.items():
            (nodes / node / name).write_text(text)
    (dev / "dri/renderD129").write_text("")
    os.chown(dev / "dri/renderD129", -1, 994)
    monkeypatch.setattr("runner.launch.daemon.gpu.read_topology", lambda: read_topology(nodes))
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    options = gpu_options("rocm", FakeClient())
    assert options["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD129:/dev/dri/renderD129:rwm"]
    assert options["group_add"] == ["993", "994"]  # the two nodes given, each by its number


def test_cuda_requests_one_specific_card_and_does_not_pass_the_host_index(
        trial: TrialPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-6f1c5f1a-2b3c-4d5e-8f90-0123456789ab,GPU-other")
    client = FakeClient(images={IMAGE_ID: FakeImage(stack="cuda")}, runtimes={"runc": {}, "nvidia": {}})
    launched = DockerLauncher(IMAGE_ID, client=client, stack="cuda", user="10001:10001")
    launched.run(trial, None)
    kw = client.containers.created[-1].kwargs
    [request] = kw["device_requests"]
    assert request["DeviceIDs"] == ["GPU-6f1c5f1a-2b3c-4d5e-8f90-0123456789ab"]
    assert request.get("Count") in (None, 0)  # not "all GPUs"
    assert "CUDA_VISIBLE_DEVICES" not in kw["environment"]  # inside, the requested card is the only one
    assert launched.describe()["gpu_devices"] == "GPU-6f1c5f1a-2b3c-4d5e-8f90-0123456789ab"


def test_cuda_without_a_choice_requests_card_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    [request] = gpu_options("cuda", FakeClient(runtimes={"nvidia": {}}))["device_requests"]
    assert request["DeviceIDs"] == ["0"]


def test_shipping_launcher_create_call_on_a_fake_remote_has_numeric_groups(trial: TrialPaths) -> None:
    from runner.launch.daemon.address import DaemonAddress
    from runner.launch.kinds.docker.remote import ShippingDockerLauncher
    from runner.launch.kinds.docker.transfer import ShippedInputs

    client = FakeRemote(HOST_GIDS)
    client.api.api_version = "1.41"  # type: ignore[attr-defined]
    launched = ShippingDockerLauncher(IMAGE_ID, host_name="mi300", address=DaemonAddress("ssh://u@203.0.113.7"),
                                      client=client, stack="rocm")
    [helper] = client.containers.created
    assert helper.kwargs["labels"]["org.isocost.kind"] == "gpu-groups"
    assert helper.kwargs["user"] == launched.user  # the trial's own user, not root
    launched.inputs = ShippedInputs(volume="isocost-inputs-x", corpus_name="corpus.jsonl", corpus_fingerprint="a",
                                    model_fingerprint="b", shipped=True, ship_s=0.0, verify_s=0.0, bytes_sent=0)
    kwargs = launched._create_kwargs(trial, trial.trial_dir)
    assert kwargs["group_add"] == ["109", "993"]
    assert kwargs["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD128:/dev/dri/renderD128:rwm"]
    assert "seccomp=unconfined" in kwargs["security_opt"]
    assert launched.describe()["gpu_groups"] == "109,993"


def test_rocm_container_gets_the_card_the_host_chose_and_not_the_host_index(
        trial: TrialPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "GPU-000000000000002a,0")  # card 1, by its UUID
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0")
    client = FakeRemote(HOST_GIDS)
    launched = DockerLauncher(IMAGE_ID, client=client, stack="rocm", user="10001:10001")
    launched.run(trial, None)
    kw = client.containers.created[-1].kwargs
    assert kw["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri/renderD129:/dev/dri/renderD129:rwm"]
    assert kw["group_add"] == ["110", "993"]
    # inside, the card given is device 0: no host index reaches the container
    assert not {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"} & set(kw["environment"])


def test_rocm_card_not_on_the_host_is_refused_naming_the_cards_there(monkeypatch: pytest.MonkeyPatch) -> None:
    from protocol.errors import UserError

    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2")
    with pytest.raises(UserError, match=r"AMD card '2' .* has 0 \(GPU-9e37700cae3480b1, /dev/dri/renderD128\), "
                                        r"1 \(GPU-000000000000002a, /dev/dri/renderD129\)"):
        gpu_options("rocm", FakeRemote(HOST_GIDS), image_ref=IMAGE_ID, user="10001:10001")


def test_rocm_host_without_a_gpu_in_its_topology_is_refused() -> None:
    from protocol.errors import UserError

    cpu_only = {"0": HOST_TOPOLOGY["0"]}
    with pytest.raises(UserError, match="lists no AMD GPU in its KFD topology"):
        gpu_options("rocm", FakeRemote(HOST_GIDS, cpu_only), image_ref=IMAGE_ID, user="10001:10001")


def test_rocm_render_node_named_by_the_topology_but_missing_is_refused() -> None:
    from protocol.errors import UserError

    gids = {key: value for key, value in HOST_GIDS.items() if key != "/dev/dri/renderD128"}
    with pytest.raises(UserError, match="no such device node"):
        gpu_options("rocm", FakeRemote(gids), image_ref=IMAGE_ID, user="10001:10001")
