"""summary.md's ``## Serving`` section, for a ``scenario = "server"`` study only (an offline summary is unchanged),
rendered from summary.json's ``serving`` record (:mod:`runner.analysis.serving_record`).

Per trial (one configuration at one rate): MLPerf LoadGen's verdict (VALID/INVALID, with its early-stopping
verdict), the latency at the declared percentile against the bound, the scheduled and completed rates against the
target, and whether the answers were accepted (the pass accepted by the task's unchanged gate AND the same result as
the reference at that rate); under it, the run's latency distribution from its sealed ``queries.jsonl`` (min,
p50, p90, p95, p99, max, and the count of queries per multiple of the bound), each percentile the run had too few
queries to decide marked, and a note when the run had fewer queries than the declared percentile needs. A variant
is **serving-acceptable** only when every one of its runs has accepted answers AND a VALID LoadGen result; the
section ends by naming those variants.

Example::

    serving_lines(record)
    # "\\n## Serving (MLPerf LoadGen's Server scenario, …)\\n\\n- batch_size=1@rate_qps=2: LoadGen VALID …"
"""

from __future__ import annotations

from protocol.records.serving import PERCENTILES, Distribution, ServingRun, ServingSummary, TokenLatency
from protocol.study.traffic import queries_needed


def serving_lines(record: ServingSummary | None) -> str:
    """The ``## Serving`` section ('' for an offline study: ``record`` None)."""
    if record is None:
        return ""
    share = f"p{record.percentile * 100:g}"
    rates = ", ".join(f"{rate:g}" for rate in record.rates_qps)
    lines = ["", f"## Serving (MLPerf LoadGen's Server scenario: Poisson arrivals at {rates} qps, {share} "
                 f"{record.measure} bound {record.bound_ms:g} ms)", "",
             "A variant (one configuration at one rate) is serving-acceptable only when its answers are accepted "
             "(the task's gate on the file written from the answers, one per id, and the same result as the "
             "reference at that rate) AND LoadGen says VALID. A server trial's pass time is its serving run: from "
             f"the first query issued to the last answered. A {share} needs at least {record.queries_needed} "
             "queries to be decided (docs/serving.md); a percentile marked * had fewer.", ""]
    for variant in record.variants:
        for run in variant.runs:
            answers = "answers accepted" if run.answers_accepted else f"answers NOT accepted: {run.answers_reason}"
            lines.append(f"- {variant.variant_id}: {_loadgen(run, share)}; {answers} (trial {run.trial_id})")
            lines.append(f"  - {_distribution(run, record)}")
            tokens = (("TTFT", run.ttft), ("TPOT", run.tpot))
            lines += [f"  - {_token_line(name, token, share)}" for name, token in tokens if token is not None]
            if run.too_short:
                lines.append(f"  - too short to decide its {share}: {run.queries} answered queries, "
                             f"{record.queries_needed} needed")
    acceptable = ", ".join(record.acceptable) or "none"
    lines += ["", f"Serving-acceptable: {acceptable}."]
    return "\n".join(lines) + "\n"


def _loadgen(run: ServingRun, share: str) -> str:
    """LoadGen's words for one trial: verdict, latency against the bound, rates."""
    if run.loadgen_result is None:
        return "no LoadGen result (the serving run did not complete)"
    words = f"LoadGen {run.loadgen_result}"
    if run.early_stopping_met is not None:
        words += f" (early stopping {'met' if run.early_stopping_met else 'NOT met'})"
    within = {True: "≤", False: ">", None: "vs"}[run.latency_within_bound]
    measured = run.latency_at_percentile_ms
    words += (f"; {share} latency {measured:.1f} ms {within} bound" if measured is not None else
              f"; {share} latency not reported by LoadGen")
    if run.completed_qps is not None:
        scheduled = f"scheduled {run.scheduled_qps:.2f}, " if run.scheduled_qps is not None else ""
        words += f"; {scheduled}completed {run.completed_qps:.2f} of {run.target_qps:g} qps"
    return words


def _token_line(name: str, token: TokenLatency, share: str) -> str:
    """A generation run's TTFT or TPOT: LoadGen's value at the percentile against its bound, and the distribution
    measured from the run's queries."""
    within = {True: "≤", False: ">", None: "vs"}[token.within_bound]
    bound = f" {within} bound {token.bound_ms:g} ms" if token.bound_ms is not None else ""
    words = (f"{name} {share} {token.at_percentile_ms:.1f} ms{bound} (LoadGen)" if token.at_percentile_ms is not None
             else f"{name} {share} not reported by LoadGen")
    shown = token.distribution
    if shown is None:
        return f"{words}; no query measured"
    return f"{words}; measured over {shown.count} queries: {_spread(shown)}"


def _spread(shown: Distribution) -> str:
    """min · p50 · p90 · p95 · p99 · max of a distribution, in ms."""
    percentiles = " · ".join(f"{p} {getattr(shown, f'{p}_ms'):.1f}" for p, _ in PERCENTILES)
    return f"min {shown.min_ms:.1f} · {percentiles} · max {shown.max_ms:.1f}"


def _distribution(run: ServingRun, record: ServingSummary) -> str:
    """One run's latency distribution in one line (or why there is none)."""
    shown: Distribution | None = run.distribution
    failed = f"; {run.failed_queries} failed" if run.failed_queries else ""
    if shown is None:
        return f"latency distribution: no answered query{failed}"
    if not shown.histogram:
        return (f"latency ms over {shown.count} answered queries{failed} (whole answers; the bounds are per token): "
                f"{_spread(shown)}")
    marks = {name: "*" if name in shown.undecided else "" for name, _ in PERCENTILES}
    percentiles = " · ".join(f"{name}{marks[name]} {getattr(shown, f'{name}_ms'):.1f}" for name, _ in PERCENTILES)
    edges = [f"≤{multiple:g}×" for multiple in record.bound_multiples] + [f">{record.bound_multiples[-1]:g}×"]
    bins = ", ".join(f"{edge} {count}" for edge, count in zip(edges, shown.histogram, strict=True))
    undecided = ""
    if shown.undecided:
        needs = ", ".join(f"{name} needs {queries_needed(dict(PERCENTILES)[name])}" for name in shown.undecided)
        undecided = f" (* undecided with {shown.count} queries: {needs})"
    return (f"latency ms over {shown.count} answered queries{failed}: min {shown.min_ms:.1f} · {percentiles} · "
            f"max {shown.max_ms:.1f}; queries by the bound: {bins}{undecided}")
