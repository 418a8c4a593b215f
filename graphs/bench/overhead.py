"""Orchestrator overhead (reduce + build + render per executor step) and checkpoint bytes."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from context import Event, SqliteStores, TaskContext, Trajectory, replay
from context.trajectory import RecordedStep
from nodes import ExecutorRenderer, NodeEnv, ReplayTools
from nodes.runtime import PARTS
from nodes.schemas import COMPLETE_STEP
from nodes.tools import READ_ARTIFACT_SCHEMA

from ..checkpoint import checkpoint_serde

__all__ = ["CHECKPOINT_WINDOW", "Timing", "checkpoint_sizes", "measure_overhead", "synthetic_trajectory", "timing"]


@dataclass
class Timing:
    """Orchestrator overhead of one set of executor steps, in ms per step.

    Attributes:
        label: What was timed.
        steps: Steps timed.
        events: Events of the log.
        median_ms: The median.
        p95_ms: The 95th percentile.
        render_reproduced: The share of re-renders whose prompt tokens equal the logged ones.
    """

    label: str
    steps: int
    events: int
    median_ms: float
    p95_ms: float
    render_reproduced: float  # share of re-renders whose prompt tokens equal the logged ones


def measure_overhead(
    stores: SqliteStores,
    events: list[Event],
    trajectory: Trajectory,
    budget: int,
    window: tuple[int, int] | None = None,
) -> tuple[list[float], int, int]:
    """Re-fold a replayed run's log and time each executor call's reduce + render again.

    At every executor call: reduce (this step's events) + ``ExecutorRenderer.render`` (builder +
    assembly) on the real state, model time excluded.

    Args:
        stores: The run's stores (the renderer reads its event log and artifacts).
        events: The run's event log, in order.
        trajectory: The recorded run that was replayed (its tool schemas).
        budget: The run's token budget.
        window: Only time calls whose folded event count is in ``[lo, hi]``; None: every call.

    Returns:
        ``(ms per timed step, steps timed, re-renders that reproduced the logged prompt tokens)``.
    """
    env = NodeEnv(events=stores.events, artifacts=stores.artifacts, budget=budget)
    schemas = [*ReplayTools(trajectory).schemas(), READ_ARTIFACT_SCHEMA, COMPLETE_STEP]
    rend = ExecutorRenderer()
    ctx: TaskContext | None = None
    pending: list[Event] = []
    times: list[float] = []
    same = 0
    for n, e in enumerate(events):
        if (
            e.kind == "context.built"
            and e.payload["role"] == "executor"
            and (window is None or window[0] <= n <= window[1])
        ):
            t0 = time.perf_counter()
            ctx = replay(pending, ctx)
            r = rend.render(ctx, env, schemas)
            times.append((time.perf_counter() - t0) * 1000)
            same += r.prompt_tokens == e.payload["prompt_tokens"]
            pending = []
        pending.append(e)
        if window is not None and n > window[1]:
            break
        if window is not None and n < window[0] and len(pending) > 64:  # untimed catch-up before the window
            ctx = replay(pending, ctx)
            pending = []
    return times, len(times), same


def timing(label: str, times: list[float], events: int, same: int) -> Timing:
    """The median and p95 of ``times``, and the share of re-renders reproduced.

    Args:
        label: What was timed.
        times: ms per step.
        events: Events of the log.
        same: Re-renders that reproduced the logged prompt tokens.

    Returns:
        The timing (zeros when nothing was timed).
    """
    if not times:
        return Timing(label, 0, events, 0.0, 0.0, 0.0)
    q = sorted(times)
    p95 = q[min(len(q) - 1, int(round(0.95 * (len(q) - 1))))]
    return Timing(label, len(times), events, round(statistics.median(q), 3), round(p95, 3), round(same / len(q), 4))


def synthetic_trajectory(n_steps: int, seed: int = 7) -> Trajectory:
    """A deterministic synthetic run: bash/open/search steps with outputs of 0.3-12 kB.

    Args:
        n_steps: Recorded steps.
        seed: Varies the tools and sizes.

    Returns:
        The trajectory.
    """
    sizes = [300, 2_000, 6_000, 12_000, 800, 4_500, 150]
    tools = [("bash", "command"), ("open", "path"), ("search_dir", "query")]
    steps = []
    for i in range(n_steps):
        tool, key = tools[(i * seed) % len(tools)]
        size = sizes[(i * 3 + seed) % len(sizes)]
        line = f"synthetic output of step {i}: value {(i * 7919) % 10007} ok\n"
        obs = (line * (size // len(line) + 1))[:size]
        args = {key: f"item_{i % 37}.py" if key != "command" else f"python check.py --case {i}"}
        steps.append(
            RecordedStep(
                step=i + 1,
                thought=f"Step {i}: look at the next item and keep going.",
                action=f'{{"name": "{tool}"}}',
                observation=obs,
                tool=tool,
                arguments=args,
            )
        )
    req = (
        "Synthetic task: walk through every item, check it and report.\n"
        "Do not modify files outside src/.\nNever delete the test fixtures."
    )
    return Trajectory(id=f"synthetic-{n_steps}", task=req, meta={}, steps=steps, path="")


#: Checkpoint bytes at n events are the mean over the states at events n-50+1 .. n+50: a
#: checkpoint's size swings with the executor transcript between two restarts, so one state
#: alone measures where in that cycle n falls, not how the size grows with the log.
CHECKPOINT_WINDOW = 100


def checkpoint_sizes(events: list[Event], counts: tuple[int, ...]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
    """Checkpoint bytes (the checkpointer's serde) at each of ``counts`` events of the log ``events``.

    A checkpoint's size swings with the executor transcript between two restarts, so each figure
    is the mean over the ``CHECKPOINT_WINDOW`` states around it.

    Args:
        events: The log.
        counts: Event counts to measure at (those past the log are skipped).

    Returns:
        ``({events: mean bytes}, {events: {part: mean bytes}})``.
    """
    serde = checkpoint_serde()
    sizes: dict[int, int] = {}
    parts: dict[int, dict[str, int]] = {}
    for n in sorted(counts):
        if n > len(events):
            continue
        lo = max(1, n - CHECKPOINT_WINDOW // 2 + 1)
        hi = min(len(events), n + CHECKPOINT_WINDOW // 2)
        ctx = replay(events[:lo])
        totals: dict[str, int] = {}
        size_sum = 0
        for i in range(lo, hi + 1):
            if i > lo:
                ctx = replay(events[i - 1 : i], ctx)
            dump = ctx.model_dump()
            size_sum += len(serde.dumps_typed(dump)[1])
            for p in PARTS:
                if p in dump:
                    totals[p] = totals.get(p, 0) + len(serde.dumps_typed(dump[p])[1])
        k = hi - lo + 1
        sizes[n] = round(size_sum / k)
        parts[n] = {p: round(v / k) for p, v in totals.items()}
    return sizes, parts
