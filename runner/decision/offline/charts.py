"""The report's SVG charts, drawn here as text: pass times, memory against capacity, cost, the job's Pareto view.

Every chart takes the decision's records (:class:`~protocol.decision.rank.Configuration`,
:class:`~protocol.costing.job_cost.JobConfiguration`) and returns one ``<svg>`` element; nothing is fetched,
so the page that holds them opens offline. Axes, labels and legends come from :mod:`runner.decision.render.svg`.

Example: ``pass_time_svg(decision.configurations).startswith('<svg class="plot pass-times"')``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from html import escape

from protocol.costing.job_cost import JobConfiguration
from protocol.costing.projection import Projection
from protocol.decision.rank import Configuration
from protocol.decision.records import MemoryCounter, PassRecord
from runner.decision.render.svg import (
    BLUE,
    BOTTOM,
    GREEN,
    GREY,
    INK,
    LABEL_W,
    ORANGE,
    RED,
    RIGHT_W,
    ROW_H,
    TOP,
    WIDTH,
    cross,
    legend,
    nice_max,
    note,
    row_label,
    svg_open,
    text_trunc,
    tick,
    ticks,
    x_axis,
)
from runner.decision.render.text_format import usd

# -- plot 1: pass times ---------------------------------------------------------------------


def pass_time_svg(configs: Sequence[Configuration]) -> str:
    """Every repetition's pass time per configuration, median marked, failures in their own lane."""
    times = [p.pass_s for c in configs for p in c.passes if p.pass_s is not None]
    x_max = nice_max(max(times) if times else 1.0)
    plot_w = WIDTH - LABEL_W - RIGHT_W - 20
    height = TOP + ROW_H * max(len(configs), 1) + BOTTOM + 34

    def x(value: float) -> float:
        return LABEL_W + plot_w * value / x_max

    out = svg_open(height, "Pass time of every repetition, per configuration", "pass-times")
    out += x_axis(x_max, x, TOP, TOP + ROW_H * len(configs), "pass time per full pass over the corpus (s)",
                  lambda v: tick(v))
    lane_x = LABEL_W + plot_w + 16
    out.append(f'<text x="{lane_x + RIGHT_W / 2 - 8:.1f}" y="{TOP - 8}" font-size="11" text-anchor="middle" '
               f'fill="{RED}">failed (no time)</text>')
    out.append(f'<rect x="{lane_x:.1f}" y="{TOP}" width="{RIGHT_W - 16}" height="{ROW_H * len(configs)}" '
               'fill="#fdf3ee" stroke="#f0c8b4"/>')
    if not configs:
        out.append(note(LABEL_W + 10, TOP + 20, "no configuration"))
    for row, config in enumerate(configs):
        out += _pass_row(row, config, x, lane_x)
    legend_y = height - 18
    out += legend(legend_y, [
        ("dot", BLUE, "accepted pass"),
        ("ring", ORANGE, "completed, rejected"),
        ("cross", RED, "failed attempt (no pass time)"),
        ("bar", INK, "median of accepted passes"),
    ])
    out.append("</svg>")
    return "".join(out)


def _pass_row(row: int, config: Configuration, x: Callable[[float], float], lane_x: float) -> list[str]:
    """One configuration's row: a mark per pass (failures in the lane), then the median bar."""
    mid = TOP + ROW_H * row + ROW_H / 2
    out = row_label(row, config.configuration_id)
    n = max(len(config.passes), 1)
    failed = 0
    for i, p in enumerate(config.passes):
        if p.pass_s is None:
            out.append(cross(lane_x + 12 + (failed % 8) * 14, mid - 5, 5, _pass_tip(p)))
            failed += 1
        else:
            out.append(_pass_dot(p, x(p.pass_s), mid + (i - (n - 1) / 2) * min(4.0, 20.0 / n)))
    if not failed:
        out.append(f'<text x="{lane_x + 6:.1f}" y="{mid + 4:.1f}" font-size="10" fill="#999">none</text>')
    else:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(config.statuses.items()) if k != "ok")
        out.append(f'<text x="{lane_x + 6:.1f}" y="{mid + 12:.1f}" font-size="10" '
                   f'fill="{RED}">{escape(statuses)}</text>')
    if config.median_pass_s is not None:
        mx = x(config.median_pass_s)
        out.append(f'<line class="median" x1="{mx:.1f}" x2="{mx:.1f}" y1="{mid - 12:.1f}" y2="{mid + 12:.1f}" '
                   f'stroke="{INK}" stroke-width="3"><title>median of accepted passes: '
                   f'{config.median_pass_s:.3f} s</title></line>')
    elif not failed:
        out.append(note(LABEL_W + 8, mid + 4, "no pass"))
    return out


def _pass_tip(p: PassRecord) -> str:
    tip = f"{p.trial_id}: " + (f"{p.pass_s:.3f} s, " if p.pass_s is not None else "no pass time, ")
    return tip + f"status {p.status}, " + ("accepted" if p.accepted else "not accepted")


def _pass_dot(p: PassRecord, cx: float, cy: float) -> str:
    """A completed pass: filled when accepted, a ring when rejected."""
    if p.accepted:
        return (f'<circle class="pass accepted" cx="{cx:.1f}" cy="{cy:.1f}" r="5" '
                f'fill="{BLUE}" fill-opacity="0.85" stroke="white" stroke-width="1">'
                f"<title>{escape(_pass_tip(p))}</title></circle>")
    return (f'<circle class="pass rejected" cx="{cx:.1f}" cy="{cy:.1f}" r="5" '
            f'fill="white" stroke="{ORANGE}" stroke-width="2"><title>{escape(_pass_tip(p))}</title></circle>')


# -- plot 2: memory -------------------------------------------------------------------------


@dataclass(frozen=True)
class _MemoryScale:
    """Bytes to plot units: the unit, bytes per unit, and the x position of a value in units."""

    unit: str
    scale: int
    x_max: float
    plot_w: float

    def x(self, value: float) -> float:
        return LABEL_W + self.plot_w * value / self.x_max


def memory_svg(configs: Sequence[Configuration]) -> str:
    """Peak memory counters per configuration against the capacity recorded for them."""
    rows: list[tuple[str, MemoryCounter | None]] = []
    for config in configs:
        if not config.memory:
            rows.append((config.configuration_id, None))
        rows += [(config.configuration_id, counter) for counter in config.memory]
    values: list[int] = []
    for _, counter in rows:
        if counter is not None:
            values += [v for v in counter.values if v is not None]
            if counter.capacity_bytes:
                values.append(counter.capacity_bytes)
    top = max(values) if values else 1
    unit, scale = ("GiB", 2**30) if top >= 2**30 else ("MiB", 2**20)
    axis = _MemoryScale(unit, scale, nice_max(top / scale * 1.02), WIDTH - LABEL_W - RIGHT_W - 20)
    height = TOP + _MEMORY_ROW_H * max(len(rows), 1) + BOTTOM + 34
    out = svg_open(height, "Memory peaks against the device or host capacity", "memory")
    out += x_axis(axis.x_max, axis.x, TOP, TOP + _MEMORY_ROW_H * len(rows), f"peak memory ({unit})", lambda v: tick(v))
    if not rows:
        out.append(note(LABEL_W + 10, TOP + 20, "no configuration"))
    previous = None
    for index, (config_id, counter) in enumerate(rows):
        y0 = TOP + _MEMORY_ROW_H * index
        if config_id != previous:
            out.append(text_trunc(8, y0 + 14, config_id, LABEL_W - 16, weight="600"))
            if index:
                out.append(f'<line x1="4" x2="{WIDTH - 4}" y1="{y0}" y2="{y0}" stroke="#e3e3e3"/>')
            previous = config_id
        if counter is None:
            out.append(note(LABEL_W + 8, y0 + _MEMORY_ROW_H / 2 + 4, "no memory counter recorded"))
        else:
            out += _counter_marks(counter, y0, axis)
    out += legend(height - 18, [
        ("rect", BLUE, "highest peak over passes"),
        ("dot", BLUE, "one pass"),
        ("dash", RED, "capacity (host RAM or device memory)"),
    ])
    out.append("</svg>")
    return "".join(out)


_MEMORY_ROW_H = ROW_H + 6


def _counter_marks(counter: MemoryCounter, y0: float, axis: _MemoryScale) -> list[str]:
    """One counter's row: its name, the highest peak as a bar, each pass as a dot, the capacity line."""
    mid = y0 + _MEMORY_ROW_H / 2
    unit, scale = axis.unit, axis.scale
    out = [text_trunc(18, y0 + 29, counter.name, LABEL_W - 26, size=11, fill="#555")]
    peak = counter.peak_bytes
    if peak is not None:
        bar_w = axis.x(peak / scale) - LABEL_W
        out.append(f'<rect class="mem-bar" x="{LABEL_W}" y="{mid - 8:.1f}" width="{bar_w:.1f}" '
                   f'height="16" fill="{BLUE}" fill-opacity="0.35" stroke="{BLUE}">'
                   f"<title>{escape(counter.name)}: highest peak {peak / scale:.3f} {unit}</title></rect>")
        out.append(f'<text x="{axis.x(peak / scale) + 4:.1f}" y="{mid + 4:.1f}" font-size="11" fill="{INK}">'
                   f"{peak / scale:.2f} {unit}</text>")
    else:
        out.append(note(LABEL_W + 8, mid + 4, "not measured"))
    for v in counter.values:
        if v is not None:
            out.append(f'<circle class="mem-pass" cx="{axis.x(v / scale):.1f}" cy="{mid:.1f}" r="3.5" fill="{BLUE}">'
                       f"<title>one pass: {v / scale:.3f} {unit}</title></circle>")
    return out + _capacity_mark(counter, y0, axis)


def _capacity_mark(counter: MemoryCounter, y0: float, axis: _MemoryScale) -> list[str]:
    """The dashed capacity line with its name, or "capacity not recorded" with the reason."""
    capacity = counter.capacity_bytes
    unit, scale = axis.unit, axis.scale
    if not capacity:
        return [f'<text class="no-capacity" x="{LABEL_W + axis.plot_w:.1f}" y="{y0 + 11:.1f}" font-size="10" '
                f'text-anchor="end" fill="{RED}">{escape(counter.capacity_name)} capacity not recorded'
                f"<title>{escape(counter.capacity_reason)}</title></text>"]
    cx = axis.x(capacity / scale)
    return [f'<line class="capacity" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y0 + 3:.1f}" '
            f'y2="{y0 + _MEMORY_ROW_H - 3:.1f}" '
            f'stroke="{RED}" stroke-width="2" stroke-dasharray="5 3"><title>'
            f"{escape(counter.capacity_name)}: {capacity / scale:.2f} {unit} "
            f"({escape(counter.capacity_source)})</title></line>",
            f'<text x="{cx - 4:.1f}" y="{y0 + 11:.1f}" font-size="10" text-anchor="end" fill="{RED}">'
            f"{escape(counter.capacity_name)} {capacity / scale:.1f} {unit}</text>"]


# -- plot 3: cost per validated corpus ------------------------------------------------------


def cost_svg(configs: Sequence[Configuration], chosen: str | None) -> str:
    """Cost per validated corpus per configuration; empty dashed bars with the reason when undefined/unknown."""
    amounts = [_usd_value(c.cost.cost_per_validated_corpus_usd) for c in configs
               if c.cost.cost_per_validated_corpus_usd is not None]
    x_max = nice_max(max(amounts) if amounts else 1.0)
    plot_w = WIDTH - LABEL_W - RIGHT_W - 20
    height = TOP + ROW_H * max(len(configs), 1) + BOTTOM + 34

    def x(value: float) -> float:
        return LABEL_W + plot_w * value / x_max

    out = svg_open(height, "Cost per validated corpus, per configuration", "cost")
    out += x_axis(x_max, x, TOP, TOP + ROW_H * len(configs), "cost per validated corpus (USD)", lambda v: tick(v))
    if not configs:
        out.append(note(LABEL_W + 10, TOP + 20, "no configuration"))
    for row, config in enumerate(configs):
        mid = TOP + ROW_H * row + ROW_H / 2
        out += row_label(row, config.configuration_id)
        out += _cost_bar(config, chosen, mid, x, plot_w)
    out += legend(height - 18, [
        ("rect", GREEN, "chosen"),
        ("rect", BLUE, "acceptable"),
        ("rect", GREY, "not acceptable"),
        ("empty", GREY, "undefined or unknown (reason written)"),
    ])
    out.append("</svg>")
    return "".join(out)


def _cost_bar(config: Configuration, chosen: str | None, mid: float, x: Callable[[float], float],
              plot_w: float) -> list[str]:
    """A bar coloured by standing (chosen, acceptable, not), or an empty dashed bar with the reason."""
    cost = config.cost
    value = usd(cost.cost_per_validated_corpus_usd)
    if value is None:
        if cost.per_result_state == "undefined":
            reason = f"undefined: no accepted corpus (spend {usd(cost.total_usd)} USD still stands)"
        else:
            reason = "unknown: " + cost.empty_reason
        return [f'<rect class="cost-empty" x="{LABEL_W}" y="{mid - 10:.1f}" width="{plot_w:.1f}" height="20" '
                f'fill="none" stroke="{GREY}" stroke-dasharray="4 3"><title>{escape(reason)}</title></rect>',
                text_trunc(LABEL_W + 8, mid + 4, reason, plot_w - 16, size=11, fill="#555")]
    is_chosen = config.configuration_id == chosen
    colour = GREEN if is_chosen else (BLUE if config.acceptable else GREY)
    width = max(x(float(Decimal(value))) - LABEL_W, 1.0)
    status = "chosen" if is_chosen else (f"rank {config.rank}" if config.acceptable else "not acceptable")
    return [f'<rect class="cost-bar" x="{LABEL_W}" y="{mid - 10:.1f}" width="{width:.1f}" height="20" '
            f'fill="{colour}"><title>{escape(config.configuration_id)}: {value} USD per validated '
            f"corpus ({usd(cost.total_usd)} USD / {config.accepted_artifacts}); {status}</title></rect>",
            f'<text x="{LABEL_W + width + 6:.1f}" y="{mid + 4:.1f}" font-size="11" fill="{INK}">'
            f"{value} USD · {escape(status)}</text>"]


# -- plot 4: the declared job's Pareto view -------------------------------------------------


def pareto_svg(configs: Sequence[JobConfiguration]) -> str:
    """Job hours (x) against cost per validated corpus (y); the non-dominated configurations marked."""
    points = [(c, c.projection) for c in configs if c.projection is not None and c.per_corpus_usd is not None]
    height = 380.0
    left, right, top, bottom = 90.0, WIDTH - 220.0, TOP, height - 80.0
    out = svg_open(height, "Pareto view: job hours against cost per validated corpus", "pareto")
    if not points:
        out.append(note(left + 10, top + 30, "no configuration could be projected and priced for the job"))
        out.append("</svg>")
        return "".join(out)
    x_max = nice_max(max(p.high_h for _, p in points))
    y_max = nice_max(max(_usd_value(c.per_corpus_usd) for c, _ in points))

    def px(hours: float) -> float:
        return left + (right - left) * hours / x_max

    def py(dollars: float) -> float:
        return bottom - (bottom - top) * dollars / y_max

    for value in ticks(x_max):
        out.append(f'<line x1="{px(value):.1f}" x2="{px(value):.1f}" y1="{top}" y2="{bottom}" stroke="#ececec"/>')
        out.append(f'<text x="{px(value):.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle" fill="#444">'
                   f"{tick(value)}</text>")
    for value in ticks(y_max):
        out.append(f'<line x1="{left}" x2="{right}" y1="{py(value):.1f}" y2="{py(value):.1f}" stroke="#ececec"/>')
        out.append(f'<text x="{left - 6}" y="{py(value) + 4:.1f}" font-size="11" text-anchor="end" fill="#444">'
                   f"{tick(value)}</text>")
    out.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#444"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{bottom}" stroke="#444"/>')
    out.append(f'<text class="axis-label" x="{(left + right) / 2:.1f}" y="{bottom + 34}" font-size="12" '
               f'text-anchor="middle" fill="{INK}">projected job hours</text>')
    out.append(f'<text class="axis-label" x="14" y="{(top + bottom) / 2:.1f}" font-size="12" text-anchor="middle" '
               f'fill="{INK}" transform="rotate(-90 14 {(top + bottom) / 2:.1f})">cost per validated corpus '
               "(USD)</text>")
    front = sorted(((c, p) for c, p in points if c.pareto), key=lambda item: item[1].job_h)
    if len(front) > 1:
        path = " ".join(f"{'M' if i == 0 else 'L'}{px(p.job_h):.1f},{py(_usd_value(c.per_corpus_usd)):.1f}"
                        for i, (c, p) in enumerate(front))
        out.append(f'<path class="pareto-line" d="{path}" fill="none" stroke="{GREEN}" stroke-width="2"/>')
    for c, p in points:
        out += _pareto_point(c, p, px, py(_usd_value(c.per_corpus_usd)))
    out += legend(height - 18, [("dot", GREEN, "non-dominated (Pareto front)"), ("ring", BLUE, "dominated"),
                                ("rect", GREY, "bootstrap interval of the job hours")])
    out.append("</svg>")
    return "".join(out)


def _pareto_point(c: JobConfiguration, p: Projection, px: Callable[[float], float], cy: float) -> list[str]:
    """One configuration: its bootstrap interval, the point (filled on the front) and its label with quality."""
    cx = px(p.job_h)
    quality = "quality unknown" if c.median_metric is None else f"{c.metric} {c.median_metric:.4f}"
    tip = (f"{c.configuration_id}: {p.job_h:.2f} h, {usd(c.per_corpus_usd)} USD per validated corpus, "
           f"{quality}; {'non-dominated' if c.pareto else 'dominated'}")
    kind = "front" if c.pareto else "dominated"
    fill = GREEN if c.pareto else "white"
    return [f'<line class="interval" x1="{px(p.low_h):.1f}" x2="{px(p.high_h):.1f}" '
            f'y1="{cy:.1f}" y2="{cy:.1f}" stroke="{GREY}" stroke-width="3"/>',
            f'<circle class="pareto {kind}" cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="{fill}" '
            f'stroke="{GREEN if c.pareto else BLUE}" stroke-width="2"><title>{escape(tip)}</title>'
            "</circle>",
            text_trunc(cx + 10, cy - 8, f"{c.configuration_id} · {quality}", WIDTH - cx - 20, size=11)]


def _usd_value(amount: Decimal | None) -> float:
    """An amount as the plot scales it: the two-decimal figure decision.json writes, as a float."""
    return float(Decimal(str(usd(amount))))
