"""The executor node: starts the next step, records the tool calls the model asks for, completes steps."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Generator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.runnables import RunnableConfig

from context import BudgetError, Event, TaskContext, replay
from context.events import StepCompletionRequested, ToolCalled
from context.text import cut

from ..render import ExecutorRenderer, Renderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import COMPLETE_STEP
from ..tools import CONTROL_TOOLS, READ_ARTIFACT_SCHEMA, ToolExecutor, executor_of
from .completion import completion_args, step_completed
from .failures import guarded
from .node_steps import model_call, prologue, reply_text, step_started, tool_args
from .role_node import ModelRequest, RoleNode

__all__ = ["make_executor_node"]

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def task_budget_check(
    env: NodeEnv, tools: ToolExecutor, renderer: Renderer | None = None
) -> Callable[[TaskContext], None]:
    """A check that a task's budget carries its request and the floor, run before any side effect.

    The planner runs it before the task's first model call, the executor again on its first call
    (the plan may have added criteria and constraints), so a budget too small for the task fails
    at once, before any tool runs, naming the budget the task needs.

    Args:
        env: The node environment (budget, reserve, counter).
        tools: The task's tool executor (its schemas are part of every executor call).
        renderer: The executor's renderer (it must have ``minimum_budget``); default
            :class:`~nodes.render.ExecutorRenderer`.

    Returns:
        ``check(ctx)``: returns when ``env.budget`` is at least the task's minimum.

    Raises:
        BudgetError: From ``check(ctx)``: the budget is below the renderer's ``minimum_budget``
            (tokens); the error's ``minimum`` is that budget and its ``scope`` is ``"task"``.
    """
    rend = renderer or ExecutorRenderer()
    schemas = [*tools.schemas(), READ_ARTIFACT_SCHEMA, COMPLETE_STEP]

    def check(ctx: TaskContext) -> None:
        minimum = getattr(rend, "minimum_budget", None)
        if minimum is None:
            return
        need = minimum(ctx, env, schemas)
        if need > env.budget:
            raise BudgetError(
                role="executor",
                task_id=ctx.identity.task_id,
                required=need - env.reserve_for_output,
                reserve=env.reserve_for_output,
                budget=env.budget,
                scope="task",
            )

    return check


def _tool_called(
    run: NodeRun, ctx: TaskContext, tools: ToolExecutor, work: list[ToolCall], step_id: str | None, thought: str
) -> list[Event]:
    """``tool.called`` for each call of ``work`` (the reply's thought goes with the first)."""
    events: list[Event] = []
    used = {r.id for r in ctx.evidence.recent_tool_calls}
    for i, tc in enumerate(work):
        # ids go back to the provider: keep them in the strictest format (Anthropic's
        # ^[a-zA-Z0-9_-]+$); a repeated id gets "_<cursor>"
        cid = _ID_UNSAFE.sub("_", tc.get("id") or "") or f"call_{uuid.uuid4().hex[:12]}"
        if cid in used:
            cid = f"{cid}_{ctx.events.cursor}"
        used.add(cid)
        events.append(
            run.make(
                "tool.called",
                ToolCalled(
                    call_id=cid,
                    step_id=step_id,
                    tool=tc["name"],
                    arguments=json.dumps(tc["args"], sort_keys=True, ensure_ascii=False),
                    thought=thought if i == 0 else "",
                    idempotency_key=f"{run.task_id}:{cid}",
                    has_side_effects=tools.has_side_effects(tc["name"]),
                ),
            )
        )
    return events


def _completion_requested(run: NodeRun, step_id: str, done: dict[str, Any], calls: list[Event]) -> Event:
    """``step.completion.requested``: the step completes once ``calls`` (its ``tool.called``) succeed."""
    result, summary, findings, unresolved = completion_args(step_id, done)
    return run.make(
        "step.completion.requested",
        StepCompletionRequested(
            step_id=step_id,
            after_calls=[ev.payload["call_id"] for ev in calls],
            result=result,
            summary=summary,
            findings=findings,
            unresolved_issues=unresolved,
        ),
    )


def make_executor_node(
    model: BaseChatModel, env: NodeEnv, tools: ToolExecutor | Sequence[Any], renderer: Renderer | None = None
) -> RoleNode:
    """The executor node: starts the next runnable step and asks the model for its tool calls.

    The model's tool calls become ``tool.called`` events (the tool node runs them); its
    ``complete_step`` becomes ``step.completed``, or ``step.completion.requested`` when it comes
    with the step's last calls (the step completes once they succeed).

    Args:
        model: The chat model the executor calls.
        env: The node environment (stores, budget, counter).
        tools: The task's tool executor (its schemas are offered, its side effects recorded), or a
            list of LangChain tools and executors (:func:`~nodes.tools.from_langchain_tools`; give the
            tool node the same list).
        renderer: The executor's renderer; default :class:`~nodes.render.ExecutorRenderer`.

    Returns:
        The node ``(state, config) -> dict`` of changed state parts.

    Raises:
        TypeError: A list item is neither a LangChain tool nor a ToolExecutor.
        ValueError: A list's tools share a name.
    """
    rend = renderer or ExecutorRenderer()
    tx: ToolExecutor = executor_of(tools)
    env.use_workspace(tx)  # (the freshness check of a resume fingerprints it)
    check = task_budget_check(env, tx, rend)

    def executor(state: TaskContext, config: RunnableConfig) -> Generator[ModelRequest, AIMessage, dict[str, Any]]:
        run = NodeRun(env, state, "executor", config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        if ctx.plan.current_step_id is None:
            nxt = ctx.next_runnable_step()
            if nxt is None:
                run.commit(pre)
                return run.update()
            started = step_started(run, nxt)
            pre.append(started)
            ctx = replay([started], ctx)
        step_id = ctx.plan.current_step_id
        if ctx.completion_ready():  # complete_step came with the step's last calls, and they have finished
            pc = ctx.control.pending_completion
            assert pc is not None
            done = step_completed(
                run, ctx, pc.step_id, pc.result, pc.summary, list(pc.findings), list(pc.unresolved_issues)
            )
            run.commit([*pre, *done])
            return run.update()
        schemas = [*tx.schemas(), READ_ARTIFACT_SCHEMA, COMPLETE_STEP]
        if not ctx.events.counts.get("context.built:executor"):
            check(ctx)  # before any tool runs
        built, ai = yield from model_call(run, model, rend, ctx, schemas, step_id)
        thought = reply_text(ai)
        work = [tc for tc in ai.tool_calls if tc["name"] not in CONTROL_TOOLS]
        if work:
            events = _tool_called(run, ctx, tx, work, step_id, thought)
            done_args = tool_args(ai, "complete_step")
            if done_args is not None and step_id is not None:  # finish the step once these calls succeed
                events.append(_completion_requested(run, step_id, done_args, events))
        else:
            args = tool_args(ai, "complete_step") or {"summary": cut(thought.strip(), 500)}
            result, summary, findings, unresolved = completion_args(step_id or "", args)
            events = step_completed(run, ctx, step_id or "", result, summary, findings, unresolved)
        run.commit([*pre, built, *events])
        return run.update()

    return guarded("executor", env, executor)
