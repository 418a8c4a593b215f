"""A role node's own failure, recorded once as events instead of raised again on every resume."""

from __future__ import annotations

import asyncio
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
from .node_steps import ATTEMPT, prologue, step_started
from .role_node import Body, RoleNode, arun_body, run_body

__all__ = ["failure_message", "guarded", "own_failure"]

#: Exceptions a role node lets through (not a node failure): taskctx's own (budget, damaged store,
#: a provider failure as ModelCallError: the CLI exits 3, nothing recorded), LangGraph's control
#: flow (interrupts), and the store's I/O. Anything else (a model answer the node cannot use, a bug
#: in a custom renderer) is a node failure (:func:`guarded`).
_PASS_THROUGH: tuple[type[BaseException], ...] = (TaskctxError, GraphBubbleUp, OSError, sqlite3.Error)


def _is_store_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] == "psycopg"


def own_failure(exc: BaseException, *, os_errors: bool = False) -> bool:
    """Whether ``exc`` is a node's own failure (recorded), not one it lets through.

    Let through: taskctx's own errors, LangGraph's control flow (``GraphBubbleUp``: interrupts,
    ``ParentCommand``), the store's errors (SQLite, psycopg), ``OSError`` (a role node's only I/O
    is the store's) unless ``os_errors``, and anything that is not an ``Exception`` (a cancellation).

    Args:
        exc: What the node raised.
        os_errors: Count an ``OSError`` (``ConnectionError``, ``FileNotFoundError``...) as the
            node's own: a custom node's I/O is its own work.

    Returns:
        True when the failure is the node's own.
    """
    if not isinstance(exc, Exception) or _is_store_error(exc):
        return False
    if isinstance(exc, OSError):
        return os_errors
    return not isinstance(exc, _PASS_THROUGH)


def failure_message(node: str, exc: BaseException) -> str:
    """The message of a node's own failure: ``<node> node failed: <Type>: <text>``, at most 300 chars.

    Args:
        node: The node's (or role's) name.
        exc: What it raised.

    Returns:
        The message (the text's whitespace collapsed; cut with ``...`` past 300 characters).
    """
    text = " ".join(str(exc).split())
    message = f"{node} node failed: {type(exc).__name__}" + (f": {text}" if text else "")
    return message if len(message) <= 300 else message[:297] + "..."


def guarded(role: str, env: NodeEnv, body: Body) -> RoleNode:
    """The role's node over ``body``: its own failure is recorded once instead of raised on every resume.

    A failure that is not a provider failure, an interrupt or a store error (see
    ``_PASS_THROUGH``) is recorded with the node's prologue, in one transaction, as
    ``error.occurred`` (source ``node:<role>``, message ``<role> node failed: <Type>: <text>``),
    after the ``context.built`` of the model call when the model answered. Then the executor's
    running step ends ``failed`` (recovery takes over); a planner, reviewer or recovery failure ends
    the task ``failed``. The next resume continues from there.

    Args:
        role: The role's name.
        env: The node environment.
        body: The role's body (:data:`~nodes.roles.role_node.Body`).

    Returns:
        The node, sync and async (:class:`~nodes.roles.role_node.RoleNode`), named ``role``, with
        ``env`` as ``taskctx_env``.
    """

    def node(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        att: dict[str, Any] = {}
        token = ATTEMPT.set(att)
        try:
            return run_body(body(state, config))
        except Exception as exc:
            if not own_failure(exc):
                raise
            return _record_failure(role, env, state, config, exc, att)
        finally:
            ATTEMPT.reset(token)

    async def anode(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        att: dict[str, Any] = {}
        token = ATTEMPT.set(att)
        try:
            return await arun_body(body(state, config))
        except Exception as exc:
            if not own_failure(exc):
                raise
            return await asyncio.to_thread(_record_failure, role, env, state, config, exc, att)
        finally:
            ATTEMPT.reset(token)

    node.__doc__ = anode.__doc__ = body.__doc__
    role_node = RoleNode(node, anode, name=getattr(body, "__name__", role))
    role_node.taskctx_env = env  # type: ignore[attr-defined]  # (graphs.compile_graph finds the event log here)
    return role_node


def _record_failure(
    role: str, env: NodeEnv, state: TaskContext, config: RunnableConfig, exc: Exception, att: dict[str, Any]
) -> dict[str, Any]:
    # the failed attempt's own prologue (and step.started), when it got that far: nothing of it
    # was appended, and its events are older than the model call's
    run: NodeRun = att["run"] if "run" in att else NodeRun(env, state, role, config)
    pre: list[Event] = list(att["pre"]) if "pre" in att else prologue(run)[0]
    ctx = replay(pre, run.ctx)
    built: Event | None = att.get("built")
    message = failure_message(role, exc)
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
