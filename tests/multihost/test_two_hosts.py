"""Real multi-host campaigns: the local engine and a second engine reached through ssh on 127.0.0.1.

Both hosts run the whole study in parallel, each in OUT/<host>/; rows name their host, engine and
the image digest run there; inputs and outputs travel by archive and are verified by hash on
both ends. A killed engine is its host's problem only, and --resume completes it.
"""

from __future__ import annotations

import csv
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from loopback import Loopback, drop_ssh_connections, kill_engine, restart_engine

from protocol.io.jsonio import read_json
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.cli import main

pytestmark = [pytest.mark.docker, pytest.mark.multihost]


def rows(campaign: Path) -> list[dict[str, str]]:
    with open(campaign / "raw.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def engine2(box: Loopback) -> Any:
    import docker

    return docker.DockerClient(base_url=box.engine_url, timeout=60)


def leftovers(client: Any, out: Path) -> tuple[list[Any], list[Any]]:
    """This campaign's containers and trial volumes still on an engine."""
    containers = [c for c in client.containers.list(all=True)
                  if c.labels.get("org.isocost.campaign_dir", "").startswith(str(out.resolve()))]
    volumes = [v for v in client.volumes.list(filters={"label": "org.isocost.kind=trial"})
               if (v.attrs.get("Labels") or {}).get("org.isocost.campaign_dir", "").startswith(str(out.resolve()))]
    return containers, volumes


def test_two_hosts_complete_in_parallel_and_rows_name_their_host(
    loopback: Loopback, pushed_image: Any, mh_workspace: Any, local_engine: Any, tmp_path: Path,
) -> None:
    study = mh_workspace.study("two-hosts")
    hosts = mh_workspace.hosts_file("two-hosts", loopback)
    out = tmp_path / "multi"
    ledger = tmp_path / "shared-ledger"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--hosts-file", str(hosts),
                                       "--image", pushed_image.repo_digest, "--ledger", str(ledger)])
    assert result.exit_code == 0, result.output
    # --ledger reaches every host's campaign: each recorded its evaluation in that ledger
    seen = [json.loads(line)["out"] for line in (ledger / "evaluations.jsonl").read_text().splitlines()]
    assert sorted(seen) == [str((out / "a").resolve()), str((out / "b").resolve())]
    assert re.search(r"^a +complete +2/2 ", result.output, re.M), result.output
    assert re.search(r"^b +complete +2/2 ", result.output, re.M), result.output
    record = read_json(out / "hosts.json")
    states = {h["name"]: h["state"] for h in record["hosts"]}
    assert states == {"a": "complete", "b": "complete"}
    engines = {h["name"]: h["engine"]["engine_id"] for h in record["hosts"]}
    assert engines["a"] != engines["b"], "two engines, two identities"
    for host in record["hosts"]:
        assert host["image_digest"] == pushed_image.repo_digest
        assert host["inputs"]["corpus_fingerprint"].startswith("sha256:")
        table = rows(out / host["name"])
        assert [r["variant_id"] for r in table] == ["batch_size=1", "batch_size=4"]
        for row in table:
            assert row["status"] == "ok", row["notes"]
            assert row["corpus_accepted"] == "true"
            assert row["notes"].startswith(f"host {host['name']} ({host['url']}): engine {engines[host['name']]}, "
                                           "Docker ")
            assert row["image_digest"] == pushed_image.repo_digest
            assert row["image_id"] == pushed_image.image_id
            launched = read_json(out / host["name"] / "trials" / row["trial_id"] / "launcher.json")
            transfer = launched["transfer"]
            assert transfer["verified"] is True
            assert transfer["host_sha256"] == transfer["arrived_sha256"]
            assert set(transfer["arrived_sha256"]) == {"spec.json", "predictions.jsonl", "batches.jsonl",
                                                       "manifest.json", "status.json"}
            assert transfer["spec_read_back"] == transfer["sent"]["spec.json"]
        description = read_json(out / host["name"] / "campaign.json")
        assert description["launcher"]["host_name"] == host["name"]
        assert description["launcher"]["engine_id"] == engines[host["name"]]
        assert description["rental"]["gpu"] == {"a": "rtx-4090", "b": "b200"}[host["name"]]
    # The second engine really ran b's trials: it holds the image pulled by digest, and nothing is left over.
    remote = engine2(loopback)
    try:
        assert any(pushed_image.repo_digest in (i.attrs.get("RepoDigests") or []) for i in remote.images.list())
        assert leftovers(remote, out) == ([], [])
        assert leftovers(local_engine, out) == ([], [])
    finally:
        remote.close()

    from runner.hosts.record import expand_campaign_dirs

    assert expand_campaign_dirs([out]) == [out / "a", out / "b"]


def test_killed_engine_is_one_hosts_problem_and_resume_completes_it(
    loopback: Loopback, pushed_image: Any, mh_workspace: Any, tmp_path: Path,
) -> None:
    from runner.hosts.board import HostBoard
    from runner.hosts.parallel import run_hosts
    from runner.hosts.spec import load_hosts_file

    study = mh_workspace.study("engine-killed")
    hosts = load_hosts_file(mh_workspace.hosts_file("engine-killed", loopback, reconnect_s=3))
    out = tmp_path / "multi"
    remote = engine2(loopback)
    killed = threading.Event()

    def kill_when_a_trial_runs() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                running = remote.containers.list(filters={"label": "org.isocost.kind=trial", "status": "running"})
            except Exception:  # noqa: BLE001  (the engine is being killed)
                running = []
            if running:
                kill_engine(loopback)
                killed.set()
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_when_a_trial_runs, daemon=True)
    killer.start()
    # b's trials sleep a little per batch, so the kill lands mid-trial; a's trials run normally.
    outcome = run_hosts(study, out, hosts, image=pushed_image.repo_digest, board=HostBoard(["a", "b"], tty=False),
                        extra_env={"b": {"ISOCOST_FAULT_INJECT": "sleep-per-batch:1"}}, poll_s=0.5)
    killer.join(timeout=5)
    remote.close()
    assert killed.is_set(), "no trial container was seen running on the second engine"
    states = {h.name: h.state for h in outcome.hosts}
    assert states == {"a": "complete", "b": "lost"}, outcome.hosts
    a_rows = rows(out / "a")
    assert [r["status"] for r in a_rows] == ["ok", "ok"]
    [lost] = rows(out / "b")
    assert lost["status"] == "interrupted"
    assert lost["notes"].startswith("host b (")
    assert "host b lost during the trial" in lost["notes"] and HOST_STOP_NOTE in lost["notes"]
    assert lost["corpus_accepted"] == "false"
    record = read_json(out / "hosts.json")
    b = next(h for h in record["hosts"] if h["name"] == "b")
    assert b["state"] == "lost" and "lost mid-campaign" in b["reason"]

    # The engine comes back; --resume (hosts from hosts.json) completes b without touching a.
    restart_engine(loopback)
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--resume"])
    assert result.exit_code == 0, result.output
    assert rows(out / "a") == a_rows, "a finished: resuming adds nothing there"
    b_rows = rows(out / "b")
    # The first trial was the one killed: it runs again as attempt 2; no row is duplicated.
    assert [(r["trial_id"], r["status"]) for r in b_rows] == [
        ("001-r1-batch_size-1", "interrupted"),
        ("001-r1-batch_size-1-a2", "ok"),
        ("002-r1-batch_size-4", "ok"),
    ]
    assert sum(1 for r in b_rows if r["corpus_accepted"] == "true") == 2
    assert {h["name"]: h["state"] for h in read_json(out / "hosts.json")["hosts"]} == {"a": "complete",
                                                                                      "b": "complete"}


def test_unreachable_host_does_not_stop_the_others(
    loopback: Loopback, pushed_image: Any, mh_workspace: Any, tmp_path: Path,
) -> None:
    from loopback import free_port

    study = mh_workspace.study("unreachable", batches="[4]")
    out = tmp_path / "multi"
    nobody = f"ssh://{loopback.user}@127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--image", pushed_image.repo_digest,
                                       "--host", "a=local", "--host", f"gone={nobody}"])
    assert result.exit_code == 3, result.output
    record = {h["name"]: h for h in read_json(out / "hosts.json")["hosts"]}
    assert record["a"]["state"] == "complete"
    assert record["gone"]["state"] == "unreachable"
    assert "does not answer" in record["gone"]["reason"] and "Connection refused" in record["gone"]["reason"]
    assert [r["status"] for r in rows(out / "a")] == ["ok"]
    assert not (out / "gone" / "campaign.json").exists()
    assert "--resume" in result.output


def test_dropped_ssh_connections_mid_trial_are_ridden_out(
    loopback: Loopback, pushed_image: Any, mh_workspace: Any, tmp_path: Path,
) -> None:
    from runner.hosts.board import HostBoard
    from runner.hosts.parallel import run_hosts
    from runner.hosts.spec import load_hosts_file

    study = mh_workspace.study("ssh-dropped", batches="[4]")
    [b] = [h for h in load_hosts_file(mh_workspace.hosts_file("ssh-dropped", loopback, reconnect_s=30))
           if h.name == "b"]
    out = tmp_path / "multi"
    remote = engine2(loopback)
    cut = []

    def cut_while_a_trial_runs() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(cut) < 3:
            if remote.containers.list(filters={"label": "org.isocost.kind=trial", "status": "running"}):
                cut.append(drop_ssh_connections(loopback))
                time.sleep(0.7)
            else:
                time.sleep(0.1)

    cutter = threading.Thread(target=cut_while_a_trial_runs, daemon=True)
    cutter.start()
    outcome = run_hosts(study, out, [b], image=pushed_image.repo_digest, board=HostBoard(["b"], tty=False),
                        extra_env={"b": {"ISOCOST_FAULT_INJECT": "sleep-per-batch:1.5"}}, poll_s=0.3)
    cutter.join(timeout=5)
    remote.close()
    assert sum(cut) > 0, "no ssh connection was cut while the trial ran"
    assert [h.state for h in outcome.hosts] == ["complete"], outcome.hosts
    [row] = rows(out / "b")
    # The container went on running on the host; the host CLI reconnected and collected it.
    assert row["status"] == "ok", row["notes"]
    assert row["corpus_accepted"] == "true"
