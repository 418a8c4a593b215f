"""The orchestrator graph for LangGraph Server (``langgraph.json``: graph id ``taskctx``).

The server brings its own checkpointer (in memory under ``langgraph dev``, Postgres in a
deployment), so the graph is compiled without one. The event log, artifacts and task registry
live in the database named by ``TASKCTX_DB``: a SQLite file (default
``.taskctx/server.sqlite``, relative to the server's working directory) or a
``postgresql://`` URL, which several server workers share.

:func:`make_graph` is an async graph factory: the server calls it for every run and state read
with the run's config, so what the graph runs is chosen per thread or run by
``config["configurable"]``:

* ``trajectory``: path of a recorded trajectory (``.jsonl``; relative to the server's working
  directory): the replay model and replay tools, as ``taskctx replay``;
* ``model``: ``"provider:name"`` (any LangChain chat model, as ``taskctx run``);
* ``budget``: the prompt budget in tokens (default 8,000).

Durable memory as the CLI has it: a new thread's task loads the memories relevant to its request
from the long-term store beside the event log of ``TASKCTX_DB`` (what ``taskctx memory confirm
--db`` writes; :func:`server_project`), without a workspace check (the server has no workspace
of its own, so no memory is marked stale).

The first run that names a trajectory or model records it in the task registry under the thread
id, so later runs of the thread (a resume with ``command``) need no config. A thread that never
named either can be read (state, history), but a model call fails with a message naming the
missing key. The input of a run is a TaskContext whose ``identity.task_id`` is the
thread id (``graphs.new_task(request, thread_id).model_dump(mode="json")``); approvals are
``interrupt()`` s of the tool node (``requires_approval`` in the input's permissions), answered
with ``Command(resume={"action": "approve" | "edit" | "reject" | "respond", ...})``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph.state import CompiledStateGraph

from context import InvalidInputError, Trajectory, load_trajectory
from context.pg_store import PgStores
from context.sqlite_store import SqliteStores
from graphs.checkpoint import adopt_checkpoint_serde
from graphs.diagnosis import SERVER_CHECKPOINTS
from graphs.orchestrator import build_orchestrator
from graphs.project import Project, open_project
from nodes import DEFAULT_BUDGET, ReplayChatModel, ReplayTools

__all__ = [
    "DB_ENV",
    "DEFAULT_SERVER_DB",
    "GRAPH_ID",
    "build_server_graph",
    "make_graph",
    "server_project",
    "server_stores",
]

GRAPH_ID = "taskctx"
DB_ENV = "TASKCTX_DB"
DEFAULT_SERVER_DB = ".taskctx/server.sqlite"

_lock = threading.Lock()
_projects: dict[str, Project] = {}


def server_project(db: str | None = None) -> Project:
    """The taskctx database ``db`` (default: ``$TASKCTX_DB`` or ``.taskctx/server.sqlite``) as a
    :class:`~graphs.project.Project`, opened once per process and shared by every run: its
    event log and artifacts, and its long-term memory store (``Project.memory``). Its own
    checkpointer is not used (the server brings one)."""
    db = db or os.environ.get(DB_ENV) or DEFAULT_SERVER_DB
    with _lock:
        if db not in _projects:
            _projects[db] = open_project(db)  # (creates the file's folder)
        return _projects[db]


def server_stores(db: str | None = None) -> SqliteStores | PgStores:
    """The stores of ``db`` (:func:`server_project`'s), shared by every run of the process."""
    return server_project(db).stores


@functools.lru_cache(maxsize=32)
def _trajectory(path: str, mtime: float) -> Trajectory:
    return load_trajectory(path)


class UnconfiguredModel(BaseChatModel):
    """Stands in when a run's config names no ``trajectory`` or ``model``: reading a thread's
    state works, a model call fails with the fix."""

    @property
    def _llm_type(self) -> str:
        return "taskctx-unconfigured"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise InvalidInputError(
            "this run's config names no model: pass config={'configurable': {'trajectory': PATH}} (replay) "
            "or {'configurable': {'model': 'provider:name'}} when you create the thread or the run"
        )


def _spec(conf: dict[str, Any], stores: SqliteStores | PgStores) -> dict[str, Any] | None:
    """What this thread runs: from the config when it names a trajectory or model (then recorded
    in the task registry under the thread id), else what the thread's first run recorded."""
    tid = conf.get("thread_id")
    spec: dict[str, Any] | None
    if conf.get("trajectory"):
        p = Path(str(conf["trajectory"])).expanduser().resolve()
        if not p.is_file():
            raise InvalidInputError(f"configurable.trajectory {conf['trajectory']!r} is not a file on the server ({p})")
        spec = {"kind": "replay", "source": str(p)}
    elif conf.get("model"):
        spec = {"kind": "run", "model": str(conf["model"])}
    else:
        spec = stores.tasks.get(str(tid)) if tid else None
        if spec is not None and conf.get("budget"):
            spec = {**spec, "budget": int(conf["budget"])}
        return spec
    spec["budget"] = int(conf.get("budget") or DEFAULT_BUDGET)
    spec["checkpoints"] = SERVER_CHECKPOINTS  # (the Server's, not in TASKCTX_DB: graphs.diagnosis.on_server)
    if tid:
        stores.tasks.register(str(tid), spec)
    return spec


def build_server_graph(config: RunnableConfig | None = None) -> CompiledStateGraph:
    """The orchestrator for one run or state read of the server (see module doc); compiled
    without a checkpointer. The server's checkpointer, which the server passes in the config,
    gets the serializer that knows the TaskContext's classes (:func:`~graphs.checkpoint.adopt_checkpoint_serde`)."""
    conf = dict((config or {}).get("configurable") or {})
    adopt_checkpoint_serde(conf.get(CONFIG_KEY_CHECKPOINTER))
    project = server_project()
    stores = project.stores
    memory = project.memory()  # no workspace: nothing is checked for staleness
    spec = _spec(conf, stores) or {}
    budget = int(spec.get("budget") or DEFAULT_BUDGET)
    if spec.get("kind") == "replay":
        p = Path(str(spec["source"]))
        if not p.is_file():
            raise InvalidInputError(f"the trajectory of this thread, {p}, is no longer on the server")
        traj = _trajectory(str(p), p.stat().st_mtime)
        return build_orchestrator(
            ReplayChatModel(trajectory=traj), tools=ReplayTools(traj), stores=stores, budget=budget, memory=memory
        )
    if spec.get("kind") == "run":
        return build_orchestrator(str(spec["model"]), stores=stores, budget=budget, memory=memory)
    return build_orchestrator(UnconfiguredModel(), stores=stores, budget=budget, memory=memory)


async def make_graph(config: RunnableConfig) -> CompiledStateGraph:
    """The graph factory ``langgraph.json`` names. Async, so opening the database and reading the
    trajectory happen off the server's event loop."""
    return await asyncio.to_thread(build_server_graph, config)
