"""A role node with a sync and an async body: one generator drives both, the model call is its only wait.

A role's body is a generator (:data:`Body`): it yields a :class:`ModelRequest` where it needs
the model and is sent the reply back. :func:`run_body` answers with ``NodeRun.call_model``
(``invoke``, ``stream``); :func:`arun_body` awaits ``NodeRun.acall_model`` on the event loop
(``ainvoke``, ``astream``) and runs the body's own parts (the event log's reads and writes, the
rendering) in a worker thread, so the loop never waits on the store. :class:`RoleNode` is what
LangGraph runs: it picks the sync or the async body as the graph is run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable

from context import Event, TaskContext

from ..runtime import NodeRun, Rendered

__all__ = ["Body", "ModelRequest", "RoleNode", "arun_body", "run_body"]


@dataclass(frozen=True)
class ModelRequest:
    """A model call a role's body waits for: the arguments of ``NodeRun.call_model``."""

    run: NodeRun
    model: BaseChatModel
    role: str
    rendered: Rendered
    built: Event
    ctx: TaskContext


#: A role's body: ``(state, config)`` -> a generator that yields :class:`ModelRequest` and is sent
#: each reply (or has the call's exception thrown in), and returns the state update.
Body = Callable[[TaskContext, RunnableConfig], Generator[ModelRequest, AIMessage, dict[str, Any]]]


def _advance(gen: Generator[ModelRequest, AIMessage, dict[str, Any]], reply: Any) -> tuple[bool, Any]:
    """Run the body up to its next model call: ``(False, request)``, or ``(True, update)`` when it returned.

    ``reply`` is the last call's reply, or its exception (thrown into the body); None starts it.
    """
    try:
        if isinstance(reply, BaseException):
            return False, gen.throw(reply)
        return False, gen.send(reply)
    except StopIteration as stop:  # (a StopIteration cannot cross a Future: returned, not raised)
        return True, stop.value


def run_body(gen: Generator[ModelRequest, AIMessage, dict[str, Any]]) -> dict[str, Any]:
    """Run a role's body to its end, each model call with ``NodeRun.call_model``.

    Args:
        gen: The body's generator.

    Returns:
        The state update it returned.
    """
    reply: Any = None
    while True:
        done, out = _advance(gen, reply)
        if done:
            return out  # type: ignore[no-any-return]
        try:
            reply = out.run.call_model(out.model, out.role, out.rendered, out.built, out.ctx)
        except Exception as exc:
            reply = exc


async def arun_body(gen: Generator[ModelRequest, AIMessage, dict[str, Any]]) -> dict[str, Any]:
    """Run a role's body to its end: its parts in a worker thread, each model call awaited on the loop.

    Args:
        gen: The body's generator.

    Returns:
        The state update it returned.
    """
    reply: Any = None
    while True:
        done, out = await asyncio.to_thread(_advance, gen, reply)
        if done:
            return out  # type: ignore[no-any-return]
        try:
            reply = await out.run.acall_model(out.model, out.role, out.rendered, out.built, out.ctx)
        except Exception as exc:
            reply = exc


class RoleNode(RunnableCallable):
    """A graph node with a sync and an async implementation, as LangGraph runs a plain function.

    LangGraph calls ``func`` under ``invoke``/``stream`` and ``afunc`` under ``ainvoke``/``astream``
    (no trace run of its own: the node's run is LangGraph's, as for a function). Callable
    directly as ``node(state, config)``, the sync way.

    Args:
        func: ``(state, config) -> state update``.
        afunc: ``async (state, config) -> state update``.
        name: The node's name (the role).
    """

    def __init__(
        self,
        func: Callable[[TaskContext, RunnableConfig], dict[str, Any]],
        afunc: Callable[[TaskContext, RunnableConfig], Awaitable[dict[str, Any]]],
        name: str,
    ) -> None:
        super().__init__(func, afunc, name=name, trace=False)
        self.sync = func
        self.__name__ = name
        self.__doc__ = func.__doc__

    def __call__(self, state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        """Run the node the sync way.

        Args:
            state: The graph state.
            config: The LangGraph run config.

        Returns:
            The state update.
        """
        return self.sync(state, config)
