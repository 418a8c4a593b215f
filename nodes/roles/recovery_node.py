"""The recovery node: records new failures, then decides retry, replan or stop."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from context import TaskContext, replay
from context.events import (
    ErrorOccurred,
    RecoveryDecided,
    TaskCompleted,
)

from ..render import RecoveryRenderer, Renderer
from ..runtime import NodeEnv, NodeRun
from ..schemas import DECIDE_RECOVERY
from ..tools import REJECTED_AGAIN
from .failures import guarded
from .node_steps import model_call, one_of, prologue, reply_text, tool_args
from .role_node import ModelRequest, RoleNode

__all__ = ["DECISIONS", "MAX_REJECTED_REPEATS", "MAX_STEP_ERRORS", "make_recovery_node"]

#: What recovery decides.
Decision = Literal["retry", "replan", "stop"]
#: What recovery may decide (anything else the model answers is ``retry``).
DECISIONS: tuple[Decision, ...] = ("retry", "replan", "stop")
#: Open errors (failures no later success of the step resolved) one step may have before recovery
#: stops the task whatever the model says.
MAX_STEP_ERRORS = 10


#: Calls repeated after the user rejected them before recovery stops the task (the first
#: repeat re-plans: retrying a rejected call would only repeat it).
MAX_REJECTED_REPEATS = 2


def _new_failures(ctx: TaskContext) -> list[ErrorOccurred]:
    """``error.occurred`` payloads for each failed call and failed step not yet recorded."""
    n = max(ctx.errors.occurred_count, len(ctx.errors.error_history))  # the history is a window
    failures: list[ErrorOccurred] = []
    for rec in ctx.unrecorded_tool_errors():
        n += 1
        lines = rec.result_summary.strip().splitlines()
        at = next((i for i, ln in enumerate(lines) if "rror" in ln or "Traceback" in ln), 0)
        msg = " ".join(ln.strip() for ln in lines[at : at + 3] if ln.strip()) if lines else ""
        failures.append(
            ErrorOccurred(
                error_id=f"err-{n}",
                source=f"tool:{rec.tool}",
                message=msg.strip()[:300],
                step_id=rec.step_id,
                call_id=rec.id,
            )
        )
    failed = ctx.failed_step()
    if failed is not None:
        n += 1
        failures.append(
            ErrorOccurred(
                error_id=f"err-{n}",
                source=f"step:{failed.id}",
                message=f"step {failed.id} ended {failed.result}: {failed.summary}"[:300],
                step_id=failed.id,
            )
        )
    return failures


def _overruled(ctx: TaskContext, step_id: str | None, decision: Decision, reason: str) -> tuple[Decision, str]:
    """The model's decision, unless the limits stop or re-plan the task whatever it says."""
    # open errors of the step: failures since its last success (a resolved error left the
    # state's window, or a later call of the step succeeded: the step is moving)
    settled = {e.id for e in ctx.errors.resolved_errors}
    step_errors = sum(1 for e in ctx.errors.error_history if e.step_id == step_id and e.id not in settled)
    if decision == "retry" and step_errors >= MAX_STEP_ERRORS:
        decision, reason = "stop", f"{step_errors} errors in step {step_id}; {reason}"
    last = ctx.errors.last_error
    if last is not None and last.message.startswith(REJECTED_AGAIN):
        repeats = sum(1 for e in ctx.errors.error_history if e.message.startswith(REJECTED_AGAIN))
        if repeats >= MAX_REJECTED_REPEATS:
            decision, reason = "stop", f"the agent repeated a call the user rejected {repeats} times; {reason}"
        elif decision == "retry":
            decision, reason = "replan", f"retrying would repeat a call the user rejected; {reason}"
    return decision, reason


def make_recovery_node(model: BaseChatModel, env: NodeEnv, renderer: Renderer | None = None) -> RoleNode:
    """The recovery node: records each new failure, then decides retry, replan or stop.

    Each failed call or step not yet recorded becomes ``error.occurred``; then
    ``recovery.decided``: retry (back to the executor), replan (the planner) or stop (the task
    fails). After ``MAX_STEP_ERRORS`` open errors in one step, or ``MAX_REJECTED_REPEATS`` repeats
    of a call the user rejected, it stops whatever the model says.

    Args:
        model: The chat model recovery calls.
        env: The node environment.
        renderer: The recovery renderer; default :class:`~nodes.render.RecoveryRenderer`.

    Returns:
        The node ``(state, config) -> dict`` of changed state parts.
    """
    rend = renderer or RecoveryRenderer()

    def recovery(state: TaskContext, config: RunnableConfig) -> Generator[ModelRequest, AIMessage, dict[str, Any]]:
        run = NodeRun(env, state, "recovery", config)
        if run.replayed:
            return run.update()
        pre, ctx = prologue(run)
        failed = ctx.failed_step()
        for f in _new_failures(ctx):
            ev = run.make("error.occurred", f, actor="system")
            pre.append(ev)
            ctx = replay([ev], ctx)
        step_id = ctx.plan.current_step_id or (failed.id if failed is not None else None)
        built, ai = yield from model_call(run, model, rend, ctx, [DECIDE_RECOVERY], step_id)
        args = tool_args(ai, "decide_recovery") or {"decision": "retry", "reason": reply_text(ai)[:300]}
        decision, reason = _overruled(
            ctx, step_id, one_of(args.get("decision"), DECISIONS, "retry"), str(args.get("reason") or "")
        )
        last = ctx.errors.last_error
        events = [
            run.make(
                "recovery.decided",
                RecoveryDecided(error_id=last.id if last else None, decision=decision, reason=reason),
            )
        ]
        if decision == "stop":
            events.append(run.make("task.completed", TaskCompleted(status="failed", summary=reason)))
        run.commit([*pre, built, *events])
        return run.update()

    return guarded("recovery", env, recovery)
