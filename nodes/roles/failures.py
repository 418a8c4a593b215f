"""A role node's own failure, recorded once as events instead of raised again on every resume."""

from __future__ import annotations

import sqlite3
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp

from context import Event, TaskContext, TaskctxError, replay
from context.events import (
    ErrorOccurred,
    StepCompleted,
    TaskCompleted,
)

from ..runtime import NodeEnv, NodeRun
from .node_steps import ATTEMPT, Node, prologue, step_started

__all__ = ["guarded"]

#: Exceptions a role node lets through (not a node failure): taskctx's own (budget, damaged store,
#: a provider failure as ModelCallError: the CLI exits 3, nothing recorded), LangGraph's control
#: flow (interrupts), and the store's I/O. Anything else (a model answer the node cannot use, a bug
#: in a custom renderer) is a node failure (:func:`guarded`).
_PASS_THROUGH: tuple[type[BaseException], ...] = (TaskctxError, GraphBubbleUp, OSError, sqlite3.Error)


def _is_store_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "psycopg"


def guarded(role: str, env: NodeEnv, node: Node) -> Node:
    """Wrap ``node`` so that its own failure is recorded once instead of raised on every resume.

    A failure that is not a provider failure, an interrupt or a store error (see
    ``_PASS_THROUGH``) is recorded with the node's prologue, in one transaction, as
    ``error.occurred`` (source ``node:<role>``, message ``<role> node failed: <Type>: <text>``),
    after the ``context.built`` of the model call when the model answered. Then the executor's
    running step ends ``failed`` (recovery takes over); a planner, reviewer or recovery failure ends
    the task ``failed``. The next resume continues from there.

    Args:
        role: The role's name.
        env: The node environment.
        node: The role's node.

    Returns:
        The wrapped node, with ``node``'s name and docstring, and ``env`` as ``taskctx_env``.
    """

    def guarded(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        att: dict[str, Any] = {}
        token = ATTEMPT.set(att)
        try:
            return node(state, config)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            if _is_store_error(exc):
                raise
            return _record_failure(role, env, state, config, exc, att)
        finally:
            ATTEMPT.reset(token)

    guarded.__name__ = getattr(node, "__name__", role)
    guarded.__doc__ = node.__doc__
    guarded.taskctx_env = env  # type: ignore[attr-defined]  # (graphs.compile_graph finds the event log here)
    return guarded


def _record_failure(
    role: str, env: NodeEnv, state: TaskContext, config: RunnableConfig, exc: Exception, att: dict[str, Any]
) -> dict[str, Any]:
    # the failed attempt's own prologue (and step.started), when it got that far: nothing of it
    # was appended, and its events are older than the model call's
    run: NodeRun = att["run"] if "run" in att else NodeRun(env, state, role, config)
    pre: list[Event] = list(att["pre"]) if "pre" in att else prologue(run)[0]
    ctx = replay(pre, run.ctx)
    built: Event | None = att.get("built")
    text = " ".join(str(exc).split())
    message = f"{role} node failed: {type(exc).__name__}" + (f": {text}" if text else "")
    message = message if len(message) <= 300 else message[:297] + "..."
    if role == "executor" and ctx.plan.current_step_id is None:
        nxt = ctx.next_runnable_step()
        if nxt is not None:  # the step the failed attempt was starting
            started = step_started(run, nxt)
            pre.append(started)
            ctx = replay([started], ctx)
    if built is not None:  # the model answered: its call is recorded (the manifest, the tokens it took)
        pre.append(built)
        ctx = replay([built], ctx)
    step_id = ctx.plan.current_step_id
    events = [
        run.make(
            "error.occurred",
            ErrorOccurred(
                error_id=f"err-{len(ctx.errors.error_history) + 1}",
                source=f"node:{role}",
                message=message,
                step_id=step_id,
            ),
            actor="system",
        )
    ]
    if role == "executor" and step_id is not None:
        events.append(
            run.make("step.completed", StepCompleted(step_id=step_id, result="failed", summary=message), actor="system")
        )
    else:
        events.append(run.make("task.completed", TaskCompleted(status="failed", summary=message), actor="system"))
    run.commit([*pre, *events])
    return run.update()
