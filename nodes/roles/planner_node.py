"""The planner node: ``plan.created`` (first plan) or ``plan.updated`` (re-plan)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from context import PlanStep, TaskContext
from context.events import (
    PlanCreated,
    TaskCompleted,
)

from ..render import PlannerRenderer, Renderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import SUBMIT_PLAN
from .failures import guarded
from .node_steps import model_call, prologue, reply_text, tool_args
from .role_node import ModelRequest, RoleNode

__all__ = ["make_planner_node"]


def _plan_steps(ctx: TaskContext, raw_steps: list[Any]) -> list[PlanStep]:
    kept = [s for s in ctx.plan.steps if s.status in ("done", "skipped")]
    used = {s.id for s in kept}
    out = list(kept)
    n = len(ctx.plan.steps) + ctx.plan.done_folded
    for raw in raw_steps:
        if not isinstance(raw, dict):
            raw = {"title": str(raw)}
        sid = str(raw.get("id") or "")
        if not sid or sid in used or ctx.plan.is_folded(sid):  # a folded done step's id is taken too
            n += 1
            sid = f"s{n}"
            while sid in used or ctx.plan.is_folded(sid):
                n += 1
                sid = f"s{n}"
        used.add(sid)
        out.append(
            PlanStep(
                id=sid,
                title=str(raw.get("title") or sid),
                description=str(raw.get("description") or ""),
                expected_output=str(raw.get("expected_output") or ""),
                depends_on=[str(d) for d in raw.get("depends_on") or [] if str(d) in used],
            )
        )
    return out


def make_planner_node(
    model: BaseChatModel,
    env: NodeEnv,
    renderer: Renderer | None = None,
    *,
    preflight: Callable[[TaskContext], None] | None = None,
) -> RoleNode:
    """The planner node: writes ``plan.created`` (first plan) or ``plan.updated`` (re-plan).

    A reply without a ``submit_plan`` call becomes a one-step plan of its text; a plan with no
    steps ends the task ``failed``.

    Args:
        model: The chat model the planner calls.
        env: The node environment.
        renderer: The planner's renderer; default :class:`~nodes.render.PlannerRenderer`.
        preflight: Run on the task's first planner call, before its model call (e.g.
            :func:`~nodes.roles.executor_node.task_budget_check`: a ``BudgetError`` stops the task
            there, before any side effect); None: no check.

    Returns:
        The node ``(state, config) -> dict`` of changed state parts.
    """
    rend = renderer or PlannerRenderer()

    def planner(state: TaskContext, config: RunnableConfig) -> Generator[ModelRequest, AIMessage, dict[str, Any]]:
        run = NodeRun(env, state, "planner", config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        if preflight is not None and ctx.plan.version == 0 and not ctx.events.counts.get("context.built:planner"):
            preflight(ctx)
        built, ai = yield from model_call(run, model, rend, ctx, [SUBMIT_PLAN], None)
        args = tool_args(ai, "submit_plan")
        if args is None:
            text = reply_text(ai)
            args = {
                "steps": [{"title": text.strip()[:200] or "Do the task"}],
                "reason": "model gave no submit_plan call",
            }
        steps = _plan_steps(ctx, list(args.get("steps") or []))
        payload = PlanCreated(
            interpreted_goal=str(args.get("interpreted_goal") or ""),
            success_criteria=[str(c) for c in args.get("success_criteria") or []],
            non_goals=[str(c) for c in args.get("non_goals") or []],
            constraints=[str(c) for c in args.get("constraints") or []],
            steps=steps,
            reason=str(args.get("reason") or ""),
        )
        kind = "plan.created" if ctx.plan.version == 0 else "plan.updated"
        events = [run.make(kind, payload)]
        if not steps:  # nothing to execute: the task ends here, and says why
            events.append(
                run.make("task.completed", TaskCompleted(status="failed", summary="the planner gave no steps"))
            )
        run.commit([*pre, built, *events])
        return run.update()

    return guarded("planner", env, planner)
