"""decision.json (as a dict) → report.html: one self-contained page a person would rather look at than read.

Everything is inline: CSS in a ``<style>`` element and plots as SVG drawn
here. No script, font, image or stylesheet is fetched from anywhere, so the
page opens offline and makes no network request.

Plots:

1. every repetition's pass time per configuration (dots; the median of the
   accepted passes marked; completed-but-rejected passes hollow; failed
   attempts as a cross in their own lane, with the status);
2. memory peaks against the capacity that bounds them (host RSS against host
   RAM, GPU counters against device memory; "capacity not recorded" is
   written in the plot when it was not);
3. cost per validated corpus per configuration (an empty dashed bar with the
   reason when it is undefined or unknown);
4. with a declared ``[job]``: the Pareto view, projected job hours against the
   job's cost per validated corpus, quality written beside each point, the
   non-dominated configurations filled and joined (cost, hours and quality
   together: none of the others is better on all three).

Example: ``render_report(json.loads(Path("decision.json").read_text()))`` returns the HTML text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from html import escape
from typing import Any

_WIDTH = 980
_LABEL_W = 300
_RIGHT_W = 140
_ROW_H = 34
_TOP = 48
_BOTTOM = 52
_CHAR_W = 6.6  # average width of a 12 px sans-serif character, for truncation

# Colours (Okabe-Ito, readable for the common colour-vision deficiencies).
_BLUE = "#0072B2"
_ORANGE = "#E69F00"
_RED = "#D55E00"
_GREEN = "#009E73"
_GREY = "#8a8a8a"
_INK = "#222222"

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       margin: 24px auto; max-width: 1020px; padding: 0 16px; line-height: 1.45; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
.answer { border-left: 6px solid #009E73; background: #f1faf6; padding: 10px 16px; }
.answer.none { border-color: #D55E00; background: #fdf3ee; }
.muted { color: #666; font-size: 0.92em; }
table { border-collapse: collapse; font-size: 0.86em; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0 24px 0; }
figcaption { font-size: 0.9em; color: #444; margin-top: 4px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
code { font-size: 0.9em; }
"""


def render_report(data: dict[str, Any]) -> str:
    """The whole report page for one decision (``Decision.to_dict()`` or decision.json)."""
    configs = data["configurations"]
    chosen = data["chosen"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>isocost decision: {escape(data['study_name'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Decision: {escape(data['study_name'])}</h1>",
        f"<p class=\"muted\">{escape(data['question'])}</p>",
    ]
    if chosen:
        config = next(c for c in configs if c["configuration_id"] == chosen)
        cost = config["cost"]
        parts.append(
            f"<div class=\"answer\"><p><strong>Chosen: {escape(chosen)}</strong>. Contracted plan "
            f"{escape(_plan_short(cost))}; cost per validated corpus {escape(_per_corpus_text(cost))}.</p>"
            f"<p>Target load: {escape(data['target_load'])}.</p>"
            + _ul(data["why"]) + "</div>"
        )
    else:
        parts.append("<div class=\"answer none\"><p><strong>No configuration is chosen.</strong></p>"
                     + _ul(data["why"]) + "</div>")
    if data["deadline_note"]:
        parts.append(f"<p><strong>Deadline:</strong> {escape(data['deadline_note'])}.</p>")
    if data.get("job"):
        parts += _job_html(data["job"])
    parts += [
        "<h2>Pass time of every repetition</h2>",
        f"<figure>{pass_time_svg(configs)}<figcaption>One dot per attempted pass over the whole corpus "
        "(seconds). The black bar is the median of the accepted passes; failed attempts have no pass time and sit "
        "in the right-hand lane with their status. Five passes describe a small series: look at the spread, "
        "not only the median.</figcaption></figure>",
        "<h2>Memory peaks against capacity</h2>",
        f"<figure>{memory_svg(configs)}<figcaption>Bars: the highest peak over all passes; dots: each pass. "
        "Allocated and reserved GPU memory are separate counters, never summed. The dashed line is the capacity "
        "recorded by the trials; when none was recorded the plot says so.</figcaption></figure>",
        "<h2>Cost per validated corpus</h2>",
        f"<figure>{cost_svg(configs, chosen)}<figcaption>Whole contracted plan price ÷ accepted artifacts "
        "(each distinct corpus counted once). An empty dashed bar means undefined (no accepted corpus: the spend "
        "still stands) or unknown (no rental or no price: nothing is guessed).</figcaption></figure>",
        "<h2>What is uncertain</h2>",
        _ul(data["uncertain"] or ["nothing flagged"]),
        "<h2>Configurations</h2>",
        _config_table(configs),
        "<h2>Campaign period (measured)</h2>",
        _period_tables(data["campaigns"]),
        "<h2>Counting rule for accepted artifacts</h2>",
        f"<p>{escape(data['artifact_rule'])}</p>",
        "<h2>Other project expenses</h2>",
        _ledger_html(data["ledger"]),
        "<h2>Inputs</h2>",
        _ul([
            f"study {data['study_name']}, sha256 {data['study_sha256']}; reference variant "
            f"{data['reference_variant']}",
            f"corpus {data['corpus_fingerprint']} ({data['corpus_inputs']} inputs); model {data['model_fingerprint']}",
            f"catalog {data['catalog_path']} dated {data['catalog_dates']}",
            *(f"campaign {c['campaign_id']} in {c['label']}: {c['hardware']}, launcher {c['launcher']}"
              for c in data["campaigns"]),
        ]),
        "<p class=\"muted\">Generated by isocost decide. Self-contained: no script, no external resource.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# -- plot 1: pass times ---------------------------------------------------------------------


def pass_time_svg(configs: list[dict[str, Any]]) -> str:
    """Every repetition's pass time per configuration, median marked, failures in their own lane."""
    times = [p["pass_s"] for c in configs for p in c["passes"] if p["pass_s"] is not None]
    x_max = _nice_max(max(times) if times else 1.0)
    plot_w = _WIDTH - _LABEL_W - _RIGHT_W - 20
    height = _TOP + _ROW_H * max(len(configs), 1) + _BOTTOM + 34

    def x(value: float) -> float:
        return _LABEL_W + plot_w * value / x_max

    out = _svg_open(height, "Pass time of every repetition, per configuration",
                    "pass-times")
    out += _x_axis(x_max, x, _TOP, _TOP + _ROW_H * len(configs), "pass time per full pass over the corpus (s)",
                   lambda v: _tick(v))
    lane_x = _LABEL_W + plot_w + 16
    out.append(f'<text x="{lane_x + _RIGHT_W / 2 - 8:.1f}" y="{_TOP - 8}" font-size="11" text-anchor="middle" '
               f'fill="{_RED}">failed (no time)</text>')
    out.append(f'<rect x="{lane_x:.1f}" y="{_TOP}" width="{_RIGHT_W - 16}" height="{_ROW_H * len(configs)}" '
               'fill="#fdf3ee" stroke="#f0c8b4"/>')
    if not configs:
        out.append(_note(_LABEL_W + 10, _TOP + 20, "no configuration"))
    for row, config in enumerate(configs):
        mid = _TOP + _ROW_H * row + _ROW_H / 2
        out += _row_label(row, config["configuration_id"])
        passes = config["passes"]
        n = max(len(passes), 1)
        failed = 0
        for i, p in enumerate(passes):
            dy = (i - (n - 1) / 2) * min(4.0, 20.0 / n)
            tip = f"{p['trial_id']}: " + (f"{p['pass_s']:.3f} s, " if p["pass_s"] is not None else "no pass time, ")
            tip += f"status {p['status']}, " + ("accepted" if p["accepted"] else "not accepted")
            if p["pass_s"] is None:
                cx = lane_x + 12 + (failed % 8) * 14
                failed += 1
                out.append(_cross(cx, mid - 5, 5, tip))
            elif p["accepted"]:
                out.append(f'<circle class="pass accepted" cx="{x(p["pass_s"]):.1f}" cy="{mid + dy:.1f}" r="5" '
                           f'fill="{_BLUE}" fill-opacity="0.85" stroke="white" stroke-width="1">'
                           f"<title>{escape(tip)}</title></circle>")
            else:
                out.append(f'<circle class="pass rejected" cx="{x(p["pass_s"]):.1f}" cy="{mid + dy:.1f}" r="5" '
                           f'fill="white" stroke="{_ORANGE}" stroke-width="2"><title>{escape(tip)}</title></circle>')
        if not failed:
            out.append(f'<text x="{lane_x + 6:.1f}" y="{mid + 4:.1f}" font-size="10" fill="#999">none</text>')
        else:
            statuses = ", ".join(f"{k} {v}" for k, v in config["statuses"].items() if k != "ok")
            out.append(f'<text x="{lane_x + 6:.1f}" y="{mid + 12:.1f}" font-size="10" '
                       f'fill="{_RED}">{escape(statuses)}</text>')
        if config["median_pass_s"] is not None:
            mx = x(config["median_pass_s"])
            out.append(f'<line class="median" x1="{mx:.1f}" x2="{mx:.1f}" y1="{mid - 12:.1f}" y2="{mid + 12:.1f}" '
                       f'stroke="{_INK}" stroke-width="3"><title>median of accepted passes: '
                       f'{config["median_pass_s"]:.3f} s</title></line>')
        elif not failed:
            out.append(_note(_LABEL_W + 8, mid + 4, "no pass"))
    legend_y = height - 18
    out += _legend(legend_y, [
        ("dot", _BLUE, "accepted pass"),
        ("ring", _ORANGE, "completed, rejected"),
        ("cross", _RED, "failed attempt (no pass time)"),
        ("bar", _INK, "median of accepted passes"),
    ])
    out.append("</svg>")
    return "".join(out)


# -- plot 2: memory -------------------------------------------------------------------------


def memory_svg(configs: list[dict[str, Any]]) -> str:
    """Peak memory counters per configuration against the capacity recorded for them."""
    rows: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
    for config in configs:
        counters = config["memory"]
        if not counters:
            rows.append((config["configuration_id"], None, config))
        for counter in counters:
            rows.append((config["configuration_id"], counter, config))
    values: list[int] = []
    for _, counter, _config in rows:
        if counter is None:
            continue
        values += [v for v in counter["values"] if v is not None]
        if counter["capacity_bytes"]:
            values.append(counter["capacity_bytes"])
    top = max(values) if values else 1
    unit, scale = ("GiB", 2**30) if top >= 2**30 else ("MiB", 2**20)
    x_max = _nice_max(top / scale * 1.02)
    plot_w = _WIDTH - _LABEL_W - _RIGHT_W - 20
    row_h = _ROW_H + 6
    height = _TOP + row_h * max(len(rows), 1) + _BOTTOM + 34

    def x(value: float) -> float:
        return _LABEL_W + plot_w * value / x_max

    out = _svg_open(height, "Memory peaks against the device or host capacity", "memory")
    out += _x_axis(x_max, x, _TOP, _TOP + row_h * len(rows), f"peak memory ({unit})", lambda v: _tick(v))
    if not rows:
        out.append(_note(_LABEL_W + 10, _TOP + 20, "no configuration"))
    previous = None
    for index, (config_id, counter, _config) in enumerate(rows):
        y0 = _TOP + row_h * index
        mid = y0 + row_h / 2
        if config_id != previous:
            out.append(_text_trunc(8, y0 + 14, config_id, _LABEL_W - 16, weight="600"))
            if index:
                out.append(f'<line x1="4" x2="{_WIDTH - 4}" y1="{y0}" y2="{y0}" stroke="#e3e3e3"/>')
            previous = config_id
        if counter is None:
            out.append(_note(_LABEL_W + 8, mid + 4, "no memory counter recorded"))
            continue
        out.append(_text_trunc(18, y0 + 29, counter["name"], _LABEL_W - 26, size=11, fill="#555"))
        peak = counter["peak_bytes"]
        if peak is not None:
            bar_w = x(peak / scale) - _LABEL_W
            out.append(f'<rect class="mem-bar" x="{_LABEL_W}" y="{mid - 8:.1f}" width="{bar_w:.1f}" '
                       f'height="16" fill="{_BLUE}" fill-opacity="0.35" stroke="{_BLUE}">'
                       f"<title>{escape(counter['name'])}: highest peak {peak / scale:.3f} {unit}</title></rect>")
            out.append(f'<text x="{x(peak / scale) + 4:.1f}" y="{mid + 4:.1f}" font-size="11" fill="{_INK}">'
                       f"{peak / scale:.2f} {unit}</text>")
        else:
            out.append(_note(_LABEL_W + 8, mid + 4, "not measured"))
        for v in counter["values"]:
            if v is not None:
                out.append(f'<circle class="mem-pass" cx="{x(v / scale):.1f}" cy="{mid:.1f}" r="3.5" fill="{_BLUE}">'
                           f"<title>one pass: {v / scale:.3f} {unit}</title></circle>")
        capacity = counter["capacity_bytes"]
        if capacity:
            cx = x(capacity / scale)
            out.append(f'<line class="capacity" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y0 + 3:.1f}" '
                       f'y2="{y0 + row_h - 3:.1f}" '
                       f'stroke="{_RED}" stroke-width="2" stroke-dasharray="5 3"><title>'
                       f"{escape(counter['capacity_name'])}: {capacity / scale:.2f} {unit} "
                       f"({escape(counter['capacity_source'])})</title></line>")
            out.append(f'<text x="{cx - 4:.1f}" y="{y0 + 11:.1f}" font-size="10" text-anchor="end" fill="{_RED}">'
                       f"{escape(counter['capacity_name'])} {capacity / scale:.1f} {unit}</text>")
        else:
            out.append(f'<text class="no-capacity" x="{_LABEL_W + plot_w:.1f}" y="{y0 + 11:.1f}" font-size="10" '
                       f'text-anchor="end" fill="{_RED}">{escape(counter["capacity_name"])} capacity not recorded'
                       f"<title>{escape(counter['capacity_reason'])}</title></text>")
    out += _legend(height - 18, [
        ("rect", _BLUE, "highest peak over passes"),
        ("dot", _BLUE, "one pass"),
        ("dash", _RED, "capacity (host RAM or device memory)"),
    ])
    out.append("</svg>")
    return "".join(out)


# -- plot 3: cost per validated corpus ------------------------------------------------------


def cost_svg(configs: list[dict[str, Any]], chosen: str | None) -> str:
    """Cost per validated corpus per configuration; empty dashed bars with the reason when undefined/unknown."""
    amounts = [Decimal(c["cost"]["cost_per_validated_corpus_usd"]) for c in configs
               if c["cost"]["cost_per_validated_corpus_usd"] is not None]
    x_max = _nice_max(float(max(amounts)) if amounts else 1.0)
    plot_w = _WIDTH - _LABEL_W - _RIGHT_W - 20
    height = _TOP + _ROW_H * max(len(configs), 1) + _BOTTOM + 34

    def x(value: float) -> float:
        return _LABEL_W + plot_w * value / x_max

    out = _svg_open(height, "Cost per validated corpus, per configuration", "cost")
    out += _x_axis(x_max, x, _TOP, _TOP + _ROW_H * len(configs), "cost per validated corpus (USD)",
                   lambda v: _tick(v))
    if not configs:
        out.append(_note(_LABEL_W + 10, _TOP + 20, "no configuration"))
    for row, config in enumerate(configs):
        y0 = _TOP + _ROW_H * row
        mid = y0 + _ROW_H / 2
        out += _row_label(row, config["configuration_id"])
        cost = config["cost"]
        value = cost["cost_per_validated_corpus_usd"]
        if value is not None:
            colour = _GREEN if config["configuration_id"] == chosen else (_BLUE if config["acceptable"] else _GREY)
            width = max(x(float(Decimal(value))) - _LABEL_W, 1.0)
            status = "chosen" if config["configuration_id"] == chosen else (
                f"rank {config['rank']}" if config["acceptable"] else "not acceptable")
            out.append(f'<rect class="cost-bar" x="{_LABEL_W}" y="{mid - 10:.1f}" width="{width:.1f}" height="20" '
                       f'fill="{colour}"><title>{escape(config["configuration_id"])}: {value} USD per validated '
                       f"corpus ({cost['total_usd']} USD / {config['accepted_artifacts']}); {status}</title></rect>")
            out.append(f'<text x="{_LABEL_W + width + 6:.1f}" y="{mid + 4:.1f}" font-size="11" fill="{_INK}">'
                       f"{value} USD · {escape(status)}</text>")
        else:
            if cost["per_result_state"] == "undefined":
                reason = f"undefined: no accepted corpus (spend {cost['total_usd']} USD still stands)"
            else:
                reason = "unknown: " + cost["empty_reason"]
            out.append(f'<rect class="cost-empty" x="{_LABEL_W}" y="{mid - 10:.1f}" width="{plot_w:.1f}" height="20" '
                       f'fill="none" stroke="{_GREY}" stroke-dasharray="4 3"><title>{escape(reason)}</title></rect>')
            out.append(_text_trunc(_LABEL_W + 8, mid + 4, reason, plot_w - 16, size=11, fill="#555"))
    out += _legend(height - 18, [
        ("rect", _GREEN, "chosen"),
        ("rect", _BLUE, "acceptable"),
        ("rect", _GREY, "not acceptable"),
        ("empty", _GREY, "undefined or unknown (reason written)"),
    ])
    out.append("</svg>")
    return "".join(out)


# -- plot 4: the declared job's Pareto view -------------------------------------------------


def _job_html(job: dict[str, Any]) -> list[str]:
    spec = job["job"]
    chosen = job["chosen"]
    configs = {c["configuration_id"]: c for c in job["configurations"]}
    if chosen:
        c = configs[chosen]
        p = c["projection"]
        answer = (f"<div class=\"answer\"><p><strong>Cheapest for the job ({spec['inputs']:,} inputs × "
                  f"{spec['corpora']} corpus/corpora): {escape(chosen)}</strong>: projected {p['job_h']:.1f} h "
                  f"(interval {p['interval_h'][0]:.1f}–{p['interval_h'][1]:.1f} h), {escape(c['chosen_option'])} "
                  f"billing, expected {c['expected_usd']} USD; per validated corpus {c['per_corpus_usd']} USD.</p>"
                  + _ul(job["why"]) + "</div>")
    else:
        answer = "<div class=\"answer none\"><p><strong>No configuration can do the declared job.</strong></p>" \
                 + _ul(job["why"]) + "</div>"
    rows = []
    for c in sorted(job["configurations"], key=lambda c: (c["rank"] is None, c["rank"] or 0)):
        p = c["projection"]
        hours = "—" if p is None else f"{p['job_h']:.1f} ({p['interval_h'][0]:.1f}–{p['interval_h'][1]:.1f})"
        fits = "—" if c["p_fits_deadline"] is None else f"{c['p_fits_deadline']:.1%}"
        rows.append(f"<tr><td>{c['rank'] or '—'}</td><td>{escape(c['configuration_id'])}</td><td class=\"num\">"
                    f"{hours}</td><td>{escape(c['chosen_option'] or '—')}</td><td class=\"num\">"
                    f"{c['per_corpus_usd'] or '—'}</td><td class=\"num\">{fits}</td><td>"
                    f"{'non-dominated' if c['pareto'] else ''}</td><td>{escape('; '.join(c['exclusions']))}</td></tr>")
    comparisons = [f"{c['a']} vs {c['b']}: P(cheaper) {c['p_a_cheaper']:.1%}, P(same) {c['p_tie']:.1%}: "
                   f"{c['verdict']}; {c['note']}" for c in job["comparisons"]]
    return [
        "<h2>The declared job</h2>", answer,
        f"<figure>{pareto_svg(job['configurations'])}<figcaption>Each configuration the job could be projected for: "
        "projected job hours (bootstrap interval as a bar) against the job's expected cost per validated corpus under "
        "its cheapest fitting billing option; quality beside the point. Filled and joined: the non-dominated ones "
        "(no other configuration is cheaper, faster and at least as good at once).</figcaption></figure>",
        "<table><tr><th>rank</th><th>configuration</th><th>job hours (interval)</th><th>billing</th>"
        "<th>per validated corpus (USD)</th><th>P(fits deadline)</th><th>Pareto</th><th>not ranked because</th></tr>"
        + "".join(rows) + "</table>",
        "<h3>How sure</h3>", _ul(comparisons or ["fewer than two ranked configurations: nothing to compare"]),
    ]


def pareto_svg(configs: list[dict[str, Any]]) -> str:
    """Job hours (x) against cost per validated corpus (y); the non-dominated configurations marked."""
    points = [c for c in configs if c["projection"] is not None and c["per_corpus_usd"] is not None]
    height = 380.0
    left, right, top, bottom = 90.0, _WIDTH - 220.0, _TOP, height - 80.0
    out = _svg_open(height, "Pareto view: job hours against cost per validated corpus", "pareto")
    if not points:
        out.append(_note(left + 10, top + 30, "no configuration could be projected and priced for the job"))
        out.append("</svg>")
        return "".join(out)
    x_max = _nice_max(max(c["projection"]["interval_h"][1] for c in points))
    y_max = _nice_max(max(float(Decimal(c["per_corpus_usd"])) for c in points))

    def px(hours: float) -> float:
        return left + (right - left) * hours / x_max

    def py(usd: float) -> float:
        return bottom - (bottom - top) * usd / y_max

    for value in _ticks(x_max):
        out.append(f'<line x1="{px(value):.1f}" x2="{px(value):.1f}" y1="{top}" y2="{bottom}" stroke="#ececec"/>')
        out.append(f'<text x="{px(value):.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle" fill="#444">'
                   f"{_tick(value)}</text>")
    for value in _ticks(y_max):
        out.append(f'<line x1="{left}" x2="{right}" y1="{py(value):.1f}" y2="{py(value):.1f}" stroke="#ececec"/>')
        out.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" font-size="11" text-anchor="end" fill="#444">'
                   f"{_tick(value)}</text>")
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#444"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="#444"/>')
    out.append(f'<text class="axis-label" x="{(left + right) / 2:.1f}" y="{bottom + 34}" font-size="12" '
               f'text-anchor="middle" fill="{_INK}">projected job hours</text>')
    out.append(f'<text class="axis-label" x="14" y="{(top + bottom) / 2:.1f}" font-size="12" text-anchor="middle" '
               f'fill="{_INK}" transform="rotate(-90 14 {(top + bottom) / 2:.1f})">cost per validated corpus '
               "(USD)</text>")
    front = sorted((c for c in points if c["pareto"]), key=lambda c: c["projection"]["job_h"])
    if len(front) > 1:
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(c['projection']['job_h']):.1f},"
                        f"{py(float(Decimal(c['per_corpus_usd']))):.1f}" for i, c in enumerate(front))
        out.append(f'<path class="pareto-line" d="{path}" fill="none" stroke="{_GREEN}" stroke-width="2"/>')
    for c in points:
        p = c["projection"]
        cx, cy = px(p["job_h"]), py(float(Decimal(c["per_corpus_usd"])))
        out.append(f'<line class="interval" x1="{px(p["interval_h"][0]):.1f}" x2="{px(p["interval_h"][1]):.1f}" '
                   f'y1="{cy:.1f}" y2="{cy:.1f}" stroke="{_GREY}" stroke-width="3"/>')
        quality = "quality unknown" if c["median_metric"] is None else f"{c['metric']} {c['median_metric']:.4f}"
        tip = (f"{c['configuration_id']}: {p['job_h']:.2f} h, {c['per_corpus_usd']} USD per validated corpus, "
               f"{quality}; {'non-dominated' if c['pareto'] else 'dominated'}")
        kind = "front" if c["pareto"] else "dominated"
        fill = _GREEN if c["pareto"] else "white"
        out.append(f'<circle class="pareto {kind}" cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="{fill}" '
                   f'stroke="{_GREEN if c["pareto"] else _BLUE}" stroke-width="2"><title>{escape(tip)}</title>'
                   "</circle>")
        out.append(_text_trunc(cx + 10, cy - 8, f"{c['configuration_id']} · {quality}", _WIDTH - cx - 20, size=11))
    out += _legend(height - 18, [("dot", _GREEN, "non-dominated (Pareto front)"), ("ring", _BLUE, "dominated"),
                                 ("rect", _GREY, "bootstrap interval of the job hours")])
    out.append("</svg>")
    return "".join(out)


# -- SVG helpers ----------------------------------------------------------------------------


def _svg_open(height: float, title: str, name: str) -> list[str]:
    return [
        f'<svg class="plot {name}" width="{_WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {_WIDTH} {height:.0f}" role="img" aria-label="{escape(title)}">',
        f'<rect x="0" y="0" width="{_WIDTH}" height="{height:.0f}" fill="white"/>',
        f'<text x="8" y="22" font-size="15" font-weight="600" fill="{_INK}">{escape(title)}</text>',
    ]


def _x_axis(x_max: float, x: Any, y_top: float, y_bottom: float, label: str, fmt: Any) -> list[str]:
    out = []
    for value in _ticks(x_max):
        px = x(value)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y_top}" y2="{y_bottom}" stroke="#ececec"/>')
        out.append(f'<text x="{px:.1f}" y="{y_bottom + 16}" font-size="11" text-anchor="middle" fill="#444">'
                   f"{fmt(value)}</text>")
    out.append(f'<line x1="{_LABEL_W}" x2="{x(x_max):.1f}" y1="{y_bottom}" y2="{y_bottom}" stroke="#444"/>')
    out.append(f'<line x1="{_LABEL_W}" x2="{_LABEL_W}" y1="{y_top}" y2="{y_bottom}" stroke="#444"/>')
    out.append(f'<text class="axis-label" x="{(_LABEL_W + x(x_max)) / 2:.1f}" y="{y_bottom + 34}" font-size="12" '
               f'text-anchor="middle" fill="{_INK}">{escape(label)}</text>')
    return out


def _row_label(row: int, text: str) -> list[str]:
    mid = _TOP + _ROW_H * row + _ROW_H / 2
    out = [_text_trunc(8, mid + 4, text, _LABEL_W - 16)]
    if row:
        y = _TOP + _ROW_H * row
        out.append(f'<line x1="4" x2="{_LABEL_W}" y1="{y}" y2="{y}" stroke="#f0f0f0"/>')
    return out


def _text_trunc(x: float, y: float, text: str, width: float, size: int = 12, fill: str = _INK,
                weight: str = "normal") -> str:
    limit = max(int(width / (_CHAR_W * size / 12)), 4)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" fill="{fill}">'
            f"{escape(shown)}<title>{escape(text)}</title></text>")


def _note(x: float, y: float, text: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="11" font-style="italic" fill="#777">{escape(text)}</text>'


def _cross(cx: float, cy: float, r: float, tip: str) -> str:
    return (f'<path class="pass failed" d="M{cx - r:.1f},{cy - r:.1f} L{cx + r:.1f},{cy + r:.1f} '
            f'M{cx - r:.1f},{cy + r:.1f} L{cx + r:.1f},{cy - r:.1f}" stroke="{_RED}" stroke-width="2.5" '
            f'stroke-linecap="round"><title>{escape(tip)}</title></path>')


def _legend(y: float, items: Iterable[tuple[str, str, str]]) -> list[str]:
    out = ['<g class="legend">']
    x = float(_LABEL_W)
    for kind, colour, label in items:
        if kind == "dot":
            out.append(f'<circle cx="{x + 6:.1f}" cy="{y - 4:.1f}" r="5" fill="{colour}"/>')
        elif kind == "ring":
            out.append(f'<circle cx="{x + 6:.1f}" cy="{y - 4:.1f}" r="5" fill="white" stroke="{colour}" '
                       'stroke-width="2"/>')
        elif kind == "cross":
            out.append(f'<path d="M{x + 2:.1f},{y - 8:.1f} L{x + 10:.1f},{y:.1f} M{x + 2:.1f},{y:.1f} '
                       f'L{x + 10:.1f},{y - 8:.1f}" stroke="{colour}" stroke-width="2.5"/>')
        elif kind == "bar":
            out.append(f'<line x1="{x + 6:.1f}" x2="{x + 6:.1f}" y1="{y - 11:.1f}" y2="{y + 3:.1f}" '
                       f'stroke="{colour}" stroke-width="3"/>')
        elif kind == "dash":
            out.append(f'<line x1="{x + 6:.1f}" x2="{x + 6:.1f}" y1="{y - 11:.1f}" y2="{y + 3:.1f}" '
                       f'stroke="{colour}" stroke-width="2" stroke-dasharray="4 2"/>')
        elif kind == "empty":
            out.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="14" height="12" fill="none" stroke="{colour}" '
                       'stroke-dasharray="3 2"/>')
        else:
            out.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="14" height="12" fill="{colour}" '
                       'fill-opacity="0.6"/>')
        out.append(f'<text x="{x + 18:.1f}" y="{y:.1f}" font-size="11" fill="#333">{escape(label)}</text>')
        x += 28 + len(label) * _CHAR_W * 11 / 12
    out.append("</g>")
    return out


def _nice_max(value: float) -> float:
    """The smallest 1/2/2.5/5 × 10^k at or above ``value``. Example: ``_nice_max(27.9) == 30``."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 3, 4, 5, 6, 8, 10):
        candidate = step * 10**exponent
        if candidate >= value * 0.999999:
            return float(candidate)
    return float(10 ** (exponent + 1))


def _ticks(x_max: float) -> list[float]:
    """About five round ticks from 0 to ``x_max`` inclusive."""
    raw = x_max / 5
    exponent = math.floor(math.log10(raw))
    step = min((s * 10**exponent for s in (1, 2, 2.5, 5, 10) if s * 10**exponent >= raw), default=raw)
    count = int(round(x_max / step))
    return [step * i for i in range(count + 1) if step * i <= x_max * 1.000001]


def _tick(value: float) -> str:
    if value == int(value):
        return f"{int(value)}"
    return f"{value:g}"


# -- HTML helpers ---------------------------------------------------------------------------


def _ul(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def _plan_short(cost: dict[str, Any]) -> str:
    contracted = cost["contracted"]
    plan = contracted["plan"]
    return (f"{plan['gpu']} {plan['plan_days']}-day, {contracted['lots']} lot(s) × {plan['price_usd_per_lot']} USD = "
            f"{contracted['total_usd']} USD")


def _per_corpus_text(cost: dict[str, Any]) -> str:
    if cost["per_result_state"] == "defined":
        return f"{cost['cost_per_validated_corpus_usd']} USD"
    if cost["per_result_state"] == "undefined":
        return "undefined (no accepted corpus)"
    return "unknown"


def _config_table(configs: list[dict[str, Any]]) -> str:
    head = ("<table><tr><th>rank</th><th>configuration</th><th>quality</th><th>pass times (s)</th>"
            "<th>median (s)</th><th>accepted / attempts</th><th>accepted artifacts</th><th>needed period (h)</th>"
            "<th>cost (USD)</th><th>per validated corpus (USD)</th><th>deadline</th><th>not ranked because</th></tr>")
    rows = []
    for c in sorted(configs, key=lambda c: (c["rank"] is None, c["rank"] or 0)):
        quality = {True: "equivalent", False: "NOT equivalent", None: "unknown"}[c["equivalent"]]
        times = " ".join(
            (f"{p['pass_s']:.2f}" if p["accepted"] else f"{p['pass_s']:.2f}(r)") if p["pass_s"] is not None
            else f"✗{p['status']}" for p in c["passes"])
        deadline = {True: "fits", False: "does NOT fit", None: "—"}[c["deadline_fits"]]
        per = c["cost"]["cost_per_validated_corpus_usd"] or (
            "undefined" if c["cost"]["per_result_state"] == "undefined" else "unknown")
        needed = "—" if c["campaign_needed_h"] is None else f"{c['campaign_needed_h']:.2f}"
        median = "—" if c["median_pass_s"] is None else f"{c['median_pass_s']:.2f}"
        rows.append(
            f"<tr><td>{c['rank'] or '—'}</td><td>{escape(c['configuration_id'])}</td>"
            f"<td title=\"{escape(c['quality_reason'])}\">{quality}</td><td>{escape(times)}</td>"
            f"<td class=\"num\">{median}</td><td class=\"num\">{c['accepted_passes']} / {c['attempts']}</td>"
            f"<td class=\"num\">{c['accepted_artifacts']} of {c['expected_artifacts']}</td>"
            f"<td class=\"num\">{needed}</td><td class=\"num\">{c['cost']['total_usd'] or '—'}</td>"
            f"<td class=\"num\">{escape(per)}</td><td>{deadline}</td>"
            f"<td>{escape('; '.join(c['exclusions']))}</td></tr>"
        )
    return head + "".join(rows) + "</table>"


def _period_tables(campaigns: list[dict[str, Any]]) -> str:
    out = []
    for campaign in campaigns:
        period = campaign["period"]
        out.append(f"<h3>{escape(campaign['hardware'])} "
                   f"<span class=\"muted\">({escape(campaign['label'])})</span></h3>")
        if period["used_s"] is None:
            out.append(f"<p>Period unknown: {escape('; '.join(sorted(set(period['empty_reasons'].values()))))}.</p>")
            continue
        out.append(f"<p>Needed period <strong>{period['needed_h']:.2f} h</strong> = used {period['used_h']:.2f} h "
                   f"(overlaps counted once) + declared waiting {period['waiting_h']:.2f} h. Idle between sessions: "
                   f"{period['idle_h']:.2f} h.</p>")
        out.append("<table><tr><th>component</th><th>hours</th><th>counted</th><th>where it comes from</th></tr>")
        for c in period["components"]:
            hours = "—" if c["hours"] is None else f"{c['hours']:.4f}"
            out.append(f"<tr><td>{escape(c['name'])}</td><td class=\"num\">{hours}</td>"
                       f"<td>{'yes' if c['counted'] else 'no'}</td><td>{escape(c['source'])}</td></tr>")
        out.append("</table>")
        if period["notes"]:
            out.append(_ul(period["notes"]))
    return "".join(out)


def _ledger_html(ledger: dict[str, Any] | None) -> str:
    if ledger is None:
        return "<p>None given (<code>--expenses FILE</code>). Never part of a configuration's cost.</p>"
    rows = "".join(
        f"<tr><td>{escape(e['date'])}</td><td>{escape(e['description'])}</td><td class=\"num\">{e['amount_usd']}</td>"
        f"<td>{escape(e['evidence'])}</td></tr>" for e in ledger["expenses"])
    return (f"<p>From {escape(ledger['path'])}; shown apart, never added to a configuration's cost.</p>"
            "<table><tr><th>date</th><th>description</th><th>amount (USD)</th><th>evidence</th></tr>"
            f"{rows}<tr><td></td><td><strong>total</strong></td><td class=\"num\">{ledger['total_usd']}</td>"
            "<td></td></tr></table>")
