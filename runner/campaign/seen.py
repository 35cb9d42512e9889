"""Which final corpora have been seen, under which quality rule.

Thresholds are fixed before timing. Once a campaign has run on a final
corpus, its results have been seen: a new study that changes the quality rule
for the SAME corpus would be tuning on the final comparison set, and
``isocost tune`` after that would be tuning on seen results.

The ledger belongs to the project: ``.isocost/evaluations.jsonl`` next to the
study file. ``--ledger DIR`` (run, tune) or ``ISOCOST_LEDGER_DIR`` put it
elsewhere (a ledger shared by several study folders); ``ISOCOST_HOME`` is
still honoured as before. A changed rule on a seen corpus is refused unless
the user acknowledges the reuse, which is then recorded in ``campaign.json``.

Example::

    check_and_record(study, content_fp, campaign_id, out, acknowledge_reuse=False)
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.safe_write import check_writable_target, make_dirs
from protocol.study.model import Study
from runner.campaign_dir.appendlog import append_line, quarantine_cut, read_log, require_whole

LEDGER_FILE = "evaluations.jsonl"


def ledger_path(study: Study, ledger_dir: Path | None = None) -> Path:
    """``--ledger`` > ``ISOCOST_LEDGER_DIR`` > ``ISOCOST_HOME`` > ``.isocost/`` next to the study file."""
    chosen = ledger_dir or os.environ.get("ISOCOST_LEDGER_DIR") or os.environ.get("ISOCOST_HOME")
    return Path(chosen) / LEDGER_FILE if chosen else study.path.parent / ".isocost" / LEDGER_FILE


def quality_rule(study: Study) -> dict[str, Any]:
    q = study.quality
    return {
        "metric": q.metric,
        "minimum": q.minimum,
        "max_metric_drop": q.max_metric_drop,
        "min_agreement": q.min_agreement,
        "reference_variant": q.reference_variant,
        "subgroups": list(q.subgroups),
    }


def rule_text(rule: dict[str, Any]) -> str:
    """A quality rule in plain words: ``accuracy minimum 0.9, max_metric_drop 0.01, …``."""
    subgroups = ", ".join(rule.get("subgroups") or []) or "none"
    return (f"{rule.get('metric')} minimum {rule.get('minimum')}, max_metric_drop {rule.get('max_metric_drop')}, "
            f"min_agreement {rule.get('min_agreement')}, reference variant {rule.get('reference_variant')}, "
            f"subgroups {subgroups}")


_LEDGER_FIX = ("The evaluations ledger (--ledger DIR, else ISOCOST_LEDGER_DIR, else .isocost/ next to the study) is "
               "append-only: restore it from a backup, or move it away knowingly (final corpora recorded in it would "
               "no longer be refused for re-tuning).")


def _entries(path: Path) -> list[dict[str, Any]]:
    """Every entry of the ledger; a line that is not a JSON object is refused by number, never skipped. A last
    line cut by a crash is named too: ``isocost run`` keeps its bytes in evaluations.jsonl.partial-N."""
    read = read_log(path, "the evaluations ledger", fix=_LEDGER_FIX)
    require_whole(read, path, "the evaluations ledger",
                  "A crash cut it while it was written: the next `isocost run` keeps its bytes in "
                  f"{path.name}.partial-N (or move them there yourself).")
    return list(read.entries)


def seen_entries(study: Study, corpus_content_fingerprint: str, ledger_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every campaign that evaluated this final corpus (by content), oldest first."""
    return [e for e in _entries(ledger_path(study, ledger_dir))
            if e.get("corpus_content_fingerprint") == corpus_content_fingerprint]


def describe_entry(entry: dict[str, Any]) -> str:
    return (f"campaign {entry.get('campaign_id')} of study {entry.get('study_name')} on {entry.get('at')} "
            f"(results in {entry.get('out')})")


def raise_if_conflict(study: Study, conflict: dict[str, Any], ledger_dir: Path | None = None) -> None:
    """The refusal for a changed rule on a seen final corpus, in plain words (also used by `isocost check`)."""
    path = ledger_path(study, ledger_dir)
    rule = quality_rule(study)
    raise UserError(
        f"the final corpus {study.corpus.fingerprint} ({study.corpus.path.name}, as `isocost fingerprint` "
        f"prints it) has been seen by {describe_entry(conflict)} under another quality rule: "
        f"{rule_text(conflict.get('quality_rule') or {})}; this study now says {rule_text(rule)}",
        f"{study.path}; ledger {path}",
        "Thresholds are fixed before timing, so a changed rule needs a new independent evaluation set: "
        "a new final corpus that nobody has evaluated yet; point [corpus] at it. Or restore the earlier "
        "rule. To run anyway, pass --acknowledge-seen-corpus: the reuse is recorded in campaign.json and "
        "shown in the summary.",
    )


def check_and_record(
    study: Study, corpus_content_fingerprint: str, campaign_id: str, out: Path, acknowledge_reuse: bool,
    ledger_dir: Path | None = None,
) -> dict[str, Any] | None:
    """Refuse a changed quality rule on an already-seen final corpus; record this campaign.

    Returns the earlier entry that was acknowledged, if any.
    """
    path = ledger_path(study, ledger_dir)
    rule = quality_rule(study)
    check_writable_target(path, fix="Choose a writable ledger directory with --ledger DIR (or ISOCOST_LEDGER_DIR).")
    quarantine_cut(path, path.parent, _LEDGER_FIX)  # a line a crash cut short is kept aside, byte for byte, not skipped
    conflict = next((e for e in seen_entries(study, corpus_content_fingerprint, ledger_dir)
                     if e.get("quality_rule") != rule), None)
    if conflict is not None and not acknowledge_reuse:
        raise_if_conflict(study, conflict, ledger_dir)
    make_dirs(path.parent, fix="Choose a writable ledger directory with --ledger DIR (or ISOCOST_LEDGER_DIR).")
    record = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "campaign_id": campaign_id,
        "corpus_content_fingerprint": corpus_content_fingerprint,
        "corpus_fingerprint": study.corpus.fingerprint,
        "out": str(out.resolve()),
        "quality_rule": rule,
        "study_name": study.name,
        "study_path": str(study.path),
        "study_sha256": study.sha256,
    }
    append_line(path, record, root=path.parent, what="the evaluations ledger",
                fix="Choose a writable ledger directory with --ledger DIR (or ISOCOST_LEDGER_DIR).")
    return conflict
