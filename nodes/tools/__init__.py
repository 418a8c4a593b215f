"""The tool node (:class:`TaskToolNode`) and what it runs: :class:`ToolExecutor`, LangChain, built-in and replay tools."""

from .approvals import APPROVAL_ACTIONS, REJECTED_AGAIN, ApprovalQuestions, normalize_answer
from .builtin import BUILTIN_TOOLS, READ_ARTIFACT_SCHEMA, SEARCH_HISTORY_SCHEMA, read_artifact, search_history
from .langchain_tools import SIDE_EFFECTS_KEY, LangChainTools, as_names, message_text, side_effect_names
from .loops import EventLoopBlockedError
from .node import TaskToolNode, make_tool_node
from .parallel import DEFAULT_MAX_PARALLEL, run_at_once
from .progress import PROGRESS_KINDS, ProgressKind, progress_scope, report_progress
from .protocol import (
    CONTROL_TOOLS,
    Recovery,
    ToolExecutor,
    ToolOutcome,
    accepts_scopes,
    as_outcome,
    check_arguments,
    function_schema,
    parameters_of,
    run_off_loop,
    scoped_execute,
)
from .replay import RECORDED_ERROR, ReplayTools
from .toolset import ToolSet, executor_of, from_langchain_tools

__all__ = [
    "APPROVAL_ACTIONS",
    "BUILTIN_TOOLS",
    "CONTROL_TOOLS",
    "DEFAULT_MAX_PARALLEL",
    "PROGRESS_KINDS",
    "READ_ARTIFACT_SCHEMA",
    "RECORDED_ERROR",
    "REJECTED_AGAIN",
    "SEARCH_HISTORY_SCHEMA",
    "SIDE_EFFECTS_KEY",
    "ApprovalQuestions",
    "EventLoopBlockedError",
    "LangChainTools",
    "ProgressKind",
    "Recovery",
    "ReplayTools",
    "TaskToolNode",
    "ToolExecutor",
    "ToolOutcome",
    "ToolSet",
    "accepts_scopes",
    "as_names",
    "as_outcome",
    "check_arguments",
    "executor_of",
    "from_langchain_tools",
    "function_schema",
    "make_tool_node",
    "message_text",
    "normalize_answer",
    "parameters_of",
    "progress_scope",
    "read_artifact",
    "report_progress",
    "run_at_once",
    "run_off_loop",
    "scoped_execute",
    "search_history",
    "side_effect_names",
]
