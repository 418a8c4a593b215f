"""The optimistic bound: what an executor call cannot cost less than while it keeps the quality floor.

It follows taskctx's own manifests (the floor of each call, everything but the newest step
cached), so it moves with taskctx's restart decisions; each rule of :mod:`nodes.pricing` prices it.
"""

from __future__ import annotations

from nodes.pricing import RULES

from .metrics import CACHE_DISCOUNT, FLOOR_LAST, Stats
from .strategies import TaskctxRun

__all__ = ["BOUND", "bound_stats"]

BOUND = "optimistic bound"
#: the working state of the floor, as the bench's floor measure asks it (``metrics``): the state
#: note, and the checkpoint block (plan, steps done, findings) once the transcript restarted
WORKING_STATE = ("step.delta", "state.checkpoint")


def bound_stats(run: TaskctxRun) -> Stats:
    """The optimistic bound over one run's executor calls.

    Args:
        run: The taskctx run (its executor calls' manifests).

    Returns:
        Its :class:`~.metrics.Stats`: calls, input tokens, peak, cached prefix, effective cost and
        the cost under each pricing rule.
    """
    s = Stats(run.trajectory.id, BOUND)
    shown: set[str] = set()
    for i, c in enumerate(run.calls):
        blocks = [b for b in c.payload["blocks"] if b["included"]]
        calls = [b for b in blocks if b["id"].startswith("tool.")]
        outside = c.prompt_tokens - sum(b["tokens"] for b in blocks)  # system, schemas, framing
        floor = [b for b in blocks if b["id"].startswith("core.") or b["id"] in WORKING_STATE]
        floor += calls[-FLOOR_LAST:]
        prompt = outside + sum(b["tokens"] for b in floor)
        newest = calls[-1]["tokens"] if calls and calls[-1]["id"] not in shown else 0
        cached = 0 if i == 0 else prompt - newest
        shown = {b["id"] for b in calls}
        s.calls += 1
        s.input_tokens += prompt
        s.peak_prompt_tokens = max(s.peak_prompt_tokens, prompt)
        s.cached_prefix_tokens += cached
        s.effective_cost += (prompt - cached) + CACHE_DISCOUNT * cached
        for r in RULES:
            s.costs[r.name] = s.costs.get(r.name, 0.0) + r.cost(prompt, cached)
    return s
