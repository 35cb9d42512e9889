"""The fault-injection suite: each case runs a real small campaign and injects one fault.

Used by ``tests/faults/test_faults.py`` (pytest) and ``tests/faults/fault_table.py``
(``make faults``: prints the table). Each case returns a :class:`Outcome`:
the status the protocol demands, the status observed, and the rows lost
(attempts made minus rows in raw.csv, after any resume the case performs).

Every case runs with trials as local processes (:func:`process_context`); where a Docker
engine answers, :data:`DOCKER_CASES` run again with trials in containers of this checkout's CPU
image (:func:`docker_context`), plus two faults only containers have: the container memory
limit, and the Docker daemon restarted during a trial (on a private second engine, see
``private_engine.py``: the machine's own dockerd is never restarted).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_raw
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.kinds.process.launcher import ProcessLauncher

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from workspace import write_workspace  # noqa: E402


@dataclass(frozen=True)
class Outcome:
    case: str
    launcher: str
    expected: str
    observed: str
    rows_lost: int
    passed: bool
    detail: str


#: Set to 1 where the container cases must run (CI): a missing engine is then a failure, not a skip.
REQUIRE_DOCKER_ENV = "ISOCOST_REQUIRE_DOCKER"
#: Set to 1 where mounting a tmpfs must work (CI, .ci/run): the disk-full case is then required.
REQUIRE_MOUNT_ENV = "ISOCOST_REQUIRE_MOUNT"


class NotRun(Exception):
    """A case cannot run here (no engine, no image, mounting refused): reported with this reason, never passed.

    ``required_by`` names the variable that, set to 1, turns this into a failure.
    """

    def __init__(self, reason: str, required_by: str = REQUIRE_DOCKER_ENV) -> None:
        super().__init__(reason)
        self.required_by = required_by

    @property
    def required(self) -> bool:
        return os.environ.get(self.required_by) == "1"


@functools.cache
def mount_refused() -> str:
    """Why a small tmpfs cannot be mounted here ("" when it can): tried, never guessed from the uid.

    Root inside an unprivileged container cannot mount (``mount`` exits 32); a user with the
    capability outside one can.
    """
    import tempfile

    probe = tempfile.mkdtemp(prefix="isocost-mount-probe-")
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], capture_output=True,
                                text=True, timeout=30, check=False)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            return (f"mounting a tmpfs is refused here (mount exit {result.returncode}"
                    + (f": {detail[-1][:120]}" if detail else "") + ")")
        subprocess.run(["umount", probe], capture_output=True, timeout=30, check=False)
        return ""
    except (OSError, subprocess.SubprocessError) as exc:
        return f"mount cannot run here: {exc}"
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


@dataclass(frozen=True)
class Context:
    root: Path  # a fresh directory for this case
    model: Path  # a tiny real checkpoint to copy
    launcher_factory: Callable[[], Any]
    launcher_name: str  # "process" or "docker" (what `isocost run --launcher` takes)
    image: str = ""  # the container image (image ID), for docker

    def study(self, **options: Any) -> Path:
        study = write_workspace(self.root / "ws", self.model, **options)
        # transformers saves weights with mode 0600; a trial container runs as a non-root user and
        # reads its inputs through read-only mounts (modes are not part of the fingerprint).
        for path in [study.parent, *study.parent.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return study

    def cli_launcher_args(self) -> list[str]:
        return ["--launcher", self.launcher_name] + (["--image", self.image] if self.image else [])


def attempts_made(out: Path) -> int:
    trials = out / "trials"
    return sum(1 for d in trials.iterdir() if (d / "spec.json").exists()) if trials.exists() else 0


def rows_lost(out: Path) -> int:
    rows = read_raw(out / "raw.csv") if (out / "raw.csv").exists() else []
    return attempts_made(out) - len(rows)


@contextmanager
def fault(value: str) -> Iterator[None]:
    old = os.environ.get("ISOCOST_FAULT_INJECT")
    os.environ["ISOCOST_FAULT_INJECT"] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ISOCOST_FAULT_INJECT", None)
        else:
            os.environ["ISOCOST_FAULT_INJECT"] = old


def _first_row(out: Path) -> dict[str, str]:
    return read_raw(out / "raw.csv")[0]


# -- cases ----------------------------------------------------------------------------------


def case_oom_in_runner(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[4, 1]")
    out = ctx.root / "out"
    with fault("oom-at-batch:2"):
        run_campaign(study, out, ctx.launcher_factory())
    rows = read_raw(out / "raw.csv")
    row = rows[0]
    ok = (row["status"] == "oom" and row["completed"] == "8" and row["batch_size"] == "4"
          and len(rows) == 2 and rows[1]["batch_size"] == "1")
    return Outcome("GPU-style OOM raised in the runner", ctx.launcher_name, "oom, completed 8, campaign goes on, "
                   "no silent smaller batch", f"{row['status']}, completed {row['completed']}, "
                   f"{len(rows)} rows", rows_lost(out), ok, row["notes"][:120])


def case_killed_mid_pass(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1]")
    out = ctx.root / "out"
    run_killing_first_trial(ctx, study, out, "predictions.jsonl", lines=3, sleep_s=0.4)
    row = _first_row(out)
    ok = row["status"] == "interrupted" and int(row["completed"]) >= 3 and row["corpus_accepted"] == "false"
    return Outcome("trial killed mid-pass (SIGKILL)", ctx.launcher_name, "interrupted, completed count kept",
                   f"{row['status']}, completed {row['completed']}", rows_lost(out), ok, row["notes"][:120])


def run_killing_first_trial(ctx: Context, study: Path, out: Path, outputs: str, lines: int, sleep_s: float,
                            wait_s: float = 120, first_trial: str = "001-r1-batch_size-1") -> None:
    """Run the campaign of ``study`` into ``out``, each batch slowed by ``sleep_s``, and SIGKILL its first trial
    (``first_trial``) once its file ``outputs`` holds ``lines`` lines (given up after ``wait_s``)."""
    first = out / "trials" / first_trial

    def killer() -> None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            written = first / outputs
            if written.exists() and written.read_text().count("\n") >= lines:
                _kill_trial(first, ctx.launcher_name)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    with fault(f"sleep-per-batch:{sleep_s}"):
        thread.start()
        run_campaign(study, out, ctx.launcher_factory())
        thread.join()


def _kill_trial(trial_dir: Path, launcher_name: str) -> None:
    info = json.loads((trial_dir / "launcher.json").read_text())
    if launcher_name == "docker" and info.get("container_id"):
        import docker

        docker.from_env().containers.get(info["container_id"]).kill(signal="SIGKILL")
    else:
        os.kill(int(info["pid"]), signal.SIGKILL)


def case_host_killed_then_resume(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=2, batches="[1, 4]")
    out = ctx.root / "out"
    env = {**os.environ, "ISOCOST_FAULT_INJECT": "sleep-per-batch:0.2", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out),
               *ctx.cli_launcher_args()]
    host = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    second_dir = out / "trials" / "002-r1-batch_size-4"
    # A process is running once it has a pid; a container once its trial writes (not merely created).
    second = second_dir / ("predictions.jsonl" if ctx.launcher_name == "docker" else "launcher.json")
    while time.monotonic() < deadline and not second.exists():
        time.sleep(0.05)
    host.kill()
    host.wait()
    left_running = _trial_containers(second_dir) if ctx.launcher_name == "docker" else []
    before = (out / "raw.csv").read_bytes() if (out / "raw.csv").exists() else b""
    run_campaign(study, out, ctx.launcher_factory(), resume=True)
    after = (out / "raw.csv").read_bytes()
    rows = read_raw(out / "raw.csv")
    final = [r for r in rows if HOST_STOP_NOTE not in r["notes"]]
    one_each = sorted(r["order_index"] for r in final) == ["1", "2", "3", "4"]
    ok = after.startswith(before) and one_each and len(before) > 0
    detail = f"{len(rows) - len(final)} interrupted attempt(s) recorded"
    if ctx.launcher_name == "docker":
        leftover = _trial_containers(second_dir)
        ok = ok and len(left_running) == 1 and not leftover
        detail += (f"; the killed CLI left {len(left_running)} trial container running, --resume "
                   f"{'removed it' if not leftover else 'did NOT remove it'}")
    return Outcome("host CLI killed mid-campaign, then --resume", ctx.launcher_name,
                   "completes; one final row per pass; earlier rows byte-identical",
                   f"{len(final)} final rows for 4 passes, earlier bytes "
                   f"{'kept' if after.startswith(before) else 'CHANGED'}",
                   rows_lost(out), ok, detail)


def _trial_containers(trial_dir: Path) -> list[Any]:
    """Containers (any state) of one trial on the local engine, by the label the launcher sets."""
    import docker

    client = docker.from_env(timeout=60)
    try:
        return list(client.containers.list(
            all=True, filters={"label": f"org.isocost.trial_dir={trial_dir.resolve()}"}))
    finally:
        client.close()


def case_disk_full(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=2, batches="[1]")
    out = ctx.root / "out"
    why = mount_refused()
    if why:
        raise NotRun(why, REQUIRE_MOUNT_ENV)
    out.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(out)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise NotRun(f"cannot mount a tmpfs here: {exc}", REQUIRE_MOUNT_ENV) from None
    try:
        ballast = out / "ballast"

        def fill(message: str) -> None:
            if message.startswith("[2/2]") and ": running" in message:
                try:  # fill the disk just before the second trial starts
                    with open(ballast, "wb") as handle:
                        while True:
                            handle.write(b"\0" * 4096)
                            handle.flush()
                except OSError:
                    pass

        error = ""
        try:
            run_campaign(study, out, ctx.launcher_factory(), progress=fill)
        except UserError as exc:
            error = exc.message
        intact_rows = read_raw(out / "raw.csv")  # parses: no partial row, whatever happened
        ballast.unlink()
        run_campaign(study, out, ctx.launcher_factory(), resume=True)  # completes what is missing, if anything
        rows = read_raw(out / "raw.csv")
        failed = [r for r in rows if r["trial_id"] == "002-r2-batch_size-1"]
        first = failed[0] if failed else {}
        stopped = f"; the host stopped cleanly: {error[:70]}" if error else ""
        observed = f"{first.get('status', 'no row')} row for the trial that hit the full disk{stopped}"
        # The full disk is named either in the trial's row (it wrote its status) or in the host's clean stop
        # (it could not even append the row, which --resume then recorded from the trial directory).
        named = "No space left" in first.get("notes", "") or "No space left" in error
        ok = (len(intact_rows) >= 1 and first.get("status") in ("error", "interrupted") and named
              and rows_lost(out) == 0)
        return Outcome("output disk full (4 MiB tmpfs)", ctx.launcher_name,
                       "error row, raw.csv never corrupt, campaign resumable", observed, rows_lost(out), ok,
                       first.get("notes", "")[:160])
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False, capture_output=True)


def _corrupt_case(kind: str, expected_reason: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        study = ctx.study(n=8, repetitions=1, batches="[4]")
        out = ctx.root / "out"
        with fault(f"corrupt:{kind}"):
            run_campaign(study, out, ctx.launcher_factory())
        row = _first_row(out)
        ok = row["corpus_accepted"] == "false" and expected_reason in row["quality_verdict"]
        return Outcome(f"prediction file: {kind}", ctx.launcher_name, f"rejected: {expected_reason}; row kept",
                       row["quality_verdict"][:90], rows_lost(out), ok, row["notes"][:120])

    return run


def _changed_input(kind: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        study = ctx.study(n=4, repetitions=2, batches="[1]")
        out = ctx.root / "out"
        target = study.parent / ("corpus.jsonl" if kind == "corpus" else "model/config.json")

        def change(message: str) -> None:
            if message.startswith("[1/2]") and ": ok" in message:
                target.write_text(target.read_text() + "\n")

        error = ""
        try:
            run_campaign(study, out, ctx.launcher_factory(), progress=change)
        except UserError as exc:
            error = exc.message
        rows = read_raw(out / "raw.csv")
        ok = f"{kind} fingerprint" in error and "before the next trial" in error and len(rows) == 1
        return Outcome(f"{kind} changed on disk after the start", ctx.launcher_name,
                       "refused before the next trial", "refused" if ok else f"not refused: {error[:60]}",
                       rows_lost(out), ok, error[:140])

    return run


def case_hang(ctx: Context) -> Outcome:
    study = ctx.study(n=8, repetitions=1, batches="[4]", timeout=30)  # batch 0 done first, on a loaded machine too
    out = ctx.root / "out"
    with fault("hang-at-batch:1"):
        run_campaign(study, out, ctx.launcher_factory())
    row = _first_row(out)
    ok = row["status"] == "timeout" and row["completed"] == "4"
    return Outcome("trial hangs", ctx.launcher_name, "killed at the time limit: timeout",
                   f"{row['status']}, completed {row['completed']}", rows_lost(out), ok, row["notes"][:120])


# -- hostile inputs: refused before anything runs, nothing hangs, --out stays usable (issue 11) ---------


class _Hung(Exception):
    pass


def _within(seconds: int, action: Callable[[], Any]) -> Any:
    """Run ``action`` under an alarm: a read that blocks (a FIFO) fails the case instead of the suite."""
    def expire(signum: int, frame: Any) -> None:
        raise _Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        return action()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _refused_start(ctx: Context, study: Path, out: Path) -> tuple[str, float]:
    """Run the campaign; return the refusal message ("" if it started) and the seconds it took."""
    start = time.monotonic()
    try:
        _within(60, lambda: run_campaign(study, out, ctx.launcher_factory()))
    except UserError as exc:
        return exc.message, time.monotonic() - start
    except _Hung as exc:
        return f"HUNG: {exc}", time.monotonic() - start
    return "", time.monotonic() - start


def _out_usable(out: Path) -> bool:
    """Absent or empty but for the writer lock (a retry takes it again)."""
    from runner.campaign_dir.layout import LOCK_NAME

    return not out.exists() or not any(p.name != LOCK_NAME for p in out.iterdir())


def _special_corpus(kind: str) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        study = ctx.study(n=4, repetitions=1, batches="[1]")
        corpus = study.parent / "corpus.jsonl"
        corpus.unlink()
        if kind == "fifo":
            os.mkfifo(corpus)
        else:
            corpus.symlink_to("/dev/zero")
        out = ctx.root / "out"
        message, seconds = _refused_start(ctx, study, out)
        expected = "FIFO" if kind == "fifo" else "character device"
        ok = expected in message and "refused, not read" in message and _out_usable(out) and seconds < 30
        return Outcome(f"corpus is a {'FIFO' if kind == 'fifo' else 'link to /dev/zero'}", ctx.launcher_name,
                       "refused without reading it, --out untouched",
                       f"refused in {seconds:.1f} s" if ok else f"not refused as expected: {message[:60]}",
                       rows_lost(out) if out.exists() else 0, ok, message[:160])

    return run


def case_invalid_utf8_corpus_then_retry(ctx: Context) -> Outcome:
    study = ctx.study(n=4, repetitions=1, batches="[1]")
    corpus = study.parent / "corpus.jsonl"
    good = corpus.read_bytes()
    corpus.write_bytes(good.replace(b'"text": "', b'"text": "caf\xe9 \xed\xa0\x80', 1))
    study.write_text(study.read_text().replace(_fingerprint_text(study), _fingerprint(corpus)))
    out = ctx.root / "out"
    message, _ = _refused_start(ctx, study, out)
    refused = "not UTF-8" in message and "line 1" in message and _out_usable(out)
    corpus.write_bytes(good)
    study.write_text(study.read_text().replace(_fingerprint_text(study), _fingerprint(corpus)))
    run_campaign(study, out, ctx.launcher_factory())  # the same --out, once the corpus is fixed
    rows = read_raw(out / "raw.csv")
    ok = refused and len(rows) == 1 and rows[0]["status"] == "ok"
    return Outcome("corpus not UTF-8, then fixed: same --out", ctx.launcher_name,
                   "refused naming line and byte; the retry in the same --out runs",
                   f"{'refused' if refused else 'NOT refused'}; retry: {len(rows)} row(s) "
                   f"{rows[0]['status'] if rows else ''}", rows_lost(out), ok, message[:160])


def _fingerprint(path: Path) -> str:
    from protocol.io.fingerprint import fingerprint_path

    return fingerprint_path(path)


def _fingerprint_text(study: Path) -> str:
    return study.read_text().split("[corpus]")[1].split('fingerprint = "')[1][:71]


def case_study_number_out_of_bounds(ctx: Context) -> Outcome:
    study = ctx.study(n=4, repetitions=1, batches="[1]")
    study.write_text(study.read_text().replace("repetitions = 1", "repetitions = 1000000000"))
    out = ctx.root / "out"
    message, seconds = _refused_start(ctx, study, out)
    ok = "between 1 and 1000" in message and "campaign.repetitions" in message and _out_usable(out)
    return Outcome("study asks for 10^9 repetitions", ctx.launcher_name, "refused with the bound, --out untouched",
                   f"refused in {seconds:.1f} s" if ok else f"not refused as expected: {message[:60]}", 0, ok,
                   message[:160])


def case_deeply_nested_corpus(ctx: Context) -> Outcome:
    study = ctx.study(n=4, repetitions=1, batches="[1]")
    corpus = study.parent / "corpus.jsonl"
    corpus.write_bytes(corpus.read_bytes() + b"[" * 200_000 + b"\n")
    study.write_text(study.read_text().replace(_fingerprint_text(study), _fingerprint(corpus)))
    out = ctx.root / "out"
    message, seconds = _refused_start(ctx, study, out)
    ok = "nested too deeply" in message and "line 5" in message and _out_usable(out)
    return Outcome("corpus line nested 200,000 deep", ctx.launcher_name, "refused naming the line, no traceback",
                   f"refused in {seconds:.1f} s" if ok else f"not refused as expected: {message[:60]}", 0, ok,
                   message[:160])


def case_sparse_archive_verify(ctx: Context) -> Outcome:
    """A PAX sparse member (1 GiB of holes in a few hundred bytes) is refused before anything is written."""
    from runner.bundle.verify import verify_bundle

    source = ctx.root / "src" / "campaign" / "raw.csv"
    source.parent.mkdir(parents=True)
    with open(source, "wb") as handle:
        handle.truncate(2**30)
    archive = ctx.root / "sparse.tar.gz"
    subprocess.run(["tar", "--format=posix", "--sparse", "-czf", str(archive), "-C", str(ctx.root / "src"),
                    "campaign/raw.csv"], check=True, capture_output=True)
    tmp_before = shutil.disk_usage("/tmp").used
    report = verify_bundle(archive)
    grew = shutil.disk_usage("/tmp").used - tmp_before
    problem = report.first.message if report.first else ""
    ok = not report.ok and "sparse" in problem and grew < 64 * 2**20
    return Outcome(f"bundle with a PAX sparse member ({archive.stat().st_size} B, 1 GiB expanded)", "-",
                   "verify refuses it; nothing expanded", f"refused: {problem[:60]}" if ok else "NOT refused",
                   0, ok, f"temporary disk grew {grew} bytes")


def case_archive_member_bound(ctx: Context) -> Outcome:
    """More members than the bound: refused from the headers, before the first file is written."""
    import io
    import tarfile

    from protocol.io.safe_extract import ExtractLimits, UnsafeArchive, read_archive

    archive = ctx.root / "many.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for i in range(300):
            info = tarfile.TarInfo(f"campaign/f{i:04d}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    dest = ctx.root / "dest"
    dest.mkdir()
    message = ""
    try:
        read_archive(archive, dest=dest, limits=ExtractLimits(max_members=200))
    except UnsafeArchive as exc:
        message = exc.message
    written = sum(1 for _ in dest.rglob("*"))
    ok = "more than 200 members" in message and written == 0
    return Outcome("archive of 300 members, bound 200", "-", "refused before the first file is written",
                   f"refused, {written} files written", 0, ok, message[:160])


# -- the sealed campaign directory (one writer, chained rows, exact resume) ------------------


def _host_cli(ctx: Context, study: Path, out: Path, *, resume: bool = False) -> list[str]:
    return [sys.executable, "-m", "runner.cli", "run", str(study), "--out", str(out),
            *(["--resume"] if resume else []), *ctx.cli_launcher_args()]


def _host_env(sleep_s: float) -> dict[str, str]:
    return {**os.environ, "ISOCOST_FAULT_INJECT": f"sleep-per-batch:{sleep_s}", "PYTHONPATH": str(ROOT)}


def _wait_path(path: Path, timeout_s: float = 300) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def _final(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    from runner.campaign_dir.raw_table import is_host_stopped

    return [r for r in rows if not is_host_stopped(r)]


def case_second_writer(ctx: Context) -> Outcome:
    """A second `run --resume` on a campaign another CLI is writing: refused with its pid and host."""
    study = ctx.study(n=12, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    first = subprocess.Popen(_host_cli(ctx, study, out), env=_host_env(0.3), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _wait_path(out / "trials" / "001-r1-batch_size-1" / "spec.json")
    second = subprocess.run(_host_cli(ctx, study, out, resume=True), env=_host_env(0.0), capture_output=True,
                            text=True, timeout=300, check=False)
    first_code = first.wait(timeout=600)
    rows = read_raw(out / "raw.csv")
    message = next((line for line in second.stderr.splitlines() if line.startswith("Error:")), "")
    refused = second.returncode == 2 and "another isocost run is writing this campaign" in message \
        and f"pid {first.pid}" in message
    ok = refused and first_code == 0 and sorted(r["order_index"] for r in rows) == ["1", "2"] \
        and len({r["trial_id"] for r in rows}) == len(rows)
    return Outcome("second writer on a running campaign", ctx.launcher_name,
                   "second refused (exit 2, pid and host); first finishes alone, one row per pass",
                   f"second exit {second.returncode}; first exit {first_code}; {len(rows)} rows for 2 passes",
                   rows_lost(out), ok, message[:160])


def case_cut_raw_row(ctx: Context) -> Outcome:
    """raw.csv cut inside its last row's trial id: readers refuse; --resume keeps the bytes and re-derives."""
    study = ctx.study(n=6, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    run_campaign(study, out, ctx.launcher_factory())
    raw = out / "raw.csv"
    data = raw.read_bytes()
    start = data.rindex(b"\n002-r1-b") + 1
    at = start + len("002-r1-ba")
    raw.write_bytes(data[:at])
    message = ""
    try:
        read_raw(raw)
    except UserError as exc:
        message = exc.what
    run_campaign(study, out, ctx.launcher_factory(), resume=True)
    rows = read_raw(raw)
    kept = (out / "raw.csv.partial-1").read_bytes() == data[start:at] if (out / "raw.csv.partial-1").exists() \
        else False
    ok = ("partial row" in message and kept and raw.read_bytes()[:start] == data[:start]
          and [r["trial_id"] for r in rows] == ["001-r1-batch_size-1", "002-r1-batch_size-4"]
          and rows[1]["status"] == "ok" and not (out / "trials" / "002-r1-batch_size-4-a2").exists())
    return Outcome("raw.csv cut inside its last row", ctx.launcher_name,
                   "every reader refuses; --resume keeps the cut bytes aside and re-derives the row, no rerun",
                   f"{'refused' if message else 'NOT refused'}; cut bytes {'kept' if kept else 'LOST'}; "
                   f"{len(rows)} rows for 2 passes", rows_lost(out), ok, message[:160])


def case_finished_after_host_death(ctx: Context) -> Outcome:
    """The host CLI dies while trial 2 runs, the trial finishes alone: --resume records it, never reruns it."""
    study = ctx.study(n=8, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    host = subprocess.Popen(_host_cli(ctx, study, out), env=_host_env(0.3), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    second = out / "trials" / "002-r1-batch_size-4"
    _wait_path(second / ("predictions.jsonl" if ctx.launcher_name == "docker" else "launcher.json"))
    host.kill()
    host.wait()
    finished = _wait_path(second / "status.json", timeout_s=300)  # the trial goes on alone
    time.sleep(0.5)
    run_campaign(study, out, ctx.launcher_factory(), resume=True)
    rows = read_raw(out / "raw.csv")
    last = rows[-1] if rows else {"status": "", "notes": ""}
    ok = (finished and [r["trial_id"] for r in rows] == ["001-r1-batch_size-1", "002-r1-batch_size-4"]
          and last["status"] == "ok" and "ended by itself" in last["notes"]
          and not (out / "trials" / "002-r1-batch_size-4-a2").exists())
    return Outcome("host CLI killed, trial 2 finishes alone, then --resume", ctx.launcher_name,
                   "recorded from its directory as ok, not run again",
                   f"{len(rows)} rows for 2 passes, last {last['status']}"
                   + ("" if not (out / "trials" / "002-r1-batch_size-4-a2").exists() else ", RERUN"),
                   rows_lost(out), ok, last["notes"][:160])


PROCESS_CASES: dict[str, Callable[[Context], Outcome]] = {
    "oom-runner": case_oom_in_runner,
    "killed-mid-pass": case_killed_mid_pass,
    "host-killed-resume": case_host_killed_then_resume,
    "disk-full": case_disk_full,
    "truncated-predictions": _corrupt_case("truncate", "truncated (no final newline)"),
    "duplicate-ids": _corrupt_case("duplicate", "duplicate id(s)"),
    "foreign-ids": _corrupt_case("foreign-id", "not in the corpus"),
    "wrong-label-set": _corrupt_case("bad-label", "outside the corpus label set"),
    "corpus-changed": _changed_input("corpus"),
    "model-changed": _changed_input("model"),
    "hang": case_hang,
    "fifo-corpus": _special_corpus("fifo"),
    "device-corpus": _special_corpus("device"),
    "invalid-utf8-corpus-retry": case_invalid_utf8_corpus_then_retry,
    "study-number-bound": case_study_number_out_of_bounds,
    "deeply-nested-corpus": case_deeply_nested_corpus,
    "sparse-archive-verify": case_sparse_archive_verify,
    "archive-member-bound": case_archive_member_bound,
    "second-writer": case_second_writer,
    "cut-raw-row": case_cut_raw_row,
    "finished-after-host-death": case_finished_after_host_death,
}


def process_context(root: Path, model: Path) -> Context:
    return Context(root=root, model=model, launcher_factory=ProcessLauncher, launcher_name="process")


# -- containers ------------------------------------------------------------------------------

BASE_IMAGE = os.environ.get("ISOCOST_BASE_IMAGE", "isocost-base/bookworm:local")
#: Set to an image ID (sha256:…) to run the docker cases on that image instead of building one.
IMAGE_ENV = "ISOCOST_FAULTS_IMAGE"


def docker_unavailable() -> str:
    """Why the docker cases cannot run here ("" when they can)."""
    from runner.launch.daemon.client import daemon_answers

    ok, why = daemon_answers(timeout_s=10)
    if not ok:
        return f"no Docker engine answers ({why}); run `bash .ci/docker-setup.sh`"
    try:
        cpu_image()
    except NotRun as exc:
        return str(exc)
    return ""


@functools.cache
def cpu_image() -> str:
    """The image ID of this checkout's CPU image: built once per run (the layer cache makes it seconds).

    Built rather than taken from images/images.lock, so that the trial code in the container (and its
    fault hooks) is this checkout's; the build is recorded in a private lock, never images/images.lock.
    Without the local base image, the locked CPU image is used if the engine holds it.
    """
    import tempfile

    import docker
    import docker.errors

    from protocol.errors import UserError
    from runner.images.build import build_image
    from runner.images.lock import locked_image

    if os.environ.get(IMAGE_ENV):
        return os.environ[IMAGE_ENV]
    client = docker.from_env(timeout=3600)
    try:
        try:
            client.images.get(BASE_IMAGE)
        except docker.errors.ImageNotFound:
            record = locked_image("cpu")
            if record is None:
                raise NotRun(f"no base image {BASE_IMAGE} to build the CPU image on, and no CPU image in "
                             "images/images.lock; run `bash .ci/docker-setup.sh`") from None
            try:
                client.images.get(record.image_id)
            except docker.errors.ImageNotFound:
                raise NotRun(f"the locked CPU image {record.image_id} is not in the engine and base {BASE_IMAGE} "
                             "is missing; run `bash .ci/docker-setup.sh`") from None
            return record.image_id
        with tempfile.TemporaryDirectory(prefix="isocost-faults-lock-") as tmp:
            try:
                return build_image("cpu", BASE_IMAGE, lock_path=Path(tmp) / "images.lock").image_id
            except UserError as exc:
                raise NotRun(f"the CPU image could not be built: {exc.message}") from None
    finally:
        client.close()


def docker_context(root: Path, model: Path, image: str | None = None) -> Context:
    """Trials in containers of the CPU image, on the local engine (DOCKER_HOST)."""
    from runner.launch.kinds.docker.launcher import DockerLauncher

    image = image or cpu_image()

    def launcher() -> Any:
        return DockerLauncher(image, stack="cpu", kill_grace_s=5)

    return Context(root=root, model=model, launcher_factory=launcher, launcher_name="docker", image=image)


MEMORY_LIMIT_MIB = 600  # a trial of the tiny model peaks near 430 MB


def case_oom_memory_limit(ctx: Context) -> Outcome:
    """The container's memory limit (the study's ``memory_limit_bytes``) kills a trial that takes more."""
    from runner.campaign.launcher_choice import choose_launcher

    study = ctx.study(n=8, repetitions=2, batches="[4]", replace={
        "trial_timeout_s = 300": f"trial_timeout_s = 300\nmemory_limit_bytes = {MEMORY_LIMIT_MIB * 2**20}"})
    out = ctx.root / "out"
    # The launcher as `isocost run --launcher docker` builds it: the limit comes from the study file.
    launcher = choose_launcher(study, "docker", image=ctx.image).launcher
    with fault("allocate-mib:2000"):
        run_campaign(study, out, launcher)
    rows = read_raw(out / "raw.csv")
    first = rows[0]
    ok = (len(rows) == 2 and all(r["status"] == "oom" and r["exit_code"] == "137" and "OOMKilled" in r["notes"]
                                 and r["completed"] == r["observed_ids"] and r["batch_size"] == "4"
                                 and r["corpus_accepted"] == "false" for r in rows)
          and launcher.describe()["mem_limit"] == str(MEMORY_LIMIT_MIB * 2**20))
    return Outcome(f"out of memory: container limit ({MEMORY_LIMIT_MIB} MiB, trial takes 2000 MiB)",
                   ctx.launcher_name, "oom from OOMKilled, completed count kept, campaign goes on, "
                   "no silent smaller batch",
                   f"{first['status']}, completed {first['completed']}, exit {first['exit_code']}; {len(rows)} rows, "
                   f"batch {'/'.join(r['batch_size'] for r in rows)}", rows_lost(out), ok, first["notes"][:140])


def case_engine_restarted(ctx: Context) -> Outcome:
    """The Docker daemon restarted during a trial (a private second engine, never the machine's own)."""
    import tempfile

    import docker
    from private_engine import EngineUnavailable, PrivateEngine

    from runner.launch.kinds.docker.launcher import DockerLauncher

    study = ctx.study(n=8, repetitions=1, batches="[1, 4]")
    out = ctx.root / "out"
    box = PrivateEngine(Path(tempfile.mkdtemp(prefix="isocost-fe-", dir="/tmp")))
    try:
        try:
            box.start()
            main_engine = docker.from_env(timeout=900)
            try:
                how = box.ensure_image(main_engine, ctx.image)
            finally:
                main_engine.close()
        except (EngineUnavailable, OSError, docker.errors.DockerException) as exc:
            raise NotRun(f"no private second engine: {exc}") from None
        client = box.client(timeout_s=120)
        launcher = DockerLauncher(ctx.image, stack="cpu", client=client, kill_grace_s=5, reconnect_s=60)
        first = out / "trials" / "001-r1-batch_size-1"
        restarted = threading.Event()

        def restart_mid_trial() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                predictions = first / "predictions.jsonl"
                if predictions.exists() and predictions.read_text().count("\n") >= 2:
                    box.restart()
                    restarted.set()
                    return
                time.sleep(0.05)

        thread = threading.Thread(target=restart_mid_trial, daemon=True)
        stopped = ""
        with fault("sleep-per-batch:0.5"):
            thread.start()
            try:
                run_campaign(study, out, launcher)
            except UserError as exc:
                stopped = exc.message
            thread.join(timeout=150)
        rows = read_raw(out / "raw.csv")
        row = rows[0] if rows else {}
        leftover = client.containers.list(all=True) if box.answers() else []
        client.close()
        failed = row.get("status") in ("interrupted", "error") and row.get("corpus_accepted") == "false"
        reason = "Docker engine" in row.get("notes", "")
        went_on = len(rows) == 2 and rows[1]["status"] == "ok" and not stopped
        clear_stop = bool(stopped) and "engine" in stopped and len(rows) == 1
        ok = restarted.is_set() and failed and reason and (went_on or clear_stop) and not leftover
        after = (f"campaign went on: next trial {rows[1]['status']}" if went_on
                 else f"campaign stopped: {stopped[:80]}" if stopped else f"{len(rows)} rows")
        return Outcome("Docker daemon restarted during a trial (private engine)", ctx.launcher_name,
                       "trial recorded as failed with the reason; campaign goes on or stops clearly",
                       f"{row.get('status', 'no row')}, completed {row.get('completed', '?')}; {after}",
                       rows_lost(out), ok,
                       f"{row.get('notes', '')[:170]} [image: {how}; leftover containers: {len(leftover)}]")
    finally:
        box.stop()
        shutil.rmtree(box.root, ignore_errors=True)


OUTPUT_LIMIT_BYTES = 2**16  # the smallest output_file_limit_bytes a study may set


def case_output_file_limit(ctx: Context) -> Outcome:
    """A trial writes more than the container's file-size limit: the write fails (EFBIG), the row is kept."""
    from runner.campaign.launcher_choice import choose_launcher

    study = ctx.study(n=1300, repetitions=1, batches="[64]", replace={
        "trial_timeout_s = 300": f"trial_timeout_s = 300\noutput_file_limit_bytes = {OUTPUT_LIMIT_BYTES}"})
    out = ctx.root / "out"
    launcher = choose_launcher(study, "docker", image=ctx.image).launcher
    run_campaign(study, out, launcher)
    rows = read_raw(out / "raw.csv")
    sizes = [(d / "predictions.jsonl").stat().st_size for d in sorted((out / "trials").iterdir())
             if (d / "predictions.jsonl").exists()]
    first = rows[0] if rows else {}
    ok = (len(rows) == 1 and all(r["status"] == "error" and "File too large" in r["notes"]
                                 and r["corpus_accepted"] == "false" for r in rows)
          and all(size <= OUTPUT_LIMIT_BYTES for size in sizes)
          and launcher.describe()["file_size_limit_bytes"] == str(OUTPUT_LIMIT_BYTES))
    return Outcome(f"trial output over the file-size limit ({OUTPUT_LIMIT_BYTES} B, ~75 KB of predictions)",
                   ctx.launcher_name, "write stopped at the limit (EFBIG: 'File too large'); error row kept",
                   f"{first.get('status', 'no row')}, completed {first.get('completed', '?')}; {len(rows)} rows; "
                   f"largest file {max(sizes) if sizes else 0} B", rows_lost(out), ok,
                   first.get("notes", "")[:160])


def case_default_limits_recorded(ctx: Context) -> Outcome:
    """No limit in the study: memory and CPU limits derived from the engine's machine, recorded and applied."""
    import docker as docker_sdk

    from runner.campaign.launcher_choice import choose_launcher

    study = ctx.study(n=4, repetitions=1, batches="[1]")
    out = ctx.root / "out"
    launcher = choose_launcher(study, "docker", image=ctx.image).launcher
    run_campaign(study, out, launcher)
    facts = json.loads((out / "campaign.json").read_text())["launcher"]
    trial = next((out / "trials").iterdir())
    record = json.loads((trial / "launcher.json").read_text())
    client = docker_sdk.from_env(timeout=60)
    try:
        info = client.info()
    finally:
        client.close()
    memory = int(facts.get("mem_limit", "0") or 0) if facts.get("mem_limit", "none") != "none" else 0
    recorded = record.get("limits", {}).get("mem_limit") == str(memory)
    ok = (0 < memory < info["MemTotal"] and facts.get("cpus") == str(info["NCPU"]) and recorded
          and "derived" in facts.get("mem_limit_source", "") and read_raw(out / "raw.csv")[0]["status"] == "ok")
    return Outcome("no limits in the study: defaults from the engine machine", ctx.launcher_name,
                   "memory < MemTotal and all CPUs, recorded in campaign.json and launcher.json; trial ok",
                   f"memory {memory} of {info['MemTotal']} B, cpus {facts.get('cpus')}", rows_lost(out), ok,
                   facts.get("mem_limit_source", "")[:160])


SHARED_DOCKER_CASES = ("oom-runner", "killed-mid-pass", "host-killed-resume", "disk-full", "truncated-predictions",
                       "duplicate-ids", "foreign-ids", "wrong-label-set", "corpus-changed", "model-changed", "hang",
                       "fifo-corpus", "device-corpus", "invalid-utf8-corpus-retry", "study-number-bound",
                       "second-writer", "cut-raw-row", "finished-after-host-death")

DOCKER_CASES: dict[str, Callable[[Context], Outcome]] = {
    **{name: PROCESS_CASES[name] for name in SHARED_DOCKER_CASES},
    "oom-memory-limit": case_oom_memory_limit,
    "engine-restart": case_engine_restarted,
    "output-file-limit": case_output_file_limit,
    "default-limits": case_default_limits_recorded,
}


# Evidence edited after the campaign and links planted where isocost writes (issue 20): tests/faults/evidence_cases.py.
from evidence_cases import EVIDENCE_CASES  # noqa: E402

PROCESS_CASES.update(EVIDENCE_CASES)

# The sentence-embedding task's faults (issue 22): tests/faults/embedding_cases.py.
from embedding_cases import EMBEDDING_CASES, EMBEDDING_DOCKER_CASES  # noqa: E402

PROCESS_CASES.update(EMBEDDING_CASES)
DOCKER_CASES.update({name: EMBEDDING_CASES[name] for name in EMBEDDING_DOCKER_CASES})

# The text-generation task's cases (issue 23), in processes and in containers: tests/faults/generation_cases.py.
from generation_cases import GENERATION_CASES  # noqa: E402

PROCESS_CASES.update(GENERATION_CASES)
DOCKER_CASES.update(GENERATION_CASES)

# The engines' cases (issue 35: ONNX Runtime and vLLM killed mid-pass, vLLM left running): tests/faults/engine_cases.py.
from engine_cases import ENGINE_CASES  # noqa: E402

PROCESS_CASES.update(ENGINE_CASES)

# The serving cases (issue 36: a server trial killed mid-run, its queries failing): tests/faults/serving_cases.py.
from serving_cases import SERVING_CASES  # noqa: E402

PROCESS_CASES.update(SERVING_CASES)
