"""taskctx.nodes: one node per role, their renderers, the tool node and offline chat models.

Depends on ``context`` (never on ``graphs``).
"""

from .models import resolve_model
from .render import (
    EXTERNAL_RULE,
    ExecutorRenderer,
    PlannerRenderer,
    RecoveryRenderer,
    Renderer,
    ReviewerRenderer,
    quote_external,
)
from .roles import (
    make_executor_node,
    make_planner_node,
    make_recovery_node,
    make_reviewer_node,
)
from .runtime import DEFAULT_BUDGET, DEFAULT_RESERVE, NodeEnv, NodeRun, Rendered, cached_prefix_tokens, fingerprints
from .testing import ReplayChatModel, ScriptedChatModel, and_complete, complete, plan, recover, review, tool_call
from .permissions import Decision, PolicyError, assess
from .secrets import mask_secrets
from .tools import (
    ReplayTools,
    TaskToolNode,
    ToolExecutor,
    ToolOutcome,
    function_schema,
    make_tool_node,
    normalize_answer,
)
from .workspace import Recovery, WorkspaceTools

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RESERVE",
    "Decision",
    "EXTERNAL_RULE",
    "ExecutorRenderer",
    "NodeEnv",
    "NodeRun",
    "PlannerRenderer",
    "PolicyError",
    "Recovery",
    "RecoveryRenderer",
    "Renderer",
    "Rendered",
    "ReplayChatModel",
    "ReplayTools",
    "ReviewerRenderer",
    "ScriptedChatModel",
    "TaskToolNode",
    "ToolExecutor",
    "ToolOutcome",
    "WorkspaceTools",
    "assess",
    "cached_prefix_tokens",
    "and_complete",
    "complete",
    "fingerprints",
    "function_schema",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "make_tool_node",
    "mask_secrets",
    "normalize_answer",
    "plan",
    "quote_external",
    "recover",
    "resolve_model",
    "review",
    "tool_call",
]
