"""Which final corpora have been seen, under which quality rule.

Thresholds are fixed before timing. Once a campaign has run on a final
corpus, its results have been seen: a new study that changes the quality rule
for the SAME corpus would be tuning on the final comparison set. The ledger of
seen corpora lives in ``$ISOCOST_HOME/evaluations.jsonl`` (default
``~/.local/share/isocost``) and such a campaign is refused unless the user
acknowledges the reuse, which is then recorded in ``campaign.json``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.study import Study


def ledger_path() -> Path:
    home = os.environ.get("ISOCOST_HOME") or str(Path.home() / ".local" / "share" / "isocost")
    return Path(home) / "evaluations.jsonl"


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


def _entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line from a crash; the other entries still count
    return entries


def check_and_record(
    study: Study, corpus_content_fingerprint: str, campaign_id: str, out: Path, acknowledge_reuse: bool
) -> dict[str, Any] | None:
    """Refuse a changed quality rule on an already-seen final corpus; record this campaign.

    Returns the earlier entry that was acknowledged, if any.
    """
    path = ledger_path()
    rule = quality_rule(study)
    conflict = None
    for entry in _entries(path):
        if entry.get("corpus_content_fingerprint") == corpus_content_fingerprint and entry.get("quality_rule") != rule:
            conflict = entry
            break
    if conflict is not None and not acknowledge_reuse:
        raise UserError(
            f"the final corpus {corpus_content_fingerprint} has been seen by campaign {conflict['campaign_id']} "
            f"(study {conflict['study_name']}, {conflict['at']}) under another quality rule "
            f"{conflict['quality_rule']}",
            str(study.path),
            "Thresholds are fixed before timing: a changed rule needs a new independent evaluation set "
            "(another final corpus). To run anyway, pass --acknowledge-seen-corpus; the reuse is recorded "
            "in campaign.json and shown in the summary.",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "campaign_id": campaign_id,
        "corpus_content_fingerprint": corpus_content_fingerprint,
        "out": str(out.resolve()),
        "quality_rule": rule,
        "study_name": study.name,
        "study_sha256": study.sha256,
    }
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    return conflict
