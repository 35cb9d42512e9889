"""Property: kill the host at random points, resume, and the campaign is exact.

Each seeded scenario runs a 4-pass fake campaign (real host code in a real host process, fake
trials of random length, tests/fakecampaign.py) and interrupts it 1 to 3 times: SIGKILL of the host
CLI alone (its trial goes on and may finish by itself), of the host and its trial together (a
reboot), or a raw.csv cut inside its last row (the host died while appending). Then ``--resume``
runs to the end, and the invariants hold:

- the directory passes every consistency check (``check_campaign``: chain, rows ↔ trial
  directories ↔ specs, statuses, predictions, events);
- exactly one final row per planned pass; every attempt (trial directory with a spec) has exactly
  one row; no pass ran again after its final row;
- the raw.csv bytes that were intact before each resume are a prefix of the final raw.csv, and
  every cut row is kept byte for byte in a raw.csv.partial-N file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fakecampaign import fake_workspace, host_command, host_env

from protocol.study.schedule import attempt_trial_id
from runner.analysis.summarize import summarize_campaign
from runner.campaign_dir.integrity import check_campaign
from runner.campaign_dir.layout import load_record, read_raw
from runner.campaign_dir.raw_table import is_host_stopped, scan
from runner.campaign_dir.slots import planned_slots, slot_of

pytestmark = pytest.mark.e2e

SEEDS = range(12)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fake_workspace(tmp_path_factory.mktemp("resume") / "ws", repetitions=2, batches="[1, 4]", n=8)


def _kill_trials(out: Path) -> None:
    """The machine went down: every trial process still running dies too."""
    for launcher in (out / "trials").glob("*/launcher.json"):
        try:
            os.killpg(int(json.loads(launcher.read_text())["pid"]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError, KeyError):
            pass


def _cut_last_row(out: Path, rng: random.Random, cuts: list[bytes], size_before: int) -> None:
    """The host died while appending its last row: cut that row (only a row this host wrote)."""
    raw = out / "raw.csv"
    if not raw.exists():
        return
    data = raw.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    if start == 0 or start >= len(data) - 1 or start < size_before:
        return  # header only, or no row appended by this host
    at = rng.randrange(start + 1, len(data))  # at least one byte of the row kept, its newline lost
    if data.endswith(b"\n"):
        cuts.append(data[start:at])
    else:  # the host died before it quarantined the previous cut: that partial row is cut shorter
        cuts[-1] = data[start:at]
    raw.write_bytes(data[:at])


def _interrupt(study: Path, out: Path, rng: random.Random, resume: bool, trial_s: float, cuts: list[bytes]) -> None:
    size_before = (out / "raw.csv").stat().st_size if (out / "raw.csv").exists() else 0
    log = open(out.parent / f"host-{len(list(out.parent.glob('host-*.log')))}.log", "wb")  # noqa: SIM115
    host = subprocess.Popen(host_command(study, out, resume=resume), env=host_env(trial_s),
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        host.wait(timeout=rng.uniform(0.2, 2.5))
    except subprocess.TimeoutExpired:
        host.kill()
        host.wait()
    how = rng.choice(["host", "machine", "cut"])
    if how == "machine":
        _kill_trials(out)
    elif how == "cut":
        _cut_last_row(out, rng, cuts, size_before)
    if how == "host" and rng.random() < 0.5:
        time.sleep(trial_s + 0.3)  # let a trial left running finish by itself


@pytest.mark.parametrize("seed", SEEDS)
def test_resume_after_random_kills_is_exact(study, tmp_path, seed):
    rng = random.Random(seed)
    out = tmp_path / "out"
    trial_s = rng.uniform(0.1, 0.5)
    cuts: list[bytes] = []
    prefixes: list[bytes] = []
    for _ in range(rng.randint(1, 3)):
        _interrupt(study, out, rng, resume=(out / "campaign.json").exists(), trial_s=trial_s, cuts=cuts)
        if (out / "raw.csv").exists():
            prefixes.append((out / "raw.csv").read_bytes()[:scan(out / "raw.csv").intact_bytes])
    if not (out / "campaign.json").exists():  # killed during set-up: start again from an empty --out
        for child in out.iterdir() if out.exists() else ():
            child.unlink()
    final = subprocess.run(host_command(study, out, resume=(out / "campaign.json").exists()),
                           env=host_env(trial_s), capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, (seed, final.stdout, final.stderr)

    logs = "\n".join(p.read_text() for p in sorted(tmp_path.glob("host-*.log"))) + final.stdout
    problems = [str(p) for p in check_campaign(out) if "verdicts" not in p.file and "summary" not in p.file]
    assert problems == [], (seed, problems, logs)
    summarize_campaign(out)
    assert check_campaign(out) == [], (seed, [str(p) for p in check_campaign(out)])

    slots = planned_slots(load_record(out))
    by_id = {slot.trial_id: slot for slot in slots}
    rows = read_raw(out / "raw.csv")
    ids = [row["trial_id"] for row in rows]
    assert len(ids) == len(set(ids)), (seed, ids)
    attempts = sorted(d.name for d in (out / "trials").iterdir() if (d / "spec.json").exists())
    assert sorted(ids) == attempts, (seed, ids, attempts)  # rows lost: 0
    for slot in slots:
        mine = sorted((slot_of(row["trial_id"], by_id)[1], row) for row in rows
                      if slot_of(row["trial_id"], by_id)[0] == slot)
        finals = [row for _, row in mine if not is_host_stopped(row)]
        assert len(finals) == 1, (seed, slot.trial_id, [r["trial_id"] for _, r in mine])
        assert mine[-1][1] is finals[0], (seed, slot.trial_id, "a pass ran again after its final row")
        assert [n for n, _ in mine] == list(range(1, len(mine) + 1)), (seed, slot.trial_id)
        assert not (out / "trials" / attempt_trial_id(slot, len(mine) + 1)).exists()
    text = (out / "raw.csv").read_bytes()
    for prefix in prefixes:
        assert text.startswith(prefix), seed
    kept = [p.read_bytes() for p in sorted(out.glob("raw.csv.partial-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))]
    assert len(kept) == len(set(kept)), seed  # each cut row kept once
    assert [k for k in kept if k in cuts] == cuts, (seed, kept, cuts)  # every cut kept, byte for byte, in order
