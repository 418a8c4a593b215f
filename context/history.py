"""What left the TaskContext's windows, read back from the event log (for ``inspect``, the report).

Pure: these functions read only their arguments (the task's events, in seq order, and its
folded state).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .events import Event
from .models import ErrorRecord, PlanStep, TaskContext
from .reports import RoleReport
from .windows import REPORT_ITEMS_KEPT

__all__ = ["REVIEW_REPORTS_SINCE", "all_errors", "all_plan_steps", "all_reports", "report_of"]

#: The first data schema whose ``review.completed`` is also the reviewer's report (older tasks'
#: checkpoints were written without it, and must stay their log's fold).
REVIEW_REPORTS_SINCE = 3

#: A node run's ``causation_id``: ``<task_id>#<input cursor>:<node>``.
_ATTEMPT = re.compile(r"^.*#\d+:(?P<node>.+)$")


def report_of(e: Event, *, plan_version: int, step_id: str | None, schema_version: int) -> RoleReport | None:
    """The report an event records, as the state keeps it (items cut to the window).

    Args:
        e: The event: ``role.reported``, or ``review.completed`` (the reviewing node's report,
            named from its ``causation_id``, from schema :data:`REVIEW_REPORTS_SINCE` on).
        plan_version: The plan version it was made against.
        step_id: The running step then (a ``review.completed`` names none of its own).
        schema_version: The task's data schema (``events.schema_version``).

    Returns:
        The report, or None for any other event.
    """
    p = e.payload
    if e.kind == "role.reported":
        role, items, refs, step_id = p["role"], list(p["items"]), list(p["refs"]), p.get("step_id")
    elif e.kind == "review.completed" and schema_version >= REVIEW_REPORTS_SINCE:
        m = _ATTEMPT.match(e.causation_id or "")
        role, items, refs = (m["node"] if m else "reviewer"), list(p["issues"]), []
    else:
        return None
    return RoleReport(
        role=role,
        seq=e.seq,
        kind=e.kind,
        verdict=p["verdict"],
        summary=p["summary"],
        items=items[:REPORT_ITEMS_KEPT],
        items_total=len(items),
        refs=refs,
        step_id=step_id,
        plan_version=plan_version,
    )


def all_reports(events: Iterable[Event]) -> list[RoleReport]:
    """Every role report of a task (``progress.reports`` keeps the last of each role), in log order.

    Args:
        events: The task's events, in seq order.

    Returns:
        The reports (items cut to :data:`~context.windows.REPORT_ITEMS_KEPT`; the events have all).
    """
    out: list[RoleReport] = []
    version, step, schema = 0, None, 0
    for e in events:
        if e.kind == "task.created":
            schema = e.payload.get("schema_version", 0)
        elif e.kind in ("plan.created", "plan.updated"):
            version, step = version + 1, None
        elif e.kind == "step.started":
            step = e.payload["step_id"]
        elif e.kind == "step.completed":
            step = None
        r = report_of(e, plan_version=version, step_id=step, schema_version=schema)
        if r is not None:
            out.append(r)
    return out


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
