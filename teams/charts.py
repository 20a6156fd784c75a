"""Server-side SVG charts (no JavaScript, no CDN): the numbers are always in a table beside them."""

from __future__ import annotations

import math

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE = ["#2457c5", "#e07b39", "#2f9e6e", "#b83280", "#7c5cc4", "#c9a227", "#3b9fb5", "#8a8f98"]


def nice_step(peak: float, *, ticks: int = 4) -> tuple[float, int]:
    """A round y-axis step (1, 2, 2.5 or 5 x 10^k) giving about ``ticks`` grid lines up to ``peak``,
    and how many decimals its labels need so no two labels read the same."""
    raw = max(peak, 1e-9) / ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    decimals = max(0, -math.floor(math.log10(step))) + (1 if round(step / magnitude, 1) == 2.5 else 0)
    return step, decimals


def stacked_bars_svg(
    daily: dict[str, dict[str, float]], *, title: str, unit: str = "GPU-hours", width: int = 720, height: int = 260
) -> SafeString:
    """A stacked bar per day (keys ``YYYY-MM-DD``, sorted), one colour per series (e.g. member), with a
    y axis, day labels and a legend. Empty input gives a short "no data" figure. All text escaped."""
    days = sorted(daily)
    series = sorted({name for values in daily.values() for name in values})
    if not days or not series:
        return mark_safe(
            f'<svg role="img" aria-label="{escape(title)}: no data" width="{width}" height="40"><text x="8" y="24" font-size="13" fill="#6b7280">No usage in this period yet.</text></svg>'
        )
    left, right, top, bottom = 48, 150, 16, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(sum(daily[d].values()) for d in days) or 1.0
    tick, decimals = nice_step(peak)
    ticks = int(math.ceil(peak / tick)) or 1
    scale = plot_h / (ticks * tick)
    bar_w = max(2.0, plot_w / len(days) * 0.7)
    step = plot_w / len(days)
    parts = [
        f'<svg role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" font-family="system-ui, sans-serif">'
    ]
    parts.append(f"<title>{escape(title)}</title>")
    for i in range(ticks + 1):  # y grid at round numbers
        value = tick * i
        y = top + plot_h - value * scale
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#6b7280">{value:.{decimals}f}</text>'
        )
    parts.append(
        f'<text x="12" y="{top + plot_h / 2:.0f}" font-size="11" fill="#6b7280" transform="rotate(-90 12 {top + plot_h / 2:.0f})" text-anchor="middle">{escape(unit)}</text>'
    )
    label_every = max(1, len(days) // 10)
    for index, day in enumerate(days):
        x = left + index * step + (step - bar_w) / 2
        y = top + plot_h
        for s_index, name in enumerate(series):
            value = daily[day].get(name, 0.0)
            if value <= 0:
                continue
            h = value * scale
            y -= h
            colour = PALETTE[s_index % len(PALETTE)]
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" fill="{colour}"><title>{escape(day)} {escape(name)}: {value:.2f} {escape(unit)}</title></rect>'
            )
        if index % label_every == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 16}" font-size="10" text-anchor="middle" fill="#374151">{escape(day[5:])}</text>'
            )
    for s_index, name in enumerate(series):
        y = top + 6 + s_index * 18
        parts.append(f'<rect x="{left + plot_w + 16}" y="{y}" width="12" height="12" fill="{PALETTE[s_index % len(PALETTE)]}"/>')
        parts.append(f'<text x="{left + plot_w + 34}" y="{y + 10}" font-size="12" fill="#1d2330">{escape(name)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))
