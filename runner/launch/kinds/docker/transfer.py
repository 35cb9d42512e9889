"""Moving files to and from a Docker daemon that shares no disk with us, each checked by sha256.

The shipping launcher (:mod:`runner.launch.kinds.docker.remote`) uses these pieces:

- the inputs (corpus file, model directory) as one tar (:func:`write_inputs_tar`), hashed on the
  host by :data:`HASH_SCRIPT` in a helper container and checked against the study's fingerprints
  (:func:`input_problems`, :func:`tree_fingerprint`); the result is a :class:`ShippedInputs`;
- a trial's own files (spec.json) as a tar owned by the trial's user (:func:`trial_tar`), read back
  from the daemon and hashed (:func:`read_back`);
- the trial's outputs, hashed on the host and again on arrival: only files whose hashes agree are
  kept in the trial directory (:func:`keep_verified_outputs`).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes
from runner.launch.daemon.client import docker_sdk, short_error
from runner.launch.daemon.containers import CONTAINER_IN, remove_container
from runner.trial.measure import clock

LABEL_KIND = "org.isocost.kind"
LABEL_CAMPAIGN = "org.isocost.campaign_dir"

#: Inside each trial container: the trial volume at /out, the trial's directory below it (a
#: volume's root belongs to root; the directory we ship belongs to the trial's user).
CONTAINER_OUT_ROOT = "/out"
TRIAL_SUBDIR = "trial"
CONTAINER_TRIAL_DIR = f"{CONTAINER_OUT_ROOT}/{TRIAL_SUBDIR}"

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
    """``protocol.io.fingerprint.sha256_tree`` of the files under ``prefix/`` in a host's hash listing."""
    names = sorted(n for n in listing if n.startswith(prefix + "/"))
    lines = [f"{listing[name][0]}  {name[len(prefix) + 1:]}\n" for name in names]
    return sha256_bytes("".join(lines).encode("utf-8"))


def input_problems(listing: dict[str, list[Any]], corpus_name: str, corpus_fp: str, model_fp: str) -> list[str]:
    """What keeps a host's hash listing of an inputs volume from being the study's inputs ([] if nothing)."""
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
    return problems


def keep_verified_outputs(listing: dict[str, list[Any]], archive: Path, trial_dir: Path,
                          transfer: dict[str, Any], scratch: Path) -> list[str]:
    """Unpack the fetched ``archive`` in ``scratch``; move into ``trial_dir`` each output whose hash on
    arrival equals the host's (``listing``). Fills ``transfer`` (host and arrived hashes, verified,
    mismatched); returns notes for the row."""
    from protocol.io.safe_extract import read_archive

    notes: list[str] = []
    transfer["host_sha256"] = {name: f"sha256:{entry[0]}" for name, entry in sorted(listing.items())}
    landed = scratch / "landed"
    landed.mkdir()
    digests = read_archive(archive, dest=landed)
    prefix = TRIAL_SUBDIR + "/"
    arrived = {name[len(prefix):]: d.sha256 for name, d in digests.items() if name.startswith(prefix)}
    transfer["arrived_sha256"] = dict(sorted(arrived.items()))
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


@dataclass(frozen=True)
class SentFiles:
    """A tar of a trial's own files and the sha256 of each (by file name)."""

    data: bytes
    digests: dict[str, str]


def trial_tar(trial_dir: Path, uid: int) -> SentFiles:
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
    return SentFiles(buffer.getvalue(), digests)


def read_back(container: Any, path: str) -> str:
    """sha256 of one file as the daemon holds it (read back through the archive API)."""
    bits, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(bits))) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    return sha256_bytes(handle.read())
    return ""


def write_inputs_tar(handle: Any, corpus: Path, corpus_name: str, model: Path) -> int:
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


class HostVolumes:
    """The data volumes of one host: the inputs shipped and verified there, a trial's outputs fetched back.

    Every file is hashed ON THE HOST by a short, locked-down helper container of the trial image.
    """

    def __init__(self, client: Any, *, image_ref: str, user: str, host_name: str, url: str, campaign_dir: str,
                 progress: Callable[[str], None]) -> None:
        self.client = client
        self.image_ref = image_ref
        self.user = user
        self.host_name = host_name
        self.url = url
        self.campaign_dir = campaign_dir
        self.progress = progress

    def ship_inputs(self, corpus: Path, model: Path, corpus_fingerprint: str, model_fingerprint: str) -> ShippedInputs:
        """Put the corpus and model on the host (once per content) and verify them there by hash."""
        corpus, model = corpus.resolve(), model.resolve()
        corpus_name = f"corpus{corpus.suffix}"
        key = hashlib.sha256(f"{corpus_fingerprint}\n{model_fingerprint}\n{corpus_name}".encode()).hexdigest()[:24]
        volume = f"isocost-inputs-{key}"
        fingerprints = (corpus_name, corpus_fingerprint, model_fingerprint)
        start = clock()
        shipped, sent, ship_s = False, 0, 0.0
        verified = self._verified_volume(volume, *fingerprints)
        if verified is None:
            sent = self._ship_into_new_volume(volume, corpus, model, *fingerprints)
            shipped, ship_s = True, clock() - start
            ok, why, verify_s = self._verify_inputs(volume, *fingerprints)
            if not ok:
                self.remove(volume)
                raise UserError(f"host {self.host_name}: the inputs shipped to volume {volume} do not verify on the "
                                f"host ({why})", self.url,
                                "Check the host's disk (and the link): run again to ship them anew.")
        else:
            verify_s = verified
        self.progress(f"inputs verified on the host by sha256 (corpus {corpus_fingerprint[:19]}…, "
                      f"model {model_fingerprint[:19]}…)")
        return ShippedInputs(volume=volume, corpus_name=corpus_name, corpus_fingerprint=corpus_fingerprint,
                             model_fingerprint=model_fingerprint, shipped=shipped, ship_s=ship_s,
                             verify_s=verify_s, bytes_sent=sent)

    def _verified_volume(self, volume: str, corpus_name: str, corpus_fp: str, model_fp: str) -> float | None:
        """The verify time when an inputs volume already on the host holds the study's inputs; else None
        (a volume that does not verify is removed)."""
        if not self.exists(volume):
            return None
        self.progress(f"inputs volume {volume} already on the host: verifying it by hash")
        ok, why, verify_s = self._verify_inputs(volume, corpus_name, corpus_fp, model_fp)
        if ok:
            return verify_s
        self.progress(f"inputs volume {volume} does not verify ({why}): shipping again")
        self.remove(volume)
        return None

    def _ship_into_new_volume(self, volume: str, corpus: Path, model: Path, corpus_name: str, corpus_fp: str,
                              model_fp: str) -> int:
        """Create the inputs volume and fill it; the bytes sent."""
        labels = {LABEL_KIND: "inputs", "org.isocost.corpus_fingerprint": corpus_fp,
                  "org.isocost.model_fingerprint": model_fp}
        try:
            self.client.volumes.create(name=volume, labels=labels)
        except docker_sdk().errors.DockerException as exc:
            raise UserError(f"host {self.host_name}: the engine could not create volume {volume}: "
                            f"{short_error(exc)}", self.url,
                            "Check the engine's disk space and permissions.") from None
        with tempfile.TemporaryFile() as archive:
            sent = write_inputs_tar(archive, corpus, corpus_name, model)
            archive.seek(0)
            self.progress(f"shipping inputs ({sent / 2**20:.1f} MiB) to volume {volume}")
            self._fill_volume(volume, archive)
        return sent

    def exists(self, name: str) -> bool:
        try:
            self.client.volumes.get(name)
            return True
        except docker_sdk().errors.NotFound:
            return False

    def remove(self, name: str) -> bool:
        try:
            self.client.api.remove_volume(name, force=True)
            return True
        except Exception:  # gone already, or the daemon is
            return False

    def _helper(self, mounts: list[Any], command: list[str], *, label: str, read_only_root: bool = True) -> Any:
        """A short-lived, locked-down container of the trial image (its python3), not started yet."""
        return self.client.containers.create(
            image=self.image_ref, entrypoint=["python3"], command=command, user=self.user, network_mode="none",
            read_only=read_only_root, mounts=mounts, cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=64, labels={LABEL_KIND: label, LABEL_CAMPAIGN: self.campaign_dir}, detach=True,
            environment={"HOME": "/tmp"}, tmpfs={"/tmp": "rw,nosuid,nodev,size=16m"},
        )

    def _fill_volume(self, volume: str, archive: Any) -> None:
        mount = docker_sdk().types.Mount(CONTAINER_IN, volume, type="volume", read_only=False)
        helper = self._helper([mount], ["-c", "pass"], label="inputs-fill")
        try:
            if not helper.put_archive(CONTAINER_IN, archive):
                raise UserError(f"host {self.host_name}: the engine refused the inputs archive", self.url,
                                "Check the engine's disk space.")
        finally:
            remove_container(helper)

    def hash_listing(self, volume: str, path: str, archive: Path | None = None) -> dict[str, list[Any]]:
        """Hash the files under ``path`` of a volume ON THE HOST; with ``archive``, also fetch them there."""
        target = CONTAINER_OUT_ROOT if path.startswith(CONTAINER_OUT_ROOT) else CONTAINER_IN
        mount = docker_sdk().types.Mount(target, volume, type="volume", read_only=True)
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
            remove_container(helper)

    def _verify_inputs(self, volume: str, corpus_name: str, corpus_fp: str, model_fp: str) -> tuple[bool, str, float]:
        start = clock()
        try:
            listing = self.hash_listing(volume, CONTAINER_IN)
        except Exception as exc:  # the helper, or the daemon, failed: the volume is not verified
            return False, f"could not hash it: {short_error(exc)}", clock() - start
        problems = input_problems(listing, corpus_name, corpus_fp, model_fp)
        return not problems, "; ".join(problems), clock() - start

    def fetch_outputs(self, volume: str, trial_dir: Path, record: dict[str, Any]) -> list[str]:
        """Hash the trial's outputs on the host, fetch them, check them on arrival; keep what verifies."""
        transfer = record["transfer"]
        start = clock()
        with tempfile.TemporaryDirectory(prefix="isocost-fetch-") as scratch:
            archive = Path(scratch) / "out.tar"
            listing = self.hash_listing(volume, CONTAINER_TRIAL_DIR, archive)
            notes = keep_verified_outputs(listing, archive, trial_dir, transfer, Path(scratch))
        transfer["fetch_s"] = round(clock() - start, 3)
        return notes

