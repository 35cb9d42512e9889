"""A server campaign's kept runs as the facts the capacity rule reads (:class:`protocol.decision.capacity.RunFacts`).

Per raw.csv row (one trial): the variant's rate and configuration (:func:`protocol.decision.capacity.rate_of`,
:func:`~protocol.decision.capacity.configuration_of`), whether its answers were accepted (the re-derived verdict of
:func:`runner.decision.inputs.load_evidence`, and the variant the same result as the reference in the re-derived
summary), and LoadGen's verdict and the latency against the bound from the trial's sealed ``manifest.json``
``serving`` block (read as :mod:`runner.analysis.serving_lines` reads it). Reads only; writes nothing.

A refused pass is told apart by what its manifest's ``answers`` count: malformed or differing answers, or a variant
not the same result as the reference, are a quality failure (``accepted`` False: the configuration gets no
capacity); ids missing or failed (a run stopped before it asked them, a query that failed) and a failed trial
leave the answers incomplete (``accepted`` None: that rate did not hold).

Example::

    runs = serving_runs(campaign, evidence)
    runs[0].rate_qps, runs[0].result, runs[0].accepted     # 20.0, "VALID", True
"""

from __future__ import annotations

from typing import Any

from protocol.decision.capacity import RunFacts, configuration_of, rate_of
from protocol.decision.evidence import CampaignEvidence
from protocol.records.manifest import read_manifest
from protocol.study.model import configuration_id
from runner.campaign_dir.campaign import Campaign


def serving_runs(campaign: Campaign, evidence: CampaignEvidence) -> tuple[RunFacts, ...]:
    """Every kept run of ``campaign`` (raw.csv's rows, in file order) as :class:`RunFacts`."""
    study, traffic = campaign.study, campaign.study.traffic
    assert traffic is not None, "serving runs need a server study"
    variants = {v.variant_id: v for v in study.variants()}
    summaries = {v.variant_id: v for v in evidence.summary.variants}
    reference = evidence.summary.reference_variant
    runs = []
    for row in evidence.rows:
        variant = variants.get(row.variant_id)
        manifest = read_manifest(campaign.trial_dir(row.trial_id))
        serving: dict[str, Any] = (manifest.serving if manifest is not None else None) or {}
        summary = summaries.get(row.variant_id)
        same = row.variant_id == reference or (summary is not None and summary.equivalent is True)
        accepted, reason = _accepted(row, row.trial_id in evidence.accepted_trials, same, serving,
                                     summary.equivalence_reason if summary is not None else "", reference)
        runs.append(RunFacts(
            trial_id=row.trial_id, variant_id=row.variant_id,
            configuration=configuration_of(variant) if variant is not None else configuration_id(row.variant_id),
            rate_qps=rate_of(variant, traffic) if variant is not None else float(traffic.rates_qps[0]),
            status=str(row.status), accepted=accepted, accepted_reason=reason,
            result=_text(serving.get("result")), latency_ms=_number(serving.get("latency_at_percentile_ms")),
            bound_ms=_number(serving.get("latency_bound_ms")),
            within_bound=_within(serving), bound_detail=_bound_detail(serving),
            completed_qps=_number(serving.get("completed_qps")), queries=_count(serving.get("queries")),
            output_tokens=_count(serving.get("output_tokens")),
        ))
    return tuple(runs)


def _accepted(row: Any, gate: bool, same: bool, serving: dict[str, Any], equivalence: str,
              reference: str) -> tuple[bool | None, str]:
    """(accepted, why not): True; False for a quality failure; None for incomplete answers (see the module doc)."""
    found = serving.get("answers")
    answers: dict[str, Any] = found if isinstance(found, dict) else {}
    bad = {key: answers.get(f"{key}_count") for key in ("malformed", "differing", "missing", "failed")}
    if str(row.status) != "ok":
        return None, f"the trial did not complete (status {row.status})"
    if bad["malformed"] or bad["differing"]:
        return False, (f"{bad['malformed'] or 0} id(s) with malformed answers, {bad['differing'] or 0} whose repeats "
                       "differ")
    if not gate:
        if bad["missing"] or bad["failed"] or serving.get("unanswered"):
            return None, (f"the gate refused the pass: {bad['missing'] or 0} id(s) missing, {bad['failed'] or 0} "
                          "with a failed query")
        return False, "the task's gate refused the pass"
    if not same:
        return False, f"not shown the same result as {reference}" + (f" ({equivalence})" if equivalence else "")
    return True, ""


#: The bounds a manifest's serving block may hold: the whole answer's latency, or a generation's TTFT and TPOT.
MEASURES = ("latency", "ttft", "tpot")


def _declared(serving: dict[str, Any]) -> list[str]:
    """The measures whose bound the run declared (``<measure>_bound_ms`` set)."""
    return [m for m in MEASURES if _number(serving.get(f"{m}_bound_ms")) is not None]


def _within(serving: dict[str, Any]) -> bool | None:
    """Every declared bound met: True; one missed: False; one not reported (or none declared): None."""
    verdicts = [serving.get(f"{m}_within_bound") for m in _declared(serving)]
    if any(v is False for v in verdicts):
        return False
    return True if verdicts and all(v is True for v in verdicts) else None


def _bound_detail(serving: dict[str, Any]) -> str:
    """With more than one bound (generation: TTFT and TPOT), each against its measure; '' with one."""
    declared = _declared(serving)
    if len(declared) < 2:
        return ""
    share = _number(serving.get("percentile"))
    words = []
    for m in declared:
        measured = _number(serving.get(f"{m}_at_percentile_ms"))
        verdict = serving.get(f"{m}_within_bound")
        sign = "≤" if verdict is True else ">" if verdict is False else "vs"
        shown = f"{measured:.1f} ms" if measured is not None else "not reported"
        words.append(f"{m} {shown} {sign} {serving.get(f'{m}_bound_ms'):g} ms")
    return (f"at p{share * 100:g}: " if share else "") + ", ".join(words)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
