"""Fault cases of the engines (issue 35): an engine killed mid-pass, an engine left running after an error.

- ``onnxruntime-killed-mid-pass``: an ONNX Runtime trial (the tiny classifier exported at load) is SIGKILLed between
  batches: its row is kept, ``interrupted``, with the completed count and the whole lines of ``predictions.jsonl``.
- ``vllm-killed-mid-pass``: a vLLM trial (the demo's SmolLM2, ``.venv-vllm``'s interpreter) is SIGKILLed between
  batches: nothing in the trial can close its engine, yet neither vLLM's engine core nor its worker may outlive it
  (the process tree is searched after the campaign); its row is kept with the generations it completed.
- ``vllm-left-running``: a vLLM trial fails mid-pass (a simulated out-of-memory error with no resume rule) while its
  engine runs: the trial must close the engine itself, promptly (its own status, not the time limit's kill), its
  row kept, and no engine process left.
- ``vllm-server-port-taken``, ``vllm-server-never-ready``, ``vllm-server-killed-mid-pass``,
  ``vllm-server-bad-request`` (``server = true``: vLLM's HTTP server started by the trial on loopback): another
  listener holds the server's port before it starts (the server exits; the trial is refused, naming the port and
  the log's last lines); the server is not ready within the wait (a 2-second wait, the fault
  ``server-ready-timeout``: it is stopped, the trial refused, its log kept); the server is SIGKILLed before the
  third batch (its requests fail: the trial ends ``error`` naming the failed request, the completed generations
  kept); the third batch's request is sent malformed (``max_tokens = 0``) and the real server answers it with an
  HTTP error (the trial ends ``error`` naming the status, the completed generations kept); the trial itself is
  SIGKILLed while its server runs (``vllm-server-trial-killed``: nothing in the trial can stop the server, which
  shares the trial's process group and session, so the launcher's sweep of the group stops it).
  Each: row kept, no process of the trial's left.

The vLLM cases run where ``.venv-vllm`` exists (``make vllm``); elsewhere they are not run, with the reason
(``ISOCOST_REQUIRE_VLLM=1``, CI after ``make vllm``, makes that a failure). Process launcher only: engine ``vllm``
declares ``launchers = ("process",)``.

Example: ``python tests/faults/fault_table.py --processes onnxruntime-killed-mid-pass vllm-left-running``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cases import Context, NotRun, Outcome, _first_row, fault, rows_lost, run_killing_first_trial  # noqa: I001
from generation_workspace import smollm2_checkpoint, write_generation_workspace

from runner.campaign.run import run_campaign

ROOT = Path(__file__).resolve().parents[2]
REQUIRE_VLLM_ENV = "ISOCOST_REQUIRE_VLLM"
VLLM_BASE = {"deterministic = true\n": 'deterministic = true\nengine = "vllm"\n'}
VLLM_SETTINGS = "\n[engines.vllm]\nmax_model_len = 512\nmax_num_seqs = 8\n"
#: Seconds the engine's processes get to go once their trial is gone (they are killed, not asked).
GONE_WITHIN_S = 15.0


def _whole_ids(path: Path) -> list[str]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line)["id"] for line in text[: text.rfind("\n") + 1].splitlines()]


def case_onnxruntime_killed_mid_pass(ctx: Context) -> Outcome:
    study = ctx.study(n=12, repetitions=1, batches="[1]",
                      replace={"deterministic = true\n": 'deterministic = true\nengine = "onnxruntime"\n'})
    out = ctx.root / "out"
    run_killing_first_trial(ctx, study, out, "predictions.jsonl", lines=3, sleep_s=0.4, wait_s=300)
    row = _first_row(out)
    kept = _whole_ids(out / "trials" / row["trial_id"] / "predictions.jsonl")
    ok = (row["engine"] == "onnxruntime" and row["status"] == "interrupted" and row["corpus_accepted"] == "false"
          and int(row["completed"]) >= 3 and len(kept) == int(row["completed"]))
    return Outcome("ONNX Runtime trial killed mid-pass (SIGKILL)", ctx.launcher_name,
                   "interrupted, completed ids kept whole", f"{row['engine']} {row['status']}, completed "
                   f"{row['completed']}, {len(kept)} whole lines", rows_lost(out), ok, row["notes"][:120])


def vllm_python() -> Path:
    """``.venv-vllm``'s interpreter, or :class:`NotRun` naming ``make vllm``."""
    python = Path(os.environ.get("ISOCOST_VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
    if not python.exists():
        raise NotRun(f"no vLLM environment at {python} (make vllm builds it)", REQUIRE_VLLM_ENV)
    return python


def session_left(out: Path, within_s: float = GONE_WITHIN_S) -> list[str]:
    """Live processes (``pid comm``) of any trial's session in campaign ``out``: the process launcher starts each
    trial as a session leader (its pid in ``launcher.json``), and vLLM's engine core and worker inherit that
    session, so whatever is left of a trial, orphaned or not, is found there (waiting ``within_s`` for it to go)."""
    sessions = {int(json.loads(p.read_text())["pid"]) for p in (out / "trials").glob("*/launcher.json")}
    deadline = time.monotonic() + within_s
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                comm = (entry / "comm").read_text().strip()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[3]) in sessions:
                found.append(f"{entry.name} {comm}")
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def _vllm_study(ctx: Context, **options: object) -> Path:
    vllm_python()
    study = write_generation_workspace(ctx.root / "gen", smollm2_checkpoint(), replace=dict(VLLM_BASE),
                                       extra=VLLM_SETTINGS, **options)  # type: ignore[arg-type]
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return study


def case_vllm_killed_mid_pass(ctx: Context) -> Outcome:
    study = _vllm_study(ctx, n=6, batches="[1]", max_new_tokens=4, timeout=600)
    out = ctx.root / "out"
    run_killing_first_trial(ctx, study, out, "generations.jsonl", lines=2, sleep_s=1.0, wait_s=600)
    left = session_left(out)
    row = _first_row(out)
    kept = _whole_ids(out / "trials" / row["trial_id"] / "generations.jsonl")
    ok = (row["engine"] == "vllm" and row["status"] == "interrupted" and int(row["completed"]) >= 2
          and len(kept) == int(row["completed"]) and not left)
    return Outcome("vLLM trial killed mid-pass (SIGKILL): no engine process survives", ctx.launcher_name,
                   "interrupted, completed kept, no orphan engine core or worker",
                   f"{row['engine']} {row['status']}, completed {row['completed']}, {len(kept)} whole lines, "
                   f"{len(left)} engine process(es) left{': ' + ', '.join(left) if left else ''}",
                   rows_lost(out), ok, row["notes"][:120])


def case_vllm_left_running(ctx: Context) -> Outcome:
    study = _vllm_study(ctx, n=6, batches="[1]", max_new_tokens=4, timeout=600)
    out = ctx.root / "out"
    with fault("oom-at-batch:2"):
        run_campaign(study, out, ctx.launcher_factory())
    left = session_left(out)
    row = _first_row(out)
    status = json.loads((out / "trials" / row["trial_id"] / "status.json").read_text())["status"]
    ok = (row["engine"] == "vllm" and row["status"] == "oom" and status == "oom" and int(row["completed"]) == 2
          and not left)
    return Outcome("vLLM engine left running after an error: the trial closes it", ctx.launcher_name,
                   "oom with 2 completed, status written by the trial, no engine process left",
                   f"{row['engine']} {row['status']} (trial status {status}), completed {row['completed']}, "
                   f"{len(left)} engine process(es) left{': ' + ', '.join(left) if left else ''}",
                   rows_lost(out), ok, row["notes"][:120])


def servers_left(out: Path, within_s: float = GONE_WITHIN_S) -> list[str]:
    """Live vLLM servers of campaign ``out``, wherever they are (a server that escaped the trial's session is not
    found by :func:`session_left`): processes running vLLM's api_server on a port a trial's manifest names."""
    ports = set()
    for manifest in (out / "trials").glob("*/manifest.json"):
        server = (json.loads(manifest.read_text()).get("engine") or {}).get("server") or {}
        if server.get("address"):
            ports.add(server["address"].rsplit(":", 1)[1])
    deadline = time.monotonic() + within_s
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] if argv else "Z"
            except (OSError, IndexError):
                continue
            if state != "Z" and b"vllm.entrypoints.openai.api_server" in argv and b"--port" in argv:
                if argv[argv.index(b"--port") + 1].decode() in ports:
                    found.append(f"{entry.name} api_server")
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def _server_study(ctx: Context) -> Path:
    vllm_python()
    study = write_generation_workspace(ctx.root / "gen", smollm2_checkpoint(), replace=dict(VLLM_BASE),
                                       extra=VLLM_SETTINGS + "server = true\n", n=6, batches="[1]",
                                       max_new_tokens=4, timeout=600)
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return study


def _server_case(ctx: Context, fault_value: str) -> tuple[Path, dict[str, str], dict[str, object], list[str]]:
    """A vLLM study with ``server = true`` run under ``fault_value``: the campaign, its row, the trial's status and
    the processes of the trial left."""
    study = _server_study(ctx)
    out = ctx.root / "out"
    with fault(fault_value):
        run_campaign(study, out, ctx.launcher_factory())
    left = session_left(out) + servers_left(out)
    row = _first_row(out)
    status = json.loads((out / "trials" / row["trial_id"] / "status.json").read_text())
    return out, row, status, left


def case_vllm_server_port_taken(ctx: Context) -> Outcome:
    out, row, status, left = _server_case(ctx, "server-port-taken:1")
    reason = str(status.get("error") or "")
    ok = (row["status"] == "refused" and "exited with code" in reason and "127.0.0.1:" in reason and not left)
    return Outcome("vLLM server's port already taken", ctx.launcher_name, "refused naming the port, nothing left",
                   f"{row['status']}: {reason[:90]}; {len(left)} process(es) left", rows_lost(out), ok,
                   row["notes"][:120])


def case_vllm_server_never_ready(ctx: Context) -> Outcome:
    out, row, status, left = _server_case(ctx, "server-ready-timeout:2")
    reason = str(status.get("error") or "")
    log = out / "trials" / row["trial_id"] / "vllm_server.log"
    ok = (row["status"] == "refused" and "not ready" in reason and log.exists() and not left)
    return Outcome("vLLM server never ready (2 s wait)", ctx.launcher_name,
                   "refused, server stopped, its log kept, nothing left",
                   f"{row['status']}: {reason[:70]}; log kept {log.exists()}; {len(left)} process(es) left",
                   rows_lost(out), ok, row["notes"][:120])


def case_vllm_server_killed_mid_pass(ctx: Context) -> Outcome:
    out, row, status, left = _server_case(ctx, "kill-server-at-batch:2")
    kept = _whole_ids(out / "trials" / row["trial_id"] / "generations.jsonl")
    ok = (row["status"] == "error" and "ServerFailed" in str(status.get("error")) and int(row["completed"]) == 2
          and len(kept) == 2 and not left)
    return Outcome("vLLM server killed mid-pass (SIGKILL)", ctx.launcher_name,
                   "error (the requests' failure named), 2 completed kept, nothing left",
                   f"{row['status']}, completed {row['completed']}, {len(kept)} whole lines, "
                   f"{str(status.get('error'))[:60]}; {len(left)} process(es) left", rows_lost(out), ok,
                   row["notes"][:120])


def case_vllm_server_bad_request(ctx: Context) -> Outcome:
    out, row, status, left = _server_case(ctx, "bad-request-at-batch:2")
    kept = _whole_ids(out / "trials" / row["trial_id"] / "generations.jsonl")
    error = str(status.get("error") or "")
    ok = (row["status"] == "error" and "the server answered HTTP 4" in error and int(row["completed"]) == 2
          and len(kept) == 2 and not left)
    return Outcome("one request answered with an HTTP error by the vLLM server", ctx.launcher_name,
                   "error naming the HTTP status, 2 completed kept, nothing left",
                   f"{row['status']}, completed {row['completed']}, {len(kept)} whole lines, "
                   f"{error[error.find('HTTP'):][:40]}; {len(left)} process(es) left", rows_lost(out), ok,
                   row["notes"][:120])


def case_vllm_server_trial_killed(ctx: Context) -> Outcome:
    study = _server_study(ctx)
    out = ctx.root / "out"
    run_killing_first_trial(ctx, study, out, "generations.jsonl", lines=2, sleep_s=1.0, wait_s=600)
    left = session_left(out) + servers_left(out)
    row = _first_row(out)
    kept = _whole_ids(out / "trials" / row["trial_id"] / "generations.jsonl")
    ok = (row["status"] == "interrupted" and int(row["completed"]) >= 2 and len(kept) == int(row["completed"])
          and not left)
    return Outcome("trial SIGKILLed while its vLLM server runs: the server does not survive", ctx.launcher_name,
                   "interrupted, completed kept, no server or engine process left",
                   f"{row['status']}, completed {row['completed']}, {len(kept)} whole lines, {len(left)} process(es) "
                   f"left{': ' + ', '.join(left) if left else ''}", rows_lost(out), ok, row["notes"][:120])


ENGINE_CASES = {"onnxruntime-killed-mid-pass": case_onnxruntime_killed_mid_pass,
                "vllm-killed-mid-pass": case_vllm_killed_mid_pass,
                "vllm-left-running": case_vllm_left_running,
                "vllm-server-port-taken": case_vllm_server_port_taken,
                "vllm-server-never-ready": case_vllm_server_never_ready,
                "vllm-server-killed-mid-pass": case_vllm_server_killed_mid_pass,
                "vllm-server-bad-request": case_vllm_server_bad_request,
                "vllm-server-trial-killed": case_vllm_server_trial_killed}
