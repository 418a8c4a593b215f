"""taskctx.nodes: one node per role, their renderers, the tool node and offline chat models.

Depends on ``context`` (never on ``graphs``, which wires these nodes into a ``StateGraph``).
One model call of a role node, and what the tool node does with the calls it asked for::

    TaskContext (the state: the event log folded by context.reducer)
      │  NodeRun (runtime.py): catch up on this node's crashed attempt, or go on
      ▼
    renderer (render/): the role's layers as context blocks
      │  context.build_context: chosen within the token budget, manifest
      ▼
    messages + tool schemas (schemas.py, tools/, workspace/) ── context.built event
      ▼
    chat model (models.py resolves "provider:model"; testing.py: scripted / replay models)
      ▼
    role node (roles.py): the answer as events (plan.created, tool.called, step.completed, ...)
      ▼
    tool node (tools/node.py): each pending call ─ permissions.py: allowed? risk? approval?
      │  (interrupt() for approvals) ─ the ToolExecutor runs it (workspace/, tools/replay.py)
      │  ─ output → artifact store (it masks secrets: context.secrets), context compresses
      ▼
    events (tool.result.received, permission.*, file.modified, error.resolved) ─▶ next node

Modules:

* ``roles.py``: the planner, executor, reviewer and recovery nodes (``make_*_node``).
* ``runtime.py``: what every node shares: :class:`NodeEnv` (stores, budget), :class:`NodeRun`
  (catch-up rule, commits, ``context.built``, model calls with metadata), prompt fingerprints.
* ``render/``: one renderer per role (see its package doc).
* ``schemas.py``: the control tools the role nodes offer (``submit_plan``, ``complete_step``...).
* ``tools/``: the tool node (:class:`TaskToolNode`), the :class:`ToolExecutor` protocol,
  ``read_artifact`` / ``search_history``, :class:`ReplayTools` (see its package doc).
* ``workspace/``: :class:`WorkspaceTools`, the executor over a real folder: path and command
  policy, unified diffs, side-effect-safe recovery (see its package doc).
* ``permissions.py``: :func:`assess`, the tool node's permission decision per call.
* ``secrets.py``: :func:`mask_secrets` (moved to :mod:`context.secrets`: the stores mask everything
  they write; this name and path keep working).
* ``testing.py``: :class:`ScriptedChatModel`, :class:`ReplayChatModel` and the answer helpers.
* ``models.py``: :func:`resolve_model`, ``provider:model`` strings to chat models.
* ``memory.py``: :class:`~nodes.memory_source.MemorySource`, durable memory on a LangGraph ``BaseStore``:
  what a new task loads (``memory.loaded``, by the role nodes' prologue) and how confirmation
  events reach the store (``NodeRun.commit``).
* ``pricing.py``: the providers' prompt-cache pricing rules (:class:`~nodes.pricing.PricingRule`),
  what the executor's restart decision prices with (``NodeEnv.cache_rule``).
"""

from typing import TYPE_CHECKING

from context.lazy import lazy_exports

if TYPE_CHECKING:
    from context.secrets import mask_secrets

    from .chat_models import resolve_model
    from .permissions import Decision, PolicyError, assess
    from .render import (
        EXTERNAL_RULE,
        ExecutorRenderer,
        PlannerRenderer,
        RecoveryRenderer,
        Renderer,
        ReviewerRenderer,
        assemble,
        core_blocks,
        quote_external,
    )
    from .roles import (
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        task_created_event,
    )
    from .runtime import DEFAULT_BUDGET, DEFAULT_RESERVE, NodeEnv, NodeRun, Rendered, cached_prefix_tokens, fingerprints
    from .testing import RECORDED_THOUGHT, ReplayChatModel, ScriptedChatModel
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

# imported on first use (PEP 562): ``import nodes`` alone loads none of the modules below
__getattr__ = lazy_exports(
    __name__,
    {
        "resolve_model": ".chat_models",
        "Decision": ".permissions",
        "PolicyError": ".permissions",
        "assess": ".permissions",
        "EXTERNAL_RULE": ".render",
        "ExecutorRenderer": ".render",
        "PlannerRenderer": ".render",
        "RecoveryRenderer": ".render",
        "Renderer": ".render",
        "ReviewerRenderer": ".render",
        "assemble": ".render",
        "core_blocks": ".render",
        "quote_external": ".render",
        "make_executor_node": ".roles",
        "make_planner_node": ".roles",
        "make_recovery_node": ".roles",
        "make_reviewer_node": ".roles",
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
        "ReplayTools": ".tools",
        "TaskToolNode": ".tools",
        "ToolExecutor": ".tools",
        "ToolOutcome": ".tools",
        "function_schema": ".tools",
        "make_tool_node": ".tools",
        "normalize_answer": ".tools",
        "Recovery": ".workspace",
        "WorkspaceTools": ".workspace",
    },
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RESERVE",
    "EXTERNAL_RULE",
    "RECORDED_THOUGHT",
    "Decision",
    "ExecutorRenderer",
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
    "WorkspaceTools",
    "assemble",
    "assess",
    "cached_prefix_tokens",
    "core_blocks",
    "fingerprints",
    "function_schema",
    "make_executor_node",
    "make_planner_node",
    "make_recovery_node",
    "make_reviewer_node",
    "make_tool_node",
    "mask_secrets",
    "normalize_answer",
    "quote_external",
    "resolve_model",
    "task_created_event",
]
