"""summary.md's ``## Serving`` section, for a ``scenario = "server"`` study only (an offline summary is unchanged).

Per trial: MLPerf LoadGen's verdict (VALID/INVALID, with its early-stopping verdict), the latency at the declared
percentile against the bound, the completed rate against the target, and whether the answers were accepted: the
pass accepted by the task's unchanged gate (every id answered once, well-formed, the quality rule) AND the variant
the same result as the reference. A variant is **serving-acceptable** only when every one of its passes has
accepted answers AND a VALID LoadGen result; the section ends by naming those variants. Everything is read from
each trial's ``manifest.json`` ``serving`` block (sealed in raw.csv, checked when the campaign is opened) and the
re-derived verdicts.

Example::

    serving_lines(campaign.paths, study, rows, verdicts, summary)
    # "\\n## Serving (MLPerf LoadGen's Server scenario, …)\\n\\n- batch_size=1: LoadGen VALID …"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocol.manifest import read_manifest
from protocol.stats import Summary
from protocol.study import Study
from runner.campaign_dir.layout import CampaignPaths


def serving_lines(paths: CampaignPaths, study: Study, rows: Sequence[Any], verdicts: dict[str, Any],
                  summary: Summary) -> str:
    """The ``## Serving`` section ('' for an offline study). ``rows``: raw rows with ``trial_id`` and
    ``variant_id``; ``verdicts``: trial id → its re-derived verdict."""
    traffic = study.traffic
    if traffic is None:
        return ""
    bound = traffic.bound("latency")
    share = f"p{bound.percentile * 100:g}" if bound else "percentile"
    rate = traffic.rates_qps[0]
    lines = ["", f"## Serving (MLPerf LoadGen's Server scenario: Poisson arrivals at {rate:g} qps, {share} latency "
                 f"bound {bound.bound_ms:g} ms)" if bound else "## Serving", "",
             "A variant is serving-acceptable only when its answers are accepted (the task's gate on the file written "
             f"from the answers, one per id, and the same result as {summary.reference_variant}) AND LoadGen says "
             "VALID. A server trial's pass time is its serving run: from the first query issued to the last answered.",
             ""]
    variants = {v.variant_id: v for v in summary.variants}
    good: dict[str, bool] = {}
    for row in rows:
        variant = variants.get(row.variant_id)
        same = variant is not None and (variant.equivalent is True or row.variant_id == summary.reference_variant)
        accepted = bool((verdicts.get(row.trial_id) or {}).get("corpus_accepted"))
        manifest = read_manifest(paths.trial_dir(row.trial_id))
        serving = manifest.serving if manifest is not None else None
        valid = bool(serving) and serving.get("result") == "VALID"  # type: ignore[union-attr]
        good[row.variant_id] = good.get(row.variant_id, True) and accepted and same and valid
        answers = ("answers accepted" if accepted and same else
                   "answers NOT accepted: " + ("the gate refused the pass" if not accepted else
                                               f"not shown the same result as {summary.reference_variant}"))
        lines.append(f"- {row.variant_id}: {_loadgen(serving, share)}; {answers} (trial {row.trial_id})")
    acceptable = [variant for variant, ok in good.items() if ok]
    lines += ["", f"Serving-acceptable: {', '.join(acceptable) if acceptable else 'none'}."]
    return "\n".join(lines) + "\n"


def _loadgen(serving: dict[str, Any] | None, share: str) -> str:
    """LoadGen's words for one trial: verdict, latency against the bound, rates."""
    if not serving or serving.get("result") is None:
        return "no LoadGen result (the serving run did not complete)"
    stopping = serving.get("early_stopping_met")
    words = f"LoadGen {serving['result']}"
    if stopping is not None:
        words += f" (early stopping {'met' if stopping else 'NOT met'})"
    measures = ((("ttft", "time to first token"), ("tpot", "time per output token")) if serving.get("token_latencies")
                else (("latency", "latency"),))  # a generation is bounded by LoadGen's token latencies
    for name, label in measures:
        measured, bound = serving.get(f"{name}_at_percentile_ms"), serving.get(f"{name}_bound_ms")
        within = {True: "≤", False: ">", None: "vs"}[serving.get(f"{name}_within_bound")]
        percentile = f"p{serving['percentile'] * 100:g}" if serving.get("percentile") else share
        words += (f"; {percentile} {label} {measured:.1f} ms {within} {bound:g} ms bound" if measured is not None
                  else f"; {percentile} {label} not reported by LoadGen")
    completed, target = serving.get("completed_qps"), serving.get("target_qps")
    if completed is not None:
        words += f"; completed {completed:.2f} of {target:g} qps"
    return words
