"""Slurm's commands here or on a login node over ssh: one quoted command line, clear errors (no cluster needed).

A fake ``ssh`` on PATH plays the login node: it records its arguments and runs the command line
it is given with ``sh -c``, as sshd's shell would, so quoting is tested for real.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from protocol.errors import UserError
from runner.launch.kinds.slurm.commands import SlurmCommands, ssh_prefix

FAKE_SSH = """#!{python}
import json, subprocess, sys
with open({log!r}, "w") as handle:
    json.dump(sys.argv[1:], handle)
command = sys.argv[-1]
if {code} == 255:
    print("ssh: connect to host login port 22: Connection refused", file=sys.stderr)
    sys.exit(255)
sys.exit(subprocess.run(["sh", "-c", command]).returncode)
"""


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    def install(code: int = 0) -> Path:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        log = tmp_path / "ssh-args.json"
        script = bin_dir / "ssh"
        script.write_text(FAKE_SSH.format(python=sys.executable, log=str(log), code=code))
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
        return log

    return install


def test_ssh_prefix_checks_the_address():
    assert ssh_prefix("ssh://me@login.example.org:2222") == [
        "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-p", "2222", "--", "me@login.example.org"]
    assert ssh_prefix("ssh://login", Path("/etc/cfg"))[-4:] == ["-F", "/etc/cfg", "--", "login"]
    for bad in ("ssh://-oProxyCommand=x", "ssh://-evil", "ssh://me@host:99999", "ssh://me:pw@host", "http://host",
                "ssh://me@host/path", "ssh://"):
        with pytest.raises(UserError) as info:
            ssh_prefix(bad)
        assert info.value.where == "--slurm-login"


def test_a_command_reaches_the_login_node_as_one_quoted_line(fake_ssh, tmp_path):
    log = fake_ssh()
    slurm = SlurmCommands("ssh://me@login:2222")
    answer = slurm.run(["echo", "a b", "$(touch PWNED)", "it's"])
    assert answer.code == 0 and answer.out == "a b $(touch PWNED) it's\n"
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    args = json.loads(log.read_text())
    assert args[-2] == "me@login" and args[args.index("--") + 1] == "me@login" and len(args) == args.index("--") + 3
    assert slurm.where == "login node ssh://me@login:2222"


def test_sbatch_gets_its_script_on_stdin_over_ssh(fake_ssh, tmp_path):
    fake_ssh()
    bin_dir = tmp_path / "bin"
    (bin_dir / "sbatch").write_text("#!/bin/sh\ncat > \"$(dirname \"$0\")/script.txt\"\necho \"17;cluster\"\n")
    (bin_dir / "sbatch").chmod(0o755)
    job = SlurmCommands("ssh://me@login").submit(["--job-name=isocost-x"], "#!/bin/bash\necho 'hi'\n")
    assert job == "17" and (bin_dir / "script.txt").read_text() == "#!/bin/bash\necho 'hi'\n"


def test_an_unreachable_login_node_and_a_missing_command_are_user_errors(fake_ssh, tmp_path, monkeypatch):
    fake_ssh(code=255)
    with pytest.raises(UserError) as info:
        SlurmCommands("ssh://me@login").run(["sinfo"])
    assert "does not answer through ssh" in info.value.what and "Connection refused" in info.value.what
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UserError) as info:
        SlurmCommands().run(["sbatch", "--version"])
    assert info.value.what == "sbatch is not installed on this machine" and "--slurm-login" in info.value.fix


def test_a_refused_submission_says_what_sbatch_said(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: gpu' >&2\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(UserError) as info:
        SlurmCommands().submit([], "#!/bin/bash\n")
    assert "invalid partition specified: gpu" in info.value.what


def test_sinfo_rows(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'gpu01|gpu*|up|gpu:a100:4(S:0-1)|mixed\\n"
                                   "gpu02|gpu*|up|(null)|drained*\\ncpu01|cpu|down|(null)|idle\\n'\n")
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    rows = SlurmCommands().nodes()
    assert [(r.node, r.partition, r.default, r.available, r.gres, r.state) for r in rows] == [
        ("gpu01", "gpu", True, "up", ("gpu:a100:4",), "mixed"), ("gpu02", "gpu", True, "up", (), "drained"),
        ("cpu01", "cpu", False, "down", (), "idle")]
