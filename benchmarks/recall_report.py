"""The recall tables and charts of locomo_recall.py, and the report of the leave-conversations-out check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from recall_ablation import ABLATIONS, ablation_tallies, holdout
from recall_data import CATEGORIES
from recall_scoring import KS, Tally, sum_tallies


def table(systems: dict[str, Tally]) -> str:
    """The recall table: one row per category and overall, R@3 / R@10 per system."""
    head = f"{'category':<14}{'n':>5}" + "".join(f"{name + ' R@3':>22}{'R@10':>7}" for name in systems)
    lines = [head, "-" * len(head)]
    first = next(iter(systems.values()))
    for key in [*sorted(k for k in first.sums if k != "all"), "all"]:
        label = "overall" if key == "all" else f"{key} {CATEGORIES.get(key, '')}"
        cells = "".join(f"{t.recall(key)[0]:>22.3f}{t.recall(key)[1]:>7.3f}" for t in systems.values())
        lines.append(f"{label:<14}{first.count(key):>5}{cells}")
    return "\n".join(lines)


def chart(systems: dict[str, Tally], path: Path, title: str = "LoCoMo retrieval recall (dev split)") -> None:
    """A grouped bar chart of Recall@3 and Recall@10 per category, one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(systems.values()))
    keys = [*sorted(k for k in first.sums if k != "all"), "all"]
    labels = ["overall" if k == "all" else CATEGORIES.get(k, str(k)) for k in keys]
    fig, axes = plt.subplots(1, len(KS), figsize=(12, 4.5), sharey=True)
    width = 0.8 / len(systems)
    for ax, (n, k) in zip(axes, enumerate(KS), strict=True):
        for s, (name, tally) in enumerate(systems.items()):
            xs = [i + (s - (len(systems) - 1) / 2) * width for i in range(len(keys))]
            values = [tally.recall(key)[n] for key in keys]
            bars = ax.bar(xs, values, width, label=name)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.set_xticks(range(len(keys)), labels, rotation=20)
        ax.set_title(f"Recall@{k}")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report_holdout(convs: list[dict[str, Any]], png: Path) -> tuple[float, float]:
    """The ablation rows on the dev split and in the leave-conversations-out check; chart them.

    Returns the unseen-split recall of the shipped design ('all': mean over the splits).
    """
    names = [c.get("sample_id", str(n)) for n, c in enumerate(convs)]
    dev: dict[str, Tally] = {}
    held: dict[str, Tally] = {}
    means: dict[str, tuple[float, float]] = {}
    for name in ABLATIONS:
        default, grid = ablation_tallies(convs, name)
        splits, pooled = holdout(grid, default, names)
        dev[name], held[name] = sum_tallies(grid[default]), pooled
        means[name] = tuple(sum(s["tuned_test"][n] for s in splits) / len(splits) for n in range(2))
        if name == "all":
            all_splits = splits
    print(file=sys.stderr)
    print("\nablation, dev split (5 conversations, shipped weights), R@3 / R@10 per category")
    print(table(dev))
    print(
        "\nablation, leave-conversations-out: weights tuned on 3 conversations, tested on the other 2, "
        "every one of the 10 splits, test questions pooled"
    )
    print(table(held))
    print(
        "mean over splits of the tested-on-2 overall R@3/R@10: "
        + ", ".join(f"{n} {r3:.3f}/{r10:.3f}" for n, (r3, r10) in means.items())
    )
    print("\nsplits of 'all':")
    print(f"{'test':<18}{'train R@3/R@10':>16}{'test tuned':>14}{'test shipped':>14}  tuned setting")

    def fmt(r: tuple[float, ...]) -> str:
        return f"{r[0]:.3f}/{r[1]:.3f}"

    for s in all_splits:
        print(
            f"{'+'.join(s['test']):<18}{fmt(s['tuned_train']):>16}{fmt(s['tuned_test']):>14}"
            f"{fmt(s['default_test']):>14}  {dict(s['tuned'])}"
        )
    chart(held, png, "LoCoMo recall, tuned on 3 conversations and tested on 2 (pooled over 10 splits)")
    print(f"chart: {png}")
    return means["all"]
