"""The default orchestrator graph and the helpers to start a task.

``START → planner → executor ⇄ tools → reviewer → END``; the reviewer can send the task back to
the planner; a failed tool call goes to recovery, which retries (executor), re-plans (planner)
or stops (END). The state is :class:`context.TaskContext`; the event log and artifacts live in
their own tables (``stores``), the checkpointer holds the TaskContext.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from context import Identity, Permissions, SqliteStores, StoreOpenError, TaskContext, extract_constraints
from context.pg_store import PgStores, is_postgres_url
from nodes import (
    DEFAULT_BUDGET,
    DEFAULT_RESERVE,
    NodeEnv,
    ToolExecutor,
    make_executor_node,
    make_planner_node,
    make_recovery_node,
    make_reviewer_node,
    make_tool_node,
    resolve_model,
)
from nodes.tokens import model_counter

from . import routing

__all__ = ["DEFAULT_DB", "NoTools", "Project", "build_orchestrator", "db_exists", "new_task", "open_project"]

DEFAULT_DB = ".taskctx/taskctx.sqlite"


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
    """

    def __init__(self, path: str):
        self.path = path
        self.url: str | None = None
        self.conn: sqlite3.Connection | None = None
        self._pool: Any = None
        self.checkpointer: BaseCheckpointSaver
        from .checkpoint import checkpoint_serde

        if is_postgres_url(path):
            from .postgres import open_postgres_checkpointer

            pg = PgStores(path)
            self.stores: SqliteStores | PgStores = pg
            self.url, self.path = pg.url, pg.path
            try:
                self.checkpointer, self._pool = open_postgres_checkpointer(pg.url, serde=checkpoint_serde())
            except BaseException:
                pg.close()
                raise
            return
        self.stores = SqliteStores(path)
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.conn = sqlite3.connect(path, check_same_thread=False)
            self.checkpointer = SqliteSaver(self.conn, serde=checkpoint_serde())
            self.checkpointer.setup()
        except sqlite3.Error as exc:
            raise StoreOpenError(
                f"cannot open the checkpointer at {path}: {exc}; pass --db with a writable file"
            ) from exc

    @property
    def is_postgres(self) -> bool:
        return self.url is not None

    def close(self) -> None:
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


def open_project(db: str | Path = DEFAULT_DB) -> Project:
    """Open (creating it and its folder if needed) the project database at ``db``: a SQLite
    file path, ``:memory:``, or a ``postgresql://user@host:port/dbname`` URL.

    Raises ``StoreOpenError`` naming the path (the URL without its password) when it cannot be
    opened.
    """
    path = str(db)
    if is_postgres_url(path):
        return Project(path)
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
    return Project(path)


def new_task(
    request: str,
    task_id: str,
    *,
    constraints: list[str] | None = None,
    success_criteria: list[str] | None = None,
    non_goals: list[str] | None = None,
    permissions: Permissions | None = None,
) -> TaskContext:
    """The input state of a new task. ``constraints`` default to the request's own hard
    constraints (its "do not ..." lines, verbatim). The first node records ``task.created``."""
    return TaskContext(
        identity=Identity(
            task_id=task_id,
            original_request=request,
            constraints=list(constraints) if constraints is not None else extract_constraints(request),
            success_criteria=list(success_criteria or []),
            non_goals=list(non_goals or []),
        ),
        permissions=permissions or Permissions(),
    )


def build_orchestrator(
    model: BaseChatModel | str,
    *,
    tools: ToolExecutor | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    stores: SqliteStores | PgStores | None = None,
    budget: int = DEFAULT_BUDGET,
    reserve_for_output: int = DEFAULT_RESERVE,
    env: NodeEnv | None = None,
) -> CompiledStateGraph:
    """The default compiled graph (see module doc).

    ``model``: a chat model or ``"provider:model"``; ``tools``: the task's ToolExecutor;
    ``budget`` and ``reserve_for_output`` in tokens, counted by :func:`model_counter` of the
    model (o200k_base or cl100k_base for OpenAI models, the upper-bound estimate for other
    providers, o200k_base for scripted and replay models). Without ``stores`` the event log and
    artifacts live in memory. Run it with ``durability="sync"`` and ``thread_id = task_id``.
    """
    chat = resolve_model(model)
    if env is None:
        st = stores or SqliteStores(":memory:")
        env = NodeEnv(
            events=st.events,
            artifacts=st.artifacts,
            budget=budget,
            reserve_for_output=reserve_for_output,
            count_tokens=model_counter(chat),
        )
    tx = tools or NoTools()
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(chat, env), metadata={"role": "planner"})
    g.add_node("executor", make_executor_node(chat, env, tx), metadata={"role": "executor"})
    g.add_node("tools", make_tool_node(env, tx), metadata={"role": "tools"})
    g.add_node("reviewer", make_reviewer_node(chat, env), metadata={"role": "reviewer"})
    g.add_node("recovery", make_recovery_node(chat, env), metadata={"role": "recovery"})
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", routing.after_planner, ["executor", "__end__"])
    g.add_conditional_edges(
        "executor", routing.after_executor, ["tools", "recovery", "executor", "reviewer", "__end__"]
    )
    g.add_conditional_edges("tools", routing.after_tools, ["recovery", "executor", "tools", "__end__"])
    g.add_conditional_edges("recovery", routing.after_recovery, ["planner", "executor", "__end__"])
    g.add_conditional_edges("reviewer", routing.after_reviewer, ["planner", "__end__"])
    return g.compile(checkpointer=checkpointer, name="taskctx")  # the root run of each trace
