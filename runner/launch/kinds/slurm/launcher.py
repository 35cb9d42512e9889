"""The Slurm launcher: each trial attempt one ``sbatch --parsable --no-requeue`` job, in the campaign's lane.

- **One lane per campaign**: every job of a campaign has the job name ``isocost-<campaign id>``
  and ``--dependency=singleton``, so Slurm runs them one at a time, in the order the schedule
  submits them; another campaign (another partition or GPU type) has its own lane and runs beside it.
- **One node, one card**: the pre-flight job's node (or ``--slurm-node``) and, when GPUs are asked
  for, its card(s) are pinned in campaign.json (``node``, ``gpus``); every job gets
  ``--nodelist=NODE`` and its script refuses to start the trial on another node or card (the job
  ends at once and is submitted again, within the start wait). Each row records ``node``,
  ``job_id``, ``allocated_gpu`` (``SLURM_JOB_GPUS`` and the card's UUID read in the job).
- **Queue time apart**: ``queue_s`` is submit → the job's own start stamp; the ``queue_start`` and
  ``queue_end`` events put it in the campaign period on its own line.
- **Ends**: Slurm's final state mapped by :mod:`runner.launch.kinds.slurm.jobs`; isocost's own trial timeout,
  Ctrl-C and a job that never starts stop the job (:mod:`runner.launch.kinds.slurm.watch`); a lost node
  (NODE_FAIL, PREEMPTED, BOOT_FAIL) or a job that never starts records the trial with the
  host-stop note and stops the campaign (``lost`` says why); ``--resume`` cancels what the lane left.
- **Files** through the shared directory (:mod:`runner.launch.kinds.slurm.preflight`); the job's output is
  the trial's ``trial.log``; ``launcher.json`` keeps the jobs, their states and what each job saw.

Example::

    launcher = SlurmLauncher(SlurmOptions.from_values({"gres": "gpu:1", "shared": "/scratch/me"}))
    run_campaign(Path("study.toml"), Path("/scratch/me/out"), launcher)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import UserError
from protocol.io.safe_write import write_text_atomic
from protocol.records import codec
from protocol.records.codec import read_record
from protocol.records.stages import CampaignRecord, TrialSpec
from runner.campaign_dir.layout import CampaignPaths, log_event, now_iso
from runner.campaign_dir.raw_table import HOST_STOP_NOTE
from runner.launch.kinds.process.launcher import ENV_FIXED
from runner.launch.kinds.slurm.commands import SlurmCommands
from runner.launch.kinds.slurm.jobs import JobInfo, iso_seconds_between, job_end, slurm_seconds_between
from runner.launch.kinds.slurm.options import SlurmOptions
from runner.launch.kinds.slurm.preflight import check_cluster, run_preflight, shared_inputs
from runner.launch.kinds.slurm.record import SlurmRecord
from runner.launch.kinds.slurm.script import (
    CONTAINER_IN,
    CONTAINER_MODEL,
    CONTAINER_OUT,
    FACTS_FILE,
    SCRIPT_FILE,
    JobSpec,
    parse_facts,
    trial_script,
)
from runner.launch.kinds.slurm.watch import stop_job, watch_job
from runner.launch.launcher import HostInterrupt, LauncherBase, LaunchResult, Placement, TrialPaths
from runner.launch.launcher_file import read_launcher_file, save_record
from runner.trial.measure import clock

if TYPE_CHECKING:
    from protocol.study.load import Study

#: Host variables the trial keeps when set (the rest of its environment is fixed, or the job's own).
HOST_ENV_KEEP = ("ISOCOST_FAULT_INJECT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_DIGEST = re.compile(r"^(?:[a-z0-9][a-z0-9._:/-]*@)?sha256:[0-9a-f]{64}$")
_CHECKOUT = Path(__file__).resolve().parents[3]
#: The longest pause between two submissions of a trial whose job got another card (or node) than the campaign's.
RESUBMIT_MAX_S = 30.0


def lane_name(campaign_id: str) -> str:
    """The job name every job of a campaign shares (its lane)."""
    return f"isocost-{campaign_id[:16]}"


class SlurmLauncher(LauncherBase):
    """Runs each trial as one Slurm job on the campaign's pinned node (see the module docstring)."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, *, stack: str = "cpu", image: str = "",
                 trial_timeout_s: float | None = None, commands: SlurmCommands | None = None,
                 poll_s: float = 0.5, kill_grace_s: float = 10.0, mem_limit: str = "", shm_size: str = "") -> None:
        self.options = options
        self.stack = stack
        self.image = _check_image(options.runtime, image)
        self.slurm = commands or SlurmCommands(options.login)
        self.partition = check_cluster(self.slurm, options)
        self.time_limit = options.time_limit(trial_timeout_s)
        self.poll_s, self.kill_grace_s, self.mem_limit, self.shm_size = poll_s, kill_grace_s, mem_limit, shm_size
        self.python = options.python or sys.executable
        self.node, self.gpus, self.image_id = options.node, "", ""
        self.inputs: tuple[Path, Path] | None = None
        self.preflight_facts: dict[str, str] = {}
        self.lost = ""

    # -- identity -------------------------------------------------------------------------

    def describe(self) -> dict[str, str]:
        facts = {"kind": self.name, "runtime": self.options.runtime, "slurm_commands": self.slurm.where,
                 **self.options.facts(), "partition": self.partition, "node": self.node, "gpus": self.gpus,
                 "time_limit": self.time_limit or "(partition default)", "image_ref": self.image,
                 "image_id": self.image_id, "image_digest": self._digest(), "stack": self.stack,
                 **self.preflight_facts}
        if self.options.runtime == "process":
            facts["python"] = self.python
            facts["notice"] = "trials ran as processes inside Slurm jobs, not containers: no image digest is recorded"
        return facts

    def resume_identity(self) -> dict[str, str]:
        return {"kind": self.name, "image_id": self.image_id, "runtime": self.options.runtime, "node": self.node,
                "gpus_per_trial": self.options.gpu.text()}

    def adopt(self, started_with: Mapping[str, str]) -> None:
        """The node and card(s) the campaign is pinned to, and the image ID it ran (unless --slurm-node says else)."""
        if not self.options.node:
            self.node = started_with.get("node", "")
        self.gpus = started_with.get("gpus", "")
        self.image_id = started_with.get("image_id", "")

    def summary(self) -> str:
        where = f"partition {self.partition}" + (f", node {self.node}" if self.node else "")
        image = f", image {self.image}" if self.image else ""
        return f"{self.name} ({self.options.runtime} runtime, {where}, GPUs {self.options.gpu.text()}{image})"

    def check_line(self) -> tuple[str, str]:
        return "launcher", (f"Slurm answers on {self.slurm.where}: {self.summary()}; the pre-flight job runs at "
                            "isocost run")

    def _digest(self) -> str:
        return self.image if "@sha256:" in self.image else ""

    def image_fields(self) -> tuple[str, str, str]:
        return self.image, self.image_id, self._digest()

    # -- before the first trial -------------------------------------------------------------

    def preflight(self, study: Study, out: Path) -> str:
        """Inputs where the nodes see them, then the pre-flight job; pins the node and card(s)."""
        corpus, model = study.corpus.path, study.model.path
        staged_corpus, staged_model, copied = shared_inputs(self.options, out, corpus, model,
                                                            (study.corpus.fingerprint, study.model.fingerprint))
        self.inputs = (staged_corpus, staged_model)
        campaign = out / "campaign.json"
        lane = lane_name(read_record(campaign, CampaignRecord).campaign_id) if campaign.exists() else ""
        pin = run_preflight(self.slurm, self.options, self.partition, out, self.inputs, python=self.python,
                            root=str(_CHECKOUT), image=self.image, lane=lane, corpus_in=self._corpus_in())
        if self.node and pin.node != self.node:
            raise UserError(f"the pre-flight job ran on node {pin.node}, the campaign is pinned to {self.node}",
                            "--slurm-node", "Check the node's name (sinfo -N).")
        if self.image_id and pin.image_id != self.image_id:
            raise UserError(f"the node's engine runs image {pin.image_id} for {self.image}, the campaign ran "
                            f"{self.image_id}", "--image", "Resume with the campaign's exact image.")
        self.node = pin.node
        self.gpus = self.gpus or (pin.gpus if self.options.gpu.how else "")
        self.image_id = pin.image_id
        self.preflight_facts = {"preflight_node": pin.node, "preflight_gpus": pin.gpus,
                                "preflight_queue_s": "" if pin.queue_s is None else f"{pin.queue_s:.3f}",
                                "inputs_as_nodes_see_them": f"{self.inputs[0]} | {self.inputs[1]}"}
        card = f", card {self.gpus}" if self.gpus else ""
        image = f", image ID {self.image_id}" if self.image_id else ""
        return (f"pre-flight job {pin.job_id} on node {pin.node}{card}: inputs read with the same sha256, "
                f"{out} writable{image}; the campaign is pinned to node {self.node}{card}"
                + (f" ({copied})" if copied else ""))

    def _corpus_in(self) -> str:
        suffix = self.inputs[0].suffix if self.inputs else ""
        return f"{CONTAINER_IN}/corpus{suffix}"

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        corpus, model = self.inputs or (paths.corpus.resolve(), paths.model.resolve())
        if self.options.runtime == "process":
            return str(corpus), str(model), str(paths.trial_dir.resolve())
        return self._corpus_in(), CONTAINER_MODEL, CONTAINER_OUT

    # -- one trial ---------------------------------------------------------------------------

    def trial_argv(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the command before SPEC OUT, the words after them) of the process runtime's trial."""
        return (self.python, "-m", "runner.trial"), ()

    def trial_environment(self) -> dict[str, str]:
        """The trial's fixed environment (the job adds PATH, HOME, CUDA_VISIBLE_DEVICES… of its own)."""
        env = {key: os.environ[key] for key in HOST_ENV_KEEP if key in os.environ}
        env.update(ENV_FIXED)
        if self.options.runtime == "process":
            env["PYTHONPATH"] = str(_CHECKOUT)
        else:
            env.update({"HOME": "/tmp", "TMPDIR": "/tmp"})
        return env

    def job_spec(self, trial_dir: Path, lane: str) -> JobSpec:
        corpus, model = self.inputs or (Path(""), Path(""))
        command, suffix = self.trial_argv()
        return JobSpec(trial_dir=str(trial_dir), runtime=self.options.runtime, corpus=str(corpus), model=str(model),
                       lane=lane, node=self.node, gpus=self.gpus, command=command, suffix=suffix,
                       env=self.trial_environment(), corpus_in=self._corpus_in(), image=self.image, stack=self.stack,
                       mem_limit=self.mem_limit, shm_size=self.shm_size, grace_s=int(self.kill_grace_s))

    def job_args(self, trial_dir: Path, lane: str) -> list[str]:
        args = [f"--job-name={lane}", "--dependency=singleton", f"--output={trial_dir / 'trial.log'}",
                "--open-mode=append", f"--chdir={trial_dir}"]
        args += self.options.sbatch_args(node=self.node, time_limit=self.time_limit)
        return args + ([] if self.options.partition else [f"--partition={self.partition}"])

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        trial_dir = paths.trial_dir.resolve()
        spec = read_record(trial_dir / "spec.json", TrialSpec)
        lane = lane_name(spec.campaign_id)
        script = trial_script(self.job_spec(trial_dir, lane))
        write_text_atomic(trial_dir / SCRIPT_FILE, script, trial_dir)  # never through a link, hard or symbolic
        record: dict[str, Any] = {"lane": lane, "runtime": self.options.runtime, "pinned_node": self.node,
                                  "pinned_gpus": self.gpus, "jobs": []}
        events = CampaignPaths(trial_dir.parents[1])
        first_submit = clock()
        while True:
            job = self._submit(trial_dir, lane, script, record, events, spec.trial_id)
            watched = watch_job(self.slurm, job["job_id"], submitted_mono=job["mono"], timeout_s=timeout_s,
                                start_wait_s=max(self.options.start_wait_s - (job["mono"] - first_submit), 1.0),
                                on_start=functools.partial(log_event, events, "queue_end",
                                                           trial_id=trial_dir.name, job_id=job["job_id"]),
                                poll_s=self.poll_s, grace_s=self.kill_grace_s)
            facts = self._job_seen(trial_dir, job, watched.info, watched.cancelled, record)
            if facts.get("refused") and clock() - first_submit < self.options.start_wait_s:
                # Another node or card than the campaign's: nothing ran. Submit again, less often each time.
                time.sleep(min(RESUBMIT_MAX_S, 2.0 ** len(record["jobs"])))
                continue
            return self._result(job, watched, facts, record, trial_dir)

    def _submit(self, trial_dir: Path, lane: str, script: str, record: dict[str, Any], events: CampaignPaths,
                trial_id: str) -> dict[str, Any]:
        submitted_at, mono = now_iso(), clock()
        try:
            job_id = self.slurm.submit(self.job_args(trial_dir, lane), script)
        except UserError as exc:
            self.lost = exc.message
            record["error"] = exc.message
            save_record(trial_dir, record, SlurmRecord)
            raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, notes=(
                f"{exc.message}; {HOST_STOP_NOTE}: the campaign stops here and --resume runs this pass again",),
                placement=Placement())) from None
        job = {"job_id": job_id, "submitted_at": submitted_at, "mono": mono}
        record["jobs"].append({k: v for k, v in job.items() if k != "mono"})
        save_record(trial_dir, record, SlurmRecord)
        log_event(events, "queue_start", trial_id=trial_id, job_id=job_id)
        return job

    def _job_seen(self, trial_dir: Path, job: dict[str, Any], info: JobInfo | None, cancelled: str,
                  record: dict[str, Any]) -> dict[str, Any]:
        """What the job wrote (slurm-job.txt) and Slurm's final word, into launcher.json."""
        try:
            facts: dict[str, Any] = parse_facts((trial_dir / FACTS_FILE).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            facts = {}
        entry = record["jobs"][-1]
        entry.update({"seen": facts, "cancelled_by_isocost": cancelled,
                      "slurm": dataclasses.asdict(info) if info else {}})
        save_record(trial_dir, record, SlurmRecord)
        return facts

    def _result(self, job: dict[str, Any], watched: Any, facts: dict[str, Any], record: dict[str, Any],
                trial_dir: Path) -> LaunchResult:
        info: JobInfo | None = watched.info
        notes = [f"Slurm job {job['job_id']} in lane {record['lane']} on node {facts.get('node') or self.node}"]
        placement = self._placement(job, facts, info)
        if watched.cancelled == "start-wait" or facts.get("refused"):
            wait = f"{self.options.start_wait_s:g} s"
            why = (f"no job got the campaign's {facts['refused']} within {wait}" if facts.get("refused")
                   else f"job {job['job_id']} did not start within {wait}")
            return self._stop_campaign(why, notes, placement, info)
        if info is None:
            said = watched.unanswered or "unknown to scontrol and sacct"
            return self._stop_campaign(f"Slurm lost track of job {job['job_id']} ({said})", notes, placement, None)
        end = job_end(info, cancelled_by_us=watched.cancelled)
        if end.lost:
            return self._stop_campaign(end.note, notes, placement, info)
        if end.note:
            notes.append(end.note)
        interrupted = watched.cancelled == "interrupt"
        if interrupted:
            notes.append(f"{HOST_STOP_NOTE} this trial (Ctrl-C or SIGTERM; job cancelled)")
        code = int(facts["exit_code"]) if str(facts.get("exit_code", "")).lstrip("-").isdigit() else end.exit_code
        wall = None if watched.started_mono is None else watched.ended_mono - watched.started_mono
        result = LaunchResult(exit_code=code, timed_out=end.timed_out, interrupted=interrupted,
                              oom_killed=end.oom_killed or facts.get("oom_killed") == "true", wall_s=wall,
                              image_id=str(facts.get("container_image") or self.image_id), image_digest=self._digest(),
                              notes=tuple(notes), placement=placement)
        if interrupted:
            raise HostInterrupt(result)
        return result

    def _stop_campaign(self, why: str, notes: list[str], placement: Placement, info: JobInfo | None) -> LaunchResult:
        self.lost = why
        raise HostInterrupt(LaunchResult(exit_code=None, interrupted=True, notes=(
            *notes, f"{why}; {HOST_STOP_NOTE}: the campaign stops here and --resume runs this pass again"),
            placement=placement))

    def _placement(self, job: dict[str, Any], facts: dict[str, Any], info: JobInfo | None) -> Placement:
        queue = iso_seconds_between(job["submitted_at"], str(facts.get("started_at", "")))
        if (queue is None or queue < 0) and info is not None:
            queue = slurm_seconds_between(info.submit_time, info.start_time)
        gpus = str(facts.get("job_gpus") or "")
        cards = [c for c in facts.get("cards", []) if gpus and c.split(",")[0].strip() in gpus.split(",")]
        allocated = gpus + (f" ({'; '.join(c.split(',', 1)[1].strip() for c in cards)})" if cards else "")
        return Placement(queue_s=None if queue is None or queue < 0 else queue,
                         node=str(facts.get("node") or (info.node if info else "")), job_id=job["job_id"],
                         allocated_gpu=allocated)

    # -- leftovers --------------------------------------------------------------------------

    def recover_leftovers(self, campaign_root: Path) -> list[str]:
        """Cancel every job the campaign's lane still has (a host CLI stopped, or killed, mid-trial)."""
        lane = lane_name(read_record(campaign_root / "campaign.json", CampaignRecord).campaign_id)
        found = []
        for job_id in self.slurm.lane_jobs(lane):
            info = stop_job(self.slurm, job_id, self.kill_grace_s)
            found.append(f"Slurm job {job_id} of lane {lane} cancelled ({info.state if info else 'gone'})")
        return found

    def stop_leftover(self, trial_dir: Path) -> LaunchResult | None:
        """The trial's last job stopped if it still runs; what Slurm and the job said of its end."""
        try:
            recorded = read_launcher_file(trial_dir)
            record = codec.to_dict(recorded) if recorded is not None else {}
            job = record["jobs"][-1]
        except (UserError, KeyError, IndexError, TypeError):  # no job recorded: nothing of it to stop
            return None
        info = self.slurm.job(job["job_id"])
        if info is not None and not info.final:
            info = stop_job(self.slurm, job["job_id"], self.kill_grace_s)
        facts = self._job_seen(trial_dir, job, info, "resume" if info is not None else "", record)
        end = job_end(info) if info is not None else None
        return LaunchResult(exit_code=end.exit_code if end else None,
                            notes=tuple(n for n in [end.note if end else f"Slurm job {job['job_id']} unknown"] if n),
                            placement=self._placement(job, facts, info))


def _check_image(runtime: str, image: str) -> str:
    """Containers run an image named by digest; the process runtime runs none."""
    if runtime == "process":
        if image:
            raise UserError("--image needs a container runtime", "--slurm-runtime process",
                            "Drop --image, or use --slurm-runtime docker (or pyxis).")
        return ""
    if not image:
        raise UserError(f"the {runtime} runtime needs the trial image", "--image",
                        "Pass --image REPO@sha256:… (isocost images push gives it).")
    if not _DIGEST.match(image) or (runtime == "pyxis" and not image.partition("@")[0]):
        raise UserError(f"image {image!r} is not named by digest", "--image",
                        "Use REPO@sha256:<64 hex> (pyxis pulls from a registry)"
                        + (" or the image ID sha256:<64 hex> the nodes hold" if runtime == "docker" else "") + "; "
                        "never REPO:TAG@sha256:… or a tag alone.")
    if "@" in image and ":" in image.partition("@")[0].rsplit("/", 1)[-1]:
        raise UserError(f"image {image!r} has a tag and a digest", "--image", "Drop the tag: REPO@sha256:….")
    return image
