"""taskctx.nodes: one LangGraph node per role, their renderers, the tool node and offline chat models.

Depends on ``context`` only; ``graphs`` wires these nodes into a ``StateGraph``. The test
builders (``plan``, ``tool_call``, ``complete``...) are in :mod:`nodes.testing`.
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from context.secrets import mask_secrets

    from .chat_models import AUTO_BUDGET_CAP, auto_budget, resolve_model
    from .permissions import Decision, PolicyError, assess
    from .render import (
        ALL_ROLES,
        EXTERNAL_RULE,
        ExecutorRenderer,
        PlannerRenderer,
        RecoveryRenderer,
        Renderer,
        ReviewerRenderer,
        assemble,
        core_blocks,
        quote_external,
        report_blocks,
    )
    from .roles import (
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_role_node,
        report,
        task_created_event,
    )
    from .runtime import DEFAULT_BUDGET, DEFAULT_RESERVE, NodeEnv, NodeRun, Rendered, cached_prefix_tokens, fingerprints
    from .testing import RECORDED_THOUGHT, ReplayChatModel, ScriptedChatModel
    from .tools import (
        EventLoopBlockedError,
        LangChainTools,
        ReplayTools,
        TaskToolNode,
        ToolExecutor,
        ToolOutcome,
        ToolSet,
        from_langchain_tools,
        function_schema,
        make_tool_node,
        normalize_answer,
    )
    from .workspace import Recovery, WorkspaceTools

# imported on first use (PEP 562): ``import nodes`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "resolve_model": ".chat_models",
        "auto_budget": ".chat_models",
        "AUTO_BUDGET_CAP": ".chat_models",
        "Decision": ".permissions",
        "PolicyError": ".permissions",
        "assess": ".permissions",
        "ALL_ROLES": ".render",
        "EXTERNAL_RULE": ".render",
        "ExecutorRenderer": ".render",
        "PlannerRenderer": ".render",
        "RecoveryRenderer": ".render",
        "Renderer": ".render",
        "ReviewerRenderer": ".render",
        "assemble": ".render",
        "core_blocks": ".render",
        "quote_external": ".render",
        "report_blocks": ".render",
        "make_executor_node": ".roles",
        "make_planner_node": ".roles",
        "make_recovery_node": ".roles",
        "make_reviewer_node": ".roles",
        "make_role_node": ".roles",
        "report": ".roles",
        "task_created_event": ".roles",
        "DEFAULT_BUDGET": ".runtime",
        "DEFAULT_RESERVE": ".runtime",
        "NodeEnv": ".runtime",
        "NodeRun": ".runtime",
        "Rendered": ".runtime",
        "cached_prefix_tokens": ".runtime",
        "fingerprints": ".runtime",
        "mask_secrets": "context.secrets",
        "RECORDED_THOUGHT": ".testing",
        "ReplayChatModel": ".testing",
        "ScriptedChatModel": ".testing",
        "EventLoopBlockedError": ".tools",
        "LangChainTools": ".tools",
        "ReplayTools": ".tools",
        "TaskToolNode": ".tools",
        "ToolExecutor": ".tools",
        "ToolOutcome": ".tools",
        "ToolSet": ".tools",
        "from_langchain_tools": ".tools",
        "function_schema": ".tools",
        "make_tool_node": ".tools",
        "normalize_answer": ".tools",
        "Recovery": ".workspace",
        "WorkspaceTools": ".workspace",
    },
)

__all__ = [
    "ALL_ROLES",
    "AUTO_BUDGET_CAP",
    "DEFAULT_BUDGET",
    "DEFAULT_RESERVE",
    "EXTERNAL_RULE",
    "RECORDED_THOUGHT",
    "Decision",
    "EventLoopBlockedError",
    "ExecutorRenderer",
    "LangChainTools",
    "NodeEnv",
    "NodeRun",
    "PlannerRenderer",
    "PolicyError",
    "Recovery",
    "RecoveryRenderer",
    "Rendered",
    "Renderer",
    "ReplayChatModel",
    "ReplayTools",
    "ReviewerRenderer",
    "ScriptedChatModel",
    "TaskToolNode",
    "ToolExecutor",
    "ToolOutcome",
    "ToolSet",
    "WorkspaceTools",
    "assemble",
    "assess",
    "auto_budget",
    "cached_prefix_tokens",
    "core_blocks",
    "fingerprints",
    "from_langchain_tools",
    "function_schema",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "make_role_node",
    "make_tool_node",
    "mask_secrets",
    "normalize_answer",
    "quote_external",
    "report",
    "report_blocks",
    "resolve_model",
    "task_created_event",
]
