"""The cluster reached through ssh, as from a laptop to a login node: Slurm's commands run there, not here.

Here SLURM_CONF is unset, so a Slurm command run on this side would find no cluster; only the test
sshd's sessions have it (``SetEnv``). Files still go through the shared directory, which this
machine sees at the same path (the same machine here; a mounted file system on a real one).
"""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import SetupMissing
from cluster_fixture import unavailable
from fakecampaign import fake_workspace
from fakes import FakeTrialSlurmLauncher
from login import Login, start_login, stop_login

from protocol.errors import UserError
from runner.campaign.run import run_campaign
from runner.launch.kinds.slurm.commands import SlurmCommands
from runner.launch.kinds.slurm.options import SlurmOptions

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.fixture(scope="module")
def login(slurm_cluster) -> Iterator[Login]:
    root = Path(tempfile.mkdtemp(prefix="isocost-login-"))
    try:
        node = start_login(root, slurm_cluster)
    except SetupMissing as exc:
        shutil.rmtree(root, ignore_errors=True)
        unavailable(str(exc))
    try:
        yield node
    finally:
        stop_login(node)
        shutil.rmtree(root, ignore_errors=True)


def test_a_campaign_through_a_login_node(cluster, login, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_CONF")
    with pytest.raises(UserError):
        SlurmCommands().nodes()  # no cluster on this side
    slurm = SlurmCommands(login.url, ssh_config=login.ssh_config)
    assert {row.node for row in slurm.nodes()} == {cluster.node}
    study = fake_workspace(tmp_path / "ws", n=4, repetitions=1, batches="[1, 4]")
    shared = tmp_path / "shared"
    shared.mkdir()
    options = SlurmOptions.from_values({"login": login.url, "gres": "gpu:1", "shared": str(shared), "start_wait": 120})
    launcher = FakeTrialSlurmLauncher(options, trial_timeout_s=60, commands=slurm, kill_grace_s=5)
    out = shared / "out"
    run_campaign(study, out, launcher)
    with open(out / "raw.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["ok", "ok"] and all(r["node"] == cluster.node for r in rows)
    facts = json.loads((out / "campaign.json").read_text())["launcher"]
    assert facts["login"] == login.url and facts["slurm_commands"] == f"login node {login.url}"
    assert facts["inputs_as_nodes_see_them"].startswith(str(shared / ".isocost-inputs"))
