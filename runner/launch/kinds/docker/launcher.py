"""Docker launcher: each trial in a fresh, locked-down container of a pinned image.

One container per trial, through the Docker SDK:

- no network (``network_mode="none"``), read-only root filesystem, a small tmpfs on /tmp;
- the corpus file and the model directory bind-mounted read-only at fixed paths
  (``/in/corpus<suffix>``, ``/in/model``); only the trial directory is writable (``/out``);
- a non-root user, every capability dropped, ``no-new-privileges``, a pids limit, the study's
  time limit (SIGTERM, then SIGKILL after a grace period);
- a memory limit (no swap), a CPU limit and bounds on what a trial may write (every file, /tmp,
  the daemon's copy of its log): :mod:`runner.launch.daemon.limits`;
- an allow-list of environment variables (the offline switches of the process launcher, plus
  ``ISOCOST_FAULT_INJECT`` and a few thread/device variables when the host sets them);
- GPU access per stack (:mod:`runner.launch.daemon.gpu`); a host without the stack gets a fast, clear
  error before any trial starts.

The image is named exactly: by image ID (``sha256:…``, the config digest) or by repo digest
(``REPO@sha256:…``, pulled if absent). Both are resolved before the first trial, so the spec,
and thus every manifest and raw row, carries them; each container's image is checked against
them. The host records the exit code, ``State.OOMKilled``, the container's logs (into
``trial.log``) and timings (``launcher.json``), then removes the container. A daemon that stops
answering mid-trial yields a result with ``exit_code=None`` and the reason in its notes: the
row is never lost. A daemon that stops answering *between* trials (a restart: ``systemctl
restart docker`` stops every container) is waited for, up to ``reconnect_s``: the trial it
stopped is collected once it answers again, with the reason in its notes; the next trial starts
only on a daemon that answers, and the campaign stops with a clear message if none does.

Daemon helpers live in :mod:`runner.launch.daemon.client`, the end of a container's life (stop,
collect, remove, record) in :mod:`runner.launch.daemon.containers`. :class:`DockerLauncher.run` is a template: the
shipping launcher (:mod:`runner.launch.kinds.docker.remote`) overrides its hooks (``_new_record``,
``_launch``, ``_wait``, ``_after_exit``, ``_mounts``, ``_command``, ``_labels``).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import UserError
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.daemon.client import (
    connect_daemon,
    connection_lost,
    daemon_address,
    daemon_facts,
    docker_sdk,
    resolve_image,
    short_error,
)
from runner.launch.daemon.containers import (
    CONTAINER_IN,
    CONTAINER_MODEL,
    CONTAINER_OUT,
    TRIAL_DIR_LABEL,
    collect_container,
    exit_code_after_stop,
    now_iso,
    remove_container,
    stop_container,
)
from runner.launch.daemon.gpu import gpu_options
from runner.launch.daemon.limits import ContainerLimits, cpus_text, resolve_limits
from runner.launch.kinds.docker.bind_mounts import check_readable, lend_trial_dir, return_trial_dir
from runner.launch.kinds.docker.image_modules import missing_in_image
from runner.launch.kinds.docker.leftover import stop_leftover as stop_container_leftover
from runner.launch.kinds.docker.record import DockerRecord, finish_trial
from runner.launch.kinds.process.launcher import ENV_ALLOW, ENV_FIXED
from runner.launch.launcher import HostInterrupt, LauncherBase, LaunchResult, TrialPaths
from runner.launch.launcher_file import save_record
from runner.trial.measure import clock

if TYPE_CHECKING:
    from protocol.study.load import Study

#: Host variables a container may inherit (PATH, HOME and TMPDIR are the image's own).
CONTAINER_ENV_ALLOW = tuple(name for name in ENV_ALLOW if name not in ("PATH", "HOME", "TMPDIR"))

#: What every trial container is denied (recorded in the campaign's launcher facts).
ISOLATION = "network none, read-only root, tmpfs /tmp, inputs read-only, cap-drop ALL, no-new-privileges"

_KILL_GRACE_S = 10.0
_RECONNECT_S = 60.0
_WAIT_POLL_S = 30.0


class DockerLauncher(LauncherBase):
    """Runs each trial in a new container of one exactly named image."""

    name = "docker"

    def __init__(
        self,
        image: str,
        *,
        stack: str = "cpu",
        client: Any = None,
        limits: ContainerLimits | None = None,
        user: str | None = None,
        prefer_digest: str = "",
        kill_grace_s: float = _KILL_GRACE_S,
        reconnect_s: float = _RECONNECT_S,
        gpu: bool = True,
    ) -> None:
        """``gpu=False``: no variant runs on a GPU (a CUDA image's device "cpu" trials): no card is asked for."""
        self.client = client or connect_daemon()
        self.reconnect_s = reconnect_s
        self.stack = stack
        self.limits = resolve_limits(limits or ContainerLimits(), self.client.info())  # the daemon machine's
        self.kill_grace_s = kill_grace_s
        pull_start = clock()
        self.image = resolve_image(self.client, image, prefer_digest=prefer_digest)
        self.image_s = clock() - pull_start
        if self.image.stack and self.image.stack != stack:
            raise self._stack_mismatch(stack)
        self._root_host = hasattr(os, "geteuid") and os.geteuid() == 0
        self.user = self._trial_user(user)
        if self.user.split(":")[0] in ("0", "root"):
            raise UserError("trial containers never run as root", "user", "Use a non-root uid:gid.")
        self.gpu = gpu_options(stack, self.client, image_ref=self.image.ref, user=self.user) if gpu else {}
        self._daemon = daemon_facts(self.client)
        self._inputs_checked: set[tuple[Path, Path]] = set()

    def _stack_mismatch(self, stack: str) -> UserError:
        return UserError(
            f"image {self.image.ref} is built for stack {self.image.stack!r}, the study runs {stack!r}",
            "--image",
            f"Use the {stack} image (isocost images build --stack {stack}).",
        )

    def _trial_user(self, user: str | None) -> str:
        """The container's uid:gid: as given; the image's own user when the host CLI is root; else ours."""
        if user is not None:
            return user
        if self._root_host:
            return f"{self.image.uid}:{self.image.uid}"
        return f"{os.geteuid()}:{os.getegid()}"

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
            "engine": f"Docker {self._daemon['version']} ({self._daemon['storage_driver']}, "
                      f"{self._daemon['image_store']} image store)",
            "image_ref": self.image.ref,
            "image_id": self.image.image_id,
            "image_digest": self.image.repo_digest,
            "image_id_is": "sha256 of the image config (local Image ID)",
            "image_digest_is": "REPO@sha256 of the registry manifest ('' if never pushed or pulled)",
            "stack": self.stack,
            "user": self.user,
            "isolation": ISOLATION,
            **self.limit_facts(),
        }

    def limit_facts(self) -> dict[str, str]:
        """The container limits every trial ran under, with where the memory and CPU limits came from."""
        return {
            "pids_limit": str(self.limits.pids_limit),
            "mem_limit": self.limits.mem_limit or "none",
            "mem_limit_source": self.limits.mem_limit_source,
            "cpus": cpus_text(self.limits.cpus),
            "cpus_source": self.limits.cpus_source,
            "file_size_limit_bytes": str(self.limits.file_size_bytes),
            "log_max_bytes": str(self.limits.log_max_bytes),
            "tmpfs": self._tmpfs_options(),
        }

    def _tmpfs_options(self) -> str:
        return f"rw,noexec,nosuid,nodev,size={self.limits.tmpfs_size},mode=1777"

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        self._require_daemon(paths.trial_dir.name)
        self.check_inputs(paths.corpus, paths.model)
        return self._corpus_target(paths), CONTAINER_MODEL, CONTAINER_OUT

    def _require_daemon(self, trial_id: str) -> None:
        """Start no trial on a daemon that does not answer (wait out a restart; else stop the campaign)."""
        if self._daemon_answers_anew() or self._answers_again_within(self.reconnect_s):
            return
        raise UserError(
            f"the Docker engine does not answer (waited {self.reconnect_s:g} s before trial {trial_id}); "
            "the campaign stops here, before starting that trial, and every row so far is kept",
            daemon_address(self.client),
            "Start the engine again (or let its restart finish), then continue with `isocost run --resume`.",
        )

    def _answers_again_within(self, seconds: float) -> bool:
        deadline = clock() + seconds
        while clock() < deadline:
            time.sleep(min(1.0, max(deadline - clock(), 0.0)))
            if self._daemon_answers_anew():
                return True
        return False

    def _daemon_answers_anew(self) -> bool:
        """Ping over a new connection: a daemon shutting down still answers on the ones already open."""
        with contextlib.suppress(Exception):  # a client without a pool: ping as is
            self.client.api.close()  # drops pooled connections; the next request opens a new one
        return self._daemon_answers()

    def image_fields(self) -> tuple[str, str, str]:
        return self.image.ref, self.image.image_id, self.image.repo_digest

    def preflight(self, study: Study, out: Path) -> str:
        """The study's inputs readable by the container's user through its read-only mounts; the image has every
        module the study's engines require."""
        self.check_inputs(study.corpus.path, study.model.path)
        errors = self.engine_problems({variant.engine for variant in study.variants()}) or self.scenario_problems(study)
        if errors:
            raise errors[0]
        return ""

    def engine_problems(self, engines: set[str]) -> list[UserError]:
        """The engines whose modules the image lacks (asked in a short helper container of it)."""
        return missing_in_image(self.client, self.image.image_id, self.user, engines, self.stack)

    def scenario_problems(self, study: Study) -> list[UserError]:
        """A server study's image without MLPerf LoadGen (:data:`protocol.study.traffic.SERVING_REQUIRES`)."""
        from protocol.study.traffic import SERVING_REQUIRES

        if getattr(study, "traffic", None) is None:
            return []
        return missing_in_image(self.client, self.image.image_id, self.user, (), self.stack,
                                (study.scenario, SERVING_REQUIRES))

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        stop_container_leftover(trial_dir)  # its container (by launcher.json's id or the trial label), else its process
        return None

    def summary(self) -> str:
        return f"{self.name}, image {self.image.ref} (image ID {self.image.image_id})"

    def check_line(self) -> tuple[str, str]:
        return "image", f"{self.image.ref} (image ID {self.image.image_id}) is known to the engine"

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        """Launch, wait, collect (the hooks), then record how the trial ended (:func:`finish_trial`)."""
        trial_dir = paths.trial_dir.resolve()
        record = self._new_record(trial_dir)
        times = record["times"]
        owner = self._lend_trial_dir(trial_dir)
        try:
            start = clock()
            times["create_at"] = now_iso()
            launched = self._launch(paths, trial_dir, record)
            if isinstance(launched, LaunchResult):
                return launched
            times["started_at"] = now_iso()
            outcome = self._wait(launched, start, timeout_s)
            wall = clock() - start
            times["exit_seen_at"] = now_iso()
            state, notes = self._after_exit(launched, paths, outcome, record)
            times["collected_at"] = now_iso()
        finally:
            self._return_trial_dir(trial_dir, owner)
        return finish_trial(trial_dir, record, outcome, state, notes, wall_s=wall, image_id=self.image.image_id,
                            image_digest=self.image.repo_digest, mem_limit=self.limits.mem_limit)

    # -- hooks of run() ---------------------------------------------------------------------

    def _new_record(self, trial_dir: Path) -> dict[str, Any]:
        """The trial's launcher.json as it starts."""
        return {"image_ref": self.image.ref, "image_id": self.image.image_id, "user": self.user,
                "limits": self.limit_facts(), "times": {}}

    def _launch(self, paths: TrialPaths, trial_dir: Path, record: dict[str, Any]) -> Any:
        """Create, check and start the container; a LaunchResult instead when that fails."""
        import requests

        # The SDK lets connection errors (a daemon gone between two calls) through unwrapped.
        daemon_errors = (docker_sdk().errors.DockerException, requests.exceptions.RequestException)
        container = None
        try:
            try:
                container = self.client.containers.create(**self._create_kwargs(paths, trial_dir))
            except daemon_errors as exc:
                return self._result_without_container(
                    f"the engine could not create the container: {short_error(exc)}", record, trial_dir)
            record["container_id"] = container.id
            record["container_name"] = container.name
            save_record(trial_dir, record, DockerRecord)
            refused = self._refuse_other_image(container, record, trial_dir)
            if refused is not None:
                return refused
            try:
                container.start()
            except daemon_errors as exc:
                self._remove(container)
                return self._result_without_container(
                    f"the engine could not start the container: {short_error(exc)}", record, trial_dir)
            return container
        except KeyboardInterrupt:
            if container is not None:
                self._remove(container)
            result = self._result_without_container(f"{HOST_STOP_NOTE} (Ctrl-C or SIGTERM before the trial started)",
                                                    record, trial_dir)
            raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=result.image_id,
                                             image_digest=result.image_digest, notes=result.notes)) from None

    def _refuse_other_image(self, container: Any, record: dict[str, Any], trial_dir: Path) -> LaunchResult | None:
        """Remove a created container whose image is not the requested one; None when it is."""
        running_image = (container.attrs or {}).get("Image", "")
        if running_image == self.image.image_id:
            return None
        self._remove(container)
        return self._result_without_container(
            f"the container's image {running_image} differs from the requested {self.image.ref} "
            f"({self.image.image_id}): not run", record, trial_dir)

    def _wait(self, container: Any, start: float, timeout_s: float | None) -> dict[str, Any]:
        """Wait for the exit; stop on timeout or Ctrl-C; notice a daemon that stops answering."""
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
            except (requests.exceptions.RequestException, docker_sdk().errors.DockerException) as exc:
                if self._daemon_answers():
                    continue  # only the poll timed out
                return {"engine_lost": True, "exit_code": None, "reason": short_error(exc)}

    def _after_exit(self, container: Any, paths: TrialPaths, outcome: dict[str, Any],
                    record: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(final state, notes) once the container has exited: collected, removed; a daemon gap waited out."""
        self._collect_failure: BaseException | None = None
        state, notes = self._collect(container, paths, outcome)
        if connection_lost(self._collect_failure):
            state, notes = self._collect_after_daemon_gap(container, paths, outcome, state, notes)
        return state, notes

    def _mounts(self, paths: TrialPaths, trial_dir: Path) -> list[Any]:
        """Inputs read-only, the trial directory writable: bind mounts of this machine's paths."""
        Mount = docker_sdk().types.Mount
        return [
            Mount(self._corpus_target(paths), str(paths.corpus.resolve()), type="bind", read_only=True),
            Mount(CONTAINER_MODEL, str(paths.model.resolve()), type="bind", read_only=True),
            Mount(CONTAINER_OUT, str(trial_dir), type="bind", read_only=False),
        ]

    def _command(self) -> list[str]:
        return [f"{CONTAINER_OUT}/spec.json", CONTAINER_OUT]

    def _labels(self, trial_dir: Path) -> dict[str, str]:
        return {"org.isocost.trial_id": trial_dir.name, TRIAL_DIR_LABEL: str(trial_dir)}

    # -- pieces ------------------------------------------------------------------------------

    def _collect_after_daemon_gap(self, container: Any, paths: TrialPaths, outcome: dict[str, Any],
                                  state: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], list[str]]:
        """The daemon went away as the trial ended (a daemon that stops or restarts stops its containers
        first): wait for it, up to ``reconnect_s``, then collect the container it stopped."""
        silent = clock()
        while clock() - silent < self.reconnect_s:
            if not self._answers_again_within(min(5.0, self.reconnect_s)):
                continue
            self._collect_failure = None
            state, notes = self._collect(container, paths, outcome)
            if not connection_lost(self._collect_failure):
                notes.insert(0, "the Docker engine stopped answering as the trial ended and answered again after "
                                f"{clock() - silent:.0f} s: it was stopped or restarted, and an engine that stops "
                                "stops its containers")
                return state, notes
        notes.insert(0, "the Docker engine stopped answering as the trial ended and did not answer again within "
                        f"{self.reconnect_s:g} s")
        return state, notes

    def check_inputs(self, corpus: Path, model: Path) -> None:
        """Refuse, before any trial, inputs the container's user could not read through its mounts."""
        key = (corpus.resolve(), model.resolve())
        if key not in self._inputs_checked:
            check_readable(*key, self.user, self.gpu.get("group_add", []))
            self._inputs_checked.add(key)

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
        """The locked-down container: no network, read-only root, cap-drop ALL, non-root, limits, GPU."""
        docker = docker_sdk()
        safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", trial_dir.name)[:80]
        kwargs: dict[str, Any] = {
            "image": self.image.ref,
            "command": self._command(),
            "name": f"isocost-{safe_id}-{uuid.uuid4().hex[:8]}",
            "labels": self._labels(trial_dir),
            "environment": self.environment(),
            "user": self.user,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": self._tmpfs_options()},
            "ulimits": [docker.types.Ulimit(name="fsize", soft=self.limits.file_size_bytes,
                                            hard=self.limits.file_size_bytes)],
            "log_config": docker.types.LogConfig(type="json-file", config={
                "max-size": str(self.limits.log_max_bytes), "max-file": "1"}),
            "mounts": self._mounts(paths, trial_dir),
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

    def _daemon_answers(self) -> bool:
        try:
            self.client.ping()
            return True
        except Exception:  # any failure to answer is the answer
            return False

    def _stop(self, container: Any) -> None:
        stop_container(container, self.kill_grace_s)

    def _exit_code_after_stop(self, container: Any) -> int | None:
        return exit_code_after_stop(container, self.kill_grace_s)

    def _collect(self, container: Any, paths: TrialPaths, outcome: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Logs into trial.log, the final state, then remove the container."""
        notes: list[str] = []
        state: dict[str, Any] = {}
        if outcome.get("engine_lost"):
            notes.append(f"the Docker engine stopped answering during the trial ({outcome.get('reason')}); "
                         f"exit code, OOM state and logs of container {container.id[:12]} could not be collected")
            return state, notes
        try:
            state = collect_container(container, paths.log)
        except Exception as exc:  # the daemon went away between exit and collection
            self._collect_failure = exc
            notes.append(f"logs/state of container {container.id[:12]} not collected: {short_error(exc)}")
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
        return remove_container(container)

    def _result_without_container(self, note: str, record: dict[str, Any], trial_dir: Path) -> LaunchResult:
        record["error"] = note
        save_record(trial_dir, record, DockerRecord)
        return LaunchResult(exit_code=None, image_id=self.image.image_id, image_digest=self.image.repo_digest,
                            notes=(note, record["not_saved"]) if record.get("not_saved") else (note,))

    def _lend_trial_dir(self, trial_dir: Path) -> tuple[int, int] | None:
        """As root, hand the trial directory (only it) to the container's user for the trial."""
        return lend_trial_dir(trial_dir, self.user) if self._root_host else None

    def _return_trial_dir(self, trial_dir: Path, owner: tuple[int, int] | None) -> None:
        return_trial_dir(trial_dir, owner)
