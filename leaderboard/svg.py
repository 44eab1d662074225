"""Small inline SVG line charts for the HTML leaderboard (no matplotlib: text in, text out).

:func:`line_chart` draws one line per series (markers at the points, gaps at missing values) in a
plot area with ticked axes, axis labels and a title; the legend sits in its own column right of
the plot area, so it never covers a curve. Coordinates are written with one decimal, so equal
inputs give equal bytes on every machine.
"""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

__all__ = ["PALETTE", "line_chart", "nice_ticks"]

#: matplotlib's tab10 colours, the same order as the PNG plots
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
_W, _H = 420, 260  # plot area (px)
_LEFT, _TOP, _BOTTOM = 62, 30, 46  # margins: y tick labels + label, title, x tick labels + label
_LEGEND = 200  # legend column width
_TINY, _HUGE = 1e-200, 1e200  # spans outside these have no round ticks (and 10 ** k over- or underflows)


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """About ``target`` evenly spaced round ticks (steps 1, 2, 5 × 10^k) covering [lo, hi]. Values no plot of
    pebench's makes (a span that overflows, or one too small for a power of ten: numbers from a hostile file)
    get the ticks ``[lo, hi]``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 if lo == 0 else lo - abs(lo) * 0.1, hi + 0.5 if hi == 0 else hi + abs(hi) * 0.1
    raw = (hi - lo) / target
    if not (math.isfinite(raw) and _TINY < raw < _HUGE):
        return [lo, hi] if hi > lo else [0.0, 1.0]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while True:
        t = start + k * step
        ticks.append(round(t, 12))
        if t >= hi - 1e-9 * step:
            break
        k += 1
    return ticks


def _tick_label(t: float, ticks: Sequence[float]) -> str:
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    decimals = min(max(0, -math.floor(math.log10(step) + 1e-9)), 20) if _TINY < step < _HUGE else 0
    text = f"{t:.{decimals}f}"
    return "0" if float(text) == 0 else text.replace("-", "−")


def line_chart(series: Sequence[tuple[str, Sequence[float | None]]], x_labels: Sequence[str], title: str,
               xlabel: str, ylabel: str, ref_line: float | None = None) -> str:
    """SVG text: one line per ``(label, y values)``, the values at the categorical x positions
    ``x_labels`` (evenly spaced); ``ref_line``: a dotted horizontal line (e.g. 0)."""
    ys = [y for _, vals in series for y in vals if y is not None and math.isfinite(y)]
    if ref_line is not None:
        ys.append(ref_line)
    ticks = nice_ticks(min(ys), max(ys)) if ys else [0.0, 1.0]
    y0, y1 = ticks[0], ticks[-1]
    n = len(x_labels)

    def px(i: int) -> float:
        return _LEFT + (_W * (i + 0.5) / n if n else 0)

    def py(y: float) -> float:
        return _TOP + _H - (_H * (y - y0) / (y1 - y0) if y1 > y0 else _H / 2)

    width, height = _LEFT + _W + 16 + _LEGEND, max(_TOP + _H + _BOTTOM, _TOP + 16 * len(series) + 10)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" class="chart">',
           f'<text x="{_LEFT + _W / 2:.1f}" y="18" text-anchor="middle" class="ct">{escape(title)}</text>',
           f'<rect x="{_LEFT}" y="{_TOP}" width="{_W}" height="{_H}" fill="none" stroke="#999"/>']
    for t in ticks:
        y = py(t)
        out.append(f'<line x1="{_LEFT - 4}" y1="{y:.1f}" x2="{_LEFT + _W}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick_label(t, ticks)}</text>')
    for i, lab in enumerate(x_labels):
        out.append(f'<text x="{px(i):.1f}" y="{_TOP + _H + 16}" text-anchor="middle">{escape(lab)}</text>')
    out.append(f'<text x="{_LEFT + _W / 2:.1f}" y="{_TOP + _H + 38}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(14,{_TOP + _H / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{escape(ylabel)}</text>')
    if ref_line is not None and y0 <= ref_line <= y1:
        out.append(f'<line x1="{_LEFT}" y1="{py(ref_line):.1f}" x2="{_LEFT + _W}" y2="{py(ref_line):.1f}" '
                   f'stroke="#777" stroke-dasharray="2,3"/>')
    for k, (label, vals) in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        dash = ' stroke-dasharray="5,3"' if k >= len(PALETTE) else ""
        segment: list[str] = []
        segments = []
        for i, y in enumerate(vals):
            if y is None or not math.isfinite(y):
                segments.append(segment)
                segment = []
            else:
                segment.append(f"{px(i):.1f},{py(y):.1f}")
        segments.append(segment)
        for seg in segments:
            if len(seg) > 1:
                out.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>')
            for p in seg:
                x, y = p.split(",")
                out.append(f'<circle cx="{x}" cy="{y}" r="2.6" fill="{colour}"/>')
        ly = _TOP + 8 + 16 * k
        lx = _LEFT + _W + 16
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>'
                   f'<text x="{lx + 24}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)
