"""A small dependency-free SVG renderer for line and grouped-bar charts (for the widget and Slack)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 40, 50
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class Series:
    """One named line: x and y values of the same length."""

    name: str
    x: list[float]
    y: list[float]
    dashed: bool = False


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e4 or magnitude < 1e-2:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{value:.3g}"


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        start, stop = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10.0**e for e in range(start, stop + 1) if lo <= 10.0**e <= hi] or [lo, hi]
    if hi == lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= 6:
            step *= mult
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


class _Scale:
    def __init__(self, lo: float, hi: float, out_lo: float, out_hi: float, log: bool) -> None:
        self.log = log
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi == lo:
            lo, hi = lo - 1, hi + 1
        self.lo, self.hi, self.out_lo, self.out_hi = lo, hi, out_lo, out_hi

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.out_lo + (v - self.lo) / (self.hi - self.lo) * (self.out_hi - self.out_lo)


def _frame(title: str, x_label: str, y_label: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{HEIGHT - 10}" '
        f'text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="15" y="{TOP + (HEIGHT - TOP - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 15 {TOP + (HEIGHT - TOP - BOTTOM) / 2})">{escape(y_label)}</text>',
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
        'fill="none" stroke="#333"/>',
    ]


def _legend(names: list[str], dashed: list[bool]) -> list[str]:
    parts = []
    for i, name in enumerate(names):
        y = TOP + 10 + i * 18
        x = WIDTH - RIGHT + 10
        dash = ' stroke-dasharray="5,3"' if dashed[i] else ""
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 20}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 25}" y="{y + 4}">{escape(name[:20])}</text>')
    return parts


def _axis_ticks(xs: _Scale, ys: _Scale, x_ticks: list[float], y_ticks: list[float]) -> list[str]:
    parts = []
    bottom = HEIGHT - BOTTOM
    for t in x_ticks:
        x = xs(t)
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{_fmt(t)}</text>')
    for t in y_ticks:
        y = ys(t)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    return parts


def line_chart(
    title: str, series: list[Series], x_label: str, y_label: str, *, log_x: bool = False, log_y: bool = False
) -> str:
    """Render named series as an SVG line chart with markers, axes and a legend."""
    points = [(x, y) for s in series for x, y in zip(s.x, s.y, strict=True) if math.isfinite(y)]
    if log_x:
        points = [(x, y) for x, y in points if x > 0]
    if log_y:
        points = [(x, y) for x, y in points if y > 0]
    if not points:
        return "\n".join([*_frame(title, x_label, y_label), "</svg>"])
    x_lo, x_hi = min(p[0] for p in points), max(p[0] for p in points)
    y_lo, y_hi = min(p[1] for p in points), max(p[1] for p in points)
    if not log_y:
        y_lo, y_hi = min(0.0, y_lo), y_hi * 1.05 if y_hi > 0 else y_hi + 1
    xs = _Scale(x_lo, x_hi, LEFT, WIDTH - RIGHT, log_x)
    ys = _Scale(y_lo, y_hi, HEIGHT - BOTTOM, TOP, log_y)
    parts = _frame(title, x_label, y_label) + _axis_ticks(xs, ys, _ticks(x_lo, x_hi, log_x), _ticks(y_lo, y_hi, log_y))
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = [
            (xs(x), ys(y))
            for x, y in zip(s.x, s.y, strict=True)
            if math.isfinite(y) and (x > 0 or not log_x) and (y > 0 or not log_y)
        ]
        dash = ' stroke-dasharray="5,3"' if s.dashed else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in pts)
    parts += _legend([s.name for s in series], [s.dashed for s in series])
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(title: str, categories: list[str], groups: dict[str, list[float]], y_label: str) -> str:
    """Render grouped bars: one group per category, one bar per named series."""
    values = [v for vs in groups.values() for v in vs if math.isfinite(v)]
    y_hi = max([*values, 0.0]) * 1.1 or 1.0
    ys = _Scale(0.0, y_hi, HEIGHT - BOTTOM, TOP, False)
    parts = _frame(title, "", y_label)
    for t in _ticks(0.0, y_hi, False):
        y = ys(t)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(categories))
    bar = slot * 0.8 / max(1, len(groups))
    for c, category in enumerate(categories):
        x0 = LEFT + c * slot + slot * 0.1
        for g, (_, vs) in enumerate(groups.items()):
            v = vs[c] if math.isfinite(vs[c]) else 0.0
            top = ys(v)
            parts.append(
                f'<rect x="{x0 + g * bar:.1f}" y="{top:.1f}" width="{bar - 1:.1f}" '
                f'height="{HEIGHT - BOTTOM - top:.1f}" fill="{COLOURS[g % len(COLOURS)]}"/>'
            )
        parts.append(
            f'<text x="{LEFT + c * slot + slot / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(category[:18])}</text>'
        )
    parts += _legend(list(groups), [False] * len(groups))
    parts.append("</svg>")
    return "\n".join(parts)
