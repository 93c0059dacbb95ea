"""The printed report and the chart of memory_latency.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from latency_baselines import COMPARED_TURNS, IMPORT_COMPARED
from latency_corpus import CPU, IMPORT_BATCH, percentile
from latency_ours import AFTER_IMPORT, LOCKSTEP_OURS_PER_SEED


def chart(rows: list[dict[str, Any]], path: Path, after_import: list[float]) -> None:
    """Latency vs N on log axes: p50 (solid) and p99 (dashed) per design; the after-import point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, colour in (
        ("http", "memory worker over HTTP", "tab:blue"),
        ("inproc", "memory engine in process", "tab:green"),
        ("seed", "seed: JSON blob + rank-bm25 rebuild", "tab:red"),
    ):
        ax.plot(ns, [percentile(r[key], 50) for r in rows], "o-", color=colour, label=f"{label} p50")
        ax.plot(
            ns, [percentile(r[key], 99) for r in rows], "x--", color=colour, alpha=0.6, label=f"{label} p99"
        )
    ax.plot(
        [ns[-1]], [percentile(after_import, 50)], "s", color="tab:purple", label="HTTP p50 right after import"
    )
    ax.plot([ns[-1]], [percentile(after_import, 99)], "^", color="tab:purple", alpha=0.6, label="its p99")
    ax.axhline(5, color="grey", lw=0.8, ls=":")
    ax.axhline(10, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the chat")
    ax.set_ylabel("per-turn latency (ms): record + retrieve + prompt")
    ax.set_title("Memory turn latency vs chat size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _p50(values: list[float] | None) -> float:
    return percentile(values, 50) if values else float("nan")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b else "-"


def report(
    rows: list[dict[str, Any]],
    http: dict[Any, list[float]],
    imports: dict[str, Any],
    compared: dict[str, Any],
    turns_measured: int,
) -> None:
    """Print the table of what was measured (a part not run shows as nan or -)."""
    print()
    head = (
        f"{'N':>8} | {'in process p50':>14} {'p99':>6} | {'HTTP p50':>8} {'p99':>6} | "
        f"{'seed p50':>9} {'p99':>8} {'turns':>5} | {'seed/HTTP':>9} {'seed/in-proc':>12} | "
        f"{'bare p50':>8} {'HTTP/bare':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ip, hp, sp, bp = (_p50(r.get(k)) for k in ("inproc", "http", "seed", "bare"))
        print(
            f"{r['n']:>8,} | {ip:>14.2f} {percentile(r.get('inproc') or [], 99):>6.2f} | "
            f"{hp:>8.2f} {percentile(r.get('http') or [], 99):>6.2f} | "
            f"{sp:>9.1f} {percentile(r.get('seed') or [], 99):>8.1f} {len(r.get('seed') or []):>5} | "
            f"{_ratio(sp, hp):>9} {_ratio(sp, ip):>12} | {bp:>8.2f} {_ratio(hp, bp):>9}"
        )
    largest = rows[-1]
    seed_wall, seed_cpu = _p50(largest.get("seed")), _p50(CPU.get(("seed", largest["n"])))
    if AFTER_IMPORT in http:
        after = http[AFTER_IMPORT]
        print(
            f"{largest['n']:>8,} right after its import, compaction not waited for: HTTP p50 "
            f"{percentile(after, 50):.2f} ms, p99 {percentile(after, 99):.2f} ms; "
            f"seed/HTTP {_ratio(seed_wall, percentile(after, 50))}"
        )
    print("CPU ms per turn (this process's CPU time; steadier than wall time when the machine is shared):")
    for r in rows:
        n = r["n"]
        ip, hp, sp, bp, ap = (_p50(CPU.get((k, n))) for k in ("inproc", "http", "seed", "bare", "bare-all"))
        means = {k: sum(v) / len(v) for k in ("inproc", "http") if (v := CPU.get((k, n)))}
        print(
            f"{n:>8,} | in process {ip:6.2f} | HTTP {hp:6.2f} | seed {sp:9.1f} | bare {bp:6.2f} | "
            f"bare, stopwords too {ap:6.2f} | seed/HTTP {_ratio(sp, hp)} | HTTP/bare {_ratio(hp, bp)} | "
            f"HTTP/bare with stopwords {_ratio(hp, ap)} | in-proc/bare {_ratio(ip, bp)} | means: "
            + ", ".join(f"{k} {v:.2f}" for k, v in means.items())
        )
    for r in rows:
        host, client = CPU.get(("host", r["n"])), CPU.get(("client", r["n"]))
        if not host or not client:
            continue
        sp = _p50(CPU.get(("seed", r["n"])))
        host_mean, client_mean = sum(host) / len(host), sum(client) / len(client)
        print(
            f"{r['n']:>8,} | HTTP, the host in its own process: host CPU p50 {_p50(host):.2f} / mean "
            f"{host_mean:.2f} ms, its client's {_p50(client):.2f} / {client_mean:.2f}"
            f" | seed/host {_ratio(sp, _p50(host))}"
        )
    for r in rows:
        seed, ours = CPU.get(("lockstep-seed", r["n"])), CPU.get(("lockstep-http", r["n"]))
        if seed and ours:
            print(
                f"{r['n']:>8,} | lock-step, {len(seed)} seed turns each followed by {LOCKSTEP_OURS_PER_SEED} "
                f"of ours over HTTP: seed CPU p50 {_p50(seed):.1f} ms, ours {_p50(ours):.2f} / mean "
                f"{sum(ours) / len(ours):.2f} ms | seed/HTTP {_ratio(_p50(seed), _p50(ours))}"
            )
    for r in rows:
        over, engine = CPU.get(("split-http", r["n"])), CPU.get(("split-engine", r["n"]))
        if over and engine:
            added = _p50(over) - _p50(engine)
            print(
                f"{r['n']:>8,} | split, one chat, turns alternating: over HTTP CPU p50 {_p50(over):.2f} ms, "
                f"the engine's turn alone {_p50(engine):.2f} ms: the host and HTTP add {added:.2f} ms "
                f"({added / _p50(over):.0%} of the HTTP turn)"
            )
    if AFTER_IMPORT in http:
        after_cpu = _p50(CPU.get(("http", AFTER_IMPORT)))
        print(
            f"{largest['n']:>8,} right after its import: HTTP {after_cpu:.2f} CPU ms; seed/HTTP "
            f"{_ratio(seed_cpu, after_cpu)}"
        )
    print(
        f"(latencies in ms; ours over {turns_measured} turns per size, the seed's over the few "
        "turns shown, each rebuilding its whole index; bare: a one-column FTS5 insert + OR "
        "top-3 lookup in process of the message's non-stopword tokens, 'stopwords too' of all "
        "its tokens, see bare_fts5)"
    )
    if any("index" in r for r in rows):
        print("full-text index, bytes per message (dbstat over messages_fts*, after the prefill):")
    for r in rows:
        if "index" not in r:
            continue
        count, ours, previous = r["index"]
        print(
            f"{r['n']:>8,}: {ours / count:,.0f} B/message now, {previous / count:,.0f} B/message "
            f"with the previous design (one turn before as context, no after-context, no dates): "
            f"x{ours / previous:.2f}"
        )
    if imports:
        rate = imports["imported"] / imports["seconds"]
        print(
            f"import over HTTP: {imports['imported']:,} messages in {imports['seconds']:.1f} s = "
            f"{rate:,.0f} messages/s into one chat (batches of {IMPORT_BATCH:,}); per chat: "
            + ", ".join(
                f"{n:,}: {r:,.0f}/s" if isinstance(n, int) else f"{n}: {r:,.0f}/s"
                for n, r in imports["rates"].items()
            )
        )
    if compared:
        rates, p50 = compared["import"], compared["turn_p50"]
        print(
            f"in process, {IMPORT_COMPARED:,} messages imported twice per design, then {COMPARED_TURNS} "
            f"turns: import {rates['ours']:,.0f} messages/s with our index, {rates['previous']:,.0f}/s "
            f"with the previous design's (x{rates['ours'] / rates['previous']:.2f}); turn p50 "
            f"{p50['ours']:.2f} ms vs {p50['previous']:.2f} ms (x{p50['ours'] / p50['previous']:.2f})"
        )


# The goals: (label, CPU key of the numerator, of the denominator, N, goal, at least).
GOALS = (
    ("seed / HTTP, lock-step, CPU p50 at 10k", "lockstep-seed", "lockstep-http", 10_000, 100.0, True),
    ("HTTP / bare FTS5 with stopwords too, CPU p50 at 10k", "http", "bare-all", 10_000, 0.2, False),
    ("seed / HTTP CPU p50 right after the 100k import", "seed", "http", 100_000, 500.0, True),
)


def goals(rows: list[dict[str, Any]]) -> None:
    """Print the issue's goals beside this run's figures (from CPU), `not measured` for a part not run."""
    largest = max((r["n"] for r in rows), default=0)
    print("the issue's goals, this run:")
    for label, top, bottom, n, goal, at_least in GOALS:
        # Right after the import, ours is keyed AFTER_IMPORT and measured at the largest size.
        key = AFTER_IMPORT if n == 100_000 else n
        a = _p50(CPU.get((top, n)))
        b = _p50(CPU.get((bottom, key))) if n != 100_000 or largest == n else float("nan")
        sign = ">=" if at_least else "<="
        if a == a and b == b and b:
            met = a / b >= goal if at_least else a / b <= goal
            print(f"  {label}: {_ratio(a, b)} (goal {sign} {goal:g}x): {'met' if met else 'not met'}")
        else:
            print(f"  {label}: not measured (goal {sign} {goal:g}x)")
