"""What left the TaskContext's windows, read back from the event log (for ``inspect``, the report).

Pure: these functions read only their arguments (the task's events, in seq order, and its
folded state).
"""

from __future__ import annotations

from collections.abc import Iterable

from .events import Event
from .models import ErrorRecord, PlanStep, TaskContext

__all__ = ["all_errors", "all_plan_steps"]


def all_errors(events: Iterable[Event]) -> list[ErrorRecord]:
    """Every error of a task, open or resolved.

    Args:
        events: The task's events, in seq order.

    Returns:
        The errors in the order they occurred (``error.occurred``), each with its ``resolution``
        when an ``error.resolved`` settled it (the first one; None while open).
    """
    out: dict[str, ErrorRecord] = {}
    for e in events:
        p = e.payload
        if e.kind == "error.occurred":
            out[p["error_id"]] = ErrorRecord(
                id=p["error_id"],
                step_id=p.get("step_id"),
                source=p.get("source", ""),
                message=p.get("message", ""),
                call_id=p.get("call_id"),
                timestamp=e.timestamp,
            )
        elif e.kind == "error.resolved" and p["error_id"] in out and out[p["error_id"]].resolution is None:
            out[p["error_id"]] = out[p["error_id"]].model_copy(update={"resolution": p.get("resolution", "")})
    return list(out.values())


def all_plan_steps(ctx: TaskContext, events: Iterable[Event]) -> list[PlanStep]:
    """The plan's steps as the views show them, the folded done steps included.

    Args:
        ctx: The task's folded state.
        events: The task's events, in seq order.

    Returns:
        The done steps folded out of ``ctx.plan.steps`` (their last definition in a
        ``plan.created`` / ``plan.updated``, status ``done``), then ``ctx.plan.steps``.
    """
    if not ctx.plan.done_folded:
        return list(ctx.plan.steps)
    shown = {s.id for s in ctx.plan.steps}
    defined: dict[str, PlanStep] = {}
    for e in events:
        if e.kind in ("plan.created", "plan.updated"):
            for raw in e.payload.get("steps", []):
                step = PlanStep.model_validate(raw)
                if step.id not in shown and ctx.plan.is_folded(step.id):
                    defined.pop(step.id, None)  # a re-plan's order wins
                    defined[step.id] = step.model_copy(update={"status": "done"})
    return [*defined.values(), *ctx.plan.steps]
