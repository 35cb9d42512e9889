"""Compare a rerun trial with its original, and render a replay report for a reader.

:func:`replay_differences` applies the study's ``quality.replay`` rule (identical, bounded,
quality) and returns why a rerun does not match (empty: it matches).
:func:`rerun_figures` derives what a replay records of one rerun from its files.
:func:`environment_differences` lists the software, device and host facts that changed between
the two trial manifests (informative, never a reason to differ). :func:`render_replay` writes
``replay.md``. All four are pure: they read files or records and run nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.records.codec import read_record
from protocol.records.manifest import Manifest
from protocol.records.stages import csv_cell
from protocol.tasks.pass_check import Agreement
from runner.bundle.records import ReplayReport


def replay_differences(
    final: str, accepted: bool, check_reasons: tuple[str, ...], agreement: Agreement, replayed: Any, before: Any,
    mode: str, bound: float | None,
) -> list[str]:
    """Why a rerun does not match its original under the study's replay rule (empty: it matches).

    ``identical``: same ids, labels and scores. ``bounded``: same labels, max |Δscore| ≤ ``bound``.
    ``quality``: the rerun is an accepted pass under the same quality rule.
    """
    reasons: list[str] = []
    if final != "ok":
        reasons.append(f"the replay ended with status {final}")
    if not accepted:
        reasons.append("the replay is not an accepted pass under the study's quality rule: " + "; ".join(check_reasons))
    if mode == "quality":
        return reasons
    if agreement.agreement is None or agreement.max_score_delta is None:
        reasons.append(f"the replay's ids differ from the original's ({len(replayed.ids)} vs "
                       f"{len(before.ids)} outputs)")
        return reasons
    if mode == "identical" and not agreement.identical:
        reasons.append(f"not identical: label agreement {agreement.agreement:.4f}, max |Δscore| "
                       f"{agreement.max_score_delta:.3g}")
    if mode == "bounded":
        if agreement.agreement < 1.0:
            reasons.append(f"labels differ: agreement {agreement.agreement:.4f}")
        if bound is None or not math.isfinite(bound) or bound < 0:
            reasons.append(f"the study's quality.max_score_delta {bound!r} is not a usable bound")
        elif agreement.max_score_delta > bound:
            reasons.append(f"max |Δscore| {agreement.max_score_delta:.3g} exceeds the declared bound {bound:g}")
    return reasons


def rerun_figures(task: Any, study: Any, reference: Any, replayed_dir: Path, original_dir: Path, final: str) -> \
        dict[str, Any]:
    """What a replay records of one rerun, derived from its files: the rerun's check against the reference, its
    agreement with the original's outputs, and whether it matches under the study's replay rule (what
    ``isocost replay`` writes into replay.json, and what ``compare`` re-derives before it trusts replay.json)."""
    replayed, before = task.read_pass(replayed_dir), task.read_pass(original_dir)
    quality = study.quality
    check = task.check_pass(replayed, reference, study)
    agreement = task.agreement(replayed, before, study)
    reasons = replay_differences(final, check.accepted, check.reasons, agreement, replayed, before,
                                 quality.replay, quality.max_score_delta)
    return {"matches": not reasons, "reasons": tuple(reasons), "compared_ids": len(set(replayed.ids) & set(before.ids)),
            "label_agreement": agreement.agreement, "max_score_delta": agreement.max_score_delta,
            "identical": agreement.identical, "replay_metric": check.metric_value,
            "replay_accepted": final == "ok" and check.accepted}


def environment_differences(original_dir: Path, replay_dir: Path) -> dict[str, list[Any]]:
    """Software, device and host facts that differ between the two manifests (informative)."""
    try:
        before = read_record(original_dir / "manifest.json", Manifest)
        after = read_record(replay_dir / "manifest.json", Manifest)
    except UserError:  # informative only: the replay's verdicts are judged on the predictions
        return {}
    differences: dict[str, list[Any]] = {}
    for section in ("software", "device", "host"):
        old, new = getattr(before, section) or {}, getattr(after, section) or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                differences[f"{section}.{key}"] = [old.get(key), new.get(key)]
    for key in ("image_id", "image_digest", "launcher"):
        if getattr(before, key) != getattr(after, key):
            differences[key] = [getattr(before, key), getattr(after, key)]
    return differences


def render_replay(report: ReplayReport) -> str:
    """``replay.md``: the rule, the launcher and inputs used, one line per trial, the result."""
    bound = f" (max |Δscore| ≤ {report.max_score_delta:g})" if report.mode == "bounded" else ""
    lines = [
        f"# Replay of {Path(report.bundle).name}",
        "",
        f"Campaign {report.campaign_id}, study {report.study_sha256}.",
        f"Replay rule (quality.replay): {report.mode}{bound}.",
        f"Launcher: {report.launcher['kind']} (original: {report.launcher['original']}"
        + (f", image {report.launcher['image']}" if report.launcher.get("image") else "") + ")"
        + ("" if report.launcher.get("exact") else " - NOT an exact replay: " + report.launcher.get("note", "")),
        "Inputs: " + "; ".join(f"{i.kind} {i.fingerprint} from {i.source}" for i in report.inputs),
        "",
    ]
    for t in report.trials:
        delta = f"{t.max_score_delta:.3g}" if t.max_score_delta is not None else "-"
        agreement = f"{t.label_agreement:.4f}" if t.label_agreement is not None else "-"
        verdict = "MATCHES" if t.matches else "DIFFERS: " + "; ".join(t.reasons)
        lines.append(f"- {t.trial_id} ({t.variant_id}): status {t.status}, label agreement {agreement}, "
                     f"max |Δscore| {delta}, identical {csv_cell(t.identical) or '-'}: {verdict}")
        if t.environment_differences:
            shown = ", ".join(f"{k}: {v[0]!r} -> {v[1]!r}" for k, v in list(t.environment_differences.items())[:6])
            lines.append(f"  environment differences: {shown}")
    lines += ["", f"Result: {'the replay MATCHES' if report.matches else 'the replay DIFFERS'} ({report.mode})."]
    return "\n".join(lines) + "\n"


