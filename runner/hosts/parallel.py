"""Several hosts at once: one full, normal campaign per host, in parallel, through each host's engine.

No scheduler, no agent: every host runs Docker Engine, reached as ``local``, a unix socket or
``ssh://user@host`` (Docker's own remote access). For each host, in its own thread:

1. connect; read the engine's identity (``docker info``: ID, version, machine);
2. find the image there by digest, pulling it from the registry if absent
   (:func:`~runner.launch.engine.resolve_image`); the image ID and repo digest the host reports
   are what its rows record;
3. ship the corpus and model into a data volume and verify them ON THE HOST by sha256
   (:meth:`ShippingDockerLauncher.ship_inputs`): no trial starts on unverified inputs;
4. :func:`runner.campaign.run.run_campaign` into ``OUT/<host>/``: the study's every variant and
   repetition, rotated, one fresh container per trial, one row per attempt, exactly as on one
   host. Trials of one variant never mix hosts: different hardware is a different
   configuration, and each host directory is its own campaign.

A host that cannot be reached, or is lost mid-campaign (ssh dropped for longer than its
``reconnect_s``, engine killed), is that host's problem: its state and reason go into
``OUT/hosts.json`` (and, mid-campaign, into the row of the trial that was running, with
``HOST_STOP_NOTE`` so that ``--resume`` runs that pass again); the other hosts go on.
``--resume`` continues every host that has not finished, without duplicating rows: each host's
campaign resumes by the single-host rules.

``OUT/hosts.json`` (schema 1) lists the hosts, their folders, engines, images, inputs and final
state; :func:`expand_campaign_dirs` turns a multi-host directory into its per-host campaign
directories for ``isocost decide``.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.fingerprint import fingerprint_path
from protocol.jsonio import read_json, write_json_atomic
from protocol.paths import allowed_roots, check_allowed_root
from protocol.study import load_study
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.rawtable import is_host_stopped
from runner.hosts.board import HostBoard
from runner.hosts.spec import HostSpec
from runner.launch.engine import engine_identity
from runner.launch.engine_url import connect

HOSTS_JSON = "hosts.json"
#: 1: first version (hosts, dirs, engines, images, inputs, states).
HOSTS_SCHEMA_VERSION = 1

#: Final states of a host in hosts.json.
HOST_STATES = ("pending", "running", "complete", "unreachable", "lost", "stopped", "error")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class HostOutcome:
    name: str
    state: str
    reason: str
    rows_total: int
    slots_total: int
    wall_s: float

    @property
    def finished(self) -> bool:
        return self.state == "complete"


@dataclass(frozen=True)
class MultiHostOutcome:
    root: Path
    hosts: tuple[HostOutcome, ...]
    wall_s: float

    @property
    def complete(self) -> bool:
        return all(h.finished for h in self.hosts)


# -- hosts.json ---------------------------------------------------------------------------------


def is_multihost(root: Path) -> bool:
    return (root / HOSTS_JSON).is_file()


def load_hosts_json(root: Path) -> dict[str, Any]:
    path = root / HOSTS_JSON
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema_version") != HOSTS_SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise UserError(f"hosts.json has schema_version {version!r}",
                        str(path), f"This isocost reads {HOSTS_SCHEMA_VERSION}; use the version that wrote it.")
    return data


def expand_campaign_dirs(roots: list[Path]) -> list[Path]:
    """Replace each multi-host directory (``hosts.json``) by its hosts' campaign directories, in order.

    Hosts that never started a campaign (unreachable from the start) have no directory to
    read: :func:`hosts_without_campaign` names them and says why.
    """
    expanded: list[Path] = []
    for root in roots:
        if is_multihost(root) and not (root / "campaign.json").exists():
            data = load_hosts_json(root)
            dirs = [root / h["dir"] for h in data["hosts"] if (root / h["dir"] / "campaign.json").exists()]
            if not dirs:
                raise UserError("no host of this multi-host campaign has started its campaign", str(root),
                                "See hosts.json for each host's state; continue with isocost run --resume.")
            expanded.extend(dirs)
        else:
            expanded.append(root)
    return expanded


def hosts_without_campaign(root: Path) -> list[tuple[str, str, str]]:
    """(host, state, reason) for hosts of a multi-host directory that have no campaign to read."""
    if not is_multihost(root):
        return []
    data = load_hosts_json(root)
    return [(h["name"], h.get("state", ""), h.get("reason", "")) for h in data["hosts"]
            if not (root / h["dir"] / "campaign.json").exists()]


class _Record:
    """hosts.json, rewritten atomically whenever a host's state changes (threads share it)."""

    def __init__(self, root: Path, data: dict[str, Any]) -> None:
        self.path = root / HOSTS_JSON
        self.data = data
        self.lock = threading.Lock()
        self.by_name = {h["name"]: h for h in data["hosts"]}

    def update(self, name: str, **fields: Any) -> None:
        with self.lock:
            self.by_name[name].update(fields)
            write_json_atomic(self.path, self.data)

    def save(self) -> None:
        with self.lock:
            write_json_atomic(self.path, self.data)


# -- the run ------------------------------------------------------------------------------------


def run_hosts(
    study_path: Path,
    out: Path,
    hosts: list[HostSpec],
    *,
    image: str | None = None,
    resume: bool = False,
    board: HostBoard | None = None,
    acknowledge_seen_corpus: bool = False,
    allowed_root_list: tuple[str, ...] = (),
    lock_path: Path | None = None,
    extra_env: dict[str, dict[str, str]] | None = None,
    poll_s: float = 1.0,
    stop: threading.Event | None = None,
) -> MultiHostOutcome:
    """Run (or resume) one campaign per host in parallel; returns when every host has finished or failed."""
    from runner.campaign.launcher_choice import study_stack

    started = time.monotonic()
    study = load_study(study_path)
    roots = allowed_roots(allowed_root_list)
    for path in (study.path, study.corpus.path, study.tuning.path, study.model.path, study.costing.catalog):
        if path is not None:
            check_allowed_root(path, roots)
    stack = study_stack(study_path)
    for kind, ref in (("corpus", study.corpus), ("model", study.model)):
        if not ref.path.exists():
            raise UserError(f"{kind} not found at {ref.path}", str(study.path), f"Fix [{kind}] path in the study.")
        actual = fingerprint_path(ref.path)
        if actual != ref.fingerprint:
            raise UserError(f"{kind} fingerprint {actual} differs from the study's {ref.fingerprint}", str(study.path),
                            f"The {kind} on disk is not the one the study was written for: nothing is shipped.")
    data, hosts = _prepare_record(study, out, hosts, stack, image, resume, lock_path)
    record = _Record(out, data)
    names = [h.name for h in hosts]
    board = board or HostBoard(names)
    stop = stop or threading.Event()
    results: dict[str, HostOutcome] = {}
    threads = []
    for host in hosts:
        thread = threading.Thread(
            target=_host_thread, name=f"isocost-host-{host.name}", daemon=True,
            args=(host, study_path, out, data["image"], record, board, stop, results),
            kwargs={"acknowledge_seen_corpus": acknowledge_seen_corpus, "allowed_root_list": allowed_root_list,
                    "extra_env": (extra_env or {}).get(host.name, {}), "poll_s": poll_s},
        )
        thread.start()
        threads.append(thread)
    try:
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        board.note("stopping: every host records its running trial, then stops (Ctrl-C again to abandon)")
        for thread in threads:
            thread.join()
        record.data["ended_at"] = _now()
        record.save()
        raise
    record.data["ended_at"] = _now()
    record.data["wall_s"] = round(time.monotonic() - started, 3)
    record.save()
    return MultiHostOutcome(root=out, hosts=tuple(results[n] for n in names), wall_s=time.monotonic() - started)


def _prepare_record(study: Any, out: Path, hosts: list[HostSpec], stack: str, image: str | None, resume: bool,
                    lock_path: Path | None) -> tuple[dict[str, Any], list[HostSpec]]:
    """New: check the hosts, pick the image, write hosts.json. Resume: the recorded hosts and image."""
    path = out / HOSTS_JSON
    if (out / "campaign.json").exists():
        raise UserError("this results directory holds a single-host campaign", str(out),
                        "Resume it without --host/--hosts-file, or choose another --out.")
    if path.exists():
        if not resume:
            raise UserError("the results directory already holds a multi-host campaign", str(out),
                            "Use --resume to continue it, or choose another --out.")
        data = load_hosts_json(out)
        if data.get("study_sha256") != study.sha256:
            raise UserError(f"the study changed since this campaign started ({data.get('study_sha256')} at start, "
                            f"{study.sha256} now)", str(study.path),
                            "Restore the study, or start a new campaign in another --out.")
        recorded = [HostSpec.from_dict(h["spec"], f"{path}, host {h['name']}") for h in data["hosts"]]
        if hosts and sorted(h.name for h in hosts) != sorted(h.name for h in recorded):
            raise UserError(f"this campaign's hosts are {', '.join(h.name for h in recorded)}, not "
                            f"{', '.join(h.name for h in hosts)}", str(path),
                            "Resume without --host/--hosts-file (the recorded hosts are used), or name the same hosts.")
        if hosts:  # a host's address may have changed (new IP): its engine ID is checked on connection
            by_name = {h.name: h for h in hosts}
            recorded = [HostSpec(name=h.name, url=by_name[h.name].url, stack=h.stack, rental=h.rental,
                                 ssh_config=by_name[h.name].ssh_config or h.ssh_config, reconnect_s=h.reconnect_s)
                        for h in recorded]
            for entry, host in zip(data["hosts"], recorded, strict=True):
                entry["spec"] = host.to_dict()
        if image and image not in (data["image"]["ref"], data["image"].get("repo_digest")):
            raise UserError(f"this campaign runs image {data['image']['ref']}, not {image}", "--image",
                            "Resume with the same image (or without --image): trials never mix images.")
        data.setdefault("resumed_at", []).append(_now())
        data.pop("ended_at", None)
        return data, recorded
    if resume:
        raise UserError("nothing to resume: no hosts.json", str(out), "Run without --resume to start one.")
    if out.exists() and any(out.iterdir()):
        raise UserError("the results directory is not empty and holds no campaign", str(out),
                        "Choose a new or empty --out directory.")
    if not hosts:
        raise UserError("no host given", "--host / --hosts-file", "Example: --host local=local --host b=ssh://u@h.")
    wrong = [h.name for h in hosts if h.stack and h.stack != stack]
    if wrong:
        raise UserError(f"host(s) {', '.join(wrong)} run another stack than the study's {stack!r}", "--hosts-file",
                        "One study runs one stack (one image): give those hosts their own study, or fix their stack.")
    image_ref, repo_digest, image_id = _choose_image(study, stack, image, lock_path)
    remote = [h.name for h in hosts if h.address.kind == "ssh"]
    if remote and not repo_digest:
        raise UserError(
            f"hosts {', '.join(remote)} pull the image by digest, and {image_ref} has no repo digest (never pushed)",
            "--image (or images/images.lock)",
            f"Push it once to a registry every host reaches (isocost images push --stack {stack} --registry "
            "HOST:PORT), then run again; or pass --image REPO@sha256:….",
        )
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "schema_version": HOSTS_SCHEMA_VERSION,
        "about": "one campaign per host, each in its own folder (dir); isocost decide reads this directory",
        "created_at": _now(),
        "study_name": study.name,
        "study_sha256": study.sha256,
        "stack": stack,
        "image": {"ref": repo_digest or image_ref, "repo_digest": repo_digest, "image_id": image_id,
                  "how": "pulled by repo digest on each host (or found there by image ID)"},
        "hosts": [{"name": h.name, "dir": h.name, "url": h.url, "spec": h.to_dict(), "state": "pending",
                   "reason": ""} for h in hosts],
    }
    write_json_atomic(out / HOSTS_JSON, data)
    return data, hosts


def _choose_image(study: Any, stack: str, image: str | None, lock_path: Path | None) -> tuple[str, str, str]:
    """(reference, repo digest or '', image ID or '') from --image, the study's [images], or the lock."""
    from runner.images.build import default_lock_path, locked_image

    record = locked_image(stack, lock_path or default_lock_path())
    ref = image or study.image_for(stack) or (record.image_ref if record is not None else "")
    if not ref:
        raise UserError(f"no {stack} image is known (none in the lock, no --image)", "--image",
                        f"Build and push one (isocost images build --stack {stack}; isocost images push --stack "
                        f"{stack} --registry HOST:PORT) or pass --image REPO@sha256:….")
    if "@sha256:" in ref:
        image_id = record.image_id if record is not None and record.repo_digest == ref else ""
        return ref, ref, image_id
    if record is not None and ref in (record.image_id, record.image_id.removeprefix("sha256:")):
        return record.image_id, record.repo_digest, record.image_id
    return ref, "", ref


def _done_rows(root: Path) -> int:
    try:
        return sum(1 for row in read_raw(root / "raw.csv") if not is_host_stopped(row))
    except UserError:
        return 0


def _host_thread(host: HostSpec, study_path: Path, out: Path, image: dict[str, str], record: _Record,
                 board: HostBoard, stop: threading.Event, results: dict[str, HostOutcome], *,
                 acknowledge_seen_corpus: bool, allowed_root_list: tuple[str, ...], extra_env: dict[str, str],
                 poll_s: float) -> None:
    """One host, start to end. Never raises: the outcome goes into ``results`` and hosts.json."""
    from runner.launch.remote import ShippingDockerLauncher

    say: Callable[[str], None] = board.reporter(host.name)
    started = time.monotonic()
    root = out / host.name
    entry = record.by_name[host.name]
    state, reason, rows, slots = "error", "", 0, 0
    client = None
    launcher = None
    record.update(host.name, state="running", reason="", started_at=_now())
    try:
        say(f"connecting to {host.url}")
        client = connect(host.address)
        identity = engine_identity(client)
        before = (entry.get("engine") or {}).get("engine_id")
        if before and before != identity["engine_id"]:
            raise UserError(f"host {host.name} now answers with engine {identity['engine_id']}, the campaign ran on "
                            f"{before}", host.url, "Trials of one configuration never mix hosts: point the host at "
                                                   "its original engine, or start a new campaign.")
        record.update(host.name, engine=identity)
        say(f"engine {identity['engine_id']} (Docker {identity['engine_version']}, {identity['name']}, "
            f"{identity['cpus']} CPUs); image {image['ref']}")
        if not _image_present(client, image["ref"]):
            say("the image is not on the host: pulling it by digest")
        launcher = ShippingDockerLauncher(
            image["ref"], host_name=host.name, address=host.address, client=client, stack=_stack(study_path),
            prefer_digest=image.get("repo_digest", ""), reconnect_s=host.reconnect_s, poll_s=poll_s,
            campaign_dir=root, stop=stop, extra_env=extra_env, progress=say, limits=_limits(study_path),
        )
        record.update(host.name, image_id=launcher.image.image_id, image_digest=launcher.image.repo_digest,
                      image_pulled=launcher.image.pulled, image_s=round(launcher.image_s, 3))
        if launcher.image.pulled:
            say(f"image pulled in {launcher.image_s:.1f} s: image ID {launcher.image.image_id}")
        study = load_study(study_path)
        inputs = launcher.ship_inputs(study.corpus.path, study.model.path, study.corpus.fingerprint,
                                      study.model.fingerprint)
        record.update(host.name, inputs=inputs.to_dict())
        resuming = (root / "campaign.json").exists()
        if resuming:
            board.preset(host.name, _done_rows(root), 0)
            for line in launcher.recover_leftovers(root):
                say(f"left over from the last run: {line}")
        if stop.is_set():
            raise KeyboardInterrupt
        outcome = run_campaign(study_path, root, launcher, resume=resuming, progress=say, rental=host.rental,
                               acknowledge_seen_corpus=acknowledge_seen_corpus, allowed_root_list=allowed_root_list)
        rows, slots = outcome.rows_total, outcome.slots_total
        state, reason = "complete", ""
    except KeyboardInterrupt:  # a HostInterrupt inside the campaign: the running trial's row is written
        if launcher is not None and launcher.lost:
            state, reason = "lost", f"the host was lost mid-campaign: {launcher.lost}"
        else:
            state, reason = "stopped", "the host CLI was asked to stop (Ctrl-C or SIGTERM)"
    except UserError as exc:
        state = "unreachable" if client is None else "error"
        reason = exc.message
    except Exception as exc:  # a bug, or an engine failing in a way we do not know: keep the traceback
        state, reason = "error", f"{type(exc).__name__}: {exc}"
        record.update(host.name, traceback=traceback.format_exc())
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a dead connection
                pass
    if not slots and (root / "schedule.csv").exists():
        slots = max(sum(1 for _ in open(root / "schedule.csv", encoding="utf-8")) - 1, 0)
    if not rows and (root / "raw.csv").exists():
        rows = len(read_raw(root / "raw.csv"))
    wall = time.monotonic() - started
    record.update(host.name, state=state, reason=reason, ended_at=_now(), wall_s=round(wall, 3),
                  rows=rows, slots=slots, campaign=(root / "campaign.json").exists())
    board.finish(host.name, state, reason or f"{rows} row(s) for {slots} planned pass(es) in {host.name}/raw.csv")
    results[host.name] = HostOutcome(host.name, state, reason, rows, slots, wall)


def _image_present(client: Any, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except Exception:  # NotFound, or an engine error resolve_image will report properly
        return False


def _stack(study_path: Path) -> str:
    from runner.campaign.launcher_choice import study_stack

    return study_stack(study_path)


def _limits(study_path: Path) -> Any:
    from runner.launch.limits import study_limits

    study = load_study(study_path)
    return study_limits(study.campaign)


# -- checking hosts without running anything ----------------------------------------------------


@dataclass(frozen=True)
class HostCheck:
    name: str
    url: str
    identity: dict[str, Any]  # empty when the engine did not answer
    problem: str  # "" when the host is usable
    gpu: str = ""  # the GPU pre-flight's one line (probe answer, or why it was not probed)


def _check_stack(client: Any, stack: str, image: str, require_gpu: bool, lock_path: Path | None) -> tuple[str, str]:
    """(problem, gpu line) for one engine and stack; raises UserError for missing GPU plumbing."""
    from runner.hosts.gpucheck import judge, run_probe
    from runner.images.build import locked_image
    from runner.launch.engine import is_local_engine, resolve_image
    from runner.launch.gpu import gpu_options

    if stack == "cpu":
        gpu_options(stack, client)
        return "", ""
    if stack == "cuda" or is_local_engine(client):
        gpu_options(stack, client)  # fast: the Container Toolkit / device nodes, before any image is touched
    record = locked_image(stack, lock_path)
    ref = image or (record.image_ref if record is not None else "")
    if not ref:
        why = (f"no {stack} image known to probe the GPU with (build one: isocost images build --stack {stack}; "
               "or pass --image)")
        return (why, "") if require_gpu else ("", f"GPU not probed: {why}")
    resolved = resolve_image(client, ref, prefer_digest=record.repo_digest if record is not None and not image else "")
    user = f"{resolved.uid}:{resolved.uid}"
    gpu = gpu_options(stack, client, image_ref=resolved.ref, user=user)
    result = judge(run_probe(client, resolved.ref, user, gpu), stack)
    return ("" if result.ok else result.summary), result.summary


def check_hosts(hosts: list[HostSpec], stack: str = "", *, image: str = "", require_gpu: bool = False,
                lock_path: Path | None = None) -> list[HostCheck]:
    """Connect to every host at once; read who answers (docker info) and whether it can run the stack.

    For a GPU stack, when an image is known (``image``, else ``images/images.lock``), one tiny container
    of it must see the GPU (:mod:`runner.hosts.gpucheck`); with ``require_gpu`` a host that could not be
    probed is unusable too.
    """
    found: dict[str, HostCheck] = {}

    def one(host: HostSpec) -> None:
        identity: dict[str, Any] = {}
        problem = gpu_line = ""
        client = None
        try:
            client = connect(host.address, timeout_s=60)
            identity = engine_identity(client)
            wanted = host.stack or stack
            if wanted:
                problem, gpu_line = _check_stack(client, wanted, image, require_gpu, lock_path)
        except UserError as exc:
            problem = exc.message
        except Exception as exc:  # an engine answering in a way we do not know
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            if client is not None:
                client.close()
        found[host.name] = HostCheck(host.name, host.url, identity, problem, gpu_line)

    threads = [threading.Thread(target=one, args=(host,), daemon=True) for host in hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [found[h.name] for h in hosts]
