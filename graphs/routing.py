"""Routers of the orchestrator graph: pure lookups on the TaskContext, never raising.

Each router's return annotation is a ``Literal`` of the node names it may return (``TARGETS``),
which LangGraph reads as the path map when ``add_conditional_edges`` gets none.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from langgraph.graph import END

from context import TaskContext

__all__ = ["TARGETS", "after_planner", "after_executor", "after_tools", "after_recovery", "after_reviewer"]

# The nodes each router may return ("__end__" is langgraph.graph.END).
AfterPlanner = Literal["executor", "__end__"]
AfterExecutor = Literal["tools", "recovery", "executor", "reviewer", "__end__"]
AfterTools = Literal["tools", "recovery", "executor", "__end__"]
AfterRecovery = Literal["planner", "executor", "__end__"]
AfterReviewer = Literal["planner", "__end__"]


def _ctx(state: Any) -> TaskContext:
    return state if isinstance(state, TaskContext) else TaskContext.model_validate(state)


def _finished(ctx: TaskContext) -> bool:
    return ctx.control.status in ("completed", "failed")


def after_planner(state: Any) -> AfterPlanner:
    """Route after the planner.

    Args:
        state: The graph state (a TaskContext or its dict).

    Returns:
        ``"executor"`` when the plan has steps; ``END`` when the task finished or has no plan.
    """
    ctx = _ctx(state)
    return END if _finished(ctx) or not ctx.plan.steps else "executor"


def after_executor(state: Any) -> AfterExecutor:
    """Route after the executor.

    A graph wired with this router needs all four node names (and ``END``) among its edge's
    destinations.

    Args:
        state: The graph state (a TaskContext or its dict).

    Returns:
        ``"tools"`` while a call is pending; ``"recovery"`` when the step ended failed or blocked
        and recovery has not decided on it; ``"executor"`` while a step runs or one is runnable;
        ``"reviewer"`` when no step is left; ``END`` when the task finished.
    """
    ctx = _ctx(state)
    if _finished(ctx):
        return END
    if any(r.status == "pending" for r in ctx.evidence.recent_tool_calls):
        return "tools"
    if ctx.failed_step() is not None:
        return "recovery"
    if ctx.plan.current_step_id is not None or ctx.next_runnable_step() is not None:
        return "executor"
    return "reviewer"


def after_tools(state: Any) -> AfterTools:
    """Route after the tool node.

    Args:
        state: The graph state (a TaskContext or its dict).

    Returns:
        ``"tools"`` while a call waits for approval; ``"executor"`` when a ``complete_step`` that
        ends the step failed or blocked came with the calls and they have finished;
        ``"recovery"`` when a tool call failed and is not yet in ``error_history``; else
        ``"executor"`` (``END`` when the task finished).
    """
    ctx = _ctx(state)
    if _finished(ctx):
        return END
    if any(r.status == "pending" for r in ctx.evidence.recent_tool_calls):
        return "tools"  # a call waits for the next approval (one interrupt per tool-node run)
    pc = ctx.control.pending_completion
    if pc is not None and pc.result in ("failed", "blocked") and ctx.completion_ready():
        return "executor"  # the model already said how the step ends: record it, then recovery sees both
    if ctx.unrecorded_tool_errors():
        return "recovery"
    return "executor"


def after_recovery(state: Any) -> AfterRecovery:
    """Route after recovery.

    Args:
        state: The graph state (a TaskContext or its dict).

    Returns:
        ``"planner"`` after a replan decision, ``END`` after stop, else ``"executor"`` (retry).
    """
    ctx = _ctx(state)
    if _finished(ctx):
        return END
    return "planner" if ctx.plan.status == "revising" else "executor"


def after_reviewer(state: Any) -> AfterReviewer:
    """Route after the reviewer.

    Args:
        state: The graph state (a TaskContext or its dict).

    Returns:
        ``"planner"`` when the review asked for revisions, else ``END``.
    """
    ctx = _ctx(state)
    if _finished(ctx):
        return END
    return "planner" if ctx.plan.status == "revising" else END


#: Router name -> the node names it may return (``END`` included), in the order of its annotation.
TARGETS: dict[str, tuple[str, ...]] = {
    f.__name__: get_args(t)
    for f, t in (
        (after_planner, AfterPlanner),
        (after_executor, AfterExecutor),
        (after_tools, AfterTools),
        (after_recovery, AfterRecovery),
        (after_reviewer, AfterReviewer),
    )
}
