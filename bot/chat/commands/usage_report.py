"""/usage as people read it: routerUsage totals per tier as a table and as a PNG bar chart."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Literal

from memory_engine.api import wire

_TOTALS: tuple[Literal["calls", "errors", "prompt_tokens", "completion_tokens", "cost_usd"], ...] = (
    "calls",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


def usage_table(usage: wire.UsageAnswer) -> str:
    """routerUsage totals per tier as a fixed-width text table."""
    tiers: Mapping[str, wire.TierUsage] = usage.get("tiers") or {}
    header = f"{'tier':<10} {'calls':>6} {'errors':>6} {'in tok':>9} {'out tok':>9} {'cost $':>10}"
    lines = [header, "-" * len(header)]
    total: dict[str, float] = {
        "calls": 0,
        "errors": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
    }
    for name, row in tiers.items():
        for key in _TOTALS:
            total[key] += row.get(key) or 0
        lines.append(
            f"{name[:10]:<10} {int(row.get('calls') or 0):>6} {int(row.get('errors') or 0):>6} "
            f"{int(row.get('prompt_tokens') or 0):>9} {int(row.get('completion_tokens') or 0):>9} "
            f"{float(row.get('cost_usd') or 0):>10.4f}"
        )
    lines.append("-" * len(header))
    lines.append(
        f"{'total':<10} {total['calls']:>6} {total['errors']:>6} {total['prompt_tokens']:>9} "
        f"{total['completion_tokens']:>9} {total['cost_usd']:>10.4f}"
    )
    return "\n".join(lines)


def usage_chart_png(usage: wire.UsageAnswer) -> bytes:
    """A PNG bar chart of calls (ok / errors) and cost per tier (matplotlib, Agg, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    tiers: Mapping[str, wire.TierUsage] = usage.get("tiers") or {}
    names = list(tiers) or ["(none)"]
    rows = [tiers.get(n) for n in names]
    calls = [int(r.get("calls") or 0) if r else 0 for r in rows]
    errors = [int(r.get("errors") or 0) if r else 0 for r in rows]
    ok = [c - e for c, e in zip(calls, errors, strict=True)]
    cost = [float(r.get("cost_usd") or 0.0) if r else 0.0 for r in rows]
    fig = Figure(figsize=(7, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar(names, ok, label="ok", color="#4c9a5b")
    ax1.bar(names, errors, bottom=ok, label="errors", color="#c8553d")
    ax1.set_title("model calls per tier")
    ax1.legend(loc="upper right", fontsize=8)
    ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_ylim(0, max([*calls, 1]) * 1.2)
    bars = ax2.bar(names, cost, color="#3d6fc8")
    ax2.bar_label(bars, labels=[f"${c:.4f}" for c in cost], fontsize=8)
    ax2.set_ylim(0, max([*cost, 0.0]) * 1.25 or 0.01)
    ax2.set_title("cost per tier (USD)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
