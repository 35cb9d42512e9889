"""Docker launcher: each trial in a fresh, locked-down container of a pinned image.

One container per trial, through the Docker SDK:

- no network (``network_mode="none"``), read-only root filesystem, a small tmpfs on /tmp;
- the corpus file and the model directory bind-mounted read-only at fixed paths
  (``/in/corpus<suffix>``, ``/in/model``); only the trial directory is writable (``/out``);
- a non-root user, every capability dropped, ``no-new-privileges``, a pids limit, the study's
  time limit (SIGTERM, then SIGKILL after a grace period);
- a memory limit (no swap) and a CPU limit: the study's, else derived from the machine the engine
  runs on (``docker info``: all its CPUs; its memory less max(1 GiB, 1/8) kept for the host CLI,
  the engine and the kernel), recorded in the campaign's launcher facts with where they came from;
- bounds on what a trial may write: every file at most ``file_size_bytes`` (``RLIMIT_FSIZE``: a
  write past it fails with EFBIG, on any storage driver), /tmp a ``noexec`` tmpfs of
  ``tmpfs_size``, the engine's copy of its output log at most ``log_max_bytes``;
- an allow-list of environment variables (the offline switches of the process launcher, plus
  ``ISOCOST_FAULT_INJECT`` and a few thread/device variables when the host sets them);
- GPU access per stack: NVIDIA through a device request (``--gpus all``), AMD through /dev/kfd
  and /dev/dri with the device nodes' groups and ``seccomp=unconfined``. A host without the stack
  gets a fast, clear error before any trial starts.

The image is named exactly: by image ID (``sha256:…``, the config digest) or by repo digest
(``REPO@sha256:…``, pulled if absent). Both are resolved before the first trial, so the spec,
and thus every manifest and raw row, carries them; each container's image is checked against
them. The host records the exit code, ``State.OOMKilled``, the container's logs (into
``trial.log``) and timings (``launcher.json``), then removes the container. An engine that stops
answering mid-trial yields a result with ``exit_code=None`` and the reason in its notes: the
row is never lost. An engine that stops answering *between* trials (a restart: ``systemctl
restart docker`` stops every container) is waited for, up to ``reconnect_s``: the trial it
stopped is collected once it answers again, with the reason in its notes; the next trial starts
only on an engine that answers, and the campaign stops with a clear message if none does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.jsonio import read_json, write_json_atomic
from runner.campaign_dir.rawtable import HOST_STOP_NOTE
from runner.launch.base import HostInterrupt, LaunchResult, TrialPaths
from runner.launch.process import ENV_ALLOW, ENV_FIXED
from runner.trial.measure import clock

#: Where the trial sees its inputs and its output directory.
CONTAINER_IN = "/in"
CONTAINER_MODEL = "/in/model"
CONTAINER_OUT = "/out"

#: The non-root user the images create (``org.isocost.uid`` label); used when the host CLI is root.
IMAGE_UID = 10001

#: Host variables a container may inherit (PATH, HOME and TMPDIR are the image's own).
CONTAINER_ENV_ALLOW = tuple(name for name in ENV_ALLOW if name not in ("PATH", "HOME", "TMPDIR"))

_KILL_GRACE_S = 10.0
_RECONNECT_S = 60.0
_WAIT_POLL_S = 30.0
_HEX = re.compile(r"^[0-9a-f]{12,64}$")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _docker() -> Any:
    try:
        import docker
    except ImportError:
        raise UserError(
            "the docker Python SDK is not installed",
            "--launcher docker",
            "Install it (pip install 'docker>=7'), or use --launcher process.",
        ) from None
    return docker


# -- the engine ---------------------------------------------------------------------------------


def connect_engine(timeout_s: float = 120.0, base_url: str | None = None) -> Any:
    """A docker SDK client for DOCKER_HOST (or ``base_url``); a UserError if no engine answers."""
    docker = _docker()
    try:
        if base_url:
            client = docker.DockerClient(base_url=base_url, timeout=int(timeout_s))
        else:
            client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except docker.errors.DockerException as exc:
        raise UserError(
            f"no Docker engine answers ({_short(exc)})",
            os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock",
            "Start dockerd (bash .ci/docker-setup.sh does), set DOCKER_HOST, or use --launcher process.",
        ) from None
    return client


def engine_answers(timeout_s: float = 5.0) -> tuple[bool, str]:
    """(True, engine version) if an engine answers within the timeout, else (False, why not)."""
    try:
        docker = _docker()
    except UserError as exc:
        return False, exc.what
    try:
        client = docker.from_env(timeout=max(int(timeout_s), 1))
    except docker.errors.DockerException as exc:
        return False, _short(exc)
    try:
        return True, str(client.version().get("Version", "?"))
    except Exception as exc:  # the SDK raises several unrelated types when an engine half-answers
        return False, _short(exc)
    finally:
        client.close()


def image_store(client: Any) -> str:
    """``graphdriver`` (Image ID = config digest) or ``containerd`` (Image ID = manifest/index digest)."""
    info = client.info()
    for pair in info.get("DriverStatus") or []:
        if len(pair) == 2 and "containerd.snapshotter" in str(pair[1]):
            return "containerd"
    return "graphdriver"


def engine_facts(client: Any) -> dict[str, str]:
    info = client.info()
    return {
        "version": str(info.get("ServerVersion", "")),
        "storage_driver": str(info.get("Driver", "")),
        "image_store": image_store(client),
        "cgroup": f"{info.get('CgroupDriver', '')} v{info.get('CgroupVersion', '')}",
    }


def _is_local(client: Any) -> bool:
    base = str(getattr(client.api, "base_url", ""))
    return base.startswith("http+docker://localhost") or base.startswith("http+docker://localunixsocket")


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# -- the image ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedImage:
    """An image named exactly, as the engine holds it."""

    ref: str  # what containers are created from: REPO@sha256:… or the image ID
    image_id: str  # sha256 of the config (Image ID)
    repo_digest: str  # REPO@sha256:<manifest>, "" if never pushed or pulled
    stack: str  # org.isocost.stack label, "" if the image has none
    uid: int  # org.isocost.uid label
    labels: dict[str, str] = field(default_factory=dict)
    pulled: bool = False


def resolve_image(client: Any, ref: str, *, prefer_digest: str = "", pull: bool = True) -> ResolvedImage:
    """Resolve an image ID or ``REPO@sha256:…``; pull a digest if absent. Tags are refused (they move)."""
    docker = _docker()
    ref = ref.strip()
    pulled = False
    if "@sha256:" in ref:
        digest = ref.split("@", 1)[1]
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            if not pull:
                raise UserError(f"image {ref} is not in this engine", "--image", "Pull it first.") from None
            try:
                image = client.images.pull(ref)
                pulled = True
            except docker.errors.APIError as exc:
                raise UserError(
                    f"image {ref} is not in this engine and could not be pulled: {_short(exc)}",
                    "--image",
                    "Check that the registry answers from this host and holds that digest.",
                ) from None
        digests = image.attrs.get("RepoDigests") or []
        if not any(d.split("@", 1)[1] == digest for d in digests):
            raise UserError(f"the engine's image for {ref} has other repo digests ({digests})", "--image",
                            "Remove the local image and pull the digest again.")
        repo_digest = ref
    elif ref.startswith("sha256:") or _HEX.match(ref):
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise UserError(
                f"no image with ID {ref} in this engine",
                "--image",
                "An image ID cannot be pulled from a registry; pass its repo digest (REPO@sha256:…) instead, "
                "or build it here (isocost images build).",
            ) from None
        digests = sorted(image.attrs.get("RepoDigests") or [])
        repo_digest = prefer_digest if prefer_digest in digests else (digests[0] if digests else "")
        ref = image.id
    else:
        raise UserError(
            f"{ref!r} names an image by tag, and tags move",
            "--image",
            "Name the image by repo digest (REPO@sha256:…) or image ID (sha256:…); `isocost images list` shows both.",
        )
    labels = dict((image.attrs.get("Config") or {}).get("Labels") or {})
    try:
        uid = int(labels.get("org.isocost.uid", IMAGE_UID))
    except ValueError:
        uid = IMAGE_UID
    return ResolvedImage(ref=ref, image_id=image.id, repo_digest=repo_digest, stack=labels.get("org.isocost.stack", ""),
                         uid=uid, labels=labels, pulled=pulled)


# -- GPU access per stack -----------------------------------------------------------------------


#: Read inside a helper container that was given the host's GPU device nodes: their numeric groups.
GID_SCRIPT = (
    "import glob, json, os\n"
    "nodes = ['/dev/kfd', *sorted(glob.glob('/dev/dri/*'))]\n"
    "print(json.dumps({n: os.stat(n).st_gid for n in nodes if os.path.exists(n) and not os.path.isdir(n)}))\n"
)


def cuda_device_choice() -> str:
    """The one NVIDIA card a trial container gets: the first of the host's ``CUDA_VISIBLE_DEVICES``
    (an index or a ``GPU-…`` UUID), else card 0. Inside the container it is the only card (index 0)."""
    visible = [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return visible[0] if visible else "0"


def gpu_options(stack: str, client: Any, *, image_ref: str = "", user: str = "") -> dict[str, Any]:
    """Container options that give the trial its GPU; a UserError naming what the host lacks.

    ``image_ref`` and ``user`` are needed for a remote ROCm engine: a short helper container of that
    image reads the numeric groups of ``/dev/kfd`` and ``/dev/dri/*`` on that host.
    """
    if stack == "cpu":
        return {}
    local = _is_local(client)
    if stack == "cuda":
        docker = _docker()
        runtimes = client.info().get("Runtimes") or {}
        hook = shutil.which("nvidia-container-runtime-hook") if local else None
        if "nvidia" not in runtimes and not hook:
            raise UserError(
                "the cuda stack needs NVIDIA GPUs inside containers, and this engine has no NVIDIA Container "
                f"Toolkit (docker info lists runtimes {sorted(runtimes)}, no 'nvidia'; no "
                "nvidia-container-runtime-hook on PATH)",
                "stack cuda, --launcher docker",
                "Install the NVIDIA Container Toolkit and configure dockerd (nvidia-ctk runtime configure "
                "--runtime=docker, then restart dockerd), or run on a host with NVIDIA GPUs.",
            )
        device = cuda_device_choice()
        return {
            "device_requests": [docker.types.DeviceRequest(device_ids=[device], capabilities=[["gpu"]])],
            "environment": {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
            # The container sees exactly the requested card: a host index passed through would name another.
            "drop_environment": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
            "gpu_devices": [device],
        }
    if stack == "rocm":
        kfd, dri = Path("/dev/kfd"), Path("/dev/dri")
        if local and not kfd.exists():
            raise UserError(
                "the rocm stack needs /dev/kfd, and this host has none (the amdgpu kernel driver is not loaded, "
                "or there is no AMD GPU)",
                "stack rocm, --launcher docker",
                "Install amdgpu-dkms on the host (containers share its kernel driver) and reboot, or run on a "
                "host with an AMD Instinct/Radeon GPU supported by ROCm.",
            )
        if local and not dri.is_dir():
            raise UserError("the rocm stack needs /dev/dri, and this host has none", "stack rocm",
                            "Check the amdgpu driver on the host.")
        # Groups by number, from the device nodes themselves (on the engine's host): names like "render"
        # may not exist in the image's /etc/group, and a name's id need not match the host's.
        if local:
            nodes = [kfd, *sorted(p for p in dri.iterdir() if not p.is_dir())]
            gids = {node.stat().st_gid for node in nodes}
        else:
            gids = set(remote_device_gids(client, image_ref, user).values())
        return {
            "devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"],
            "group_add": [str(g) for g in sorted(gids)],
            "security_opt": ["seccomp=unconfined"],
        }
    raise UserError(f"unknown stack {stack!r}", "study [base] stack", "Use cpu, cuda or rocm.")


def remote_device_gids(client: Any, image_ref: str, user: str) -> dict[str, int]:
    """Numeric group of each AMD GPU device node on the engine's host, read by a short helper container.

    The helper gets the nodes as devices (the engine creates them with the host's owner and group),
    runs as the trial's user with no network, a read-only root and no capabilities, and prints JSON.
    """
    where = "stack rocm, remote engine"
    if not image_ref:
        raise UserError("the rocm stack on a remote engine needs the trial image to read the GPU groups", where,
                        "Resolve the image first (this is a bug in the caller).")
    docker = _docker()
    try:
        helper = client.containers.create(
            image=image_ref, name=f"isocost-gpu-groups-{uuid.uuid4().hex[:8]}", entrypoint=["python3"],
            command=["-c", GID_SCRIPT], user=user or None,
            network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            devices=["/dev/kfd:/dev/kfd:r", "/dev/dri:/dev/dri:r"], pids_limit=16, detach=True,
            labels={"org.isocost.kind": "gpu-groups"},
        )
    except docker.errors.DockerException as exc:
        raise UserError(f"the engine could not give a container /dev/kfd and /dev/dri: {_short(exc)}", where,
                        "Check the amdgpu driver on that host (ls -l /dev/kfd /dev/dri), or run on a host with "
                        "an AMD GPU supported by ROCm.") from None
    try:
        helper.start()
        code = int(helper.wait(timeout=120).get("StatusCode", -1))
        out = helper.logs(stdout=True, stderr=False).decode("utf-8", "replace").strip().splitlines()
        gids = {str(k): int(v) for k, v in json.loads(out[-1]).items()} if code == 0 and out else {}
    except (docker.errors.DockerException, ValueError, IndexError) as exc:
        raise UserError(f"could not read the GPU device groups on the remote host: {_short(exc)}", where,
                        "Check the amdgpu driver on that host (ls -ln /dev/kfd /dev/dri).") from None
    finally:
        try:
            helper.remove(force=True)
        except Exception:  # noqa: BLE001 - best effort: the helper is labelled for later cleanup
            pass
    if "/dev/kfd" not in gids:
        raise UserError(f"the remote host has no readable /dev/kfd (helper saw {sorted(gids) or 'nothing'})", where,
                        "Install amdgpu-dkms on that host and reboot, or run on a host with an AMD GPU.")
    return gids


# -- the launcher -------------------------------------------------------------------------------


#: Every file a trial writes (predictions, logs, status) is at most this large unless the study says.
DEFAULT_FILE_SIZE_BYTES = 4 * 2**30
#: The engine keeps a trial's stdout/stderr (json-file log) up to this size; the host copies it to trial.log.
DEFAULT_LOG_MAX_BYTES = 64 * 2**20
#: Memory kept back from a derived limit: max(this, the machine's memory / 8).
RESERVED_MEMORY_BYTES = 2**30


@dataclass(frozen=True)
class ContainerLimits:
    pids_limit: int = 512
    mem_limit: str | None = None  # bytes, e.g. "8589934592"; None = derive from the engine's machine
    tmpfs_size: str = "256m"
    shm_size: str | None = None  # None = the engine's default (64 MiB)
    cpus: float | None = None  # None = derive from the engine's machine (all its CPUs)
    file_size_bytes: int = DEFAULT_FILE_SIZE_BYTES
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    mem_limit_source: str = ""  # "study", or how it was derived (set by resolve_limits)
    cpus_source: str = ""


def study_limits(campaign: Any) -> ContainerLimits:
    """The container limits a study's ``[campaign]`` table sets (memory, CPUs, largest file); the rest default."""
    return ContainerLimits(
        mem_limit=str(campaign.memory_limit_bytes) if campaign.memory_limit_bytes else None,
        cpus=campaign.cpu_limit,
        file_size_bytes=campaign.output_file_limit_bytes or DEFAULT_FILE_SIZE_BYTES,
    )


def resolve_limits(limits: ContainerLimits, info: dict[str, Any]) -> ContainerLimits:
    """Fill the memory and CPU limits the study left open from the engine machine's ``docker info``."""
    memory, memory_source = limits.mem_limit, "study"
    if memory is None and info.get("MemoryLimit") is False:
        memory_source = "none: the engine reports no memory-limit support (MemoryLimit false)"
    elif memory is None:
        total = int(info.get("MemTotal") or 0)
        if total > 0:
            kept = max(RESERVED_MEMORY_BYTES, total // 8)
            memory = str(total - kept if total - kept >= 256 * 2**20 else max(total // 2, 6 * 2**20))
            memory_source = (f"derived: the engine machine's MemTotal {total} bytes less {total - int(memory)} "
                             "kept for the host CLI, the engine and the kernel")
        else:
            memory_source = "none: the engine reported no MemTotal"
    cpus, cpus_source = limits.cpus, "study"
    if cpus is None and info.get("CpuCfsQuota") is False:
        cpus_source = "none: the engine's kernel has no CPU CFS quota (CpuCfsQuota false)"
    elif cpus is None:
        count = int(info.get("NCPU") or 0)
        if count > 0:
            cpus, cpus_source = float(count), f"derived: all {count} CPUs the engine reports (NCPU)"
        else:
            cpus_source = "none: the engine reported no NCPU"
    return replace(limits, mem_limit=memory, cpus=cpus, mem_limit_source=memory_source, cpus_source=cpus_source)


def _cpus_text(cpus: float | None) -> str:
    if cpus is None:
        return "none"
    return str(int(cpus)) if float(cpus).is_integer() else str(cpus)


class DockerLauncher:
    """Runs each trial in a new container of one exactly named image."""

    name = "docker"

    def __init__(
        self,
        image: str,
        *,
        stack: str = "cpu",
        client: Any = None,
        limits: ContainerLimits = ContainerLimits(),
        user: str | None = None,
        prefer_digest: str = "",
        kill_grace_s: float = _KILL_GRACE_S,
        reconnect_s: float = _RECONNECT_S,
    ) -> None:
        self.client = client or connect_engine()
        self.reconnect_s = reconnect_s
        self.stack = stack
        self.limits = resolve_limits(limits, self.client.info())
        self.kill_grace_s = kill_grace_s
        self.image = resolve_image(self.client, image, prefer_digest=prefer_digest)
        if self.image.stack and self.image.stack != stack:
            raise UserError(
                f"image {self.image.ref} is built for stack {self.image.stack!r}, the study runs {stack!r}",
                "--image",
                f"Use the {stack} image (isocost images build --stack {stack}).",
            )
        self._root_host = hasattr(os, "geteuid") and os.geteuid() == 0
        if user is not None:
            self.user = user
        elif self._root_host:
            self.user = f"{self.image.uid}:{self.image.uid}"
        else:
            self.user = f"{os.geteuid()}:{os.getegid()}"
        if self.user.split(":")[0] in ("0", "root"):
            raise UserError("trial containers never run as root", "user", "Use a non-root uid:gid.")
        self.gpu = gpu_options(stack, self.client, image_ref=self.image.ref, user=self.user)
        self._engine = engine_facts(self.client)
        self._inputs_checked: set[tuple[Path, Path]] = set()

    # -- the Launcher protocol --------------------------------------------------------------

    def describe(self) -> dict[str, str]:
        facts = self._describe()
        if "gpu_devices" in self.gpu:
            facts["gpu_devices"] = ",".join(self.gpu["gpu_devices"])
        if "group_add" in self.gpu:
            facts["gpu_groups"] = ",".join(self.gpu["group_add"])
        return facts

    def _describe(self) -> dict[str, str]:
        return {
            "kind": self.name,
            "engine": f"Docker {self._engine['version']} ({self._engine['storage_driver']}, "
                      f"{self._engine['image_store']} image store)",
            "image_ref": self.image.ref,
            "image_id": self.image.image_id,
            "image_digest": self.image.repo_digest,
            "image_id_is": "sha256 of the image config (local Image ID)",
            "image_digest_is": "REPO@sha256 of the registry manifest ('' if never pushed or pulled)",
            "stack": self.stack,
            "user": self.user,
            "isolation": "network none, read-only root, tmpfs /tmp, inputs read-only, cap-drop ALL, "
                         "no-new-privileges",
            **self.limit_facts(),
        }

    def limit_facts(self) -> dict[str, str]:
        """The container limits every trial ran under, with where the memory and CPU limits came from."""
        return {
            "pids_limit": str(self.limits.pids_limit),
            "mem_limit": self.limits.mem_limit or "none",
            "mem_limit_source": self.limits.mem_limit_source,
            "cpus": _cpus_text(self.limits.cpus),
            "cpus_source": self.limits.cpus_source,
            "file_size_limit_bytes": str(self.limits.file_size_bytes),
            "log_max_bytes": str(self.limits.log_max_bytes),
            "tmpfs": self._tmpfs_options(),
        }

    def _tmpfs_options(self) -> str:
        return f"rw,noexec,nosuid,nodev,size={self.limits.tmpfs_size},mode=1777"

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        self._require_engine(paths.trial_dir.name)
        self.check_inputs(paths.corpus, paths.model)
        return self._corpus_target(paths), CONTAINER_MODEL, CONTAINER_OUT

    def _require_engine(self, trial_id: str) -> None:
        """Start no trial on an engine that does not answer (wait out a restart; else stop the campaign)."""
        if self._engine_answers_anew() or self._answers_again_within(self.reconnect_s):
            return
        raise UserError(
            f"the Docker engine does not answer (waited {self.reconnect_s:g} s before trial {trial_id}); "
            "the campaign stops here, before starting that trial, and every row so far is kept",
            _engine_address(self.client),
            "Start the engine again (or let its restart finish), then continue with `isocost run --resume`.",
        )

    def _answers_again_within(self, seconds: float) -> bool:
        deadline = clock() + seconds
        while clock() < deadline:
            time.sleep(min(1.0, max(deadline - clock(), 0.0)))
            if self._engine_answers_anew():
                return True
        return False

    def _engine_answers_anew(self) -> bool:
        """Ping over a new connection: an engine shutting down still answers on the ones already open."""
        try:
            self.client.api.close()  # drops pooled connections; the next request opens a new one
        except Exception:  # noqa: BLE001  (a client without a pool: ping as is)
            pass
        return self._engine_answers()

    def image_fields(self) -> tuple[str, str, str]:
        return self.image.ref, self.image.image_id, self.image.repo_digest

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        trial_dir = paths.trial_dir.resolve()
        record: dict[str, Any] = {"image_ref": self.image.ref, "image_id": self.image.image_id,
                                  "user": self.user, "limits": self.limit_facts(), "times": {}}
        times = record["times"]
        owner = self._lend_trial_dir(trial_dir)
        try:
            start = clock()
            times["create_at"] = _now()
            launched = self._launch(paths, trial_dir, record)
            if isinstance(launched, LaunchResult):
                return launched
            times["started_at"] = _now()
            outcome = self._wait(launched, start, timeout_s)
            wall = clock() - start
            times["exit_seen_at"] = _now()
            self._collect_failure: BaseException | None = None
            state, notes = self._collect(launched, paths, outcome)
            if _connection_lost(self._collect_failure):
                state, notes = self._collect_after_engine_gap(launched, paths, outcome, state, notes)
            times["collected_at"] = _now()
        finally:
            self._return_trial_dir(trial_dir, owner)
        record["state"] = state
        record["outcome"] = outcome
        _save_record(trial_dir, record)
        if record.get("not_saved"):
            notes.append(record["not_saved"])
        exit_code = outcome.get("exit_code")
        if exit_code is None and state.get("ExitCode") is not None and not outcome.get("engine_lost"):
            exit_code = int(state["ExitCode"])
        oom = bool(state.get("OOMKilled"))
        if oom:
            notes.append("the container was killed for memory (State.OOMKilled"
                         + (f", memory limit {self.limits.mem_limit})" if self.limits.mem_limit else ")"))
        result = LaunchResult(
            exit_code=exit_code,
            timed_out=bool(outcome.get("timed_out")),
            interrupted=bool(outcome.get("interrupted")),
            oom_killed=oom,
            launch_overhead_s=_overhead(trial_dir, times["create_at"]),
            wall_s=wall,
            image_id=self.image.image_id,
            image_digest=self.image.repo_digest,
            notes=tuple(notes),
        )
        if outcome.get("interrupted"):
            raise HostInterrupt(result)
        return result

    def _collect_after_engine_gap(self, container: Any, paths: TrialPaths, outcome: dict[str, Any],
                                  state: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], list[str]]:
        """The engine went away as the trial ended (an engine that stops or restarts stops its containers
        first): wait for it, up to ``reconnect_s``, then collect the container it stopped."""
        silent = clock()
        while clock() - silent < self.reconnect_s:
            if not self._answers_again_within(min(5.0, self.reconnect_s)):
                continue
            self._collect_failure = None
            state, notes = self._collect(container, paths, outcome)
            if not _connection_lost(self._collect_failure):
                notes.insert(0, "the Docker engine stopped answering as the trial ended and answered again after "
                                f"{clock() - silent:.0f} s: it was stopped or restarted, and an engine that stops "
                                "stops its containers")
                return state, notes
        notes.insert(0, "the Docker engine stopped answering as the trial ended and did not answer again within "
                        f"{self.reconnect_s:g} s")
        return state, notes

    def _launch(self, paths: TrialPaths, trial_dir: Path, record: dict[str, Any]) -> Any:
        """Create, check and start the container; a LaunchResult instead when that fails."""
        import requests

        # The SDK lets connection errors (an engine gone between two calls) through unwrapped.
        engine_errors = (_docker().errors.DockerException, requests.exceptions.RequestException)
        container = None
        try:
            try:
                container = self.client.containers.create(**self._create_kwargs(paths, trial_dir))
            except engine_errors as exc:
                return self._result_without_container(f"the engine could not create the container: {_short(exc)}",
                                                      record, trial_dir)
            record["container_id"] = container.id
            record["container_name"] = container.name
            _save_record(trial_dir, record)
            running_image = (container.attrs or {}).get("Image", "")
            if running_image != self.image.image_id:
                self._remove(container)
                return self._result_without_container(
                    f"the container's image {running_image} differs from the requested {self.image.ref} "
                    f"({self.image.image_id}): not run", record, trial_dir)
            try:
                container.start()
            except engine_errors as exc:
                self._remove(container)
                return self._result_without_container(f"the engine could not start the container: {_short(exc)}",
                                                      record, trial_dir)
            return container
        except KeyboardInterrupt:
            if container is not None:
                self._remove(container)
            result = self._result_without_container(f"{HOST_STOP_NOTE} (Ctrl-C or SIGTERM before the trial started)",
                                                    record, trial_dir)
            raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=result.image_id,
                                             image_digest=result.image_digest, notes=result.notes)) from None

    def check_inputs(self, corpus: Path, model: Path) -> None:
        """Refuse, before any trial, inputs the container's user could not read through its mounts."""
        key = (corpus.resolve(), model.resolve())
        if key in self._inputs_checked:
            return
        uid_text, _, gid_text = self.user.partition(":")
        uid = int(uid_text) if uid_text.isdigit() else -1
        gids = {int(g) for g in (gid_text, *self.gpu.get("group_add", [])) if str(g).isdigit()}
        bad = [*unreadable_for(key[0], uid, gids), *unreadable_for(key[1], uid, gids)]
        if bad:
            first = bad[0].stat()
            raise UserError(
                f"{len(bad)} input path(s) are not readable by the trial container's user {self.user}, e.g. "
                f"{bad[0]} (mode {first.st_mode & 0o777:04o}, owner {first.st_uid}:{first.st_gid})",
                "--launcher docker",
                f"Make the inputs readable (chmod -R a+rX {key[1]} {key[0]}; modes are not part of the "
                "fingerprint, and the container mounts them read-only), or run isocost as their owner.",
            )
        self._inputs_checked.add(key)

    # -- pieces ------------------------------------------------------------------------------

    def _corpus_target(self, paths: TrialPaths) -> str:
        return f"{CONTAINER_IN}/corpus{paths.corpus.suffix}"

    def environment(self) -> dict[str, str]:
        dropped = self.gpu.get("drop_environment", ())
        env = {key: os.environ[key] for key in CONTAINER_ENV_ALLOW if key in os.environ and key not in dropped}
        env.update(ENV_FIXED)
        env.update({"HOME": "/tmp", "TMPDIR": "/tmp"})
        env.update(self.gpu.get("environment", {}))
        return env

    def _create_kwargs(self, paths: TrialPaths, trial_dir: Path) -> dict[str, Any]:
        docker = _docker()
        Mount = docker.types.Mount
        mounts = [
            Mount(self._corpus_target(paths), str(paths.corpus.resolve()), type="bind", read_only=True),
            Mount(CONTAINER_MODEL, str(paths.model.resolve()), type="bind", read_only=True),
            Mount(CONTAINER_OUT, str(trial_dir), type="bind", read_only=False),
        ]
        safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", trial_dir.name)[:80]
        kwargs: dict[str, Any] = {
            "image": self.image.ref,
            "command": [f"{CONTAINER_OUT}/spec.json", CONTAINER_OUT],
            "name": f"isocost-{safe_id}-{uuid.uuid4().hex[:8]}",
            "labels": {"org.isocost.trial_id": trial_dir.name, "org.isocost.trial_dir": str(trial_dir)},
            "environment": self.environment(),
            "user": self.user,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": self._tmpfs_options()},
            "ulimits": [docker.types.Ulimit(name="fsize", soft=self.limits.file_size_bytes,
                                            hard=self.limits.file_size_bytes)],
            "log_config": docker.types.LogConfig(type="json-file", config={
                "max-size": str(self.limits.log_max_bytes), "max-file": "1"}),
            "mounts": mounts,
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges", *self.gpu.get("security_opt", [])],
            "pids_limit": self.limits.pids_limit,
            "init": True,
            "detach": True,
        }
        if self.limits.mem_limit:
            kwargs["mem_limit"] = self.limits.mem_limit
            kwargs["memswap_limit"] = self.limits.mem_limit  # no swap: an OOM is an OOM
        if self.limits.cpus:
            kwargs["nano_cpus"] = int(round(self.limits.cpus * 10**9))
        if self.limits.shm_size:
            kwargs["shm_size"] = self.limits.shm_size
        for key in ("device_requests", "devices", "group_add"):
            if key in self.gpu:
                kwargs[key] = self.gpu[key]
        return kwargs

    def _wait(self, container: Any, start: float, timeout_s: float | None) -> dict[str, Any]:
        """Wait for the exit; stop on timeout or Ctrl-C; notice an engine that stops answering."""
        import requests

        deadline = None if timeout_s is None else start + timeout_s
        while True:
            remaining = None if deadline is None else deadline - clock()
            if remaining is not None and remaining <= 0:
                self._stop(container)
                return {"timed_out": True, "exit_code": self._exit_code_after_stop(container)}
            poll = _WAIT_POLL_S if remaining is None else max(min(_WAIT_POLL_S, remaining), 0.05)
            try:
                answer = container.wait(timeout=poll)
                return {"exit_code": answer.get("StatusCode")}
            except KeyboardInterrupt:
                self._stop(container)
                return {"interrupted": True, "exit_code": self._exit_code_after_stop(container)}
            except (requests.exceptions.RequestException, _docker().errors.DockerException) as exc:
                if self._engine_answers():
                    continue  # only the poll timed out
                return {"engine_lost": True, "exit_code": None, "reason": _short(exc)}

    def _engine_answers(self) -> bool:
        try:
            self.client.ping()
            return True
        except Exception:  # any failure to answer is the answer
            return False

    def _stop(self, container: Any) -> None:
        """SIGTERM so the trial writes its status, SIGKILL after the grace period (docker stop)."""
        try:
            container.stop(timeout=int(self.kill_grace_s))
        except Exception:  # the container may be gone, or the engine with it
            pass

    def _exit_code_after_stop(self, container: Any) -> int | None:
        try:
            return int(container.wait(timeout=self.kill_grace_s + 30).get("StatusCode"))
        except Exception:  # engine gone: the exit code is unknown
            return None

    def _collect(self, container: Any, paths: TrialPaths, outcome: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Logs into trial.log, the final state, then remove the container."""
        notes: list[str] = []
        state: dict[str, Any] = {}
        if outcome.get("engine_lost"):
            notes.append(f"the Docker engine stopped answering during the trial ({outcome.get('reason')}); "
                         f"exit code, OOM state and logs of container {container.id[:12]} could not be collected")
            return state, notes
        try:
            logs = container.logs(stdout=True, stderr=True)
            with open(paths.log, "ab") as handle:
                handle.write(logs)
            container.reload()
            raw = container.attrs.get("State") or {}
            state = {k: raw.get(k) for k in ("Status", "ExitCode", "OOMKilled", "Error", "StartedAt", "FinishedAt")}
        except Exception as exc:  # the engine went away between exit and collection
            self._collect_failure = exc
            notes.append(f"logs/state of container {container.id[:12]} not collected: {_short(exc)}")
        if outcome.get("timed_out"):
            notes.append("killed by the host at the trial time limit (docker stop: SIGTERM, then SIGKILL after "
                         f"{self.kill_grace_s:g} s)")
        if outcome.get("interrupted"):
            notes.append(f"{HOST_STOP_NOTE} (Ctrl-C or SIGTERM; container stopped)")
        if state.get("Error"):
            notes.append(f"engine error: {state['Error']}")
        if not self._remove(container):
            notes.append(f"container {container.id[:12]} could not be removed")
        return state, notes

    def _remove(self, container: Any) -> bool:
        try:
            container.remove(force=True)
            return True
        except Exception:  # already gone, or the engine is
            return False

    def _result_without_container(self, note: str, record: dict[str, Any], trial_dir: Path) -> LaunchResult:
        record["error"] = note
        _save_record(trial_dir, record)
        return LaunchResult(exit_code=None, image_id=self.image.image_id, image_digest=self.image.repo_digest,
                            notes=(note, record["not_saved"]) if record.get("not_saved") else (note,))

    def _lend_trial_dir(self, trial_dir: Path) -> tuple[int, int] | None:
        """As root, hand the trial directory (only it) to the container's user for the trial."""
        if not self._root_host:
            return None
        stat = trial_dir.stat()
        uid, _, gid = self.user.partition(":")
        os.chown(trial_dir, int(uid), int(gid or uid))
        return stat.st_uid, stat.st_gid

    def _return_trial_dir(self, trial_dir: Path, owner: tuple[int, int] | None) -> None:
        """Give the trial directory and what the container wrote back to its owner."""
        if owner is None:
            return
        for path in [trial_dir, *trial_dir.rglob("*")]:
            try:
                os.chown(path, *owner, follow_symlinks=False)
            except OSError:
                pass


def _engine_address(client: Any) -> str:
    """The engine as the user named it (unix socket path, or the API's base URL)."""
    socket_path = getattr(getattr(client.api, "_custom_adapter", None), "socket_path", "")
    if socket_path:
        return f"unix://{socket_path}"
    return str(getattr(client.api, "base_url", "")) or "--launcher docker"


def _save_record(trial_dir: Path, record: dict[str, Any]) -> None:
    """Write launcher.json; a full disk must not lose the trial's row (the failure goes into its notes)."""
    record.pop("not_saved", None)
    try:
        write_json_atomic(trial_dir / "launcher.json", record)
    except OSError as exc:
        record["not_saved"] = f"launcher.json not written: {exc.strerror}"


def _connection_lost(exc: BaseException | None) -> bool:
    """Did a call fail for want of a connection to the engine (rather than an answer from it)?"""
    import requests

    return isinstance(exc, requests.exceptions.ConnectionError)


def unreadable_for(path: Path, uid: int, gids: set[int]) -> list[Path]:
    """Paths under ``path`` that ``uid`` (with ``gids``) could not read (files) or enter (directories)."""
    items = [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]
    bad = []
    for item in items:
        stat = item.stat()
        need = 0o5 if item.is_dir() else 0o4
        if stat.st_uid == uid:
            bits = (stat.st_mode >> 6) & 0o7
        elif stat.st_gid in gids:
            bits = (stat.st_mode >> 3) & 0o7
        else:
            bits = stat.st_mode & 0o7
        if bits & need != need:
            bad.append(item)
    return bad


def _overhead(trial_dir: Path, created_at: str) -> float | None:
    """Container create → the trial's own clock start (``started_at`` in status.json)."""
    try:
        started = read_json(trial_dir / "status.json").get("started_at")
        return max((datetime.fromisoformat(started) - datetime.fromisoformat(created_at)).total_seconds(), 0.0)
    except (UserError, ValueError, TypeError, AttributeError):
        return None

