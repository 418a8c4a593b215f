"""One traced tool run per tool call, through LangChain's callbacks (what ``BaseTool.run`` does).

Under the ``tools`` node's run: ``run_type="tool"``, named after the tool, inputs the call's
arguments, outputs what the event log records of the result (the masked, compressed summary and
the ``artifact://`` ref of the whole output), an error for an ``error`` result. A tracer that is
not there (tracing off) costs one no-op callback manager.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.runnables.config import get_callback_manager_for_config
from langchain_core.tools import ToolException

from context.models import ToolCallRecord

from ..runtime import NodeRun

__all__ = ["end_tool_run", "start_tool_run"]


def start_tool_run(run: NodeRun, rec: ToolCallRecord, args: dict[str, Any]) -> CallbackManagerForToolRun:
    """Start the tool run of ``rec`` under the node run of ``run`` (its LangGraph config's callbacks).

    Args:
        run: This node run.
        rec: The call.
        args: Its arguments (the run's inputs).

    Returns:
        The run's callback handle, for :func:`end_tool_run`.
    """
    manager = get_callback_manager_for_config(run.config)  # a new manager: what is added stays on it
    manager.add_tags([f"tool:{rec.tool}"], inherit=False)
    manager.add_metadata({"task_id": run.task_id, "call_id": rec.id, "step_id": rec.step_id}, inherit=False)
    return manager.on_tool_start(
        {"name": rec.tool}, json.dumps(args, sort_keys=True, ensure_ascii=False), inputs=dict(args), name=rec.tool
    )


def end_tool_run(
    handle: CallbackManagerForToolRun,
    status: str,
    summary: str,
    ref: str | None = None,
    raw_chars: int = 0,
    compressed: bool = False,
) -> None:
    """End a tool run with the result the event log recorded.

    Args:
        handle: From :func:`start_tool_run`.
        status: The result's status (``ok``, ``error``, ``denied``); ``error`` ends the run as an error.
        summary: The result as the executor reads it (masked, compressed when ``compressed``).
        ref: The ``artifact://`` ref of the whole (masked) output, or None.
        raw_chars: The whole output's length, in characters.
        compressed: ``summary`` is a compressed form of the output.
    """
    if status == "error":
        handle.on_tool_error(ToolException(summary))
        return
    handle.on_tool_end(
        {"status": status, "summary": summary, "raw_ref": ref, "raw_chars": raw_chars, "compressed": compressed}
    )
