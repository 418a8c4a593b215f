"""Awaiting a LangChain tool's coroutine from sync code without blocking the loop it belongs to.

A plain ``async def`` tool runs on an event loop of its own (:func:`run_sync`). A tool bound to
an event loop, such as an MCP tool made from an open session (``load_mcp_tools(session)``), can
only run on that loop: when that loop is running in a thread this sync call blocks (a sync
``graph.invoke`` inside a notebook cell or an ``async def``), the call cannot run at all and
:class:`EventLoopBlockedError` is raised at once instead of a deadlock; when the loop runs freely
in another thread, the coroutine is handed to it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["CALLER_LOOP", "LOOP_START_TIMEOUT", "EventLoopBlockedError", "bound_loop", "running_loop", "run_sync"]

#: The event loop the thread that handed this thread its work runs, blocked while it waits
#: (set by :func:`~nodes.tools.parallel.run_at_once` for its worker threads).
CALLER_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "taskctx_caller_loop", default=None
)

#: Seconds a tool's own event loop, running in another thread, has to start the call before it
#: is taken as blocked (by the sync call waiting for it) and :class:`EventLoopBlockedError` raised.
LOOP_START_TIMEOUT = 5.0

_UNKNOWN = object()  # the loop of a session whose loop cannot be found


class EventLoopBlockedError(RuntimeError):
    """A tool bound to an event loop was called from sync code that blocks that loop.

    Raised out of ``graph.invoke`` (not recorded as the call's result): the tool never started.
    """


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread (None: none)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _loop_of(session: Any) -> asyncio.AbstractEventLoop | None:
    """The event loop ``session`` lives on: its ``_loop``, or the tasks of an MCP session's task group."""
    own = getattr(session, "_loop", None)
    if isinstance(own, asyncio.AbstractEventLoop):
        return own
    group = getattr(session, "_task_group", None)
    tasks = [getattr(getattr(group, "cancel_scope", None), "_host_task", None), *(getattr(group, "_tasks", None) or ())]
    for task in tasks:
        get_loop = getattr(task, "get_loop", None)
        if callable(get_loop):
            loop = get_loop()
            if isinstance(loop, asyncio.AbstractEventLoop):
                return loop
    return None


def bound_loop(tool: Any) -> asyncio.AbstractEventLoop | object | None:
    """The event loop ``tool``'s coroutine is bound to, through the ``session`` it closes over.

    Args:
        tool: A LangChain tool (its ``coroutine``, when it has one, is looked at).

    Returns:
        The loop of the session (an MCP ``ClientSession`` of ``langchain-mcp-adapters``'
        ``load_mcp_tools(session)``, or any object with an event loop in ``_loop``); an
        opaque marker for an MCP session whose loop cannot be found; None for a tool bound to
        no loop (a plain ``async def``, ``MultiServerMCPClient.get_tools()``' session per call).
    """
    coro = getattr(tool, "coroutine", None)
    names = getattr(getattr(coro, "__code__", None), "co_freevars", ())
    cells = dict(zip(names, getattr(coro, "__closure__", None) or (), strict=False))
    if "session" not in cells:
        return None
    try:
        session = cells["session"].cell_contents
    except ValueError:  # an empty cell
        return None
    if session is None:
        return None
    loop = _loop_of(session)
    if loop is None and type(session).__module__.split(".")[0] == "mcp":
        return _UNKNOWN
    return loop


def _blocked(tool: str, why: str) -> EventLoopBlockedError:
    return EventLoopBlockedError(
        f"tool {tool} was called synchronously inside a running event loop; use ainvoke/astream ({why}, so "
        "the call cannot run without blocking it): `await graph.ainvoke(...)` or `graph.astream(...)` on that "
        "loop, inside the `async with` of the MCP session; or, for a sync run, the tools of "
        "`MultiServerMCPClient.get_tools()` (a session per call)"
    )


def _unreachable(tool: str, why: str) -> EventLoopBlockedError:
    return EventLoopBlockedError(
        f"tool {tool} is bound to the event loop of its session, and {why}: run the graph async "
        "(`await graph.ainvoke(...)`) inside the `async with` of the MCP session, or take the tools of "
        "`MultiServerMCPClient.get_tools()` (a session per call)"
    )


def run_sync(make: Callable[[], Coroutine[Any, Any, Any]], tool: str, owner: object = None) -> Any:
    """Run the coroutine ``make()`` makes to its end from sync code.

    Args:
        make: Makes the coroutine (called on the loop it runs on).
        tool: The tool's name (named in an error).
        owner: The loop the coroutine must run on (:func:`bound_loop`; None: any loop).

    Returns:
        The coroutine's result.

    Raises:
        EventLoopBlockedError: ``owner`` is the loop this thread runs (or its caller's, waiting
            for it), is not running, cannot be found, or does not start the call within
            :data:`LOOP_START_TIMEOUT` seconds; the coroutine was not started.
    """
    here = running_loop()
    if owner is None:  # a loop of its own; in a worker thread when this thread runs one (a notebook)
        if here is None:
            return asyncio.run(make())
        ctx = contextvars.copy_context()  # the caller's context variables, in the worker too
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ctx.run, lambda: asyncio.run(make())).result()
    if not isinstance(owner, asyncio.AbstractEventLoop):  # an MCP session's, not found
        raise _unreachable(tool, "that loop cannot be found")
    if owner is here or owner is CALLER_LOOP.get():
        raise _blocked(tool, "the tool's session lives on that loop, which this sync call blocks")
    if owner.is_closed() or not owner.is_running():
        raise _unreachable(tool, "that loop is not running (has the session's `async with` ended?)")
    return _on_owner(make, tool, owner)


def _on_owner(make: Callable[[], Coroutine[Any, Any, Any]], tool: str, owner: asyncio.AbstractEventLoop) -> Any:
    """Run ``make()`` on ``owner``, running in another thread, once it has started the call."""
    lock, started = threading.Lock(), threading.Event()
    state = {"started": False, "abandoned": False}

    async def guarded() -> Any:
        with lock:
            if state["abandoned"]:
                return None
            state["started"] = True
        started.set()
        return await make()  # (in a copy of the caller's context: call_soon_threadsafe's)

    future = asyncio.run_coroutine_threadsafe(guarded(), owner)
    if not started.wait(LOOP_START_TIMEOUT):
        with lock:
            state["abandoned"] = not state["started"]
        if state["abandoned"]:
            future.cancel()
            raise _blocked(
                tool,
                f"the loop of the tool's session did not start the call within {LOOP_START_TIMEOUT:g} s: "
                "it is blocked, most likely by the sync call waiting for this tool",
            )
    return future.result()
