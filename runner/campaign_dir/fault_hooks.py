"""The test-only fault hook, found in a campaign's sealed manifests: evidence that must never rank unflagged.

``ISOCOST_FAULT_INJECT`` (runner/trial/faults.py) makes a trial sleep, run out of memory, hang or answer wrongly
on purpose, for the fault tests. Each trial records it in its ``manifest.json`` (``fault_injection``), which the
trial's raw.csv row seals by sha256, so it cannot be removed without the campaign's checks saying so. Every
output that ranks or compares (summary, decide's memo, decision.json and report.html, compare) puts
:func:`fault_hook_banner` first: the times, memory and outputs of such a trial are the hook's, not the
configuration's.

Example::

    fault_hook_banner(Path("results/a"), ["001-r1-batch_size-1"])
    # "NOT A MEASUREMENT: the test-only fault hook ISOCOST_FAULT_INJECT=sleep-per-batch:0.2 was set in 1 of 1 …"
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from protocol.records.manifest import read_manifest
from runner.campaign_dir.layout import CampaignPaths

#: The hook's variable (runner.trial.faults.FAULT_ENV; named here so the host never imports the trial package).
FAULT_ENV = "ISOCOST_FAULT_INJECT"
#: How every flag starts: outputs and tests find it by this prefix.
FAULT_HOOK_BANNER = "NOT A MEASUREMENT: the test-only fault hook"


def fault_hooks(root: Path, trial_ids: Sequence[str]) -> dict[str, int]:
    """Each hook value recorded in the manifests of ``trial_ids`` → how many trials ran with it."""
    paths = CampaignPaths(root)
    found: dict[str, int] = {}
    for trial_id in trial_ids:
        trial_dir = paths.trial_dir(trial_id)
        manifest = read_manifest(trial_dir) if trial_dir.is_dir() else None
        if manifest is not None and manifest.fault_injection:
            found[manifest.fault_injection] = found.get(manifest.fault_injection, 0) + 1
    return found


def fault_hook_banner(root: Path, trial_ids: Sequence[str], label: str | None = None) -> str:
    """The flag every ranking output shows first, or "" when no trial ran with the hook. ``label``: what ran, in
    the flag's words (default: ``root``); a summary names its campaign by id, so that the flag re-derived from a
    bundle's copy of the campaign (``isocost verify``) reads the same as the one written where it ran."""
    found = fault_hooks(root, trial_ids)
    if not found:
        return ""
    listed = "; ".join(f"{FAULT_ENV}={value} in {count} of {len(trial_ids)} trial(s)"
                       for value, count in sorted(found.items()))
    return (f"{FAULT_HOOK_BANNER} was set when {label or root} ran ({listed}; recorded in each trial's manifest.json, "
            "sealed by raw.csv): its times, memory and outputs are the hook's, not the configuration's. Do not "
            "rank or price it; run the campaign again without the variable.")
