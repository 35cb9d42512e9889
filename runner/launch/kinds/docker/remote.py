"""A trial container on any Docker daemon, local or reached over ssh: inputs and outputs travel.

:class:`~runner.launch.kinds.docker.launcher.DockerLauncher` bind-mounts host paths, which only works when the
daemon runs on this machine. :class:`ShippingDockerLauncher` makes no such assumption, so a
rented host reached as ``ssh://user@host`` runs exactly the same trial:

- **the image** is named by repo digest and pulled by that digest on the host (or found there by
  image ID); the image ID and digest the host reports are what the spec, the manifest and the
  row record;
- **inputs** (the corpus file and the model directory) are shipped once per host into a data
  volume named after their fingerprints (``isocost-inputs-<hash>``), through a helper container
  (``put_archive``), then hashed ON THE HOST by that helper; the listing must give the study's
  fingerprints, else no trial starts. Trial containers mount that volume read-only at ``/in``;
- **each trial** gets a fresh volume at ``/out`` with ``trial/spec.json`` in it; the spec is read
  back from the host and compared by sha256 before the container starts;
- **outputs** come back after the exit: a helper hashes ``/out/trial`` on the host, the files
  are fetched (``get_archive``), checked by :mod:`protocol.io.safe_extract` and compared by sha256 on
  arrival; a file whose hashes differ is not kept (the row then says why). The exchange is
  recorded in the trial's ``launcher.json`` (``transfer``);
- **the daemon going away** (a dropped ssh link, a killed or restarting daemon) is waited out for
  ``reconnect_s``; if the daemon answers again the trial goes on (or, after a restart, ends with
  the daemon's account of it); otherwise the trial's row says the host was lost, with
  ``HOST_STOP_NOTE`` so that ``--resume`` runs the pass again, and this host's campaign stops
  (:class:`HostInterrupt`) while other hosts go on.

Every row this launcher produces starts its notes with the host: ``host NAME (URL): engine
<ID>, Docker <version>``.

The trial itself runs through :meth:`DockerLauncher.run`; this launcher overrides its hooks:
the record (host, daemon, transfer), the launch (trial volume, spec shipped and read back), the
wait (polling, riding out short outages) and what follows the exit (outputs fetched, volume
removed). The transfers themselves are in :mod:`runner.launch.kinds.docker.transfer`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes
from protocol.io.safe_write import write_binary
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.daemon.address import DaemonAddress
from runner.launch.daemon.client import daemon_identity, docker_sdk, short_error, transport_errors
from runner.launch.daemon.containers import CONTAINER_IN, CONTAINER_MODEL, now_iso
from runner.launch.daemon.limits import ContainerLimits
from runner.launch.kinds.docker.launcher import DockerLauncher
from runner.launch.kinds.docker.record import DockerRecord
from runner.launch.kinds.docker.transfer import (
    CONTAINER_OUT_ROOT,
    CONTAINER_TRIAL_DIR,
    LABEL_CAMPAIGN,
    LABEL_KIND,
    HostVolumes,
    ShippedInputs,
    read_back,
    trial_tar,
)
from runner.launch.launcher import HostInterrupt, LaunchResult, TrialPaths
from runner.launch.launcher_file import save_record
from runner.trial.measure import clock

_POLL_S = 1.0
_RECONNECT_S = 60.0


class HostLost(Exception):
    """The daemon stopped answering for longer than the reconnect window."""


def trial_volume(trial_dir: Path) -> str:
    """The name of a trial's output volume on the host (one per trial directory)."""
    return f"isocost-trial-{hashlib.sha256(str(trial_dir).encode()).hexdigest()[:12]}-{trial_dir.name}"[:200]


class ShippingDockerLauncher(DockerLauncher):
    """Runs each trial in a fresh container on one daemon, shipping inputs and fetching outputs."""

    name = "docker"

    def __init__(
        self,
        image: str,
        *,
        host_name: str,
        address: DaemonAddress,
        client: Any,
        stack: str = "cpu",
        limits: ContainerLimits | None = None,
        prefer_digest: str = "",
        kill_grace_s: float = 10.0,
        reconnect_s: float = _RECONNECT_S,
        poll_s: float = _POLL_S,
        campaign_dir: Path | None = None,
        stop: threading.Event | None = None,
        extra_env: dict[str, str] | None = None,
        progress: Any = None,
    ) -> None:
        self.host_name = host_name
        self.address = address
        self.poll_s = poll_s
        self.campaign_dir = str(campaign_dir.resolve()) if campaign_dir is not None else ""
        self.stop_event = stop or threading.Event()
        self.extra_env = dict(extra_env or {})
        self.progress = progress or (lambda message: None)
        self.lost = ""
        self.setup_started_at = now_iso()
        super().__init__(image, stack=stack, client=client, limits=limits, prefer_digest=prefer_digest,
                         kill_grace_s=kill_grace_s, reconnect_s=reconnect_s)
        self.identity = daemon_identity(client)
        self.volumes = HostVolumes(client, image_ref=self.image.ref, user=self.user, host_name=host_name,
                                   url=address.url, campaign_dir=self.campaign_dir, progress=self.progress)
        self.inputs: ShippedInputs | None = None
        self._local_inputs: tuple[Path, Path] | None = None

    def _stack_mismatch(self, stack: str) -> UserError:
        return UserError(f"image {self.image.ref} is built for stack {self.image.stack!r}, host {self.host_name} "
                         f"runs {stack!r}", "--image", f"Use the {stack} image.")

    def _trial_user(self, user: str | None) -> str:
        """The image's own non-root user: nothing on the host is ours to match."""
        return f"{self.image.uid}:{self.image.uid}"

    # -- what the campaign records ------------------------------------------------------------

    def tag(self) -> str:
        return (f"host {self.host_name} ({self.address.url}): engine {self.identity['engine_id']}, "
                f"Docker {self.identity['engine_version']}")

    def describe(self) -> dict[str, str]:
        facts = super().describe()
        facts.update({
            "host_name": self.host_name,
            "host_url": self.address.url,
            "engine_id": self.identity["engine_id"],
            "engine_version": self.identity["engine_version"],
            "engine_host": self.identity["name"],
            "engine_os": self.identity["os"],
            "engine_cpus": str(self.identity["cpus"]),
            "engine_memory_bytes": str(self.identity["memory_bytes"]),
            "inputs": (f"shipped to volume {self.inputs.volume} on the host, verified there by sha256"
                       if self.inputs else "not shipped yet"),
            # Rental time spent before the campaign's own setup_start event (events.jsonl):
            "host_setup_started_at": self.setup_started_at,
            "image_pulled": str(self.image.pulled).lower(),
            "image_s": f"{self.image_s:.3f}",
            "inputs_ship_s": f"{self.inputs.ship_s:.3f}" if self.inputs else "",
            "inputs_verify_s": f"{self.inputs.verify_s:.3f}" if self.inputs else "",
            "isolation": "network none, read-only root, tmpfs /tmp, inputs volume read-only, one fresh output "
                         "volume per trial, cap-drop ALL, no-new-privileges",
        })
        return facts

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.update(self.extra_env)
        return env

    # -- inputs -----------------------------------------------------------------------------

    def ship_inputs(self, corpus: Path, model: Path, corpus_fingerprint: str, model_fingerprint: str) -> ShippedInputs:
        """Put the corpus and model on the host (once per content) and verify them there by hash."""
        self.inputs = self.volumes.ship_inputs(corpus, model, corpus_fingerprint, model_fingerprint)
        self._local_inputs = (corpus.resolve(), model.resolve())
        return self.inputs

    def check_inputs(self, corpus: Path, model: Path) -> None:
        """The trial's inputs must be the ones shipped (and verified) to this host."""
        if self.inputs is None or self._local_inputs != (corpus.resolve(), model.resolve()):
            raise UserError(f"host {self.host_name}: the trial's inputs were not shipped to the host", str(corpus),
                            "Call ship_inputs() before the campaign (run_hosts does).")

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        self.check_inputs(paths.corpus, paths.model)
        assert self.inputs is not None
        return f"{CONTAINER_IN}/{self.inputs.corpus_name}", CONTAINER_MODEL, CONTAINER_TRIAL_DIR

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        """Before resuming: stop what a stopped host CLI left running on this host, fetch what it wrote.

        Trial containers of this campaign still there are stopped (their logs appended to the trial's ``trial.log``) and
        removed; the outputs of a trial whose directory has no ``status.json`` yet are fetched and verified as usual, so
        that ``--resume`` records that trial from its real outputs.
        """
        from runner.campaign_dir.layout import read_rows

        label = f"{LABEL_CAMPAIGN}={self.campaign_dir}"
        recorded = {row.trial_id for row in read_rows(campaign_root / "raw.csv")}
        found: list[str] = []
        for container in self.client.containers.list(all=True, filters={"label": label}):
            trial_id = container.labels.get("org.isocost.trial_id", "")
            if container.labels.get(LABEL_KIND) == "trial" and trial_id:
                self._stop(container)
                trial_dir = campaign_root / "trials" / trial_id
                if trial_dir.is_dir() and trial_id not in recorded:
                    try:
                        with write_binary(trial_dir / "trial.log", trial_dir, append=True) as log:
                            log.write(container.logs(stdout=True, stderr=True))
                    except Exception:  # logs are a courtesy here; the outputs matter
                        pass
                found.append(f"container {container.name} of trial {trial_id} stopped and removed")
            self._remove(container)
        for volume in self.client.volumes.list(filters={"label": [label, f"{LABEL_KIND}=trial"]}):
            trial_id = (volume.attrs.get("Labels") or {}).get("org.isocost.trial_id", "")
            trial_dir = campaign_root / "trials" / trial_id
            # Only a trial without a row: one with a row (e.g. "host lost") keeps what the row says.
            orphan = trial_id and trial_id not in recorded and trial_dir.is_dir()
            if orphan and not (trial_dir / "status.json").exists():
                spec = trial_dir / "spec.json"
                record: dict[str, Any] = {"transfer": {"sent": {"spec.json": sha256_bytes(spec.read_bytes())}
                                                       if spec.exists() else {}}}
                try:
                    notes = self.volumes.fetch_outputs(volume.name, trial_dir, record)
                    found.append(f"outputs of trial {trial_id} fetched from the host"
                                 + (f" ({'; '.join(notes)})" if notes else ""))
                except Exception as exc:  # nothing to fetch, or unreadable: the row will say so
                    found.append(f"outputs of trial {trial_id} not fetched: {short_error(exc)}")
            self.volumes.remove(volume.name)
        return found

    # -- hooks of DockerLauncher.run --------------------------------------------------------

    def _lend_trial_dir(self, trial_dir: Path) -> tuple[int, int] | None:
        """Nothing to lend: the trial directory travels to the host as a tar owned by the trial's user."""
        return None

    def _new_record(self, trial_dir: Path) -> dict[str, Any]:
        return {"host": self.host_name, "host_url": self.address.url, "engine_id": self.identity["engine_id"],
                **super()._new_record(trial_dir), "transfer": {}, "volume": trial_volume(trial_dir)}

    def _launch(self, paths: TrialPaths, trial_dir: Path, record: dict[str, Any]) -> Any:
        """Refuse on a lost or stopping host; else launch (a LaunchResult tagged with the host on failure)."""
        if self.lost or self.stop_event.is_set():
            why = (f"host {self.host_name} was lost earlier in this campaign ({self.lost})" if self.lost
                   else "the host CLI was asked to stop (Ctrl-C or SIGTERM) before the trial started")
            raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=self.image.image_id,
                                             image_digest=self.image.repo_digest,
                                             notes=(self.tag(), f"{HOST_STOP_NOTE}: {why}; not started")))
        try:
            launched = self._launch_remote(paths, trial_dir, record["volume"], record)
        except HostLost as exc:
            return self._lost(str(exc), record, trial_dir, container=None)
        if isinstance(launched, LaunchResult):
            self.volumes.remove(record["volume"])
            return LaunchResult(exit_code=None, image_id=launched.image_id, image_digest=launched.image_digest,
                                notes=(self.tag(), *launched.notes))
        return launched

    def _launch_remote(self, paths: TrialPaths, trial_dir: Path, volume: str, record: dict[str, Any]) -> Any:
        """Volume, container, spec shipped and read back, start; a LaunchResult instead when that fails."""
        docker = docker_sdk()
        container = None
        try:
            self.client.volumes.create(name=volume, labels={LABEL_KIND: "trial", LABEL_CAMPAIGN: self.campaign_dir,
                                                            "org.isocost.trial_id": trial_dir.name})
            container = self.client.containers.create(**self._create_kwargs(paths, trial_dir))
        except docker.errors.DockerException as exc:
            if container is not None:
                self._remove(container)
            self._raise_if_lost(exc)
            return self._result_without_container(f"the engine could not create the container: {short_error(exc)}",
                                                  record, trial_dir)
        except transport_errors() as exc:
            self._raise_if_lost(exc)
            raise
        record["container_id"] = container.id
        record["container_name"] = container.name
        save_record(trial_dir, record, DockerRecord)
        try:
            refused = self._refuse_other_image(container, record, trial_dir) or self._ship_spec(container, record,
                                                                                                trial_dir)
            if refused is not None:
                return refused
            container.start()
        except (docker.errors.DockerException, *transport_errors()) as exc:
            self._remove(container)
            self._raise_if_lost(exc)
            return self._result_without_container(f"the engine could not start the container: {short_error(exc)}",
                                                  record, trial_dir)
        return container

    def _ship_spec(self, container: Any, record: dict[str, Any], trial_dir: Path) -> LaunchResult | None:
        """Put the trial's files (spec.json) into its volume and read spec.json back; None when it matches."""
        sent = trial_tar(trial_dir, self.image.uid)
        record["transfer"]["sent"] = sent.digests
        if not container.put_archive(CONTAINER_OUT_ROOT, sent.data):
            self._remove(container)
            return self._result_without_container("the engine refused the trial's spec archive", record, trial_dir)
        back = read_back(container, f"{CONTAINER_TRIAL_DIR}/spec.json")
        record["transfer"]["spec_read_back"] = back
        if back != sent.digests["spec.json"]:
            self._remove(container)
            return self._result_without_container(
                f"spec.json read back from the host hashes to {back}, not {sent.digests['spec.json']}: not run",
                record, trial_dir)
        return None

    def _mounts(self, paths: TrialPaths, trial_dir: Path) -> list[Any]:
        """The verified inputs volume read-only at /in, the trial's own fresh volume at /out."""
        Mount = docker_sdk().types.Mount
        assert self.inputs is not None
        return [
            Mount(CONTAINER_IN, self.inputs.volume, type="volume", read_only=True),
            Mount(CONTAINER_OUT_ROOT, trial_volume(trial_dir), type="volume", read_only=False),
        ]

    def _command(self) -> list[str]:
        return [f"{CONTAINER_TRIAL_DIR}/spec.json", CONTAINER_TRIAL_DIR]

    def _labels(self, trial_dir: Path) -> dict[str, str]:
        return {**super()._labels(trial_dir), LABEL_KIND: "trial", LABEL_CAMPAIGN: self.campaign_dir,
                "org.isocost.host": self.host_name}

    def _wait(self, container: Any, start: float, timeout_s: float | None) -> dict[str, Any]:
        """Poll the container's state (a blocking wait has no timeout over ssh); ride out short outages."""
        deadline = None if timeout_s is None else start + timeout_s
        silent_since: float | None = None
        reason = ""
        gap = 0.0
        gap_reason = ""
        while True:
            if deadline is not None and clock() >= deadline:
                self._stop(container)
                return {"timed_out": True, "exit_code": self._exit_code_after_stop(container), "gap_s": gap,
                        "gap_reason": gap_reason}
            if self.stop_event.is_set():
                self._stop(container)
                return {"interrupted": True, "exit_code": self._exit_code_after_stop(container), "gap_s": gap,
                        "gap_reason": gap_reason}
            try:
                state = self.client.api.inspect_container(container.id).get("State") or {}
            except docker_sdk().errors.NotFound:
                return {"exit_code": None, "vanished": True, "gap_s": gap, "gap_reason": gap_reason}
            except Exception as exc:  # the link or the daemon: wait for it, up to reconnect_s
                now = clock()
                if silent_since is None:
                    silent_since, reason = now, short_error(exc)
                    self.progress(f"the engine does not answer ({reason}); waiting up to {self.reconnect_s:g} s")
                elif now - silent_since >= self.reconnect_s:
                    return {"engine_lost": True, "exit_code": None, "reason": reason}
                time.sleep(self.poll_s)
                continue
            if silent_since is not None:
                gap += clock() - silent_since
                gap_reason = reason
                self.progress(f"the engine answers again after {clock() - silent_since:.0f} s")
                silent_since = None
            if state.get("Status") in ("exited", "dead"):
                return {"exit_code": state.get("ExitCode"), "gap_s": gap, "gap_reason": gap_reason}
            time.sleep(self.poll_s)

    def _after_exit(self, container: Any, paths: TrialPaths, outcome: dict[str, Any],
                    record: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Outputs fetched and verified, the container collected, the trial volume removed once fetched."""
        trial_dir = paths.trial_dir.resolve()
        if outcome.get("engine_lost"):
            self._lost(str(outcome.get("reason")), record, trial_dir, container=container)
        notes: list[str] = [self.tag()]
        if outcome.get("vanished"):
            notes.append("the container disappeared from the engine during the trial (removed by someone else)")
        if outcome.get("gap_s"):
            notes.append(f"the engine did not answer for {outcome['gap_s']:.0f} s during the trial "
                         f"({outcome.get('gap_reason')}); it answered again")
        try:
            notes.extend(self.volumes.fetch_outputs(record["volume"], trial_dir, record))
        except Exception as exc:  # the daemon went away between the exit and the transfer
            notes.append(f"outputs not fetched from the host: {short_error(exc)} (volume {record['volume']} kept "
                         "there)")
            record["transfer"]["error"] = short_error(exc)
        record["times"]["fetched_at"] = now_iso()
        state, collect_notes = self._collect(container, paths, outcome)
        notes.extend(collect_notes)
        if not record["transfer"].get("error"):
            self.volumes.remove(record["volume"])
        return state, notes

    def _raise_if_lost(self, exc: BaseException) -> None:
        if not self._answers_within(self.reconnect_s):
            raise HostLost(f"the engine stopped answering ({short_error(exc)})")

    def _answers_within(self, seconds: float) -> bool:
        deadline = clock() + seconds
        while True:
            if self._daemon_answers():
                return True
            if clock() >= deadline or self.stop_event.is_set():
                return False
            time.sleep(min(self.poll_s * 2, 5.0))

    def _lost(self, reason: str, record: dict[str, Any], trial_dir: Path, container: Any) -> LaunchResult:
        """The host is gone: record the trial as interrupted by that, and stop this host's campaign."""
        self.lost = reason
        cid = f" (container {container.id[:12]} may still run there)" if container is not None else ""
        note = (f"host {self.host_name} lost during the trial: {reason}; no answer for {self.reconnect_s:g} s"
                f"{cid}; outputs not fetched; {HOST_STOP_NOTE} for this host: its campaign stops here and "
                "--resume runs this pass again")
        record["error"] = note
        save_record(trial_dir, record, DockerRecord)
        self.progress(f"LOST: {reason}")
        raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=self.image.image_id,
                                         image_digest=self.image.repo_digest, notes=(self.tag(), note)))


__all__ = ["HostLost", "ShippingDockerLauncher", "trial_volume"]
