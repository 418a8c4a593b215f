"""The optimistic bound (issue 14): what an executor call cannot cost less than while it keeps
the quality floor, to tell how much is left to win.

Per taskctx executor call, the bound's prompt is exactly the floor and the tool schemas: the
system text and tool schemas (the prompt's tokens outside its blocks), the core layer
(``core.*`` blocks), the working state (``step.delta``, and ``state.checkpoint`` once the
transcript restarted: the floor the bench measures asks both) and the last 3 calls as taskctx shows
them (thought, action, compressed observation with its ref), from the call's manifest. Everything
but the newest step (the latest call, when the previous call did not show it) is assumed cached;
the first call caches nothing. Each rule of :mod:`nodes.pricing` prices it like the strategies'
calls (:meth:`~nodes.pricing.PricingRule.cost`).

The bound follows taskctx's own manifests, so it is not a fixed yardstick: it moves with
taskctx's restart decisions. A call after a restart carries ``state.checkpoint`` and its last 3
calls in full in its floor; the same call in a long transcript carries no checkpoint and those
calls as the builder compressed them under budget pressure. Example (moatless-django-15695, issue
12's quoting: ``core.criteria`` 17 -> 37 tokens, ``state.checkpoint`` 324 -> 337): the cost restart
at executor call index 8 (expected saving +2.0 tokens) no longer pays (-1.2), so the bound's
prompt of calls 8 and 9 goes 2,795 -> 2,013 and 3,134 -> 2,117 tokens and the run's bound 11,183.4 ->
10,319.7, while its taskctx cost goes 13,100.0 -> 13,066.0.
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
    """The bound over one run's executor calls (:class:`~.metrics.Stats`: calls, input tokens,
    peak, cached prefix, effective cost and the cost under each pricing rule)."""
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
