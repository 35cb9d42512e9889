"""The pieces every chart of the report is drawn with: sizes, colours, the opening tag, axes, labels, legends.

Text-only SVG (no script, no font, no image). Colours are Okabe-Ito, readable for the common colour-vision
deficiencies; :func:`nice_max` and :func:`ticks` choose round axis ends and ticks.

Example: ``nice_max(27.9) == 30.0``; ``ticks(30.0) == [0.0, 10.0, 20.0, 30.0]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from html import escape

WIDTH = 980
LABEL_W = 300
RIGHT_W = 140
ROW_H = 34
TOP = 48
BOTTOM = 52
CHAR_W = 6.6  # average width of a 12 px sans-serif character, for truncation

# Colours (Okabe-Ito, readable for the common colour-vision deficiencies).
BLUE = "#0072B2"
ORANGE = "#E69F00"
RED = "#D55E00"
GREEN = "#009E73"
GREY = "#8a8a8a"
INK = "#222222"


def svg_open(height: float, title: str, name: str) -> list[str]:
    """The opening ``<svg>`` tag (class ``plot NAME``), a white background and the title."""
    return [
        f'<svg class="plot {name}" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{escape(title)}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height:.0f}" fill="white"/>',
        f'<text x="8" y="22" font-size="15" font-weight="600" fill="{INK}">{escape(title)}</text>',
    ]


def x_axis(x_max: float, x: Callable[[float], float], y_top: float, y_bottom: float, label: str,
           fmt: Callable[[float], str]) -> list[str]:
    """Grid lines and labels at :func:`ticks`, the two axis lines and the axis label."""
    out = []
    for value in ticks(x_max):
        px = x(value)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y_top}" y2="{y_bottom}" stroke="#ececec"/>')
        out.append(f'<text x="{px:.1f}" y="{y_bottom + 16}" font-size="11" text-anchor="middle" fill="#444">'
                   f"{fmt(value)}</text>")
    out.append(f'<line x1="{LABEL_W}" x2="{x(x_max):.1f}" y1="{y_bottom}" y2="{y_bottom}" stroke="#444"/>')
    out.append(f'<line x1="{LABEL_W}" x2="{LABEL_W}" y1="{y_top}" y2="{y_bottom}" stroke="#444"/>')
    out.append(f'<text class="axis-label" x="{(LABEL_W + x(x_max)) / 2:.1f}" y="{y_bottom + 34}" font-size="12" '
               f'text-anchor="middle" fill="{INK}">{escape(label)}</text>')
    return out


def row_label(row: int, text: str) -> list[str]:
    """The label at the left of row ``row`` (truncated, full text as tooltip), a rule above all but the first."""
    mid = TOP + ROW_H * row + ROW_H / 2
    out = [text_trunc(8, mid + 4, text, LABEL_W - 16)]
    if row:
        y = TOP + ROW_H * row
        out.append(f'<line x1="4" x2="{LABEL_W}" y1="{y}" y2="{y}" stroke="#f0f0f0"/>')
    return out


def text_trunc(x: float, y: float, text: str, width: float, size: int = 12, fill: str = INK,
               weight: str = "normal") -> str:
    """Text cut with "…" to fit ``width`` pixels; the full text as its tooltip."""
    limit = max(int(width / (CHAR_W * size / 12)), 4)
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" fill="{fill}">'
            f"{escape(shown)}<title>{escape(text)}</title></text>")


def note(x: float, y: float, text: str) -> str:
    """An italic grey note written in the plot (e.g. "no configuration")."""
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="11" font-style="italic" fill="#777">{escape(text)}</text>'


def cross(cx: float, cy: float, r: float, tip: str) -> str:
    """A red cross marking a failed attempt, with its tooltip."""
    return (f'<path class="pass failed" d="M{cx - r:.1f},{cy - r:.1f} L{cx + r:.1f},{cy + r:.1f} '
            f'M{cx - r:.1f},{cy + r:.1f} L{cx + r:.1f},{cy - r:.1f}" stroke="{RED}" stroke-width="2.5" '
            f'stroke-linecap="round"><title>{escape(tip)}</title></path>')


def legend(y: float, items: Iterable[tuple[str, str, str]]) -> list[str]:
    """One row of (kind, colour, label) keys; kind is dot, ring, cross, bar, dash, empty or rect."""
    out = ['<g class="legend">']
    x = float(LABEL_W)
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
        x += 28 + len(label) * CHAR_W * 11 / 12
    out.append("</g>")
    return out


def nice_max(value: float) -> float:
    """The smallest 1/2/2.5/5 × 10^k at or above ``value``. Example: ``nice_max(27.9) == 30``."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 3, 4, 5, 6, 8, 10):
        candidate = step * 10**exponent
        if candidate >= value * 0.999999:
            return float(candidate)
    return float(10 ** (exponent + 1))


def ticks(x_max: float) -> list[float]:
    """About five round ticks from 0 to ``x_max`` inclusive."""
    raw = x_max / 5
    exponent = math.floor(math.log10(raw))
    step = min((s * 10**exponent for s in (1, 2, 2.5, 5, 10) if s * 10**exponent >= raw), default=raw)
    count = int(round(x_max / step))
    return [step * i for i in range(count + 1) if step * i <= x_max * 1.000001]


def tick(value: float) -> str:
    """A tick label: an integer without decimals. Example: ``tick(30.0) == "30"``, ``tick(2.5) == "2.5"``."""
    if value == int(value):
        return f"{int(value)}"
    return f"{value:g}"


