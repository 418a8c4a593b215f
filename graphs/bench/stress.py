"""The stress set: synthetic runs of the shapes that hurt a context strategy, replayed naive and taskctx."""

from __future__ import annotations

from dataclasses import dataclass

from context import COMMAND_LIMIT, RecordedStep, Trajectory, extract_constraints
from nodes import ReplayTools

from .metrics import Stats, strategy_stats, taskctx_stats
from .strategies import baseline_calls, run_taskctx

__all__ = ["STRESS_SHAPES", "StressRow", "run_stress", "stress_markdown", "stress_trajectories"]

STRESS_SHAPES: dict[str, tuple[int, tuple[int, ...]]] = {
    # name: (steps, output sizes in chars, cycled)
    "stress-threshold": (60, (COMMAND_LIMIT - 100, COMMAND_LIMIT + 100)),
    "stress-small": (200, (120,)),
    "stress-alternating": (60, (20_000, 100)),
    "stress-300": (300, (150, 800, 3_900, 4_100, 12_000, 300, 2_000)),
}


def _output(step: int, size: int) -> str:
    lines, k = [], 0
    while sum(len(x) for x in lines) < size:
        lines.append(f"step {step} line {k}: status {(step * 7919 + k * 104729) % 10007} ok\n")
        k += 1
    return "".join(lines)[:size]


def stress_trajectories() -> list[Trajectory]:
    """The stress runs of :data:`STRESS_SHAPES`, the same on every call."""
    req = (
        "Stress task: run each check in turn and report what fails.\n"
        "Do not modify files outside src/.\nNever delete the test fixtures."
    )
    out = []
    for name, (n, sizes) in STRESS_SHAPES.items():
        steps = [
            RecordedStep(
                step=i + 1,
                thought=f"Check {i}: run it and read the output.",
                action='{"name": "bash"}',
                observation=_output(i, sizes[i % len(sizes)]),
                tool="bash",
                arguments={"command": f"python check.py --case {i}"},
            )
            for i in range(n)
        ]
        out.append(Trajectory(id=name, task=req, meta={}, steps=steps, path=""))
    return out


@dataclass
class StressRow:
    """One stress run: naive's and taskctx's stats (executor calls)."""

    trajectory: str
    steps: int
    naive: Stats
    taskctx: Stats

    @property
    def ratio(self) -> float:
        """The effective cost of taskctx over that of naive."""
        return self.taskctx.effective_cost / self.naive.effective_cost


def stress_markdown(rows: list[StressRow], budget: int) -> list[str]:
    """The stress set's section of ``results.md``.

    Per run: effective cost (naive, taskctx, ratio), peak prompt and calls over budget; then the
    two targets.

    Args:
        rows: The stress runs.
        budget: The token budget.

    Returns:
        Markdown lines.
    """
    if not rows:
        return []
    out = [
        "## Stress set (SYNTHETIC, built by the bench: `graphs.bench.stress`)",
        "",
        "| run | steps | naive | taskctx | × naive | taskctx peak prompt | calls over budget | floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in rows:
        fl = x.taskctx.floor
        out.append(
            f"| {x.trajectory} | {x.steps} | {x.naive.effective_cost:,.0f} | {x.taskctx.effective_cost:,.0f} | "
            f"{x.ratio:.3f} | {x.taskctx.peak_prompt_tokens:,} | {x.taskctx.over_budget} | "
            f"{'n/a' if fl is None else f'{100 * fl:.1f}%'} |"
        )
    worst = max(rows, key=lambda x: x.ratio)
    over = sum(x.taskctx.over_budget for x in rows)
    out += [
        "",
        "| target (stress set) | measured | met |",
        "|---|---|---|",
        f"| never more than 1.0× naive on any run | worst {worst.trajectory} {worst.ratio:.3f}× | "
        f"{'yes' if worst.ratio <= 1.0 else '**no**'} |",
        f"| peak within budget on every call | peak {max(x.taskctx.peak_prompt_tokens for x in rows):,} of "
        f"{budget:,}; {over} calls over | {'yes' if over == 0 else '**no**'} |",
        "",
    ]
    return out


def run_stress(budget: int) -> list[StressRow]:
    """Every stress run through naive and taskctx (the real graph).

    Args:
        budget: The token budget.

    Returns:
        One row per run.
    """
    rows = []
    for t in stress_trajectories():
        constraints = extract_constraints(t.request)
        calls = baseline_calls(t, "naive", budget, ReplayTools(t).schemas())
        naive = strategy_stats(t.id, "naive", calls, budget, t.request, constraints)
        run = run_taskctx(t, budget)
        ex, _ = taskctx_stats(run, budget, constraints)
        run.stores.close()
        rows.append(StressRow(t.id, len(t.steps), naive, ex))
    return rows
