"""Several hosts at once: one full, normal campaign per host, in parallel, through each host's engine.

No scheduler, no agent: every host runs Docker Engine, reached as ``local``, a unix socket or
``ssh://user@host`` (Docker's own remote access). For each host, in its own thread:

1. connect; read the engine's identity (``docker info``: ID, version, machine);
2. find the image there by digest, pulling it from the registry if absent
   (:func:`~runner.launch.daemon.client.resolve_image`); the image ID and repo digest the host reports
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

``OUT/hosts.json`` (schema 1, :mod:`runner.hosts.record`) lists the hosts, their folders, engines,
images, inputs and final state; checking hosts without running anything is :mod:`runner.hosts.check`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.io.paths import allowed_roots, check_allowed_root
from protocol.study.load import Study, load_study
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_rows
from runner.campaign_dir.raw_table import is_host_stopped
from runner.hosts.board import HostBoard
from runner.hosts.record import HostsImage, HostsRecord, now_iso, prepare_hosts_record
from runner.hosts.spec import HostSpec
from runner.launch.daemon.address import connect
from runner.launch.daemon.client import daemon_identity


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












# -- the run ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HostsRun:
    """What every host's thread shares."""

    study: Study  # parsed once, by run_hosts; every host's campaign is handed it
    out: Path
    image: HostsImage
    record: HostsRecord
    board: HostBoard
    stop: threading.Event
    results: dict[str, HostOutcome]
    acknowledge_seen_corpus: bool
    allowed_root_list: tuple[str, ...]
    poll_s: float
    ledger_dir: Path | None = None


def run_hosts(
    study_path: Path | Study,
    out: Path,
    hosts: list[HostSpec],
    *,
    image: str | None = None,
    resume: bool = False,
    board: HostBoard | None = None,
    acknowledge_seen_corpus: bool = False,
    allowed_root_list: tuple[str, ...] = (),
    ledger_dir: Path | None = None,
    lock_path: Path | None = None,
    extra_env: dict[str, dict[str, str]] | None = None,
    poll_s: float = 1.0,
    stop: threading.Event | None = None,
) -> MultiHostOutcome:
    """Run (or resume) one campaign per host in parallel; returns when every host has finished or failed."""
    from runner.campaign.launcher_choice import study_stack

    started = time.monotonic()
    study = study_path if isinstance(study_path, Study) else load_study(study_path)
    _check_study_inputs(study, allowed_root_list)
    data, hosts = prepare_hosts_record(study, out, hosts, study_stack(study), image, resume, lock_path)
    names = [h.name for h in hosts]
    run = _HostsRun(study=study, out=out, image=data.image, record=HostsRecord(out, data),
                    board=board or HostBoard(names), stop=stop or threading.Event(), results={},
                    acknowledge_seen_corpus=acknowledge_seen_corpus, allowed_root_list=allowed_root_list,
                    ledger_dir=ledger_dir,
                    poll_s=poll_s)
    threads = [threading.Thread(target=_host_thread, name=f"isocost-host-{host.name}", daemon=True,
                                args=(host, run, (extra_env or {}).get(host.name, {}))) for host in hosts]
    for thread in threads:
        thread.start()
    _join_hosts(threads, run)
    run.record.finish(ended_at=now_iso(), wall_s=round(time.monotonic() - started, 3))
    return MultiHostOutcome(root=out, hosts=tuple(run.results[n] for n in names), wall_s=time.monotonic() - started)


def _check_study_inputs(study: Any, allowed_root_list: tuple[str, ...]) -> None:
    """The study's files under the allowed roots; the corpus and model on disk are the study's (by fingerprint)."""
    roots = allowed_roots(allowed_root_list)
    for path in (study.path, study.corpus.path, study.tuning.path, study.model.path, study.costing.catalog):
        if path is not None:
            check_allowed_root(path, roots)
    for kind, ref in (("corpus", study.corpus), ("model", study.model)):
        if not ref.path.exists():
            raise UserError(f"{kind} not found at {ref.path}", str(study.path), f"Fix [{kind}] path in the study.")
        actual = fingerprint_path(ref.path)
        if actual != ref.fingerprint:
            raise UserError(f"{kind} fingerprint {actual} differs from the study's {ref.fingerprint}", str(study.path),
                            f"The {kind} on disk is not the one the study was written for: nothing is shipped.")


def _join_hosts(threads: list[threading.Thread], run: _HostsRun) -> None:
    """Wait for every host; on Ctrl-C, let every host record its running trial and stop, then re-raise."""
    try:
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        run.stop.set()
        run.board.note("stopping: every host records its running trial, then stops (Ctrl-C again to abandon)")
        for thread in threads:
            thread.join()
        run.record.finish(ended_at=now_iso())
        raise


def _done_rows(root: Path) -> int:
    try:
        return sum(1 for row in read_rows(root / "raw.csv") if not is_host_stopped(row))
    except UserError:
        return 0


class _Attempt:
    """What one host's thread has reached so far (its state on failure depends on it)."""

    client: Any = None
    launcher: Any = None


def _host_thread(host: HostSpec, run: _HostsRun, extra_env: dict[str, str]) -> None:
    """One host, start to end. Never raises: the outcome goes into ``run.results`` and hosts.json."""
    started = time.monotonic()
    attempt = _Attempt()
    rows = slots = 0
    run.record.update(host.name, state="running", reason="", started_at=now_iso())
    try:
        rows, slots = _run_host_campaign(host, run, extra_env, attempt)
        state, reason = "complete", ""
    except KeyboardInterrupt:  # a HostInterrupt inside the campaign: the running trial's row is written
        if attempt.launcher is not None and attempt.launcher.lost:
            state, reason = "lost", f"the host was lost mid-campaign: {attempt.launcher.lost}"
        else:
            state, reason = "stopped", "the host CLI was asked to stop (Ctrl-C or SIGTERM)"
    except UserError as exc:
        state = "unreachable" if attempt.client is None else "error"
        reason = exc.message
    except Exception as exc:  # a bug, or an engine failing in a way we do not know: keep the traceback
        state, reason = "error", f"{type(exc).__name__}: {exc}"
        run.record.update(host.name, traceback=traceback.format_exc())
    finally:
        if attempt.client is not None:
            with contextlib.suppress(Exception):  # closing a dead connection
                attempt.client.close()
    _record_host_end(host, run, state, reason, rows, slots, time.monotonic() - started)


def _run_host_campaign(host: HostSpec, run: _HostsRun, extra_env: dict[str, str], attempt: _Attempt) -> tuple[int, int]:
    """Connect, ship the inputs, recover leftovers on resume, run the campaign: (rows, planned passes)."""
    say: Callable[[str], None] = run.board.reporter(host.name)
    root = run.out / host.name
    say(f"connecting to {host.url}")
    attempt.client = connect(host.address)
    launcher = attempt.launcher = _host_launcher(host, run, attempt.client, extra_env, say)
    study = run.study
    inputs = launcher.ship_inputs(study.corpus.path, study.model.path, study.corpus.fingerprint,
                                  study.model.fingerprint)
    run.record.update(host.name, inputs=inputs.to_dict())
    resuming = (root / "campaign.json").exists()
    if resuming:  # run_campaign asks the launcher to recover what the last run left on the host
        run.board.preset(host.name, _done_rows(root), 0)
    if run.stop.is_set():
        raise KeyboardInterrupt
    outcome = run_campaign(run.study, root, launcher, resume=resuming, progress=say, rental=host.rental,
                           acknowledge_seen_corpus=run.acknowledge_seen_corpus,
                           allowed_root_list=run.allowed_root_list, ledger_dir=run.ledger_dir,
                           campaign_hosts=tuple(entry.name for entry in run.record.record.hosts))
    return outcome.rows_total, outcome.slots_total


def _host_launcher(host: HostSpec, run: _HostsRun, client: Any, extra_env: dict[str, str],
                   say: Callable[[str], None]) -> Any:
    """The host's engine checked against the one the campaign ran on; its launcher, with the image there."""
    from runner.launch.kinds.docker.remote import ShippingDockerLauncher

    identity = daemon_identity(client)
    before = (run.record.host(host.name).engine or {}).get("engine_id")
    if before and before != identity["engine_id"]:
        raise UserError(f"host {host.name} now answers with engine {identity['engine_id']}, the campaign ran on "
                        f"{before}", host.url, "Trials of one configuration never mix hosts: point the host at "
                                               "its original engine, or start a new campaign.")
    run.record.update(host.name, engine=identity)
    say(f"engine {identity['engine_id']} (Docker {identity['engine_version']}, {identity['name']}, "
        f"{identity['cpus']} CPUs); image {run.image.ref}")
    if not _image_present(client, run.image.ref):
        say("the image is not on the host: pulling it by digest")
    launcher = ShippingDockerLauncher(
        run.image.ref, host_name=host.name, address=host.address, client=client, stack=_stack(run.study),
        prefer_digest=run.image.repo_digest, reconnect_s=host.reconnect_s, poll_s=run.poll_s,
        campaign_dir=run.out / host.name, stop=run.stop, extra_env=extra_env, progress=say,
        limits=_limits(run.study),
    )
    run.record.update(host.name, image_id=launcher.image.image_id, image_digest=launcher.image.repo_digest,
                      image_pulled=launcher.image.pulled, image_s=round(launcher.image_s, 3))
    if launcher.image.pulled:
        say(f"image pulled in {launcher.image_s:.1f} s: image ID {launcher.image.image_id}")
    return launcher


def _record_host_end(host: HostSpec, run: _HostsRun, state: str, reason: str, rows: int, slots: int,
                     wall: float) -> None:
    """The host's final state, rows and planned passes into hosts.json, the board and ``run.results``."""
    root = run.out / host.name
    if not slots and (root / "schedule.csv").exists():
        slots = max(sum(1 for _ in open(root / "schedule.csv", encoding="utf-8")) - 1, 0)
    if not rows and (root / "raw.csv").exists():
        rows = len(read_rows(root / "raw.csv"))
    run.record.update(host.name, state=state, reason=reason, ended_at=now_iso(), wall_s=round(wall, 3),
                      rows=rows, slots=slots, campaign=(root / "campaign.json").exists())
    run.board.finish(host.name, state, reason or f"{rows} row(s) for {slots} planned pass(es) in {host.name}/raw.csv")
    run.results[host.name] = HostOutcome(host.name, state, reason, rows, slots, wall)


def _image_present(client: Any, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except Exception:  # NotFound, or an engine error resolve_image will report properly
        return False


def _stack(study: Study) -> str:
    from runner.campaign.launcher_choice import study_stack

    return study_stack(study)


def _limits(study: Study) -> Any:
    from runner.launch.daemon.limits import study_limits

    return study_limits(study.campaign)
