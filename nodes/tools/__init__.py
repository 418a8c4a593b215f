"""The tool node and what it runs.

::

    executor node ── tool.called (pending calls) ──▶ TaskToolNode (node.py)
        per call: permissions.assess ─ refused ─▶ permission.denied + denied result
                  needs approval ─▶ permission.requested + interrupt() ─▶ answer
                  side effects ─▶ permission.granted (the "may have started" marker)
                  run: read_artifact / search_history (builtin.py) or the ToolExecutor
                  ─▶ tool.result.received (+ file.modified, error.resolved)

Modules (leaves first):

* ``protocol.py``: :class:`ToolExecutor` (what the node calls), :class:`ToolOutcome` (what a
  tool returns), :func:`function_schema` (OpenAI tool dicts), :data:`CONTROL_TOOLS`.
* ``builtin.py``: ``read_artifact`` and ``search_history``, answered from the task's own stores.
* ``replay.py``: :class:`ReplayTools`, the tools of a recorded trajectory.
* ``node.py``: :class:`TaskToolNode` (and :func:`make_tool_node`), the graph's ``tools`` node:
  permissions, approvals, side-effect markers and recovery, results (its module doc has the
  rules). The workspace executor lives in :mod:`nodes.workspace`.
"""

from .approvals import APPROVAL_ACTIONS, REJECTED_AGAIN, ApprovalQuestions, normalize_answer
from .builtin import BUILTIN_TOOLS, READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA, read_artifact, search_history
from .node import TaskToolNode, make_tool_node
from .protocol import (
    CONTROL_TOOLS,
    ToolExecutor,
    ToolOutcome,
    accepts_scopes,
    as_outcome,
    check_arguments,
    function_schema,
    parameters_of,
    scoped_execute,
)
from .replay import RECORDED_ERROR, ReplayTools

__all__ = [
    "APPROVAL_ACTIONS",
    "BUILTIN_TOOLS",
    "CONTROL_TOOLS",
    "READ_ARTIFACT_SCHEMA",
    "RECORDED_ERROR",
    "REJECTED_AGAIN",
    "SEARCH_HISTORY_SCHEMA",
    "ApprovalQuestions",
    "ReplayTools",
    "TaskToolNode",
    "ToolExecutor",
    "ToolOutcome",
    "accepts_scopes",
    "as_outcome",
    "check_arguments",
    "function_schema",
    "make_tool_node",
    "normalize_answer",
    "parameters_of",
    "read_artifact",
    "scoped_execute",
    "search_history",
]
