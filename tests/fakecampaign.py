"""Fast fake campaigns for the campaign-directory tests: real host code, fake trials.

The host side (freeze, schedule, raw table, lock, resume) is the real ``runner.campaign.run``;
only the trial is fake: a small Python process that writes the same files a real trial
writes (``manifest.json``, ``predictions.jsonl`` flushed per input, ``status.json``) with
every prediction correct, in about ``ISOCOST_FAKE_TRIAL_S`` seconds. The model directory holds
a word-level ``tokenizer.json`` (token counting on the host) and a ``config.json``; no torch.

Used in two ways::

    python tests/fakecampaign.py host STUDY OUT [--resume]   # a host CLI that can be SIGKILLed
    python tests/fakecampaign.py trial SPEC OUT_DIR runner.trial  # one fake trial (what the host runs)

The trailing ``runner.trial`` word lets ``--resume`` recognise (and stop) a leftover fake trial the
way it recognises a real one, by its command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(TESTS))

from recordfiles import manifest_for  # noqa: E402
from workspace import WORDS, write_workspace  # noqa: E402

from protocol.records.codec import read_record, write_record  # noqa: E402
from protocol.records.stages import MemoryPeaks, PhaseTimes, TrialSpec, TrialStatus  # noqa: E402
from runner.launch.kinds.process.launcher import ProcessRecord  # noqa: E402
from runner.launch.launcher import LauncherBase, LaunchResult, TrialPaths  # noqa: E402
from runner.launch.launcher_file import write_launcher_file  # noqa: E402

SCRIPT = Path(__file__).resolve()


def build_fake_model(out: Path) -> Path:
    """A model directory the host can count tokens with (no weights: trials are fake)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    out.mkdir(parents=True)
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(sorted(set(WORDS)))}}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "config.json").write_text(json.dumps({"model_type": "bert", "id2label": {"0": "x", "1": "y"},
                                                 "label2id": {"x": 0, "y": 1}}), encoding="utf-8")
    return out


def fake_workspace(root: Path, **options: Any) -> Path:
    """A tiny workspace (corpus, tuning split, fake model, study); returns the study path."""
    model = build_fake_model(root.parent / f"{root.name}-model")
    return write_workspace(root, model, **options)


class FakeLauncher(LauncherBase):
    """Runs each trial as ``fakecampaign.py trial`` in its own session, like the process launcher."""

    name = "process"

    def describe(self) -> dict[str, str]:
        return {"kind": "process", "python": sys.executable, "notice": "fake trials (tests only)"}

    def trial_view(self, paths: TrialPaths) -> tuple[str, str, str]:
        return str(paths.corpus), str(paths.model), str(paths.trial_dir)

    def image_fields(self) -> tuple[str, str, str]:
        return "", "", ""

    def run(self, paths: TrialPaths, timeout_s: float | None) -> LaunchResult:
        command = [sys.executable, str(SCRIPT), "trial", str(paths.trial_dir / "spec.json"), str(paths.trial_dir),
                   "runner.trial"]
        start = time.monotonic()
        with open(paths.log, "ab") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            if not os.environ.get("ISOCOST_FAKE_NO_LAUNCHER_JSON"):  # set: the host died before writing it
                write_launcher_file(paths.trial_dir, {"pid": proc.pid, "command": command}, ProcessRecord)
            proc.wait()
        return LaunchResult(exit_code=proc.returncode, wall_s=time.monotonic() - start)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def fake_trial(spec_path: Path, out: Path) -> int:
    spec = read_record(spec_path, TrialSpec)
    started = _now()
    t0 = time.monotonic()
    records = [json.loads(line) for line in Path(spec.corpus_path).read_text(encoding="utf-8").splitlines()]
    hook = os.environ.get("ISOCOST_FAULT_INJECT") or None  # recorded as the real trial records it
    write_record(out / "manifest.json", manifest_for(spec, started_at=started, fault_injection=hook))
    delay = float(os.environ.get("ISOCOST_FAKE_TRIAL_S", "0.05")) / max(len(records), 1)
    with open(out / "predictions.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps({"id": record["id"], "label": record["label"], "score": 0.9,
                                     "n_tokens": 3, "truncated": False}) + "\n")
            handle.flush()
            time.sleep(delay)
    pass_s = time.monotonic() - t0
    status = TrialStatus(trial_id=spec.trial_id, status="ok", completed=len(records), expected=len(records),
                         phases=PhaseTimes(pass_s=pass_s, trial_s=pass_s), memory=MemoryPeaks(),
                         truncated_count=0, started_at=started, ended_at=_now())
    write_record(out / "status.json", status)
    return 0


def fake_host(study: Path, out: Path, resume: bool) -> int:
    from protocol.errors import UserError
    from runner.campaign.run import run_campaign

    try:
        outcome = run_campaign(study, out, FakeLauncher(), resume=resume,
                               progress=lambda message: print(message, flush=True))
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{outcome.rows_written} trial(s) run now; {outcome.rows_total} row(s)", flush=True)
    return 0


def host_command(study: Path, out: Path, resume: bool = False) -> list[str]:
    return [sys.executable, str(SCRIPT), "host", str(study), str(out), *(["--resume"] if resume else [])]


def host_env(trial_s: float) -> dict[str, str]:
    return {**os.environ, "ISOCOST_FAKE_TRIAL_S": str(trial_s), "PYTHONPATH": str(ROOT)}


if __name__ == "__main__":
    if sys.argv[1] == "trial":
        sys.exit(fake_trial(Path(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(fake_host(Path(sys.argv[2]), Path(sys.argv[3]), "--resume" in sys.argv[4:]))
