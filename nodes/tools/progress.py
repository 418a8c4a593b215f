"""Progress of tool calls as LangGraph ``custom`` stream events (``get_stream_writer``).

A run streamed with ``stream_mode="custom"`` (or a list that holds it) receives, per call the
tool node runs, a ``tool.started`` record, the ``tool.output`` lines a long tool reports as they
come (the workspace's ``run_command``), and a ``tool.finished`` record. Outside a graph, or when
the run does not stream ``custom``, :func:`report_progress` does nothing. The records are not
part of the event log: the log records the call's result, whatever was streamed.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Literal

from context.secrets import masked_tree

__all__ = ["PROGRESS_KINDS", "ProgressKind", "progress_scope", "report_progress"]

ProgressKind = Literal["tool.started", "tool.output", "tool.finished"]
#: The kinds of progress record, in the order a call sends them (``tool.output``: zero or more).
PROGRESS_KINDS: tuple[ProgressKind, ...] = ("tool.started", "tool.output", "tool.finished")

Writer = Callable[[Any], None]


def _nobody(record: Any) -> None:
    """The writer of a scope outside a graph run: nobody to tell."""


#: The writer :func:`progress_scope` resolved for the tool call running now (None: no scope).
_SCOPE: contextvars.ContextVar[Writer | None] = contextvars.ContextVar("taskctx_progress_writer", default=None)


def _resolve() -> Writer:
    from langgraph.config import get_stream_writer

    try:
        return get_stream_writer()
    except RuntimeError:  # not inside a graph run
        return _nobody


@contextlib.contextmanager
def progress_scope() -> Iterator[None]:
    """Resolve the run's stream writer once for one tool call: the call's records all use it.

    The tool node opens one per call it runs, so a tool that reports each output line does not
    look the writer up per line.

    Yields:
        Nothing; :func:`report_progress` inside the block uses the writer resolved on entry.
    """
    token = _SCOPE.set(_resolve())
    try:
        yield
    finally:
        _SCOPE.reset(token)


def report_progress(kind: ProgressKind, call_id: str, tool: str, **fields: Any) -> None:
    """Send one progress record of a tool call to the run's ``custom`` stream, if there is one.

    Inside a :func:`progress_scope` the writer it resolved is used; outside one it is resolved now.

    Args:
        kind: ``tool.started``, ``tool.output`` (``line=``: one line of output, its newline
            kept) or ``tool.finished`` (``status=``: ``ok`` or ``error``; ``output_chars=``:
            the characters of the output).
        call_id: The tool call's id.
        tool: The tool's name.
        **fields: The record's other fields (JSON values); their strings are masked as the stores
            mask them (:func:`context.secrets.masked_tree`: a held secret's value is its placeholder).
    """
    write = _SCOPE.get() or _resolve()
    if write is not _nobody:
        write({"kind": kind, "call_id": call_id, "tool": tool, **masked_tree(fields)})
