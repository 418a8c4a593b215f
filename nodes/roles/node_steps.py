"""What every role node shares: its prologue, its model call and the events of a task's start."""

from __future__ import annotations

import contextvars
import dataclasses
import math
import time
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from context import BudgetError, ContextLengthError, Event, PlanStep, TaskContext, replay
from context.events import (
    MemoryLoaded,
    StepStarted,
    TaskCreated,
)
from context.models import SCHEMA_VERSION
from context.tokens import TokenCounter

from ..message_tokens import message_tokens
from ..render import Renderer
from ..runtime import NodeRun, usage_of
from .role_node import ModelRequest

__all__ = [
    "ATTEMPT",
    "Node",
    "OneOf",
    "REBUILD_CUT",
    "call_facts",
    "memory_loaded_events",
    "model_call",
    "one_of",
    "prologue",
    "reply_text",
    "step_started",
    "task_created_event",
    "tool_args",
]

Node = Callable[[TaskContext, RunnableConfig], dict[str, Any]]


#: A prompt the provider refuses as too long is rebuilt once, at a budget this share of its
#: droppable (not required) blocks' tokens smaller.
REBUILD_CUT = 0.25


OneOf = TypeVar("OneOf", bound=str)


def one_of(value: object, options: tuple[OneOf, ...], default: OneOf) -> OneOf:
    """``value`` when it is one of ``options`` (a model's answer field), else ``default``.

    Args:
        value: What the model gave.
        options: The values allowed.
        default: The value taken otherwise.

    Returns:
        The option equal to ``value``, or ``default``.
    """
    return next((o for o in options if o == value), default)


def reply_text(ai: AIMessage) -> str:
    """The text of a model reply; tool calls stay tool calls (``ai.tool_calls``), never text.

    Args:
        ai: The reply. Its content is a string, or a list of blocks (Anthropic: text + tool_use)
            whose text blocks are joined.

    Returns:
        The text.
    """
    if isinstance(ai.content, str):
        return ai.content
    return "\n".join(
        b if isinstance(b, str) else str(b.get("text", ""))
        for b in ai.content
        if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
    )


def tool_args(ai: AIMessage, name: str) -> dict[str, Any] | None:
    """The arguments of the reply's first call of tool ``name``.

    Args:
        ai: The reply.
        name: A tool's name (``submit_plan``, ``complete_step``...).

    Returns:
        A copy of the call's arguments, or None when the reply has no such call.
    """
    for tc in ai.tool_calls:
        if tc["name"] == name:
            return dict(tc["args"])
    return None


def task_created_event(run: NodeRun) -> Event:
    """``task.created`` from the task's input state (identity and permissions).

    Args:
        run: The node run of the task's first node.

    Returns:
        The event, not yet committed.
    """
    i, p = run.input.identity, run.input.permissions
    return run.make(
        "task.created",
        TaskCreated(
            task_id=i.task_id,
            original_request=i.original_request,
            constraints=i.constraints,
            constraint_sources=i.constraint_sources,
            schema_version=SCHEMA_VERSION,
            success_criteria=i.success_criteria,
            non_goals=i.non_goals,
            allowed_tools=p.allowed_tools,
            denied_tools=p.denied_tools,
            requires_approval=p.requires_approval,
            file_scopes=p.file_scopes,
        ),
        actor="user",
    )


def memory_loaded_events(run: NodeRun) -> list[Event]:
    """``memory.loaded`` with the durable memories relevant to the request, when there are any.

    Args:
        run: The node run (its env's long-term store, :meth:`nodes.memory_source.MemorySource.load`).

    Returns:
        The event in a list, or an empty list: no long-term store, or nothing relevant.
    """
    if run.env.memory is None:
        return []
    found = run.env.memory.load(run.input.identity.original_request)
    if not found:
        return []
    return [run.make("memory.loaded", MemoryLoaded(memories=found, search=run.env.memory.search_kind), actor="system")]


#: The attempt a role node is in (its NodeRun, and the ``context.built`` of a model call that
#: answered), for :func:`guarded` to record a failure with the call it cost.
ATTEMPT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("taskctx_attempt", default=None)


def prologue(run: NodeRun) -> tuple[list[Event], TaskContext]:
    """The events a role node starts with, and the state they make.

    ``task.created`` and ``memory.loaded`` on the task's first event, then a resume's events
    (:meth:`~nodes.runtime.NodeRun.resume_events`). The node's attempt (:data:`ATTEMPT`) keeps them,
    so a failure is recorded with them.

    Args:
        run: The node run.

    Returns:
        ``(events not yet committed, the state with them folded)``.
    """
    pre: list[Event] = []
    if run.ctx.events.cursor == 0:
        pre.append(task_created_event(run))
        pre += memory_loaded_events(run)
    pre += run.resume_events()
    att = ATTEMPT.get()
    if att is not None:  # the node appends its step.started to this same list
        att.update(run=run, pre=pre)
    return pre, replay(pre, run.ctx)


def call_facts(model: Any, ai: AIMessage, latency_ms: int, count: TokenCounter) -> dict[str, Any]:
    """What ``context.built`` records of an answered model call, beside its prompt.

    Args:
        model: The chat model that answered (its ``ls_model_name`` and ``ls_provider``).
        ai: Its reply.
        latency_ms: Milliseconds the answered request took (wall clock).
        count: The graph's text counter (``str -> tokens``).

    Returns:
        ``{model, provider, latency_ms, reply_tokens, usage}``: the model's name (else its
        ``_llm_type``), its provider (``""`` when it reports none), the reply's tokens by
        ``count`` (its text and tool calls, whatever blocks the provider's client wrapped them in,
        so a streamed reply counts as the same reply not streamed) and :func:`usage_of` the reply.
    """
    try:
        ls = model._get_ls_params()
    except Exception:
        ls = {}
    name = ls.get("ls_model_name") or getattr(model, "_llm_type", None) or type(model).__name__
    return {
        "model": str(name),
        "provider": str(ls.get("ls_provider") or ""),
        "latency_ms": int(latency_ms),
        "reply_tokens": message_tokens([AIMessage(content=reply_text(ai), tool_calls=ai.tool_calls)], count),
        "usage": usage_of(ai),
    }


def model_call(
    run: NodeRun,
    model: BaseChatModel,
    renderer: Renderer,
    ctx: TaskContext,
    tools: list[dict[str, Any]],
    step_id: str | None,
) -> Generator[ModelRequest, AIMessage, tuple[Event, AIMessage]]:
    """Render the role's prompt, record its ``context.built`` and call the model.

    A generator (``built, ai = yield from model_call(...)`` in a role's body): it yields the call
    as a :class:`~nodes.roles.role_node.ModelRequest` and is sent the reply, so the same body
    runs sync and async (:mod:`nodes.roles.role_node`). A prompt the provider refuses as too long is rebuilt once at a smaller budget (a quarter of
    its droppable blocks' tokens less) and the rebuild is noted in the event.

    Args:
        run: The node run.
        model: The chat model.
        renderer: The role's renderer.
        ctx: The state to render.
        tools: The tool schemas offered.
        step_id: The current plan step, or None.

    Yields:
        The model call.

    Returns:
        ``(the context.built event, not yet committed, the model's reply)``.

    Raises:
        BudgetError: The required blocks do not fit the budget (named with the task).
        ContextLengthError: The prompt is too long even rebuilt, or holds only required blocks.
    """
    try:
        rendered = renderer.render(ctx, run.env, tools)
    except BudgetError as exc:  # name the task, so the message says which one to rerun
        raise (exc if exc.task_id or not exc.minimum else exc.for_task(ctx.identity.task_id)) from None
    built = run.context_built(renderer.role, rendered, step_id, ctx)
    started = time.monotonic()
    try:
        ai = yield ModelRequest(run, model, renderer.role, rendered, built, ctx)
    except ContextLengthError as exc:
        # once: the prompt again with a quarter of its droppable blocks' tokens less, recorded
        optional = sum(b.token_estimate for b in rendered.blocks if b.priority != "required")
        if optional == 0:
            raise ContextLengthError(
                f"{exc.cause}; the prompt holds only required blocks ({rendered.prompt_tokens:,} tokens), so a smaller "
                "budget cannot shorten it: use a model with a larger context window",
                status=exc.status,
                role=exc.role,
            ) from exc
        refused = rendered.prompt_tokens
        smaller = run.env.reserve_for_output + refused - math.ceil(optional * REBUILD_CUT)
        env = dataclasses.replace(run.env, budget=min(run.env.budget, smaller))
        rendered = renderer.render(ctx, env, tools)
        built = run.context_built(renderer.role, rendered, step_id, ctx)
        reason = (
            f"{exc.cause}; the prompt of {refused:,} tokens rebuilt at budget {env.budget:,} (was {run.env.budget:,})"
        )
        built = built.model_copy(update={"payload": {**built.payload, "rebuilt": reason}})
        started = time.monotonic()
        ai = yield ModelRequest(run, model, renderer.role, rendered, built, ctx)
    ms = round((time.monotonic() - started) * 1000)
    facts = call_facts(model, ai, ms, run.env.count_tokens)  # model, provider, latency, reply tokens, usage
    built = built.model_copy(update={"payload": {**built.payload, **facts}})
    att = ATTEMPT.get()
    if att is not None:
        att["built"] = built
    return built, ai


def step_started(run: NodeRun, step: PlanStep) -> Event:
    """``step.started`` for ``step``: its title and description as the objective.

    Args:
        run: The node run.
        step: The plan step starting.

    Returns:
        The event, not yet committed.
    """
    return run.make(
        "step.started",
        StepStarted(
            step_id=step.id,
            objective=step.title + (f": {step.description}" if step.description else ""),
            expected_output=step.expected_output,
            constraints=[],
        ),
    )
