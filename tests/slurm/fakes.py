"""The Slurm launcher with fake trials (tests/fakecampaign.py) inside real Slurm jobs, and a host CLI around it.

Everything of the launcher is real (sbatch, the lane, the pins, the pre-flight job, scontrol, scancel);
only the process runtime's trial is ``fakecampaign.py trial``, which writes a real trial's files in
about ``ISOCOST_FAKE_TRIAL_S`` seconds without torch. As a script it is a host CLI that can be killed::

    python tests/slurm/fakes.py STUDY OUT [--resume] [--gres GRES]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent))

from fakecampaign import SCRIPT  # noqa: E402

from runner.launch.kinds.slurm.launcher import SlurmLauncher  # noqa: E402
from runner.launch.kinds.slurm.options import SlurmOptions  # noqa: E402

FAKE_S_ENV = "ISOCOST_FAKE_TRIAL_S"


class FakeTrialSlurmLauncher(SlurmLauncher):
    """Real Slurm jobs, fake trials."""

    def trial_argv(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (sys.executable, str(SCRIPT), "trial"), ("runner.trial",)

    def trial_environment(self) -> dict[str, str]:
        env = super().trial_environment()
        env[FAKE_S_ENV] = os.environ.get(FAKE_S_ENV, "0.2")
        return env


def fake_launcher(trial_timeout_s: float | None = 60, **values: Any) -> FakeTrialSlurmLauncher:
    """A launcher of fake trials; a job may wait 120 s in the queue (a test never hangs on a held node)."""
    options = SlurmOptions.from_values({"start_wait": 120, **values})
    return FakeTrialSlurmLauncher(options, trial_timeout_s=trial_timeout_s, kill_grace_s=5)


def host_command(study: Path, out: Path, *, resume: bool = False, gres: str = "gpu:1") -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), str(study), str(out), "--gres", gres,
            *(["--resume"] if resume else [])]


def main(argv: list[str]) -> int:
    from protocol.errors import UserError
    from runner.campaign.run import run_campaign

    study, out = Path(argv[0]), Path(argv[1])
    gres = argv[argv.index("--gres") + 1] if "--gres" in argv else "gpu:1"
    launcher = fake_launcher(gres=gres)
    try:
        outcome = run_campaign(study, out, launcher, resume="--resume" in argv,
                               progress=lambda message: print(message, flush=True))
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print(f"Stopped: {launcher.lost or 'interrupted'}", flush=True)
        return 130
    print(f"{outcome.rows_written} trial(s) run now; {outcome.rows_total} row(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
