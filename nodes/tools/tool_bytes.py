"""A LangChain tool's ``bytes`` output, kept as it is: :func:`keeping_bytes`, :func:`bytes_kept`.

LangChain makes the ``ToolMessage`` of a tool that returns ``bytes`` from ``str(output)``, the
``b'...'`` repr. A copy of the tool whose function hands its output on unchanged, and a note of
any ``bytes`` in the call's box, gives the tool node the exact bytes to store.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any

from langchain_core.tools import BaseTool

__all__ = ["bytes_kept", "keeping_bytes"]

#: The box of the call running in this context: the ``bytes`` its tool returned.
_BOX: contextvars.ContextVar[list[bytes] | None] = contextvars.ContextVar("taskctx_tool_bytes", default=None)


def _note(result: Any, pair: bool) -> Any:
    """Note ``result``'s content in the running call's box when it is ``bytes``; return it unchanged."""
    content = result[0] if pair and isinstance(result, tuple) and len(result) == 2 else result
    box = _BOX.get()
    if box is not None and isinstance(content, bytes | bytearray | memoryview):
        box.append(bytes(content))
    return result


def keeping_bytes(tool: BaseTool) -> BaseTool:
    """A copy of ``tool`` whose ``bytes`` output is noted for :func:`bytes_kept` (else ``tool`` itself).

    Args:
        tool: A LangChain tool; one with a ``func`` or a ``coroutine`` (``@tool``,
            ``StructuredTool``, ``Tool``, MCP tools) is copied with them wrapped
            (``functools.wraps``: same signature, so LangChain injects the same arguments).

    Returns:
        The copy, or ``tool`` when it has neither (a ``BaseTool`` subclass with its own ``_run``:
        its ``bytes`` reach the log as LangChain's text of them).
    """
    func, coro = getattr(tool, "func", None), getattr(tool, "coroutine", None)
    if func is None and coro is None:
        return tool
    pair = getattr(tool, "response_format", "content") == "content_and_artifact"
    update: dict[str, Any] = {}
    if callable(func):
        sync_func = func

        @functools.wraps(sync_func)
        def run(*args: Any, **kwargs: Any) -> Any:
            return _note(sync_func(*args, **kwargs), pair)

        update["func"] = run
    if callable(coro):
        async_func = coro

        @functools.wraps(async_func)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            return _note(await async_func(*args, **kwargs), pair)

        update["coroutine"] = arun
    return tool.model_copy(update=update)


@contextlib.contextmanager
def bytes_kept() -> Iterator[list[bytes]]:
    """A box for the ``bytes`` the tool of the call run inside returns (:func:`keeping_bytes`).

    Yields:
        The box: empty, or the ``bytes`` the tool returned (the last is the output).
    """
    box: list[bytes] = []
    token = _BOX.set(box)
    try:
        yield box
    finally:
        _BOX.reset(token)
