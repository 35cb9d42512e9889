"""The batch script of one trial job, per runtime: every value from the study or the host quoted for bash.

Every script starts the same way: it writes what the job sees into ``slurm-job.txt`` in the trial
directory (job id, node, ``SLURM_JOB_GPUS``, ``CUDA_VISIBLE_DEVICES``, the cards' index, UUID and
name from ``nvidia-smi`` where there is one, its start time), then refuses to start the trial on
another node or card than the campaign's (``refused=…``: no trial ran, the launcher submits
again). Then, by runtime:

- ``process``: the trial runner in the cluster's Python (``PYTHON -m runner.trial SPEC OUT``) with
  only the allowed environment (``env -i``), as the process launcher runs it; a TERM (scancel
  signals every process of the job) reaches it directly, and the script waits for its real exit code;
- ``docker``: the container named after the job (``isocost-job-<id>``), the image by digest, the
  lockdown of the Docker launcher (no network, read-only root, cap-drop ALL, non-root user…),
  inputs read-only, exactly the allocated card (``--gpus device=$SLURM_JOB_GPUS``), and a TERM
  trap that stops the container: a container is never inside the job's cgroup, so Slurm alone
  would leave it running. Its image ID and OOM state go into ``slurm-job.txt``;
- ``pyxis``: ``srun --container-image=REGISTRY#REPO@sha256:…`` with the inputs and the trial
  directory mounted, as provider clusters run containers (written here, run only where pyxis is).

Nothing from a study reaches the script unquoted: every path and value goes through ``shlex.quote``.

Example::

    text = trial_script(JobSpec(trial_dir="/shared/out/trials/001-r1-batch_size-1", runtime="process",
                                corpus="/shared/in/corpus.jsonl", model="/shared/in/model", lane="isocost-ab12",
                                command=("/opt/venv/bin/python", "-m", "runner.trial")))
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.engines import device_stack

#: What the job records, one ``key=value`` per line, in the trial directory.
FACTS_FILE = "slurm-job.txt"
#: The script as submitted, kept beside it.
SCRIPT_FILE = "slurm-job.sh"
#: Where the trial sees its inputs and output directory inside a container (as the Docker launcher mounts them).
CONTAINER_IN, CONTAINER_MODEL, CONTAINER_OUT = "/in", "/in/model", "/out"
#: Variables of the job's own environment a process trial keeps (the rest is the fixed environment).
JOB_ENV_ALLOW = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                 "ROCR_VISIBLE_DEVICES")

_STAMP = "$(date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00)"


@dataclass(frozen=True)
class JobSpec:
    """One trial job: where its files are as the node sees them, what runs, and what it is pinned to."""

    trial_dir: str
    runtime: str
    corpus: str
    model: str
    lane: str
    node: str = ""  # "" : not pinned yet
    gpus: str = ""  # the card index(es) the campaign is pinned to ("" : any)
    command: tuple[str, ...] = ()  # process runtime: the trial runner (PYTHON -m runner.trial)
    suffix: tuple[str, ...] = ()  # process runtime: words after SPEC OUT (tests: a fake trial's marker)
    env: Mapping[str, str] = field(default_factory=dict)  # the trial's fixed environment
    corpus_in: str = ""  # docker, pyxis: where the container sees the corpus (/in/corpus<suffix>)
    image: str = ""  # docker: REPO@sha256:… or sha256:…; pyxis: REPO@sha256:…
    stack: str = "cpu"
    user: str = ""  # docker: uid:gid ("" : the job's user, or the image's own when the job runs as root)
    mem_limit: str = ""  # docker: bytes
    shm_size: str = ""  # docker: /dev/shm its engine needs ("512m"; "" : Docker's default, 64 MiB)
    grace_s: int = 10  # docker: how long a stopped container may take to write its status


def q(text: str) -> str:
    return shlex.quote(text)


def trial_script(job: JobSpec) -> str:
    """The whole batch script of one trial job."""
    runtime = {"process": _process, "docker": _docker, "pyxis": _pyxis}[job.runtime]
    lines = [
        "#!/bin/bash",
        f"# isocost trial job of lane {job.lane} ({job.runtime} runtime); written by isocost, submitted with",
        "# sbatch --parsable --no-requeue. Its output is the trial's trial.log.",
        "set -u",
        f"trial_dir={q(job.trial_dir)}",
        f'facts="$trial_dir"/{FACTS_FILE}',
        *_facts(),
        *_pins(job),
        *runtime(job),
        f"printf 'exit_code=%s\\nended_at=%s\\n' \"$code\" \"{_STAMP}\" >> \"$facts\"",
        'exit "$code"',
        "",
    ]
    return "\n".join(lines)


def _facts() -> list[str]:
    return [
        "{",
        "  printf 'job_id=%s\\n' \"${SLURM_JOB_ID:-}\"",
        "  printf 'node=%s\\n' \"${SLURMD_NODENAME:-$(hostname)}\"",
        "  printf 'job_gpus=%s\\n' \"${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}\"",
        "  printf 'cuda_visible_devices=%s\\n' \"${CUDA_VISIBLE_DEVICES:-}\"",
        f"  printf 'started_at=%s\\n' \"{_STAMP}\"",
        "} > \"$facts\"",
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        "  nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader 2>/dev/null | sed 's/^/card=/' >> \"$facts\"",
        "fi",
    ]


def _pins(job: JobSpec) -> list[str]:
    """Refuse another node or card than the campaign's: no trial starts, the launcher submits again."""
    return [
        f"pinned_node={q(job.node)}",
        'if [ -n "$pinned_node" ] && [ "${SLURMD_NODENAME:-}" != "$pinned_node" ]; then',
        '  echo "isocost: job on node ${SLURMD_NODENAME:-?}, the campaign is pinned to $pinned_node: no trial started"',
        "  echo 'refused=node' >> \"$facts\"",
        "  exit 0",
        "fi",
        f"pinned_gpus={q(job.gpus)}",
        'if [ -n "$pinned_gpus" ] && [ "${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}" != "$pinned_gpus" ]; then',
        '  echo "isocost: job given card(s) ${SLURM_JOB_GPUS:-?}, the campaign runs on $pinned_gpus: no trial started"',
        "  echo 'refused=card' >> \"$facts\"",
        "  exit 0",
        "fi",
    ]


def _env_words(env: Mapping[str, str]) -> str:
    return " ".join(q(f"{key}={env[key]}") for key in sorted(env))


def _wait_child() -> list[str]:
    """Wait for the backgrounded trial; after a trapped TERM, wait again for its real exit code."""
    return [
        "child=$!",
        "wait \"$child\"; code=$?",
        "while kill -0 \"$child\" 2>/dev/null; do wait \"$child\"; code=$?; done",
    ]


def _process(job: JobSpec) -> list[str]:
    kept = " ".join(f'${{{name}+"{name}=${name}"}}' for name in JOB_ENV_ALLOW)
    spec = f"{job.trial_dir}/spec.json"
    argv = " ".join(q(word) for word in (*job.command, spec, job.trial_dir, *job.suffix))
    return [
        'cd "$trial_dir" || exit 3',
        "trap ':' TERM INT  # Slurm signals the trial itself; the script waits for its real exit code",
        f"env -i {kept} {_env_words(job.env)} {argv} &",
        *_wait_child(),
    ]


def _docker_gpu(stack: str) -> list[str]:
    """Exactly the allocated card(s): the job's SLURM_JOB_GPUS, as the node numbers them."""
    if stack == "cuda":
        return ['gpus="${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}"',
                'if [ -n "$gpus" ]; then',
                '  gpu_args=(--gpus "device=$gpus" -e NVIDIA_DRIVER_CAPABILITIES=compute,utility)',
                "fi"]
    if stack == "rocm":
        return ['gpus="${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-}}"',
                'gpu_args=(--device /dev/kfd --device /dev/dri --security-opt seccomp=unconfined '
                '-e "ROCR_VISIBLE_DEVICES=$gpus")']
    return []


def _docker_user(job: JobSpec) -> list[str]:
    """The container's user: given, the job's own, or (a root job) the image's own, lent the trial directory."""
    return [
        f"user={q(job.user)}",
        "lend=0",
        'if [ -z "$user" ]; then',
        '  if [ "$(id -u)" = 0 ]; then user=$(docker image inspect --format "{{.Config.User}}" "$image"); lend=1;',
        '  else user="$(id -u):$(id -g)"; fi',
        "fi",
        'case "$user" in ""|0|0:*|root|root:*)',
        '  echo "isocost: trial containers never run as root (image user: ${user:-none})"; code=3',
        "  printf 'exit_code=%s\\n' \"$code\" >> \"$facts\"; exit \"$code\";;",
        "esac",
        'if [ "$lend" = 1 ]; then owner=$(stat -c %u:%g "$trial_dir"); chown "$user" "$trial_dir"; fi',
    ]


def _docker(job: JobSpec) -> list[str]:
    mounts = [f"type=bind,src={job.corpus},dst={job.corpus_in},readonly",
              f"type=bind,src={job.model},dst={CONTAINER_MODEL},readonly"]
    memory = f"--memory {q(job.mem_limit)} --memory-swap {q(job.mem_limit)} " if job.mem_limit else ""
    memory += f"--shm-size {q(job.shm_size)} " if job.shm_size else ""
    env = " ".join(f"-e {q(f'{key}={job.env[key]}')}" for key in sorted(job.env))
    return [
        'name="isocost-job-${SLURM_JOB_ID:-0}"',
        f"image={q(job.image)}",
        *_docker_user(job),
        "gpu_args=()",
        *_docker_gpu(device_stack(job.stack)),
        f"stop_container() {{ docker kill --signal TERM \"$name\" >/dev/null 2>&1; "
        f"timeout {int(job.grace_s)} docker wait \"$name\" >/dev/null 2>&1; docker rm -f \"$name\" >/dev/null 2>&1; }}",
        "trap 'stop_container' TERM INT",
        "# The lane runs one job at a time: any container of it still here was left by an earlier job.",
        f"docker ps -aq --filter {q('label=org.isocost.lane=' + job.lane)} | xargs -r docker rm -f >/dev/null 2>&1",
        'docker rm -f "$name" >/dev/null 2>&1',
        "docker run --name \"$name\" --label org.isocost.kind=slurm-trial "
        f"--label {q('org.isocost.lane=' + job.lane)} --label \"org.isocost.job_id=${{SLURM_JOB_ID:-}}\" "
        "--init --network none --read-only --tmpfs /tmp:rw,noexec,nosuid,nodev,size=256m,mode=1777 "
        "--cap-drop ALL --security-opt no-new-privileges --pids-limit 512 --ulimit fsize=4294967296 "
        f'--user "$user" {memory}'
        + " ".join(f"--mount {q(m)}" for m in mounts)
        + f' --mount "type=bind,src=$trial_dir,dst={CONTAINER_OUT}" {env} "${{gpu_args[@]}}" "$image" '
        f"{CONTAINER_OUT}/spec.json {CONTAINER_OUT} &",
        *_wait_child(),
        "printf 'container_image=%s\\n' \"$(docker inspect --format '{{.Image}}' \"$name\" 2>/dev/null)\" "
        ">> \"$facts\"",
        "printf 'oom_killed=%s\\n' \"$(docker inspect --format '{{.State.OOMKilled}}' \"$name\" 2>/dev/null)\" "
        ">> \"$facts\"",
        'docker rm -f "$name" >/dev/null 2>&1',
        'if [ "$lend" = 1 ]; then chown "$owner" "$trial_dir"; fi',
    ]


def enroot_uri(image: str) -> str:
    """pyxis/enroot name an image REGISTRY#REPO@sha256:…, the registry set apart by '#'.

    Example: ``enroot_uri("ghcr.io/acme/isocost-cuda@sha256:ab…") == "ghcr.io#acme/isocost-cuda@sha256:ab…"``.
    """
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def _pyxis(job: JobSpec) -> list[str]:
    mounts = ",".join([f"{job.corpus}:{job.corpus_in}:ro", f"{job.model}:{CONTAINER_MODEL}:ro",
                       f"{job.trial_dir}:{CONTAINER_OUT}"])
    exports = [f"export {q(f'{key}={job.env[key]}')}" for key in sorted(job.env)]
    return [
        *exports,
        "trap ':' TERM INT  # Slurm signals the step; the script waits for srun's exit code",
        f"srun --ntasks=1 --container-image={q(enroot_uri(job.image))} --container-mounts={q(mounts)} "
        f"--container-workdir={CONTAINER_OUT} --no-container-mount-home --no-container-remap-root "
        f"--no-container-entrypoint python3 -m runner.trial {CONTAINER_OUT}/spec.json {CONTAINER_OUT} &",
        *_wait_child(),
    ]


def parse_facts(text: str) -> dict[str, str | list[str]]:
    """``slurm-job.txt`` as a dict; ``card`` lines (index, UUID, name) become a list."""
    facts: dict[str, str | list[str]] = {}
    cards: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "card":
            cards.append(value.strip())
        else:
            facts[key.strip()] = value.strip()
    facts["cards"] = cards
    return facts
