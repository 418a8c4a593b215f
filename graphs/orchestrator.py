"""The default graph (:func:`build_orchestrator`), the wiring check, and a new task's state.

``START → planner → executor ⇄ tools → reviewer → END``; the reviewer can send the task back to
the planner; a failed tool call goes to recovery, which retries, re-plans or stops.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from context import (
    Identity,
    InvalidInputError,
    Permissions,
    SqliteStores,
    TaskContext,
    extract_constraints,
)
from context.pg_store import PgStores
from context.policy import ContextPolicy
from context.secrets import mask_secrets
from context.text import clean
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

if TYPE_CHECKING:  # (LangGraph's graph runtime and the nodes are imported when a graph is built, a start-up
    # cost that `taskctx inspect`, `list` or the resume of a finished task do not pay)
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph import StateGraph
    from langgraph.graph.state import CompiledStateGraph

    from nodes import NodeEnv, ToolExecutor

    from .edits import TaskGraph

__all__ = [
    "GraphWiringError",
    "NoTools",
    "build_orchestrator",
    "check_graph",
    "compile_graph",
    "new_task",
    "receipts_beside",
    "router_targets",
]


class NoTools:
    """A ToolExecutor with no tools (the executor still has ``read_artifact``)."""

    def schemas(self) -> list[dict[str, Any]]:
        """No tool schemas."""
        return []

    def has_side_effects(self, tool: str) -> bool:
        """No tool has side effects."""
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Every call is an unknown tool's error."""
        from nodes import ToolOutcome  # (nodes.tools loads langgraph.types: imported when a call runs)

        return ToolOutcome("error", f"unknown tool {tool!r}")


def new_task(
    request: str,
    task_id: str,
    *,
    constraints: list[str] | None = None,
    success_criteria: list[str] | None = None,
    non_goals: list[str] | None = None,
    permissions: Permissions | None = None,
) -> TaskContext:
    """The input state of a new task (its first node records ``task.created``).

    Hard constraints: first the caller's, verbatim, then the prohibitions found in the request's
    wording (:func:`context.extract_constraints`) that the caller did not give. Secret-shaped
    values in the request, constraints and criteria are masked here, before the first
    checkpoint, as the stores mask what they write; the values of the secrets a run holds
    (:mod:`context.held_secrets`) become their placeholders. A secret the agent needs is given
    to :meth:`graphs.Project.run` (``secrets=``, or found in its request), which holds it.

    Args:
        request: What the agent should do, verbatim.
        task_id: The task's id (its thread id).
        constraints: Hard constraints, verbatim.
        success_criteria: What the result must satisfy.
        non_goals: What the task must not try to do.
        permissions: The task's tool permissions (default: all tools, the workspace).

    Returns:
        The state to pass as the graph's input.
    """

    def text(t: str) -> str:  # a lone surrogate cannot be checkpointed: U+FFFD (context.text)
        return mask_secrets(clean(t)).text

    request = text(request)
    given = list(dict.fromkeys(text(c).strip() for c in constraints or () if c.strip()))
    found = [c for c in extract_constraints(request) if c not in given]
    return TaskContext(
        identity=Identity(
            task_id=task_id,
            original_request=request,
            constraints=given + found,
            constraint_sources=dict.fromkeys(found, "request"),
            success_criteria=[text(c) for c in success_criteria or []],
            non_goals=[text(c) for c in non_goals or []],
        ),
        permissions=permissions or Permissions(),
    )


class GraphWiringError(InvalidInputError):
    """A graph whose router may return a node the graph does not have (:func:`check_graph`)."""


#: The node factory to name in a fix, per built-in role.
_FACTORIES = {
    "planner": "nodes.make_planner_node(model, env)",
    "executor": "nodes.make_executor_node(model, env, tools)",
    "tools": "nodes.make_tool_node(env, tools)",
    "reviewer": "nodes.make_reviewer_node(model, env)",
    "recovery": "nodes.make_recovery_node(model, env)",
}


def router_targets(router: Any) -> tuple[str, ...] | None:
    """The node names a router may return, from its ``Literal[...]`` return annotation.

    This is how LangGraph's ``add_conditional_edges`` infers a path map.

    Args:
        router: A function, or the runnable LangGraph wraps it in.

    Returns:
        The names, or None when it declares none.
    """
    func = getattr(router, "func", None) or getattr(router, "afunc", None) or router
    try:
        ret = get_type_hints(func).get("return")
    except Exception:  # unresolvable annotations: nothing declared
        return None
    return tuple(str(a) for a in get_args(ret)) if get_origin(ret) is Literal else None


def check_graph(builder: StateGraph) -> StateGraph:
    """Check that every node a router may return is mapped and exists, before compiling.

    Each router's ``Literal`` return annotation (the routers of :mod:`graphs.routing`) must be
    keys of the edge's path map when one is given, and every destination a node of the graph
    (or ``END``). LangGraph's ``compile`` refuses an unknown destination too; this names the
    router, the missing node and the fix in one line.

    Args:
        builder: The graph, not compiled yet.

    Returns:
        ``builder``.

    Raises:
        GraphWiringError: A router may return a node that is not mapped or does not exist.
    """
    from langgraph.graph import END

    known = set(builder.nodes) | {END}
    for source, branches in builder.branches.items():
        for name, branch in branches.items():
            ends = branch.ends
            if ends is None:  # no path map and no annotation: LangGraph lets it go to any node
                continue
            for target in router_targets(branch.path) or ():
                if target not in ends:
                    raise GraphWiringError(
                        f"router {name} (after node {source!r}) can return {target!r}, but the path map of "
                        f"add_conditional_edges({source!r}, {name}, ...) has no {target!r} key; add "
                        f"{target!r}: <a node of the graph> to it, or leave the path map out"
                    )
            for key, node in ends.items():
                if node in known:
                    continue
                make = _FACTORIES.get(str(node), "your node")
                raise GraphWiringError(
                    f"router {name} (after node {source!r}) can return {key!r}, but the graph has no node {node!r}; "
                    f"add it (g.add_node({node!r}, {make})) or send {key!r} to a node you have with a path map: "
                    f"g.add_conditional_edges({source!r}, {name}, {{..., {key!r}: 'other_node'}})"
                )
    return builder


def compile_graph(builder: StateGraph, *, env: NodeEnv | None = None, **compile_kwargs: Any) -> CompiledStateGraph:
    """Check a graph (:func:`check_graph`), then compile it as a taskctx graph.

    A graph with taskctx nodes (or an ``env``) is compiled as a :class:`~graphs.edits.TaskGraph`
    on their event log: ``update_state`` is recorded as ``state.edited`` or refused, a run that
    continues a thread is recorded as a resume (``resume.started``, the freshness check), and
    each node's update and route is checked against the log (:mod:`graphs.divergence`: a key
    the TaskContext lacks, a field changed without an event, events not returned, a router
    returning a node the graph lacks fail the task with an error naming the node and the fix).

    Args:
        builder: The graph.
        env: The nodes' environment (None: the one its ``nodes.make_*_node`` nodes share; a
            graph with neither is compiled by LangGraph as it is).
        **compile_kwargs: Arguments of ``StateGraph.compile`` (``checkpointer``, ``name``, ...).

    Returns:
        The compiled graph (a ``TaskGraph`` when it has an event log).

    Raises:
        GraphWiringError: Naming the router, the missing node and the fix.
    """
    from .divergence import graph_env, guard_nodes, guard_routers
    from .edits import TaskGraph

    check_graph(builder)
    env = env if env is not None else graph_env(builder)
    if env is None:
        return builder.compile(**compile_kwargs)
    guarded = guard_routers(builder)
    compiled = guarded.compile(**compile_kwargs)
    guard_nodes(compiled, guarded, env.events)
    compiled.__class__ = TaskGraph  # update_state from outside a node: recorded or refused (graphs.edits)
    compiled.taskctx_events = env.events  # type: ignore[attr-defined]
    compiled.taskctx_stores = getattr(env, "stores", None)  # type: ignore[attr-defined]
    return compiled


def build_orchestrator(
    model: BaseChatModel | str,
    *,
    tools: ToolExecutor | Sequence[Any] | None = None,
    side_effects: str | Iterable[str] = (),
    checkpointer: BaseCheckpointSaver | None = None,
    stores: SqliteStores | PgStores | None = None,
    budget: int | Literal["auto"] = DEFAULT_BUDGET,
    reserve_for_output: int = DEFAULT_RESERVE,
    env: NodeEnv | None = None,
    budget_cap: int | None = None,
    memory: Any = None,
    policies: Sequence[ContextPolicy] | None = None,
    freshness: bool = True,
    reports: bool = True,
) -> TaskGraph:
    """The default graph, compiled: planner, executor, tools, reviewer and recovery.

    Run it with ``durability="sync"`` and ``thread_id = task_id`` (:func:`graphs.thread_config`);
    tokens are counted by the model's counter, restarts priced by its provider's cache rule.

    Args:
        model: A chat model or ``"provider:model"``.
        tools: The task's tool executor, or a list of LangChain tools (``@tool``, ``StructuredTool``,
            MCP tools) and executors (:func:`nodes.from_langchain_tools`; the receipts of the
            tools with side effects go in ``receipts/`` beside a SQLite file's ``stores``); None:
            no tools but ``read_artifact``.
        side_effects: Names of the LangChain tools of a ``tools`` list that have side effects (one
            ``str`` is one name), besides those whose metadata says ``{"taskctx": {"side_effects":
            True}}`` and MCP tools not annotated ``readOnlyHint: True``; the others are read-only.
        checkpointer: LangGraph's checkpointer (None: the graph keeps no checkpoints).
        stores: The event log and artifacts (None: in memory).
        budget: The prompt budget in tokens, or ``"auto"``: the model's context window from its
            profile, capped by ``budget_cap`` (:func:`nodes.auto_budget`).
        reserve_for_output: Tokens of the budget kept for the model's answer.
        env: The nodes' environment (None: made from the arguments; given, it overrides them but ``memory``).
        budget_cap: With ``budget="auto"``: the cost target, the most tokens one call may take
            (None: ``nodes.AUTO_BUDGET_CAP``).
        memory: A :class:`nodes.memory_source.MemorySource` (``project.memory(workspace)``): a new task
            loads the durable memories relevant to its request, the graph gets its store; None: none.
        policies: The context policies (:mod:`context.policy`; None: the defaults, ``[]``: none).
        freshness: Record ``fact.stale`` when a file a fact rests on changed (False: off).
        reports: Show role reports (``progress.reports``) in the prompts that take them (False: off).

    Returns:
        A :class:`~graphs.edits.TaskGraph`: ``update_state`` from outside a node is recorded in
        the event log (``state.edited``) or refused (``InvalidInputError``).

    Raises:
        ModelConfigError: ``model`` names no chat model that can be made, or ``budget="auto"``
            and its profile names no context window.
        TypeError: A ``tools`` list item is neither a LangChain tool nor a ToolExecutor.
        ValueError: Two of the ``tools`` share a name; ``side_effects`` names a tool not in the
            list, or comes with a ToolExecutor (say it in its ``has_side_effects``).
    """
    from nodes import resolve_model
    from nodes.tools import executor_of

    chat = resolve_model(model)
    if env is None:
        tokens = _budget_tokens(chat, budget, reserve_for_output, budget_cap)
        env = _default_env(chat, stores, tokens, reserve_for_output, policies, freshness, reports)
    if memory is not None:
        env.memory = memory
    tx = executor_of(tools, side_effects=side_effects, receipts_dir=receipts_beside(stores), artifacts=env.artifacts)
    tx = NoTools() if tx is None else tx
    env.use_workspace(tx)  # fingerprinted by the first node after a resume (context.freshness)
    g = _default_graph(chat, env, tx)
    store = getattr(env.memory, "store", None)
    # the root run of each trace is named taskctx
    compiled = compile_graph(g, env=env, checkpointer=checkpointer, store=store, name="taskctx")
    if stores is not None:  # (the stores a resume checks: graphs.edits)
        compiled.taskctx_stores = stores  # type: ignore[attr-defined]
    return compiled  # type: ignore[return-value]


def _default_graph(chat: BaseChatModel, env: NodeEnv, tx: Any) -> StateGraph:
    """The default graph's nodes and edges, not compiled."""
    from langgraph.graph import START, StateGraph

    from . import routing

    g = StateGraph(TaskContext)
    _add_role_nodes(g, chat, env, tx)
    g.add_edge(START, "planner")
    # no path maps: each router's Literal return annotation is its path map (graphs.routing)
    g.add_conditional_edges("planner", routing.after_planner)
    g.add_conditional_edges("executor", routing.after_executor)
    g.add_conditional_edges("tools", routing.after_tools)
    g.add_conditional_edges("recovery", routing.after_recovery)
    g.add_conditional_edges("reviewer", routing.after_reviewer)
    return g


def receipts_beside(stores: SqliteStores | PgStores | None) -> Path | None:
    """Where the LangChain tools of a ``tools`` list keep their receipts: ``receipts/`` beside a SQLite file.

    Args:
        stores: The graph's stores.

    Returns:
        The folder, or None for stores in memory or in Postgres (no receipts: an interrupted call
        with side effects is put to the user before it runs again).
    """
    if not isinstance(stores, SqliteStores) or str(stores.path) == ":memory:":
        return None
    return Path(stores.path).resolve().parent / "receipts"


def _budget_tokens(chat: BaseChatModel, budget: int | str, reserve_for_output: int, cap: int | None) -> int:
    """The budget in tokens: ``budget`` itself, or for ``"auto"`` the model's (:func:`nodes.auto_budget`)."""
    if budget != "auto":
        return int(budget)
    from nodes import AUTO_BUDGET_CAP, auto_budget

    return auto_budget(chat, reserve_for_output=reserve_for_output, cap=AUTO_BUDGET_CAP if cap is None else cap)


def _add_role_nodes(g: Any, chat: BaseChatModel, env: NodeEnv, tx: ToolExecutor) -> None:
    """The default graph's nodes: planner (with the task-start budget check), executor, tools, reviewer, recovery."""
    from nodes import make_executor_node, make_planner_node, make_recovery_node, make_reviewer_node, make_tool_node
    from nodes.roles import task_budget_check

    preflight = task_budget_check(env, tx)  # the request and the floor fit, before any side effect
    g.add_node("planner", make_planner_node(chat, env, preflight=preflight), metadata={"role": "planner"})
    g.add_node("executor", make_executor_node(chat, env, tx), metadata={"role": "executor"})
    g.add_node("tools", make_tool_node(env, tx), metadata={"role": "tools"})
    g.add_node("reviewer", make_reviewer_node(chat, env), metadata={"role": "reviewer"})
    g.add_node("recovery", make_recovery_node(chat, env), metadata={"role": "recovery"})


def _default_env(
    chat: BaseChatModel,
    stores: SqliteStores | PgStores | None,
    budget: int,
    reserve_for_output: int,
    policies: Sequence[ContextPolicy] | None,
    freshness: bool,
    reports: bool = True,
) -> NodeEnv:
    """The nodes' environment of :func:`build_orchestrator` when none is given."""
    from nodes import NodeEnv
    from nodes.message_tokens import model_counter
    from nodes.pricing import rule_for_provider
    from nodes.runtime import provider_of

    st = stores or SqliteStores(":memory:")
    return NodeEnv(
        events=st.events,
        artifacts=st.artifacts,
        budget=budget,
        reserve_for_output=reserve_for_output,
        count_tokens=model_counter(chat),
        cache_rule=rule_for_provider(provider_of(chat)),
        policies=policies,
        freshness=freshness,
        reports=reports,
    )
