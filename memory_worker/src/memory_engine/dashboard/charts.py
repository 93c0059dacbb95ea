"""Charts as inline SVG, made on the server: model calls per day (stacked by tier) and their cost.

No script runs in the page; the browser draws the SVG. Every label goes through `html`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta

from memory_engine.dashboard.markup import Html, html, join
from memory_engine.dashboard.wire import UsageDay

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
COST = "#222"
W, H = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 44, 56, 28, 36


def _days(last: str, n: int) -> list[str]:
    end = date.fromisoformat(last)
    return [(end - timedelta(days=i)).isoformat() for i in range(n - 1, -1, -1)]


def _nice(top: float) -> float:
    """A round axis maximum at or above `top`."""
    if top <= 0:
        return 1.0
    step = 10 ** len(str(int(top))) / 10
    for mult in (1, 2, 2.5, 5, 10):
        if step * mult >= top:
            return step * mult
    return top


def usage_chart(
    rows: Iterable[UsageDay], today: str, days: int = 30, title: str = "Model calls per day"
) -> Html:
    """Stacked bars of calls per day and tier over the last `days` days to `today`; a line of cost."""
    axis = _days(today, days)
    calls: dict[str, dict[str, int]] = {}
    cost = dict.fromkeys(axis, 0.0)
    for r in rows:
        if r["day"] in cost:
            calls.setdefault(r["tier"], dict.fromkeys(axis, 0))[r["day"]] += r["calls"]
            cost[r["day"]] += r["cost_usd"]
    tiers = sorted(calls)
    per_day = [sum(calls[t][d] for t in tiers) for d in axis]
    top_calls = -(-max(_nice(max(per_day, default=0)), 4.0) // 4) * 4  # whole calls on every grid line
    top_cost = _nice(max(cost.values(), default=0.0)) if any(cost.values()) else 1.0
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / days
    bar = max(slot * 0.7, 1.0)
    parts: list[Html] = []
    for i in range(5):  # grid lines and the calls axis
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            html(
                '<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#ddd"/>'
                '<text x="{tx}" y="{ty}" text-anchor="end" class="ax">{calls}</text>'
                '<text x="{cx}" y="{ty}" class="ax">{cost}</text>',
                x1=LEFT,
                x2=W - RIGHT,
                y=f"{y:.1f}",
                tx=LEFT - 4,
                ty=f"{y + 4:.1f}",
                calls=f"{top_calls * i / 4:g}",
                cx=W - RIGHT + 4,
                cost=f"${top_cost * i / 4:.2f}",
            )
        )
    for i, day in enumerate(axis):
        x = LEFT + i * slot + (slot - bar) / 2
        y = TOP + plot_h
        for n, tier in enumerate(tiers):
            v = calls[tier][day]
            if not v:
                continue
            h = plot_h * v / top_calls
            y -= h
            parts.append(
                html(
                    '<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}"><title>{tip}</title>'
                    "</rect>",
                    x=f"{x:.1f}",
                    y=f"{y:.1f}",
                    w=f"{bar:.1f}",
                    h=f"{h:.1f}",
                    fill=PALETTE[n % len(PALETTE)],
                    tip=f"{day} {tier}: {v} calls",
                )
            )
        if i % 5 == 0 or i == days - 1:
            parts.append(
                html(
                    '<text x="{x}" y="{y}" text-anchor="middle" class="ax">{d}</text>',
                    x=f"{x + bar / 2:.1f}",
                    y=H - BOTTOM + 16,
                    d=day[5:],
                )
            )
    points = " ".join(
        f"{LEFT + i * slot + slot / 2:.1f},{TOP + plot_h - plot_h * cost[d] / top_cost:.1f}"
        for i, d in enumerate(axis)
    )
    parts.append(
        html('<polyline points="{p}" fill="none" stroke="{c}" stroke-width="1.5"/>', p=points, c=COST)
    )
    legend = [html('<text x="{x}" y="16" class="lg">{t}</text>', x=LEFT, t=title)]
    lx = LEFT + 8 * len(title) + 16
    for n, tier in enumerate(tiers):
        legend.append(
            html(
                '<rect x="{x}" y="7" width="10" height="10" fill="{fill}"/><text x="{tx}" y="16" '
                'class="lg">{t}</text>',
                x=lx,
                fill=PALETTE[n % len(PALETTE)],
                tx=lx + 14,
                t=tier,
            )
        )
        lx += 24 + 7 * len(tier)
    legend.append(
        html(
            '<line x1="{x}" y1="12" x2="{x2}" y2="12" stroke="{c}" stroke-width="1.5"/><text x="{tx}" '
            'y="16" class="lg">cost (USD)</text>',
            x=lx,
            x2=lx + 14,
            c=COST,
            tx=lx + 18,
        )
    )
    total_calls, total_cost = sum(per_day), sum(cost.values())
    label = f"{title}: {total_calls} calls, ${total_cost:.2f} over {days} days"
    return html(
        '<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
        'xmlns="http://www.w3.org/2000/svg">{legend}{parts}</svg>',
        label=label,
        w=W,
        h=H,
        legend=join(legend),
        parts=join(parts),
    )
