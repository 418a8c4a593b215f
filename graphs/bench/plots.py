"""The bench's two figures (matplotlib, Agg backend): prompt tokens per call, effective cost per strategy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .replays import BenchResult
from .strategies import STRATEGIES

__all__ = ["plot_effective_cost", "plot_prompt_tokens", "pyplot"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` with the Agg backend (no display needed)."""
    # (imported here: matplotlib is slow to import and only a figure needs it)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_prompt_tokens(r: BenchResult, path: str | Path) -> Path:
    """Plot prompt tokens per executor call of the three longest trajectories.

    Log scale, one panel per trajectory, the budget as a dashed line.

    Args:
        r: The bench result.
        path: The PNG to write.

    Returns:
        ``path``.
    """
    plt = pyplot()
    longest = sorted(r.trajectories, key=lambda t: -r.steps[t])[:3]
    fig, axes = plt.subplots(1, len(longest), figsize=(6 * len(longest), 4.5), squeeze=False)
    for ax, tid in zip(axes[0], longest):
        for s in STRATEGIES:
            ys = r.series[tid][s]
            ax.plot(range(1, len(ys) + 1), ys, label=s, lw=1.6 if s == "taskctx" else 1.0)
        ax.axhline(r.budget, color="k", ls="--", lw=0.8, label="budget")
        ax.set_yscale("log")
        ax.set_title(f"{tid} ({r.steps[tid]} steps)", fontsize=9)
        ax.set_xlabel("executor call")
        ax.set_ylabel("prompt tokens (log)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    p1 = Path(path)
    fig.savefig(p1, dpi=110)
    plt.close(fig)
    return p1


def plot_effective_cost(r: BenchResult, path: str | Path) -> Path:
    """Plot the total effective cost (tokens, uncached + 0.1 x cached) per strategy as bars.

    Args:
        r: The bench result.
        path: The PNG to write.

    Returns:
        ``path``.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = [*STRATEGIES, "taskctx (all roles)"]
    vals = [r.totals[s].effective_cost for s in names]
    ax.bar(names, vals, color=["#999", "#6a9", "#69c", "#c96", "#c33", "#e88"])
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("effective cost (tokens)")
    ax.set_title(f"Effective cost over {len(r.trajectories)} trajectories (uncached + 0.1 × cached)")
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    p2 = Path(path)
    fig.savefig(p2, dpi=110)
    plt.close(fig)
    return p2
