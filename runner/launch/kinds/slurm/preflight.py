"""Before the first trial: the cluster's answers checked, the inputs where the nodes see them, one pre-flight job.

:func:`check_cluster` asks ``sinfo`` and refuses an unknown or unavailable partition, a GRES or
GPU type no node of it has, a pinned node outside it. :func:`shared_inputs` keeps ``--out`` inside
the declared shared directory and copies inputs that are outside it into
``SHARED/.isocost-inputs/<fingerprint>/`` (checked by fingerprint after the copy, reused when it
matches). :func:`run_preflight` then submits one short job with the campaign's partition, GPUs and
node; on the compute node it writes, into ``--out``:

- the node and the card(s) it was given (the campaign is pinned to them);
- the sha256 of the corpus and of every model file as the node reads them (compared here);
- for ``process``: that the cluster's Python imports the trial runner; for ``docker``: the
  engine, the image (pulled by digest if absent) and its ID, leftover trial containers of the
  lane removed, and that the trial's user reads the inputs inside a container; for ``pyxis``: that
  srun has ``--container-image``.

A job that never starts within the declared wait, a node that cannot see the inputs or write into
``--out``, or another byte at an input's path: a UserError before any trial is timed.

Example::

    pin = run_preflight(slurm, options, Path("/shared/out"), corpus, model, image="", lane="")
    pin.node, pin.gpus      # ("gpu07", "3")
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_file
from runner.launch.kinds.slurm.commands import NodeRow, SlurmCommands
from runner.launch.kinds.slurm.jobs import JobInfo, job_end
from runner.launch.kinds.slurm.options import SlurmOptions
from runner.launch.kinds.slurm.script import parse_facts, q

#: How long the pre-flight job may run once started.
PREFLIGHT_RUN_S = 600.0
_POLL_S = 0.5


@dataclass(frozen=True)
class Pin:
    """What the pre-flight job found on its node: the campaign runs there, on that card."""

    node: str
    gpus: str
    image_id: str = ""
    queue_s: float | None = None
    job_id: str = ""
    cleaned: str = ""


def check_cluster(slurm: SlurmCommands, options: SlurmOptions) -> str:
    """The partition the jobs go to (named, or the default), checked against sinfo with the GPUs and the node."""
    rows = slurm.nodes()
    if not rows:
        raise UserError(f"sinfo lists no node on {slurm.where}", "--launcher slurm",
                        "Check SLURM_CONF (the cluster's slurm.conf) and that slurmctld answers.")
    partitions = sorted({row.partition for row in rows})
    name = options.partition or next((row.partition for row in rows if row.default), "")
    if not name:
        raise UserError("the cluster has no default partition", "--slurm-partition",
                        f"Name one: {', '.join(partitions)}.")
    mine = [row for row in rows if row.partition == name]
    if not mine:
        raise UserError(f"unknown partition {name!r}", "--slurm-partition", f"Use one of: {', '.join(partitions)}.")
    if mine[0].available != "up":
        raise UserError(f"partition {name} is {mine[0].available}", "--slurm-partition",
                        "Choose a partition that is up (sinfo), or ask the cluster's admins.")
    if options.node and options.node not in {row.node for row in mine}:
        raise UserError(f"node {options.node} is not in partition {name}", "--slurm-node",
                        f"Use one of: {', '.join(sorted({row.node for row in mine}))}.")
    candidates = [row for row in mine if not options.node or row.node == options.node]
    if options.gpu.how:
        _check_gpus(options, candidates, name)
    check_node_size(options.extra, candidates, name)
    return name


#: Slurm's memory units (``--mem=SIZE[K|M|G|T]``, M when none), in MB.
_MEM_UNITS_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}


def _arg_value(extra: tuple[str, ...], name: str) -> str | None:
    values = [arg.split("=", 1)[1] for arg in extra if arg.startswith(f"--{name}=")]
    return values[-1] if values else None


def _memory_mb(text: str) -> float | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?", text.strip().upper())
    return float(match.group(1)) * _MEM_UNITS_MB[match.group(2) or "M"] if match else None


def check_node_size(extra: tuple[str, ...], rows: list[NodeRow], partition: str) -> None:
    """Refuse ``--slurm-arg=--mem=…`` (or ``--cpus-per-task``, ``--mem-per-cpu`` × CPUs) that no node of the partition
    has: sbatch would refuse the pre-flight job at ``isocost run`` ("Requested node configuration is not
    available"); sinfo's %m and %c say so at ``isocost check``. A node sinfo lists without a size is not judged."""
    cpus_text = _arg_value(extra, "cpus-per-task")
    cpus = int(cpus_text) if cpus_text and cpus_text.isdigit() else 1
    known_cpus = [row.cpus for row in rows if row.cpus is not None]
    if cpus_text and known_cpus and cpus > max(known_cpus):
        raise UserError(f"no node of partition {partition} has the {cpus} CPUs "
                        f"--slurm-arg=--cpus-per-task={cpus_text} asks for (most: {max(known_cpus)}): sbatch would "
                        "refuse every job", "--slurm-arg",
                        f"Ask for at most {max(known_cpus)} CPUs, or choose a partition with larger nodes "
                        "(sinfo -N -l).")
    for name, factor in (("mem", 1), ("mem-per-cpu", cpus)):
        text = _arg_value(extra, name)
        wanted = _memory_mb(text) if text else None
        known = [row.memory_mb for row in rows if row.memory_mb is not None]
        if wanted is None or wanted == 0 or not known or wanted * factor <= max(known):
            continue  # --mem=0: the whole node's memory
        per = f" × {cpus} CPUs" if factor != 1 else ""
        raise UserError(f"no node of partition {partition} has the memory --slurm-arg=--{name}={text} asks for "
                        f"({wanted * factor:,.0f} MB{per}; the largest node has {max(known):,} MB): sbatch would "
                        "refuse every job", "--slurm-arg",
                        f"Ask for at most {max(known) // max(factor, 1)}M (--slurm-arg=--{name}="
                        f"{max(known) // max(factor, 1)}M), or choose a partition with larger nodes (sinfo -N -l).")


def _check_gpus(options: SlurmOptions, rows: list[NodeRow], partition: str) -> None:
    """Some node of the partition has the GPU type asked for, at least as many as asked."""
    offered: dict[str, int] = {}
    for row in rows:
        per_type: dict[str, int] = {}
        for gres in row.gres:
            parts = gres.split(":")
            if parts[0] != "gpu" or not parts[-1].isdigit():
                continue
            kind = parts[1] if len(parts) == 3 else ""
            per_type[kind] = per_type.get(kind, 0) + int(parts[-1])
        per_type[""] = sum(count for kind, count in per_type.items() if kind) or per_type.get("", 0)
        for kind, count in per_type.items():
            offered[kind] = max(offered.get(kind, 0), count)
    want = options.gpu
    have = offered.get(want.type, 0)
    if have < want.count:
        listed = ", ".join(f"gpu:{k}:{n}" if k else f"gpu:{n}" for k, n in sorted(offered.items()) if n) or "none"
        flag = f"--slurm-{want.how}"
        raise UserError(f"no node of partition {partition} offers {want.text()} (GPUs there: {listed})", flag,
                        "Ask for a type and count that sinfo -o %G lists for the partition.")


def check_shared(options: SlurmOptions, out: Path | None) -> Path:
    """``--slurm-shared`` exists here and holds ``--out`` (when given): ``run``'s pre-flight and ``check`` refuse
    the same way."""
    assert options.shared is not None
    shared = options.shared.resolve()
    if not shared.is_dir():
        raise UserError(f"the shared directory {shared} does not exist here", "--slurm-shared",
                        "Give a directory this machine and the compute nodes both mount (e.g. /scratch/$USER).")
    if out is not None and not out.resolve().is_relative_to(shared):
        raise UserError(f"--out {out} is outside the shared directory {shared}: the compute nodes could not "
                        "write the trials' files", "--out", f"Put --out inside {shared}.")
    return shared


def shared_inputs(options: SlurmOptions, out: Path, corpus: Path, model: Path,
                  fingerprints: tuple[str, str]) -> tuple[Path, Path, str]:
    """The corpus and model as the nodes see them (copied into the shared directory when outside it); a note."""
    if options.shared is None:
        return corpus.resolve(), model.resolve(), ""
    shared = check_shared(options, out)
    staged, notes = [], []
    for kind, path, fingerprint in (("corpus", corpus, fingerprints[0]), ("model", model, fingerprints[1])):
        path = path.resolve()
        if path.is_relative_to(shared):
            staged.append(path)
            continue
        target = shared / ".isocost-inputs" / fingerprint.replace("sha256:", "")[:24] / path.name
        if not target.exists() or fingerprint_path(target) != fingerprint:
            _copy(path, target)
            notes.append(f"{kind} copied to {target}")
        else:
            notes.append(f"{kind} found at {target}")
        if fingerprint_path(target) != fingerprint:
            raise UserError(f"the {kind} copied to {target} does not have the study's fingerprint {fingerprint}",
                            "--slurm-shared", "Check the shared file system (space, quota), then run again.")
        staged.append(target)
    return staged[0], staged[1], "; ".join(notes)


def _copy(source: Path, target: Path) -> None:
    partial = target.with_name(target.name + f".partial-{uuid.uuid4().hex[:8]}")
    partial.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, partial, symlinks=False)
    else:
        shutil.copyfile(source, partial)
    if target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    partial.rename(target)


def local_sums(corpus: Path, model: Path) -> dict[str, str]:
    """sha256 of the corpus and of every model file by relative path, as the node's listing names them."""
    sums = {"corpus": sha256_file(corpus).removeprefix("sha256:")}
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        sums[f"model/{path.relative_to(model).as_posix()}"] = sha256_file(path).removeprefix("sha256:")
    return sums


def preflight_script(report: Path, corpus: str, model: str, runtime_lines: list[str]) -> str:
    """The pre-flight job: what the node sees, written to ``report`` in one move (absent: it could not write)."""
    return "\n".join([
        "#!/bin/bash",
        "# isocost pre-flight job: can a compute node read the inputs and write the trials' directory?",
        "set -u",
        f"report={q(str(report))}",
        "{",
        "  printf 'node=%s\\njob_gpus=%s\\n' \"${SLURMD_NODENAME:-}\" \"${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}\"",
        "  printf 'started_at=%s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00)\"",
        f"  sha256sum {q(corpus)} | sed 's/^\\([0-9a-f]*\\).*/sum=corpus \\1/'",
        f"  (cd {q(model)} && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)"
        " | sed 's|^\\([0-9a-f]*\\)  \\./\\(.*\\)$|sum=model/\\2 \\1|'",
        *("  " + line for line in runtime_lines),
        '} > "$report.partial" 2>&1',
        'mv "$report.partial" "$report"',
        "",
    ])


def runtime_checks(options: SlurmOptions, python: str, root: str, image: str, lane: str, user_check: str) -> list[str]:
    """The runtime's part of the pre-flight job (see the module docstring)."""
    if options.runtime == "process":
        return [f"if env PYTHONPATH={q(root)} {q(python)} -c 'import runner.trial.run' >/dev/null 2>&1; "
                "then echo python=ok; else echo python=FAILED; fi"]
    if options.runtime == "pyxis":
        return ["if srun --help 2>/dev/null | grep -q -- --container-image; then echo pyxis=ok; "
                "else echo pyxis=missing; fi"]
    lines = [
        "echo \"engine=$(docker version --format '{{.Server.Version}}' 2>/dev/null)\"",
        f"image={q(image)}",
        'docker image inspect "$image" >/dev/null 2>&1 || docker pull "$image" >/dev/null 2>&1',
        "echo \"image_id=$(docker image inspect --format '{{.Id}}' \"$image\" 2>/dev/null)\"",
    ]
    if lane:
        lines.append(f"echo \"cleaned=$(docker ps -aq --filter {q('label=org.isocost.lane=' + lane)} | "
                     "xargs -r docker rm -f | wc -l)\"")
    return lines + [user_check]


def submit_and_wait(slurm: SlurmCommands, args: list[str], script: str, start_wait_s: float,
                    what: str) -> tuple[str, JobInfo, float | None]:
    """Submit a job and wait until it ends (bounded): (job id, its final state, seconds queued)."""
    job_id = slurm.submit(args, script)
    submitted = time.monotonic()
    started: float | None = None
    deadline_run = None
    while True:
        info = slurm.job(job_id)
        now = time.monotonic()
        if info is not None and info.final:
            return job_id, info, (started - submitted) if started else None
        if info is not None and not info.queued and started is None:
            started, deadline_run = now, now + PREFLIGHT_RUN_S
        if started is None and now - submitted > start_wait_s:
            slurm.cancel(job_id)
            reason = f"state {info.state}, reason {info.reason}" if info else "unknown to scontrol"
            raise UserError(f"the {what} job {job_id} did not start within {start_wait_s:g} s ({reason}); it was "
                            "cancelled and no trial was started", "--slurm-start-wait",
                            "Wait for the partition to have room (squeue, sinfo), ask for other GPUs or another "
                            "partition, or declare a longer --slurm-start-wait.")
        if deadline_run is not None and now > deadline_run:
            slurm.cancel(job_id)
            raise UserError(f"the {what} job {job_id} ran longer than {PREFLIGHT_RUN_S:g} s and was cancelled",
                            "--launcher slurm", "See its output, then try again.")
        time.sleep(_POLL_S)


def read_report(report: Path, job_id: str, info: JobInfo, out: Path) -> dict[str, str | list[str]]:
    """The pre-flight job's report; UserError when the node wrote none (it cannot see or write --out)."""
    try:
        text = report.read_text(encoding="utf-8", errors="replace")
    except OSError:
        end = job_end(info)
        raise UserError(f"the pre-flight job {job_id} ran on node {info.node or '?'} ({end.note or info.state}) but "
                        f"wrote nothing into {out}: the compute node cannot see or write that directory",
                        "--slurm-shared", "Put --out (and the inputs) in a directory the compute nodes mount, and "
                        "declare it with --slurm-shared.") from None
    finally:
        for leftover in (report, report.with_name(report.name + ".partial")):
            leftover.unlink(missing_ok=True)
    facts = parse_facts(text)
    facts["sums"] = [line.removeprefix("sum=") for line in text.splitlines() if line.startswith("sum=")]
    return facts


def compare_sums(facts: dict[str, str | list[str]], local: dict[str, str], corpus: Path, model: Path) -> None:
    """The node read the same bytes at every input path as this machine."""
    seen = dict(entry.rsplit(" ", 1) for entry in facts.get("sums", []) if " " in entry)
    for name, digest in local.items():
        path = corpus if name == "corpus" else model / name.removeprefix("model/")
        if seen.get(name) != digest:
            found = f"sha256 {seen[name][:12]}…" if name in seen else "nothing"
            raise UserError(f"a compute node reads {found} at {path}, this machine sha256 {digest[:12]}…",
                            "--slurm-shared", "The inputs must be on a file system the nodes share: put them in "
                            "the shared directory, or declare it with --slurm-shared to have them copied there.")
    extra = sorted(set(seen) - set(local))
    if extra:
        raise UserError(f"a compute node sees files this machine does not ({extra[0]}, in {model})", "--slurm-shared",
                        "The inputs must be the same on both sides: use the shared directory.")


def user_check_line(corpus_in: str, corpus: str, model: str, image_user: str) -> str:
    """A container of the image, as the trial's user, reads every input through read-only mounts."""
    probe = ("import os\n"
             f"paths = [{corpus_in!r}] + [os.path.join(d, f) for d, _, fs in os.walk('/in/model') for f in fs]\n"
             "bad = [p for p in paths if not os.access(p, os.R_OK)]\n"
             "print('read=' + ('ok' if not bad else 'FAILED ' + bad[0]))\n")
    user = q(image_user) if image_user else '"$(if [ "$(id -u)" = 0 ]; then docker image inspect --format ' \
                                            '"{{.Config.User}}" "$image"; else echo "$(id -u):$(id -g)"; fi)"'
    return (f"docker run --rm --network none --read-only --cap-drop ALL --user {user} "
            f"--mount {q(f'type=bind,src={corpus},dst={corpus_in},readonly')} "
            f"--mount {q(f'type=bind,src={model},dst=/in/model,readonly')} --entrypoint python3 \"$image\" "
            f"-c {q(probe)} 2>&1 | tail -n 1")


def runtime_problem(options: SlurmOptions, facts: dict[str, str | list[str]], image: str) -> str:
    """What the runtime's part of the report says is missing ("" when nothing is)."""
    if options.runtime == "process" and facts.get("python") != "ok":
        return (f"the cluster's Python {options.python or '(this interpreter)'} cannot import isocost's trial runner "
                "on the node: give --slurm-python a Python with isocost's dependencies installed, on a path the "
                "nodes see")
    if options.runtime == "pyxis" and facts.get("pyxis") != "ok":
        return "srun on the node has no --container-image option: pyxis is not installed there (use --slurm-runtime " \
               "process or docker)"
    if options.runtime == "docker":
        if not facts.get("engine"):
            return "no Docker engine answers on the node (docker version): use --slurm-runtime process or pyxis"
        if not facts.get("image_id"):
            return f"the node's engine has no image {image} and could not pull it by digest"
        if facts.get("read") != "ok":
            return f"the trial container's user cannot read the inputs on the node ({facts.get('read') or 'no answer'})"
    return ""


def preflight_args(options: SlurmOptions, partition: str, token: str) -> list[str]:
    """sbatch options of the pre-flight job: the campaign's own placement, a short time limit."""
    return [f"--job-name=isocost-preflight-{token}", *options.sbatch_args(node=options.node, time_limit="10"),
            *([] if options.partition else [f"--partition={partition}"]), "--output=/dev/null"]




def run_preflight(slurm: SlurmCommands, options: SlurmOptions, partition: str, out: Path, inputs: tuple[Path, Path],
                  *, python: str, root: str, image: str, lane: str, corpus_in: str) -> Pin:
    """Submit the pre-flight job, wait for it (bounded) and check its report; the node and card(s) to pin."""
    corpus, model = inputs
    token = uuid.uuid4().hex[:12]
    report = out.resolve() / f".isocost-preflight-{token}.txt"
    user_check = user_check_line(corpus_in, str(corpus), str(model), "") if options.runtime == "docker" else ""
    script = preflight_script(report, str(corpus), str(model),
                              runtime_checks(options, python, root, image, lane, user_check))
    job_id, info, queue_s = submit_and_wait(slurm, preflight_args(options, partition, token), script,
                                            options.start_wait_s, "pre-flight")
    if info.state == "CANCELLED" and not info.node and not report.exists():  # cancelled while it waited
        raise UserError(f"the pre-flight job {job_id} ended {info.state} before it started (reason {info.reason}); "
                        "no trial was started", "--launcher slurm", "See why with scontrol show job, then run again.")
    facts = read_report(report, job_id, info, out)
    compare_sums(facts, local_sums(corpus, model), corpus, model)
    problem = runtime_problem(options, facts, image)
    if problem:
        raise UserError(f"{problem} (pre-flight job {job_id} on node {facts.get('node') or '?'})", "--slurm-runtime",
                        "Fix the node's set-up or choose another runtime; nothing was timed.")
    return Pin(node=str(facts.get("node") or info.node), gpus=str(facts.get("job_gpus") or ""),
               image_id=str(facts.get("image_id") or ""), queue_s=queue_s, cleaned=str(facts.get("cleaned") or ""),
               job_id=job_id)
