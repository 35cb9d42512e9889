"""Benchmarks 3 and 4: what a trial costs around its work, and what share of a campaign is measured.

Real campaigns (``runner.campaign.run.run_campaign`` then ``summarize_campaign``, as ``isocost run``
does), one per launcher, over slices of the demo study.

Benchmark 3 (overhead per trial) uses a small corpus, so many trials are cheap: the overhead
does not depend on the pass. Before each trial the bench starts one bare baseline of the same
kind and times it (its seconds are kept out of everything else):

- process: ``python -c 'import torch, transformers'`` with the trial's environment;
- docker: ``docker run --rm`` of the same image with the launcher's hardening flags (network
  none, read-only root, tmpfs /tmp, cap-drop ALL, no-new-privileges, pids limit, init, user,
  environment; no mounts), entry point ``python3 -c 'import torch, transformers'``.
  (Both print their own import time, so the container's share of the baseline is known.)

Per trial, ``overhead`` = (launch → row written) − (load_s + warmup_s + pass_s): container or
process start, Python and the imports, fingerprint check, manifests, prediction writes, exit,
log collection and removal, gathering and validating the predictions, appending the row. It is
split into start (launch → the runner's own clock), in-runner (trial_s − load − warm-up − pass)
and end (the runner's status written → row written). Only completed (``ok``) trials count.

Benchmark 4 (campaign efficiency) runs the demo's whole corpus without baselines:
Σ pass_s / campaign wall time (launcher set-up, freeze, trials, validation and summary). A
deadline keeps it inside the bench's time budget: a trial still running at the deadline is
stopped and recorded as a timeout, as a campaign would.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Spread, fmt_s, judge, ratio_spread
from benchmarks.workspace import Workspace

CONTAINER_TARGET_RATIO = 1.1
#: The bare baseline's program: the imports, timed by itself so its start-up cost can be told apart.
BARE_IMPORT = ("import time; start = time.perf_counter(); import torch, transformers; "
               "print(time.perf_counter() - start)")


def _epoch(text: str) -> float:
    """ISO time → epoch seconds; Docker's nanoseconds are cut to the microseconds Python reads."""
    text = text.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest[:9] if c.isdigit())
        text = f"{head}.{digits[:6]:0<6}{rest[len(digits):]}"
    return datetime.fromisoformat(text).timestamp()


class Bracketed:
    """A launcher that runs (and times) one bare baseline before each trial, then the real trial.

    With ``baseline=None`` it only stamps launch times and enforces ``deadline`` (monotonic s).
    """

    def __init__(self, launcher: Any, baseline: list[str] | None, env: dict[str, str] | None,
                 deadline: float | None = None) -> None:
        self._launcher = launcher
        self._baseline = baseline
        self._env = env
        self._deadline = deadline
        self.name = launcher.name
        self.baseline_s: list[float] = []
        self.baseline_import_s: list[float | None] = []
        self.launched_at: dict[str, float] = {}
        self.baseline_failures: list[str] = []

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._launcher, attribute)

    def run(self, paths: Any, timeout_s: float | None) -> Any:
        if self._baseline is not None:
            start = time.perf_counter()
            done = subprocess.run(self._baseline, env=self._env, capture_output=True, text=True, check=False)
            self.baseline_s.append(time.perf_counter() - start)
            try:
                self.baseline_import_s.append(float(done.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                self.baseline_import_s.append(None)
            if done.returncode != 0:
                self.baseline_failures.append((done.stderr or done.stdout).strip()[-300:])
        if self._deadline is not None:
            left = max(self._deadline - time.monotonic(), 1.0)
            timeout_s = left if timeout_s is None else min(timeout_s, left)
        self.launched_at[paths.trial_dir.name] = time.time()
        return self._launcher.run(paths, timeout_s)


def _process_launcher() -> tuple[Any, list[str], dict[str, str]]:
    from runner.launch.kinds.process.launcher import ProcessLauncher, trial_env

    return ProcessLauncher(), [sys.executable, "-c", BARE_IMPORT], trial_env()


def _docker_launcher(workspace: Workspace, image: str | None) -> tuple[Any, list[str], dict[str, str] | None]:
    """The campaign's Docker launcher, chosen as `isocost run --launcher docker` would; UserError if none."""
    from runner.campaign.launcher_choice import choose_launcher
    from runner.launch.launcher import TrialPaths

    launcher: Any = choose_launcher(workspace.study_path, "docker", image).launcher
    study = workspace.study()
    probe = TrialPaths(trial_dir=workspace.root, corpus=study.corpus.path, model=study.model.path)
    kwargs = launcher._create_kwargs(probe, workspace.root)  # the exact flags each trial container gets
    return launcher, docker_run_command(kwargs), None


def docker_run_command(kwargs: dict[str, Any]) -> list[str]:
    """``docker run`` with a trial container's isolation and limits, running only the imports."""
    args = ["docker", "run", "--rm", "--entrypoint", "python3"]
    if kwargs.get("network_mode"):
        args += ["--network", kwargs["network_mode"]]
    if kwargs.get("read_only"):
        args.append("--read-only")
    for target, options in (kwargs.get("tmpfs") or {}).items():
        args += ["--tmpfs", f"{target}:{options}"]
    for cap in kwargs.get("cap_drop") or []:
        args += ["--cap-drop", cap]
    for option in kwargs.get("security_opt") or []:
        args += ["--security-opt", option]
    if kwargs.get("pids_limit"):
        args += ["--pids-limit", str(kwargs["pids_limit"])]
    if kwargs.get("init"):
        args.append("--init")
    if kwargs.get("user"):
        args += ["--user", kwargs["user"]]
    for key, value in (kwargs.get("environment") or {}).items():
        args += ["--env", f"{key}={value}"]
    if kwargs.get("mem_limit"):
        args += ["--memory", str(kwargs["mem_limit"]), "--memory-swap", str(kwargs.get("memswap_limit"))]
    if kwargs.get("shm_size"):
        args += ["--shm-size", str(kwargs["shm_size"])]
    for device in kwargs.get("devices") or []:
        args += ["--device", device]
    for group in kwargs.get("group_add") or []:
        args += ["--group-add", str(group)]
    if kwargs.get("device_requests"):
        args += ["--gpus", "all"]
    return [*args, kwargs["image"], "-c", BARE_IMPORT]


def run_campaign_with(kind: str, workspace: Workspace, out: Path, image: str | None, progress: Any,
                      baselines: bool = True, deadline: float | None = None) -> dict[str, Any]:
    """Run one campaign (with bracketing baselines if asked); every timing, raw."""
    import runner.campaign.run as campaign_module
    from runner.analysis.summarize import summarize_campaign

    written: dict[str, float] = {}
    original = campaign_module.append_row

    def append_row(path: Path, row: Any) -> None:
        original(path, row)
        written[row.values["trial_id"]] = time.time()

    wall_start = time.perf_counter()
    env: dict[str, str] | None
    if kind == "process":
        launcher, baseline, env = _process_launcher()
    else:
        launcher, baseline, env = _docker_launcher(workspace, image)
    bracketed = Bracketed(launcher, baseline if baselines else None, env, deadline)
    campaign_module.append_row = append_row  # type: ignore[assignment]
    try:
        campaign_module.run_campaign(workspace.study_path, out, bracketed,
                                     progress=lambda message: progress(f"    {message}"))
    finally:
        campaign_module.append_row = original  # type: ignore[assignment]
    trials_done = time.perf_counter()
    summarize_campaign(out)
    wall = time.perf_counter() - wall_start
    validate_s = time.perf_counter() - trials_done

    trials = [_trial_timing(trial_dir, kind, bracketed.launched_at[trial_dir.name], written[trial_dir.name])
              for trial_dir in sorted((out / "trials").iterdir())]
    bare_total = sum(bracketed.baseline_s)
    passes = sum(t["phases"]["pass_s"] or 0.0 for t in trials)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    labels = getattr(getattr(launcher, "image", None), "labels", None)
    return {
        "image_labels": {k: v for k, v in (labels or {}).items() if "revision" in k or "isocost" in k} or None,
        "kind": kind, "launcher": launcher.describe(), "baseline_command": shlex.join(baseline),
        "baseline_s": bracketed.baseline_s, "baseline_import_s": bracketed.baseline_import_s,
        "baseline_failures": bracketed.baseline_failures,
        "trials": trials, "campaign_wall_s": wall - bare_total, "wall_with_baselines_s": wall,
        "validate_and_summary_s": validate_s, "pass_s_total": passes,
        "share_in_passes": passes / (wall - bare_total), "events": events,
    }


def _trial_timing(trial_dir: Path, kind: str, launched: float, row_at: float) -> dict[str, Any]:
    """One trial's timings: launch → row written, and the overhead around its work (load, warm-up, pass)."""
    status = json.loads((trial_dir / "status.json").read_text(encoding="utf-8"))
    phases = status["phases"]
    work = sum(phases[k] or 0.0 for k in ("load_s", "warmup_s", "pass_s"))
    total = row_at - launched
    record = {
        "trial_id": trial_dir.name, "status": status["status"], "phases": phases,
        "launch_to_row_s": total, "overhead_s": total - work,
        "start_s": _epoch(status["started_at"]) - launched,
        "in_runner_s": (phases["trial_s"] or 0.0) - work,
        "in_runner_unattributed_s": (phases["trial_s"] or 0.0) - sum(
            phases[k] or 0.0 for k in ("imports_s", "verify_s", "load_s", "warmup_s", "pass_s", "write_s")),
        "end_s": row_at - _epoch(status["ended_at"]),
    }
    if kind == "docker":
        record["container"] = _container_parts(trial_dir, status, launched, row_at)
    return record


def _container_parts(trial_dir: Path, status: dict[str, Any], launched: float, row_at: float) -> dict[str, float]:
    """Where a container trial's time outside the runner goes (launcher.json times, engine state)."""
    record = json.loads((trial_dir / "launcher.json").read_text(encoding="utf-8"))
    times, state = record.get("times", {}), record.get("state", {})
    try:
        return {
            "launch → create API call": _epoch(times["create_at"]) - launched,
            "create + start API calls": _epoch(times["started_at"]) - _epoch(times["create_at"]),
            "container started → runner clock": _epoch(status["started_at"]) - _epoch(state["StartedAt"]),
            "runner done → container exited": _epoch(state["FinishedAt"]) - _epoch(status["ended_at"]),
            "exited → host saw it": _epoch(times["exit_seen_at"]) - _epoch(state["FinishedAt"]),
            "logs, state, removal": _epoch(times["collected_at"]) - _epoch(times["exit_seen_at"]),
            "gather, validate, row": row_at - _epoch(times["collected_at"]),
        }
    except (KeyError, ValueError, TypeError):
        return {}


def _run_kinds(workspace: Workspace, kinds: tuple[str, ...], image: str | None, progress: Any,
               baselines: bool, deadline: float | None) -> tuple[dict[str, Any], dict[str, str]]:
    from protocol.errors import UserError

    runs: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="isocost-bench-campaign-") as tmp:
        os.environ.setdefault("ISOCOST_HOME", str(Path(tmp) / "home"))  # keep the seen-corpus ledger private
        for kind in kinds:
            where = "containers" if kind == "docker" else "processes"
            if deadline is not None and deadline - time.monotonic() < 60:
                reasons[kind] = "not run: the bench's time budget was spent (machine load); rerun with --only 4"
                progress(f"  campaign in {where}: {reasons[kind]}")
                continue
            progress(f"  campaign in {where}: {workspace.describe()}")
            try:
                runs[kind] = run_campaign_with(kind, workspace, Path(tmp) / kind, image, progress, baselines, deadline)
            except UserError as exc:
                reasons[kind] = f"{exc.what} ({exc.where}). {exc.fix}".strip()
                progress(f"    not run: {reasons[kind]}")
            except Exception as exc:  # the bench reports a launcher that fails, it does not hide it
                reasons[kind] = f"{type(exc).__name__}: {exc}"
                progress(f"    failed: {reasons[kind]}")
    return runs, reasons


def run_overhead(workspace: Workspace, image: str | None = None, progress: Any = print) -> tuple[list[Row], dict]:
    """Rows 3 (container overhead per trial, with its target) and 3p (process overhead, context)."""
    runs, reasons = _run_kinds(workspace, ("docker", "process"), image, progress, baselines=True, deadline=None)
    rows = [_overhead_row("3", "docker", workspace, runs, reasons),
            _overhead_row("3p", "process", workspace, runs, reasons)]
    return rows, runs


def run_efficiency(workspace: Workspace, image: str | None = None, progress: Any = print,
                   deadline: float | None = None) -> tuple[list[Row], dict]:
    """Rows 4a (processes) and 4b (containers): share of the campaign's wall time in measured passes."""
    runs, reasons = _run_kinds(workspace, ("docker", "process"), image, progress, baselines=False, deadline=deadline)
    rows = [_efficiency_row(key, kind, workspace, runs, reasons) for kind, key in (("process", "4a"), ("docker", "4b"))]
    return rows, runs


def _overhead_row(key: str, kind: str, workspace: Workspace, runs: dict[str, Any], reasons: dict[str, str]) -> Row:
    noun = "container" if kind == "docker" else "process (context, no target)"
    title = f"{noun} overhead per trial: launch → runner → exit → row written ({workspace.describe()})"
    baseline_name = "bare docker run … import torch, transformers" if kind == "docker" \
        else "bare python -c 'import torch, transformers'"
    target = f"≤ {CONTAINER_TARGET_RATIO} × bare" if kind == "docker" else ""
    if kind not in runs:
        return Row(key=key, title=title, target=target, reason=reasons.get(kind, "not run"))
    data = runs[kind]
    pairs = [(t, b) for t, b in zip(data["trials"], data["baseline_s"], strict=True) if t["status"] == "ok"]
    if not pairs:
        return Row(key=key, title=title, target=target, reason="no trial completed")
    trials = [t for t, _ in pairs]
    overhead = Spread(tuple(t["overhead_s"] for t in trials))
    bare = Spread(tuple(data["baseline_s"]))
    ratio = ratio_spread([t["overhead_s"] for t, _ in pairs], [b for _, b in pairs])
    parts = {name: Spread(tuple(t[name] for t in trials)).to_dict()
             for name in ("start_s", "in_runner_s", "in_runner_unattributed_s", "end_s", "launch_to_row_s")}
    for name in ("imports_s", "verify_s", "write_s"):
        parts[name] = Spread(tuple(t["phases"][name] or 0.0 for t in trials)).to_dict()
    container = [t["container"] for t in trials if t.get("container")]
    if container:
        parts["container"] = {name: Spread(tuple(c[name] for c in container)).to_dict() for name in container[0]}
    met, why = judge(ratio, CONTAINER_TARGET_RATIO, higher_is_better=False) if kind == "docker" else (None, "")
    imports = [s for s in data["baseline_import_s"] if s is not None]
    bare_imports = Spread(tuple(imports)).to_dict() if imports else None
    split = " + ".join(f"{parts[n]['median']:.2f}" for n in ("start_s", "in_runner_s", "end_s"))
    skipped = len(data["trials"]) - len(trials)
    return Row(
        key=key, title=title,
        measured=f"{fmt_s(overhead, 2)} (start + in-runner + end ≈ {split} s"
                 + (f"; {skipped} trial(s) not ok, left out)" if skipped else ")"),
        baseline=f"{fmt_s(bare, 2)} {baseline_name}",
        ratio=f"{ratio.median:.2f} [{ratio.low:.2f}–{ratio.high:.2f}] overhead/bare",
        target=target, met=met, reason="; ".join([why, *data["baseline_failures"][:1]]).strip("; "),
        details={"overhead_s": overhead.to_dict(), "bare_s": bare.to_dict(), "ratio": ratio.to_dict(),
                 "parts": parts, "bare_import_s": bare_imports, "baseline_command": data["baseline_command"],
                 "launcher": data["launcher"], "image_labels": data.get("image_labels"),
                 "trials": data["trials"]},
    )


def _efficiency_row(key: str, kind: str, workspace: Workspace, runs: dict[str, Any], reasons: dict[str, str]) -> Row:
    where = "containers" if kind == "docker" else "processes"
    title = f"campaign efficiency in {where}: share of wall time in measured passes ({workspace.describe()})"
    if kind not in runs:
        return Row(key=key, title=title, reason=reasons.get(kind, "not run"))
    data = runs[kind]
    failed = [t["trial_id"] for t in data["trials"] if t["status"] != "ok"]
    return Row(
        key=key, title=title,
        measured=f"{data['share_in_passes'] * 100:.1f} % ({data['pass_s_total']:.1f} s of "
                 f"{data['campaign_wall_s']:.1f} s)" + (f"; {len(failed)} trial(s) not ok" if failed else ""),
        reason=f"trials not ok (their time counts, their passes do not): {', '.join(failed)}" if failed else "",
        details={"campaign_wall_s": data["campaign_wall_s"], "pass_s_total": data["pass_s_total"],
                 "validate_and_summary_s": data["validate_and_summary_s"],
                 "per_trial_phases": {t["trial_id"]: t["phases"] for t in data["trials"]},
                 "events": data["events"]},
    )
