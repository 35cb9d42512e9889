"""A trial container on any Docker engine, local or reached over ssh: inputs and outputs travel.

:class:`~runner.launch.docker.DockerLauncher` bind-mounts host paths, which only works when the
engine runs on this machine. :class:`ShippingDockerLauncher` makes no such assumption, so a
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
  are fetched (``get_archive``), checked by :mod:`protocol.safe_extract` and compared by sha256 on
  arrival; a file whose hashes differ is not kept (the row then says why). The exchange is
  recorded in the trial's ``launcher.json`` (``transfer``);
- **the engine going away** (a dropped ssh link, a killed or restarting engine) is waited out for
  ``reconnect_s``; if the engine answers again the trial goes on (or, after a restart, ends with
  the engine's account of it); otherwise the trial's row says the host was lost, with
  ``HOST_STOP_NOTE`` so that ``--resume`` runs the pass again, and this host's campaign stops
  (:class:`HostInterrupt`) while other hosts go on.

Every row this launcher produces starts its notes with the host: ``host NAME (URL): engine
<ID>, Docker <version>``.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.fingerprint import sha256_bytes
from protocol.jsonio import write_json_atomic
from runner.campaign_dir.rawtable import HOST_STOP_NOTE
from runner.launch.base import HostInterrupt, LaunchResult, TrialPaths
from runner.launch.docker import (
    CONTAINER_IN,
    CONTAINER_MODEL,
    ContainerLimits,
    DockerLauncher,
    _docker,
    _now,
    _overhead,
    _short,
    engine_facts,
    gpu_options,
    resolve_image,
    resolve_limits,
)
from runner.launch.engines import EngineAddress, engine_identity
from runner.trial.measure import clock

#: Inside each trial container: the trial volume at /out, the trial's directory below it (a
#: volume's root belongs to root; the directory we ship belongs to the trial's user).
CONTAINER_OUT_ROOT = "/out"
TRIAL_SUBDIR = "trial"
CONTAINER_TRIAL_DIR = f"{CONTAINER_OUT_ROOT}/{TRIAL_SUBDIR}"

LABEL_KIND = "org.isocost.kind"
LABEL_CAMPAIGN = "org.isocost.campaign_dir"

#: Runs in a helper container (the trial image's python3, no isocost import needed): prints a
#: JSON listing {relative path: [sha256 hex, size]} of the regular files under argv[1].
HASH_SCRIPT = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
out = {}
for base, dirs, files in os.walk(root):
    dirs.sort()
    for name in files:
        path = os.path.join(base, name)
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            out[os.path.relpath(path, root)] = ["not a regular file", -1]
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        out[os.path.relpath(path, root).replace(os.sep, "/")] = [digest.hexdigest(), info.st_size]
print(json.dumps(out, sort_keys=True))
"""

_POLL_S = 1.0
_RECONNECT_S = 60.0


@dataclass(frozen=True)
class ShippedInputs:
    """The inputs as they sit on one host, and the proof that they are the study's."""

    volume: str
    corpus_name: str  # file name inside the volume, e.g. corpus.jsonl
    corpus_fingerprint: str
    model_fingerprint: str
    shipped: bool  # False when a verified volume was already there
    ship_s: float
    verify_s: float
    bytes_sent: int

    def to_dict(self) -> dict[str, Any]:
        return {"volume": self.volume, "corpus_name": self.corpus_name,
                "corpus_fingerprint": self.corpus_fingerprint, "model_fingerprint": self.model_fingerprint,
                "shipped": self.shipped, "ship_s": round(self.ship_s, 3), "verify_s": round(self.verify_s, 3),
                "bytes_sent": self.bytes_sent,
                "verified": "sha256 of every file computed on the host by a helper container; the corpus hash "
                            "and the model tree hash equal the study's fingerprints"}


def tree_fingerprint(listing: dict[str, list[Any]], prefix: str) -> str:
    """``protocol.fingerprint.sha256_tree`` of the files under ``prefix/`` in a host's hash listing."""
    lines = []
    for name in sorted(n for n in listing if n.startswith(prefix + "/")):
        lines.append(f"{listing[name][0]}  {name[len(prefix) + 1:]}\n")
    return sha256_bytes("".join(lines).encode("utf-8"))


class HostLost(Exception):
    """The engine stopped answering for longer than the reconnect window."""


class ShippingDockerLauncher(DockerLauncher):
    """Runs each trial in a fresh container on one engine, shipping inputs and fetching outputs."""

    name = "docker"

    def __init__(
        self,
        image: str,
        *,
        host_name: str,
        address: EngineAddress,
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
        # No super().__init__(): that one assumes a local engine (user ids, bind mounts).
        self.client = client
        self.host_name = host_name
        self.address = address
        self.stack = stack
        self.limits = resolve_limits(limits or ContainerLimits(), client.info())  # the remote machine's
        self.kill_grace_s = kill_grace_s
        self.reconnect_s = reconnect_s
        self.poll_s = poll_s
        self.campaign_dir = str(campaign_dir.resolve()) if campaign_dir is not None else ""
        self.stop_event = stop or threading.Event()
        self.extra_env = dict(extra_env or {})
        self.progress = progress or (lambda message: None)
        self.lost = ""
        self.setup_started_at = _now()
        pull_start = clock()
        self.image = resolve_image(client, image, prefer_digest=prefer_digest)
        self.image_s = clock() - pull_start
        if self.image.stack and self.image.stack != stack:
            raise UserError(f"image {self.image.ref} is built for stack {self.image.stack!r}, host {host_name} "
                            f"runs {stack!r}", "--image", f"Use the {stack} image.")
        self.user = f"{self.image.uid}:{self.image.uid}"
        self.gpu = gpu_options(stack, client, image_ref=self.image.ref, user=self.user)
        self._engine = engine_facts(client)
        self.identity = engine_identity(client)
        self.inputs: ShippedInputs | None = None
        self._inputs_checked: set[tuple[Path, Path]] = set()
        self._local_inputs: tuple[Path, Path] | None = None

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
        docker = _docker()
        corpus, model = corpus.resolve(), model.resolve()
        corpus_name = f"corpus{corpus.suffix}"
        key = hashlib.sha256(f"{corpus_fingerprint}\n{model_fingerprint}\n{corpus_name}".encode()).hexdigest()[:24]
        volume = f"isocost-inputs-{key}"
        labels = {LABEL_KIND: "inputs", "org.isocost.corpus_fingerprint": corpus_fingerprint,
                  "org.isocost.model_fingerprint": model_fingerprint}
        start = clock()
        shipped, sent = False, 0
        existing = self._volume_exists(volume)
        if existing:
            self.progress(f"inputs volume {volume} already on the host: verifying it by hash")
            ok, why, verify_s = self._verify_inputs(volume, corpus_name, corpus_fingerprint, model_fingerprint)
            if not ok:
                self.progress(f"inputs volume {volume} does not verify ({why}): shipping again")
                self._remove_volume(volume)
                existing = False
        if not existing:
            try:
                self.client.volumes.create(name=volume, labels=labels)
            except docker.errors.DockerException as exc:
                raise UserError(f"host {self.host_name}: the engine could not create volume {volume}: {_short(exc)}",
                                self.address.url, "Check the engine's disk space and permissions.") from None
            with tempfile.TemporaryFile() as archive:
                sent = _write_inputs_tar(archive, corpus, corpus_name, model)
                archive.seek(0)
                self.progress(f"shipping inputs ({sent / 2**20:.1f} MiB) to volume {volume}")
                self._fill_volume(volume, archive)
            shipped = True
            ship_s = clock() - start
            ok, why, verify_s = self._verify_inputs(volume, corpus_name, corpus_fingerprint, model_fingerprint)
            if not ok:
                self._remove_volume(volume)
                raise UserError(f"host {self.host_name}: the inputs shipped to volume {volume} do not verify on the "
                                f"host ({why})", self.address.url,
                                "Check the host's disk (and the link): run again to ship them anew.")
        else:
            ship_s = 0.0
        self.inputs = ShippedInputs(volume=volume, corpus_name=corpus_name, corpus_fingerprint=corpus_fingerprint,
                                    model_fingerprint=model_fingerprint, shipped=shipped, ship_s=ship_s,
                                    verify_s=verify_s, bytes_sent=sent)
        self._local_inputs = (corpus, model)
        self.progress(f"inputs verified on the host by sha256 (corpus {corpus_fingerprint[:19]}…, "
                      f"model {model_fingerprint[:19]}…)")
        return self.inputs

    def _volume_exists(self, name: str) -> bool:
        docker = _docker()
        try:
            self.client.volumes.get(name)
            return True
        except docker.errors.NotFound:
            return False

    def _remove_volume(self, name: str) -> bool:
        try:
            self.client.api.remove_volume(name, force=True)
            return True
        except Exception:  # gone already, or the engine is
            return False

    def _helper(self, mounts: list[Any], command: list[str], *, label: str, read_only_root: bool = True) -> Any:
        """A short-lived, locked-down container of the trial image (its python3), not started yet."""
        return self.client.containers.create(
            image=self.image.ref, entrypoint=["python3"], command=command, user=self.user, network_mode="none",
            read_only=read_only_root, mounts=mounts, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=64, labels={LABEL_KIND: label, LABEL_CAMPAIGN: self.campaign_dir}, detach=True,
            environment={"HOME": "/tmp"}, tmpfs={"/tmp": "rw,nosuid,nodev,size=16m"},
        )

    def _fill_volume(self, volume: str, archive: Any) -> None:
        docker = _docker()
        mount = docker.types.Mount(CONTAINER_IN, volume, type="volume", read_only=False)
        helper = self._helper([mount], ["-c", "pass"], label="inputs-fill")
        try:
            if not helper.put_archive(CONTAINER_IN, archive):
                raise UserError(f"host {self.host_name}: the engine refused the inputs archive", self.address.url,
                                "Check the engine's disk space.")
        finally:
            self._remove(helper)

    def _hash_listing(self, volume: str, path: str, archive: Path | None = None) -> dict[str, list[Any]]:
        """Hash the files under ``path`` of a volume ON THE HOST; with ``archive``, also fetch them there."""
        docker = _docker()
        target = CONTAINER_OUT_ROOT if path.startswith(CONTAINER_OUT_ROOT) else CONTAINER_IN
        mount = docker.types.Mount(target, volume, type="volume", read_only=True)
        helper = self._helper([mount], ["-c", HASH_SCRIPT, path], label="hash")
        try:
            helper.start()
            code = int(helper.wait(timeout=600).get("StatusCode", -1))
            if code != 0:
                err = helper.logs(stdout=False, stderr=True).decode("utf-8", "replace").strip().splitlines()
                raise RuntimeError(f"the hashing helper exited with {code}: {err[-1:] or ''}")
            out = helper.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            listing = dict(json.loads(out.strip().splitlines()[-1]))
            if archive is not None:
                bits, _ = helper.get_archive(path)
                with open(archive, "wb") as handle:
                    for chunk in bits:
                        handle.write(chunk)
            return listing
        finally:
            self._remove(helper)

    def _verify_inputs(self, volume: str, corpus_name: str, corpus_fp: str, model_fp: str) -> tuple[bool, str, float]:
        start = clock()
        try:
            listing = self._hash_listing(volume, CONTAINER_IN)
        except Exception as exc:  # the helper, or the engine, failed: the volume is not verified
            return False, f"could not hash it: {_short(exc)}", clock() - start
        problems = []
        corpus_entry = listing.get(corpus_name)
        if corpus_entry is None:
            problems.append(f"{corpus_name} missing")
        elif "sha256:" + str(corpus_entry[0]) != corpus_fp:
            problems.append(f"{corpus_name} hashes to sha256:{corpus_entry[0]}, the study says {corpus_fp}")
        model_here = tree_fingerprint(listing, "model")
        if model_here != model_fp:
            problems.append(f"model/ hashes to {model_here}, the study says {model_fp}")
        unexpected = sorted(n for n in listing if n != corpus_name and not n.startswith("model/"))
        if unexpected:
            problems.append(f"unexpected files {unexpected[:3]}")
        return not problems, "; ".join(problems), clock() - start

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

        Trial containers of this campaign still there are stopped (their logs appended to the
        trial's ``trial.log``) and removed; the outputs of a trial whose directory has no
        ``status.json`` yet are fetched and verified as usual, so that ``--resume`` records that
        trial from its real outputs.
        """
        from runner.campaign_dir.layout import read_raw

        label = f"{LABEL_CAMPAIGN}={self.campaign_dir}"
        recorded = {row["trial_id"] for row in read_raw(campaign_root / "raw.csv")}
        found: list[str] = []
        for container in self.client.containers.list(all=True, filters={"label": label}):
            trial_id = container.labels.get("org.isocost.trial_id", "")
            if container.labels.get(LABEL_KIND) == "trial" and trial_id:
                self._stop(container)
                trial_dir = campaign_root / "trials" / trial_id
                if trial_dir.is_dir() and trial_id not in recorded:
                    try:
                        with open(trial_dir / "trial.log", "ab") as log:
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
                    notes = self._fetch_outputs(volume.name, trial_dir, record)
                    found.append(f"outputs of trial {trial_id} fetched from the host"
                                 + (f" ({'; '.join(notes)})" if notes else ""))
                except Exception as exc:  # nothing to fetch, or unreadable: the row will say so
                    found.append(f"outputs of trial {trial_id} not fetched: {_short(exc)}")
            self._remove_volume(volume.name)
        return found

    # -- one trial --------------------------------------------------------------------------

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        tag = self.tag()
        if self.lost or self.stop_event.is_set():
            why = (f"host {self.host_name} was lost earlier in this campaign ({self.lost})" if self.lost
                   else "the host CLI was asked to stop (Ctrl-C or SIGTERM) before the trial started")
            raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=self.image.image_id,
                                             image_digest=self.image.repo_digest,
                                             notes=(tag, f"{HOST_STOP_NOTE}: {why}; not started")))
        trial_dir = paths.trial_dir.resolve()
        record: dict[str, Any] = {"host": self.host_name, "host_url": self.address.url,
                                  "engine_id": self.identity["engine_id"], "image_ref": self.image.ref,
                                  "image_id": self.image.image_id, "user": self.user, "limits": self.limit_facts(),
                                  "times": {}, "transfer": {}}
        times = record["times"]
        start = clock()
        times["create_at"] = _now()
        volume = f"isocost-trial-{hashlib.sha256(str(trial_dir).encode()).hexdigest()[:12]}-{trial_dir.name}"[:200]
        record["volume"] = volume
        try:
            launched = self._launch_remote(paths, trial_dir, volume, record)
        except HostLost as exc:
            return self._lost(str(exc), record, trial_dir, tag, container=None)
        if isinstance(launched, LaunchResult):
            self._remove_volume(volume)
            return LaunchResult(exit_code=None, image_id=launched.image_id, image_digest=launched.image_digest,
                                notes=(tag, *launched.notes))
        times["started_at"] = _now()
        outcome = self._wait(launched, start, timeout_s)
        wall = clock() - start
        times["exit_seen_at"] = _now()
        if outcome.get("engine_lost"):
            return self._lost(str(outcome.get("reason")), record, trial_dir, tag, container=launched)
        notes: list[str] = [tag]
        if outcome.get("vanished"):
            notes.append("the container disappeared from the engine during the trial (removed by someone else)")
        if outcome.get("gap_s"):
            notes.append(f"the engine did not answer for {outcome['gap_s']:.0f} s during the trial "
                         f"({outcome.get('gap_reason')}); it answered again")
        try:
            notes.extend(self._fetch_outputs(volume, trial_dir, record))
        except Exception as exc:  # the engine went away between the exit and the transfer
            notes.append(f"outputs not fetched from the host: {_short(exc)} (volume {volume} kept there)")
            record["transfer"]["error"] = _short(exc)
        times["fetched_at"] = _now()
        state, collect_notes = self._collect(launched, paths, outcome)
        notes.extend(collect_notes)
        times["collected_at"] = _now()
        if not record["transfer"].get("error"):
            self._remove_volume(volume)
        record["state"] = state
        record["outcome"] = outcome
        write_json_atomic(trial_dir / "launcher.json", record)
        exit_code = outcome.get("exit_code")
        if exit_code is None and state.get("ExitCode") is not None:
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

    def _launch_remote(self, paths: TrialPaths, trial_dir: Path, volume: str, record: dict[str, Any]) -> Any:
        """Volume, container, spec shipped and read back, start; a LaunchResult instead when that fails."""
        docker = _docker()
        container = None
        try:
            self.client.volumes.create(name=volume, labels={LABEL_KIND: "trial", LABEL_CAMPAIGN: self.campaign_dir,
                                                            "org.isocost.trial_id": trial_dir.name})
            container = self.client.containers.create(**self._create_kwargs(paths, trial_dir, volume))
        except docker.errors.DockerException as exc:
            if container is not None:
                self._remove(container)
            self._raise_if_lost(exc)
            return self._result_without_container(f"the engine could not create the container: {_short(exc)}",
                                                  record, trial_dir)
        except _transport_errors() as exc:
            self._raise_if_lost(exc)
            raise
        record["container_id"] = container.id
        record["container_name"] = container.name
        write_json_atomic(trial_dir / "launcher.json", record)
        try:
            running_image = (container.attrs or {}).get("Image", "")
            if running_image != self.image.image_id:
                self._remove(container)
                return self._result_without_container(
                    f"the container's image {running_image} differs from the requested {self.image.ref} "
                    f"({self.image.image_id}): not run", record, trial_dir)
            sent = _trial_tar(trial_dir, self.image.uid)
            record["transfer"]["sent"] = sent.digests
            if not container.put_archive(CONTAINER_OUT_ROOT, sent.data):
                self._remove(container)
                return self._result_without_container("the engine refused the trial's spec archive", record, trial_dir)
            back = _read_back(container, f"{CONTAINER_TRIAL_DIR}/spec.json")
            record["transfer"]["spec_read_back"] = back
            if back != sent.digests["spec.json"]:
                self._remove(container)
                return self._result_without_container(
                    f"spec.json read back from the host hashes to {back}, not {sent.digests['spec.json']}: not run",
                    record, trial_dir)
            container.start()
        except (docker.errors.DockerException, *_transport_errors()) as exc:
            self._remove(container)
            self._raise_if_lost(exc)
            return self._result_without_container(f"the engine could not start the container: {_short(exc)}",
                                                  record, trial_dir)
        return container

    def _raise_if_lost(self, exc: BaseException) -> None:
        if not self._answers_within(self.reconnect_s):
            raise HostLost(f"the engine stopped answering ({_short(exc)})")

    def _answers_within(self, seconds: float) -> bool:
        deadline = clock() + seconds
        while True:
            if self._engine_answers():
                return True
            if clock() >= deadline or self.stop_event.is_set():
                return False
            time.sleep(min(self.poll_s * 2, 5.0))

    def _lost(self, reason: str, record: dict[str, Any], trial_dir: Path, tag: str, container: Any) -> LaunchResult:
        """The host is gone: record the trial as interrupted by that, and stop this host's campaign."""
        self.lost = reason
        cid = f" (container {container.id[:12]} may still run there)" if container is not None else ""
        note = (f"host {self.host_name} lost during the trial: {reason}; no answer for {self.reconnect_s:g} s"
                f"{cid}; outputs not fetched; {HOST_STOP_NOTE} for this host: its campaign stops here and "
                "--resume runs this pass again")
        record["error"] = note
        write_json_atomic(trial_dir / "launcher.json", record)
        self.progress(f"LOST: {reason}")
        raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, image_id=self.image.image_id,
                                         image_digest=self.image.repo_digest, notes=(tag, note)))

    def _create_kwargs(self, paths: TrialPaths, trial_dir: Path, volume: str = "") -> dict[str, Any]:  # type: ignore[override]
        docker = _docker()
        kwargs = super()._create_kwargs(paths, trial_dir)
        assert self.inputs is not None
        kwargs["mounts"] = [
            docker.types.Mount(CONTAINER_IN, self.inputs.volume, type="volume", read_only=True),
            docker.types.Mount(CONTAINER_OUT_ROOT, volume, type="volume", read_only=False),
        ]
        kwargs["command"] = [f"{CONTAINER_TRIAL_DIR}/spec.json", CONTAINER_TRIAL_DIR]
        kwargs["labels"] = {**kwargs["labels"], LABEL_KIND: "trial", LABEL_CAMPAIGN: self.campaign_dir,
                            "org.isocost.host": self.host_name}
        return kwargs

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
            except _docker().errors.NotFound:
                return {"exit_code": None, "vanished": True, "gap_s": gap, "gap_reason": gap_reason}
            except Exception as exc:  # the link or the engine: wait for it, up to reconnect_s
                now = clock()
                if silent_since is None:
                    silent_since, reason = now, _short(exc)
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

    # -- outputs ----------------------------------------------------------------------------

    def _fetch_outputs(self, volume: str, trial_dir: Path, record: dict[str, Any]) -> list[str]:
        """Hash the trial's outputs on the host, fetch them, check them on arrival; keep what verifies."""
        from protocol.safe_extract import read_archive

        transfer = record["transfer"]
        start = clock()
        notes: list[str] = []
        with tempfile.TemporaryDirectory(prefix="isocost-fetch-") as scratch:
            archive = Path(scratch) / "out.tar"
            listing = self._hash_listing(volume, CONTAINER_TRIAL_DIR, archive)
            transfer["host_sha256"] = {name: f"sha256:{entry[0]}" for name, entry in sorted(listing.items())}
            landed = Path(scratch) / "landed"
            landed.mkdir()
            digests = read_archive(archive, dest=landed)
            prefix = TRIAL_SUBDIR + "/"
            arrived = {name[len(prefix):]: d.sha256 for name, d in digests.items() if name.startswith(prefix)}
            transfer["arrived_sha256"] = dict(sorted(arrived.items()))
            transfer["fetch_s"] = round(clock() - start, 3)
            sent = transfer.get("sent", {})
            bad = []
            for name in sorted(set(arrived) | set(transfer["host_sha256"])):
                host_hash = transfer["host_sha256"].get(name)
                if arrived.get(name) != host_hash:
                    bad.append(name)
                    continue
                if name in sent:
                    if sent[name] != host_hash:
                        bad.append(name)
                    continue  # our own file (spec.json): already here
                target = trial_dir / name
                if target.exists():
                    notes.append(f"output {name} not kept: a file of that name is already in the trial directory")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(landed / TRIAL_SUBDIR / name), target)
            transfer["verified"] = not bad
            if bad:
                transfer["mismatched"] = bad
                notes.append(f"outputs whose hash on arrival differs from the host's (not kept): {', '.join(bad)}")
        return notes


class _Sent:
    def __init__(self, data: bytes, digests: dict[str, str]) -> None:
        self.data = data
        self.digests = digests


def _trial_tar(trial_dir: Path, uid: int) -> _Sent:
    """``trial/`` (owned by the trial's user) and the files already in the trial directory (spec.json)."""
    buffer = io.BytesIO()
    digests: dict[str, str] = {}
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        top = tarfile.TarInfo(TRIAL_SUBDIR)
        top.type, top.mode, top.uid, top.gid, top.mtime = tarfile.DIRTYPE, 0o755, uid, uid, int(time.time())
        tar.addfile(top)
        for path in sorted(p for p in trial_dir.iterdir() if p.is_file() and p.name not in ("launcher.json",
                                                                                             "trial.log")):
            data = path.read_bytes()
            info = tarfile.TarInfo(f"{TRIAL_SUBDIR}/{path.name}")
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), 0o644, uid, uid, int(time.time())
            tar.addfile(info, io.BytesIO(data))
            digests[path.name] = sha256_bytes(data)
    return _Sent(buffer.getvalue(), digests)


def _read_back(container: Any, path: str) -> str:
    """sha256 of one file as the engine holds it (read back through the archive API)."""
    bits, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(bits))) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    return sha256_bytes(handle.read())
    return ""


def _write_inputs_tar(handle: Any, corpus: Path, corpus_name: str, model: Path) -> int:
    """corpus<suffix> and model/… as a tar, readable by anyone (modes are not part of a fingerprint)."""
    with tarfile.open(fileobj=handle, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(path: Path, name: str) -> None:
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_dir():
                tar.addfile(info)
            else:
                with open(path, "rb") as source:
                    tar.addfile(info, source)

        add(corpus, corpus_name)
        add(model, "model")
        for path in sorted(model.rglob("*"), key=lambda p: p.relative_to(model).as_posix()):
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise UserError("the model directory holds a link or a special file", str(path),
                                "Replace it by the file itself: a fingerprint describes bytes that are there.")
            add(path, f"model/{path.relative_to(model).as_posix()}")
    size = handle.tell()
    return int(size)


def _transport_errors() -> tuple[type[BaseException], ...]:
    import requests

    return (requests.exceptions.RequestException, OSError, ConnectionError)


__all__ = ["HASH_SCRIPT", "ShippedInputs", "ShippingDockerLauncher", "tree_fingerprint"]
