"""The default orchestrator graph and the helpers to start a task.

``START → planner → executor ⇄ tools → reviewer → END``; the reviewer can send the task back to
the planner; a failed tool call goes to recovery, which retries (executor), re-plans (planner)
or stops (END). The state is :class:`context.TaskContext`; the event log and artifacts live in
their own tables (``stores``), the checkpointer holds the TaskContext.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from context import (
    Identity,
    InvalidInputError,
    Permissions,
    SqliteStores,
    StoreOpenError,
    TaskContext,
    extract_constraints,
)
from context.pg_store import PgStores, is_postgres_url
from context.policy import ContextPolicy
from context.secrets import mask_secrets
from context.text import clean
from nodes.runtime import DEFAULT_BUDGET, DEFAULT_RESERVE

if TYPE_CHECKING:  # LangGraph's graph runtime and the nodes are imported when a graph is built (~1 s of CPU
    # that `taskctx inspect`, `list` or the resume of a finished task do not need)
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph import StateGraph
    from langgraph.graph.state import CompiledStateGraph

    from nodes import NodeEnv, ToolExecutor

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_OUT",
    "GraphWiringError",
    "NoTools",
    "Project",
    "build_orchestrator",
    "check_graph",
    "compile_graph",
    "db_exists",
    "new_task",
    "open_project",
    "router_targets",
]

DEFAULT_DB = ".taskctx/taskctx.sqlite"
#: Where a run command exports a task (``<out>/<task_id>/``) when no ``--out`` is given.
DEFAULT_OUT = Path(".taskctx/runs")


class NoTools:
    """A ToolExecutor with no tools (the executor still has ``read_artifact``)."""

    def schemas(self) -> list[dict[str, Any]]:
        return []

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        from nodes import ToolOutcome

        return ToolOutcome("error", f"unknown tool {tool!r}")


class Project:
    """One taskctx database: the LangGraph checkpointer and the event/artifact stores.

    ``path`` is a SQLite file (or ``:memory:``): checkpointer and stores share the file on
    separate connections. Or a ``postgresql://`` URL: ``PostgresSaver`` on a checked connection
    pool (:mod:`graphs.postgres`) and the stores of :class:`context.pg_store.PgStores`, each
    retrying a call when its connection drops. ``path`` is then the URL without its password.

    ``readonly=True`` (``inspect``, ``list``, ``report``): an existing database is opened for
    reading only (SQLite: ``mode=ro`` URIs, Postgres: read-only sessions, no DDL), so nothing is
    created or changed; raises ``context.NotTaskctxDatabaseError`` when it holds no taskctx tables.
    """

    def __init__(self, path: str, *, readonly: bool = False, memory_index: dict[str, Any] | None = None):
        self.path = path
        self.url: str | None = None
        self.conn: sqlite3.Connection | None = None
        self._pool: Any = None
        self.readonly = readonly
        #: LangGraph's index config of the memory store (``{"dims", "embed", "fields"}``): its
        #: search is then semantic (see :attr:`memory_store`); None: lexical.
        self.memory_index = memory_index
        self.checkpointer: BaseCheckpointSaver
        from .checkpoint import checkpoint_serde

        if is_postgres_url(path):
            from .postgres import open_postgres_checkpointer

            pg = PgStores(path, readonly=readonly)
            self.stores: SqliteStores | PgStores = pg
            self.url, self.path = pg.url, pg.path
            try:
                self.checkpointer, self._pool = open_postgres_checkpointer(
                    pg.url, serde=checkpoint_serde(), readonly=readonly
                )
            except BaseException:
                pg.close()
                raise
            return
        self.stores = SqliteStores(path, readonly=readonly)
        if readonly:
            self._open_readonly_checkpointer(path, checkpoint_serde())
            return
        try:
            from .checkpoint import PruningSqliteSaver

            self.conn = sqlite3.connect(path, check_same_thread=False)
            self.checkpointer = PruningSqliteSaver(self.conn, serde=checkpoint_serde())
            self.checkpointer.setup()
        except sqlite3.Error as exc:
            raise StoreOpenError(
                f"cannot open the checkpointer at {path}: {exc}; pass --db with a writable file"
            ) from exc

    def _open_readonly_checkpointer(self, path: str, serde: Any) -> None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.checkpoint.sqlite import SqliteSaver

        from context.store import connect_readonly, sqlite_tables

        try:
            self.conn = connect_readonly(path)
            if {"checkpoints", "writes"} <= sqlite_tables(self.conn):
                saver = SqliteSaver(self.conn, serde=serde)
                saver.is_setup = True  # its setup() would create tables and set WAL mode: never here
                self.checkpointer = saver
            else:  # stores without checkpoints (written through the Python API): none to show
                self.checkpointer = InMemorySaver(serde=serde)
        except BaseException:
            self.stores.close()
            raise

    @property
    def is_postgres(self) -> bool:
        return self.url is not None

    @property
    def memory_store(self) -> Any:
        """The long-term store of durable memories (a LangGraph ``BaseStore`` beside the
        checkpointer: :func:`graphs.memory_store.open_memory_store`), opened on first use."""
        if getattr(self, "_memory_store", None) is None:
            from .memory_store import open_memory_store

            self._memory_store = open_memory_store(self, index=self.memory_index)
        return self._memory_store

    def memory(self, root: str | Path | None = None) -> Any:
        """A :class:`nodes.memory_source.MemorySource` on :attr:`memory_store`, checking the memories'
        files against the workspace ``root`` (``None``: no staleness check); pass it to
        :func:`build_orchestrator` as ``memory=``."""
        from nodes.memory_source import MemorySource

        return MemorySource(self.memory_store, root=Path(root) if root is not None else None)

    def close(self) -> None:
        ms = getattr(self, "_memory_store", None)
        if ms is not None and getattr(ms, "_taskctx_conn", None) is not None:
            ms._taskctx_conn.close()
        if self.conn is not None:
            self.conn.close()
        if self._pool is not None:
            self._pool.close()
        self.stores.close()

    def __enter__(self) -> Project:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def db_exists(db: str | Path) -> bool:
    """Whether ``--db`` names an existing database: a file that exists, ``:memory:``, or a
    ``postgresql://`` URL (whose tables are created on open)."""
    return is_postgres_url(str(db)) or str(db) == ":memory:" or Path(db).exists()


def open_project(
    db: str | Path = DEFAULT_DB, *, readonly: bool = False, memory_index: dict[str, Any] | None = None
) -> Project:
    """Open (creating it and its folder if needed) the project database at ``db``: a SQLite
    file path, ``:memory:``, or a ``postgresql://user@host:port/dbname`` URL.

    Raises ``StoreOpenError`` naming the path (the URL without its password) when it cannot be
    opened. ``readonly=True`` creates and changes nothing (see :class:`Project`): a missing file
    raises ``StoreOpenError``, a database without the taskctx tables ``NotTaskctxDatabaseError``.
    ``memory_index``: LangGraph's index config for the long-term memory store (``{"dims": N,
    "embed": <embedding function or Embeddings>}``): memories are then found by semantic search;
    ``None``: lexically (nothing downloaded).
    """
    path = str(db)
    if is_postgres_url(path) or readonly:
        return Project(path, readonly=readonly, memory_index=memory_index)
    if path != ":memory:":
        p = Path(path)
        if p.exists() and p.is_dir():
            raise StoreOpenError(f"--db {path} is a directory; give a file path such as {path}/taskctx.sqlite")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreOpenError(f"cannot create the folder for --db {path}: {exc}") from exc
        if p.exists():
            with open(p, "rb") as fh:
                head = fh.read(16)
            if head and not head.startswith(b"SQLite format 3"):
                raise StoreOpenError(f"--db {path} exists but is not a SQLite database; pass another path")
    return Project(path, memory_index=memory_index)


def new_task(
    request: str,
    task_id: str,
    *,
    constraints: list[str] | None = None,
    success_criteria: list[str] | None = None,
    non_goals: list[str] | None = None,
    permissions: Permissions | None = None,
) -> TaskContext:
    """The input state of a new task. Hard constraints: first the caller's ``constraints``
    (verbatim), then the prohibitions found in the request's wording
    (:func:`context.extract_constraints`, source ``"request"``) that the caller did not give;
    the planner may add more (source ``"planner"``). The first node records ``task.created``.
    Secret-shaped values in the request, constraints and criteria are masked here, before the
    graph's first checkpoint, as the stores mask everything they write (:mod:`context.secrets`:
    the log feeds every prompt, export and trace; a secret the agent needs goes in the
    workspace's environment, not in the request)."""

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


class GraphWiringError(InvalidInputError, ValueError):
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
    """The node names a router may return, from its ``Literal[...]`` return annotation (the way
    LangGraph's ``add_conditional_edges`` infers a path map), or None when it declares none.
    ``router`` is a function or the runnable LangGraph wraps it in."""
    func = getattr(router, "func", None) or getattr(router, "afunc", None) or router
    try:
        ret = get_type_hints(func).get("return")
    except Exception:  # unresolvable annotations: nothing declared
        return None
    return tuple(str(a) for a in get_args(ret)) if get_origin(ret) is Literal else None


def check_graph(builder: StateGraph) -> StateGraph:
    """Check a graph before it is compiled: every node a router may return (its ``Literal``
    return annotation, e.g. the routers of :mod:`graphs.routing`) must be a key of the edge's
    path map when one is given, and every destination must be a node of the graph (or ``END``).
    LangGraph's ``StateGraph.validate`` (run by ``compile``) refuses an unknown destination too;
    this names the router, the missing node and the fix in one line.

    Returns ``builder``; raises :class:`GraphWiringError` (a ``ValueError``)."""
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


def compile_graph(builder: StateGraph, **compile_kwargs: Any) -> CompiledStateGraph:
    """:func:`check_graph`, then ``builder.compile(**compile_kwargs)`` (``checkpointer``,
    ``name``, ...). Raises :class:`GraphWiringError` naming the router, the missing node and
    the fix."""
    return check_graph(builder).compile(**compile_kwargs)


def build_orchestrator(
    model: BaseChatModel | str,
    *,
    tools: ToolExecutor | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    stores: SqliteStores | PgStores | None = None,
    budget: int = DEFAULT_BUDGET,
    reserve_for_output: int = DEFAULT_RESERVE,
    env: NodeEnv | None = None,
    memory: Any = None,
    policies: Sequence[ContextPolicy] | None = None,
    freshness: bool = True,
) -> CompiledStateGraph:
    """The default compiled graph (see module doc).

    ``model``: a chat model or ``"provider:model"``; ``tools``: the task's ToolExecutor;
    ``budget`` and ``reserve_for_output`` in tokens, counted by :func:`model_counter` of the
    model (o200k_base or cl100k_base for OpenAI models, the upper-bound estimate for other
    providers, o200k_base for scripted and replay models); the executor's restarts are priced
    with the provider's cache rule (``nodes.pricing.rule_for_provider``: flat for scripted and
    replay models). Without ``stores`` the event log and artifacts live in memory. ``policies``:
    the context policies (:mod:`context.policy`; None: the defaults, ``[]``: none);
    ``freshness``: record ``fact.stale`` (:mod:`context.freshness`; False switches it off); both
    are ignored when ``env`` is given (set them on the env). ``memory``: a
    :class:`nodes.memory_source.MemorySource` (e.g. ``project.memory(workspace)``): a new task loads the
    durable memories relevant to its request, confirmations reach the long-term store, and the
    graph is compiled with its store (LangGraph passes it to nodes that ask for ``store``);
    ``None``: no durable memory. Run it with ``durability="sync"`` and ``thread_id = task_id``.
    Returns a :class:`~graphs.edits.TaskGraph`: ``update_state`` from outside a node is recorded
    in the event log (``state.edited``) or refused (``InvalidInputError``).
    """
    from langgraph.graph import START, StateGraph

    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
        resolve_model,
    )
    from nodes.message_tokens import model_counter
    from nodes.pricing import rule_for_provider
    from nodes.runtime import provider_of

    from . import routing
    from .edits import TaskGraph

    chat = resolve_model(model)
    if env is None:
        st = stores or SqliteStores(":memory:")
        env = NodeEnv(
            events=st.events,
            artifacts=st.artifacts,
            budget=budget,
            reserve_for_output=reserve_for_output,
            count_tokens=model_counter(chat),
            cache_rule=rule_for_provider(provider_of(chat)),
            policies=policies,
            freshness=freshness,
        )
    if memory is not None:
        env.memory = memory
    tx = tools or NoTools()
    if env.workspace is None and hasattr(tx, "fingerprint"):
        env.workspace = tx  # fingerprinted by the first node after a resume (context.freshness)
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(chat, env), metadata={"role": "planner"})
    g.add_node("executor", make_executor_node(chat, env, tx), metadata={"role": "executor"})
    g.add_node("tools", make_tool_node(env, tx), metadata={"role": "tools"})
    g.add_node("reviewer", make_reviewer_node(chat, env), metadata={"role": "reviewer"})
    g.add_node("recovery", make_recovery_node(chat, env), metadata={"role": "recovery"})
    g.add_edge(START, "planner")
    # no path maps: each router's Literal return annotation is its path map (graphs.routing)
    g.add_conditional_edges("planner", routing.after_planner)
    g.add_conditional_edges("executor", routing.after_executor)
    g.add_conditional_edges("tools", routing.after_tools)
    g.add_conditional_edges("recovery", routing.after_recovery)
    g.add_conditional_edges("reviewer", routing.after_reviewer)
    store = getattr(env.memory, "store", None)
    compiled = compile_graph(g, checkpointer=checkpointer, store=store, name="taskctx")  # the root run of each trace
    compiled.__class__ = TaskGraph  # update_state from outside a node: recorded or refused (graphs.edits)
    compiled.taskctx_events = env.events  # type: ignore[attr-defined]
    return compiled
