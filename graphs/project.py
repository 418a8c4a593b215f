"""A taskctx project: one database's stores, checkpointer and memory, and the jobs done on it.

:func:`open_project` opens one; :class:`Project` builds a task's graph (:meth:`Project.graph`),
runs it (:meth:`Project.run`), resumes it from its last checkpoint (:meth:`Project.resume`) and
shows it (:meth:`Project.inspect`). The ``taskctx`` commands are built on these.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from context import (
    CallTotals,
    InvalidInputError,
    ModelCall,
    Permissions,
    SqliteStores,
    StoreOpenError,
    TaskContext,
    TaskInfo,
    UnknownTaskError,
    call_totals,
    find_task,
    list_tasks,
)
from context.pg_store import PgStores, is_postgres_url
from nodes.runtime import DEFAULT_BUDGET

from .arunner import AsyncProject, start_state
from .costs import Prices, priced_calls
from .diagnosis import ensure_sound
from .inspection import TaskView, inspect_task
from .orchestrator import build_orchestrator
from .project_errors import NoCheckpointError, UnregisteredTaskError
from .runner import ResumePoint, RunResult, Stores, export_run, run_with_approvals, thread_config
from .task_kinds import replay_task_graph, run_task_graph

if TYPE_CHECKING:  # (LangGraph's types: the graph runtime is imported when a graph is built, not by `inspect`)
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from nodes import ToolExecutor

    from .edits import TaskGraph

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_OUT",
    "TASK_KINDS",
    "NoCheckpointError",
    "Project",
    "UnregisteredTaskError",
    "db_exists",
    "open_project",
    "register_task_kind",
]

#: The database a project opens when none is named.
DEFAULT_DB = ".taskctx/taskctx.sqlite"
#: Where a run command exports a task (``<out>/<task_id>/``) when no ``--out`` is given.
DEFAULT_OUT = Path(".taskctx/runs")

#: An approval answerer: the request in, ``{"action": "approve" | "edit" | "reject" | "respond",
#: ...}`` out, or None to leave it pending.
Answer = Callable[[dict[str, Any]], "dict[str, Any] | None"]
#: Builds the graph of a registered task: ``(project, task_id, spec) -> graph``.
KindBuilder = Callable[["Project", str, dict[str, Any]], Any]
#: The task kinds :meth:`Project.task_graph` can rebuild, by the registry row's ``kind``: a
#: builder, or the ``"module:name"`` of one (imported when a task of that kind is rebuilt).
TASK_KINDS: dict[str, KindBuilder | str] = {}


def register_task_kind(kind: str, builder: KindBuilder | str) -> None:
    """Teach :meth:`Project.task_graph` to rebuild the graph of tasks whose registry row has ``kind``.

    Args:
        kind: The registry row's ``kind`` (built in: ``"replay"``, ``"run"``; ``graphs.demo``
            registers ``"demo"`` when imported, the CLI names it on start-up).
        builder: ``(project, task_id, spec) -> graph``, or its ``"module:name"``.
    """
    TASK_KINDS[kind] = builder


def _builder(kind: str) -> KindBuilder | None:
    """The builder registered for ``kind`` (a ``"module:name"`` is imported now), or None."""
    builder = TASK_KINDS.get(kind)
    if isinstance(builder, str):
        module, name = builder.split(":")
        builder = getattr(importlib.import_module(module), name)
    return builder


def _pending(request: dict[str, Any]) -> None:
    """The answerer of a run without one: every approval request stays pending."""
    return None


class Project(AsyncProject):
    """One taskctx database: the LangGraph checkpointer, the event/artifact stores and memory.

    ``path`` is a SQLite file (or ``:memory:``): checkpointer and stores share the file on
    separate connections. Or a ``postgresql://`` URL: ``PostgresSaver`` on a checked connection
    pool (:mod:`graphs.postgres`) and :class:`context.pg_store.PgStores`; ``path`` is then the
    URL without its password. ``readonly=True`` opens an existing database for reading only
    (SQLite ``mode=ro``, Postgres read-only sessions): nothing is created or changed.
    """

    def __init__(self, path: str, *, readonly: bool = False, memory_index: dict[str, Any] | None = None):
        """Open the database at ``path`` (use :func:`open_project`, which also creates its folder).

        Args:
            path: A SQLite file, ``:memory:``, or a ``postgresql://`` URL.
            readonly: Open an existing database for reading only.
            memory_index: LangGraph's index config of the memory store (None: lexical search).

        Raises:
            StoreOpenError: The database cannot be opened.
            NotTaskctxDatabaseError: ``readonly`` and the database holds no taskctx tables.
        """
        self.path = path
        self.url: str | None = None
        self.conn: sqlite3.Connection | None = None
        #: The Postgres connection pool the checkpointer and memory store share (None on SQLite).
        self.pool: Any = None
        self.readonly = readonly
        #: LangGraph's index config of the memory store (``{"dims", "embed", "fields"}``): its
        #: search is then semantic (see :attr:`memory_store`); None: lexical.
        self.memory_index = memory_index
        self.checkpointer: BaseCheckpointSaver
        from .checkpoint import checkpoint_serde

        if is_postgres_url(path):
            from .postgres import open_postgres_checkpointer

            pg = PgStores(path, readonly=readonly)
            self.stores: Stores = pg
            self.url, self.path = pg.url, pg.path
            try:
                self.checkpointer, self.pool = open_postgres_checkpointer(
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
            # one lock for the file's two connections: the writers of one process (threads, async
            # tasks) queue for it in turn instead of starving each other in SQLite's busy wait
            self.checkpointer.lock = self.stores.lock
        except sqlite3.Error as exc:
            raise StoreOpenError(
                f"cannot open the checkpointer at {path}: {exc}; pass --db with a writable file"
            ) from exc

    def _open_readonly_checkpointer(self, path: str, serde: Any) -> None:
        """A checkpointer that reads the file's checkpoints and never writes."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.checkpoint.sqlite import SqliteSaver

        from context.sqlite_db import connect_readonly, sqlite_tables

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
        """Whether the database is a ``postgresql://`` URL."""
        return self.url is not None

    @property
    def memory_store(self) -> Any:
        """The long-term store of durable memories, opened on first use.

        A LangGraph ``BaseStore`` beside the checkpointer (:func:`graphs.memory_store.open_memory_store`).
        """
        if getattr(self, "_memory_store", None) is None:
            # (graphs.memory_store loads nodes.workspace and langgraph's store: imported when used)
            from .memory_store import open_memory_store

            self._memory_store = open_memory_store(self, index=self.memory_index)
        return self._memory_store

    def memory(self, root: str | Path | None = None) -> Any:
        """The durable memory a graph loads from (pass it to :func:`graphs.build_orchestrator`).

        Args:
            root: The workspace the memories' files are checked against (None: no staleness check).

        Returns:
            A :class:`nodes.memory_source.MemorySource` on :attr:`memory_store`.
        """
        from nodes.memory_source import MemorySource  # (loads langgraph's store: imported when used)

        return MemorySource(self.memory_store, root=Path(root) if root is not None else None)

    def graph(
        self,
        model: BaseChatModel | str,
        *,
        tools: ToolExecutor | None = None,
        budget: int = DEFAULT_BUDGET,
        workspace: str | Path | None = None,
        memory: bool = True,
        **kwargs: Any,
    ) -> TaskGraph:
        """The default graph (:func:`graphs.build_orchestrator`) on this project's stores and checkpointer.

        Args:
            model: A chat model or ``"provider:model"``.
            tools: The task's tool executor (None: no tools but ``read_artifact``).
            budget: The prompt budget in tokens.
            workspace: The folder durable memories' files are checked against (None: no check).
            memory: Load durable memories from the project's long-term store (False: none).
            **kwargs: More arguments of :func:`graphs.build_orchestrator` (``policies``, ...).

        Returns:
            The compiled graph.
        """
        mem = self.memory(workspace) if memory else None
        return build_orchestrator(
            model, tools=tools, checkpointer=self.checkpointer, stores=self.stores, budget=budget, memory=mem, **kwargs
        )

    def task_graph(self, task_id: str, *, spec: dict[str, Any] | None = None) -> TaskGraph:
        """The graph a task was started with, rebuilt from its task registry row.

        A ``stopped`` note in the row is removed (the task continues now).

        Args:
            task_id: A task a taskctx command (or a :data:`TASK_KINDS` builder) registered.
            spec: Its registry row, when the caller has read and checked it (no fold of the log).

        Returns:
            The compiled graph.

        Raises:
            UnknownTaskError: The database does not know the task.
            UnregisteredTaskError: The task has events but no registry row.
            InvalidInputError: Its kind is unknown here, or what it was built from changed.
        """
        if spec is None:
            spec = find_task(self.stores, task_id).spec
        if spec is None:
            raise UnregisteredTaskError(task_id, self.path, self.stores.events.last_seq(task_id))
        if "stopped" in spec:  # it continues now: the stop is no longer the last word
            spec = {k: v for k, v in spec.items() if k != "stopped"}
            self.stores.tasks.register(task_id, spec)
        kind = spec.get("kind")
        builder = _builder(str(kind))
        if builder is None:
            known = "; a demo task needs graphs.demo imported" if kind == "demo" else ""
            raise InvalidInputError(f"task {task_id!r} has an unknown kind {kind!r} in {self.path}{known}")
        return builder(self, task_id, spec)

    def run(
        self,
        graph: Any,
        request_or_task: str | TaskContext,
        *,
        task_id: str | None = None,
        max_steps: int | None = None,
        approvals: Answer | None = None,
        constraints: list[str] | None = None,
        permissions: Permissions | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        prune: bool = False,
    ) -> RunResult:
        """Start a new task on ``graph`` and run it until it ends, pauses or stops.

        Args:
            graph: The task's graph (:meth:`graph`, or your own on this project's stores).
            request_or_task: What the agent should do, or a state made by :func:`graphs.new_task`.
            task_id: The task's id (a request only; default ``task-<8 hex>``).
            max_steps: Stop after this many executor steps (the thread keeps its next node).
            approvals: Answers approval requests (None: they stay pending; :meth:`resume` or
                ``taskctx approve`` answers them later).
            constraints: Hard constraints, verbatim (a request only).
            permissions: The task's permissions (a request only).
            on_event: Called with every event recorded during the run.
            on_request: Called with each approval request before it is answered.
            prune: Keep only the thread's latest checkpoint.

        Returns:
            How the run ended.

        Raises:
            InvalidInputError: The task already exists, or ``task_id`` contradicts the state's.
            LeaseHeldError: Another live process runs a task of this id (:mod:`context.lease`).
        """
        task = start_state(self, request_or_task, task_id, constraints, permissions)
        return run_with_approvals(
            graph,
            self.stores,
            task.identity.task_id,
            task,
            answer=approvals or _pending,
            stop_after=max_steps,
            on_event=on_event,
            on_request=on_request,
            prune=prune,
        )

    def resume(
        self,
        task_id: str,
        *,
        graph: Any = None,
        max_steps: int | None = None,
        approvals: Answer | None = None,
        budget: int | None = None,
        timeout: float | None = None,
        on_resume: Callable[[ResumePoint], None] | None = None,
        on_event: Callable[[Any], None] | None = None,
        on_request: Callable[[dict[str, Any]], None] | None = None,
        prune: bool = False,
    ) -> RunResult:
        """Continue a task from its latest checkpoint (never redoing a finished step).

        The stored data is checked first (:func:`graphs.diagnosis.ensure_sound`). A finished
        task is not run again: the result says ``already_finished``.

        Args:
            task_id: The task.
            graph: Its graph (None: rebuilt from its registry row, :meth:`task_graph`).
            max_steps: Stop after this many more executor steps.
            approvals: Answers approval requests (None: they stay pending).
            budget: A new prompt budget in tokens, recorded in the registry row.
            timeout: A new per-request model timeout in seconds (``run`` tasks), recorded likewise.
            on_resume: Called once with where the resume continues, before anything runs.
            on_event: Called with every event recorded during the run.
            on_request: Called with each approval request before it is answered.
            prune: Keep only the thread's latest checkpoint.

        Returns:
            How the run ended.

        Raises:
            DamagedStoreError: The stored data fails its checks (:class:`NoCheckpointError`:
                events but no checkpoint).
            UnknownTaskError: The task is unknown, or registered but never started.
            LeaseHeldError: Another live process runs the task (:mod:`context.lease`); nothing ran.
        """
        with self.stores.leases.hold(task_id):  # before the checks: a live writer's log is not read as a crash
            return self._resume(
                task_id, graph, max_steps, approvals, budget, timeout, on_resume, on_event, on_request, prune
            )

    def _resume(
        self,
        task_id: str,
        graph: Any,
        max_steps: int | None,
        approvals: Answer | None,
        budget: int | None,
        timeout: float | None,
        on_resume: Callable[[ResumePoint], None] | None,
        on_event: Callable[[Any], None] | None,
        on_request: Callable[[dict[str, Any]], None] | None,
        prune: bool,
    ) -> RunResult:
        """:meth:`resume` with the task's lease held."""
        plan = self._resume_point(task_id, graph, budget, timeout, on_resume)
        if isinstance(plan, RunResult):
            return plan
        g, done, checked = plan
        return run_with_approvals(
            g,
            self.stores,
            task_id,
            None,
            answer=approvals or _pending,
            stop_after=done + max_steps if max_steps else None,
            resume=True,
            on_event=on_event,
            on_request=on_request,
            prune=prune,
            checked=checked,
        )

    def _resume_point(
        self,
        task_id: str,
        graph: Any,
        budget: int | None,
        timeout: float | None,
        on_resume: Callable[[ResumePoint], None] | None,
    ) -> RunResult | tuple[Any, int, Any]:
        """What a resume continues: ``(graph, executor steps done, the checks' result)``.

        Or the result of a finished task (nothing to run). Sync: ``aresume`` runs it in a worker thread.
        """
        checked = ensure_sound(self.stores, self.checkpointer, task_id, full=False)
        has_events = bool(self.stores.events.last_seq(task_id))
        spec = checked.spec if has_events else find_task(self.stores, task_id).spec
        for key, value in (("budget", budget), ("timeout", timeout)):
            if value is not None and spec is not None:
                spec = {**spec, key: value}
                self.stores.tasks.register(task_id, spec)
        if checked.finished and spec is not None:  # every router ends here: no graph is built
            return self._finished(task_id, checked.state)
        g = graph if graph is not None else self.task_graph(task_id, spec=spec)
        snap = g.get_state(thread_config(task_id))
        if not snap.values and has_events:
            raise NoCheckpointError(task_id, self.path, self.stores.events.last_seq(task_id))
        if not snap.values:
            raise UnknownTaskError(
                f"task {task_id!r} was registered but never started (no checkpoint yet); start it again with the "
                f"same command and --task-id {task_id}"
            )
        state = TaskContext.model_validate(snap.values)
        if not snap.next and not snap.tasks and state.control.status in ("completed", "failed"):
            return self._finished(task_id, checked.state)
        done = state.progress.executor_steps
        if on_resume is not None:
            on_resume(ResumePoint(snap.config["configurable"].get("checkpoint_id"), done, tuple(snap.next)))
        return g, done, checked

    def _finished(self, task_id: str, state: TaskContext | None) -> RunResult:
        """The result of a resume that found the task finished (nothing ran)."""
        return RunResult(task_id, state or TaskContext(), (), False, already_finished=True)

    def inspect(self, task_id: str, *, full: bool = False) -> TaskView:
        """What ``taskctx inspect`` shows of a task (read-only).

        Args:
            task_id: The task.
            full: Read and fold the whole log (else a long sound log is read from its checkpoint).

        Returns:
            The view (:class:`graphs.TaskView`).

        Raises:
            UnknownTaskError: The database does not know the task.
            UnshowableTaskError: The task is too damaged to show.
        """
        return inspect_task(self.stores, self.checkpointer, task_id, full=full)

    def model_calls(
        self, task_id: str, *, prices: Prices = None, priced_as: str | None = None, prompts: bool = False
    ) -> list[ModelCall]:
        """One record per model call of a task (a running one's so far), from its event log, priced.

        Args:
            task_id: The task.
            prices: The price table: None (the list prices, :data:`nodes.prices.LIST_PRICES`), a
                TOML or JSON file, or model name -> prices over them (USD per 1M tokens).
            priced_as: Price every call as this model (an offline model's as the one it stands for).
            prompts: Read each call's prompt as sent from the artifact store into ``prompt``.

        Returns:
            The calls in order (:class:`context.ModelCall`).

        Raises:
            UnknownTaskError: The database has no events of the task.
            InvalidInputError: ``prices`` is not a price table.
        """
        artifacts = self.stores.artifacts if prompts else None
        return priced_calls(self.stores.events, task_id, prices=prices, priced_as=priced_as, artifacts=artifacts)

    def model_call_totals(self, task_id: str, *, prices: Prices = None, priced_as: str | None = None) -> CallTotals:
        """A task's model calls summed for the task and per role (tokens, usage, latency, cost).

        Args:
            task_id: The task.
            prices: As in :meth:`model_calls`.
            priced_as: As in :meth:`model_calls`.

        Returns:
            The totals (:class:`context.CallTotals`).

        Raises:
            UnknownTaskError: As in :meth:`model_calls`.
        """
        calls = priced_calls(self.stores.events, task_id, prices=prices, priced_as=priced_as, manifests=False)
        return call_totals(calls)

    def tasks(self) -> list[TaskInfo]:
        """Every task of the database, the most recent activity first (damaged ones marked).

        Returns:
            One :class:`context.TaskInfo` per task (:func:`context.list_tasks`).
        """
        return list_tasks(self.stores)

    def export(self, task_id: str, out: str | Path = DEFAULT_OUT) -> Path:
        """Write a task's run files to ``<out>/<task_id>/`` (:func:`graphs.runner.export_run`).

        Args:
            task_id: The task.
            out: The export root.

        Returns:
            The task's folder (``trace.jsonl``, ``state.json``, ``context_pack.md``, ``manifests.jsonl``).

        Raises:
            UnknownTaskError: The task has no events.
        """
        return export_run(self.stores, task_id, out)

    def close(self) -> None:
        """Close the stores, the checkpointer's connection or pool and the memory store."""
        ms = getattr(self, "_memory_store", None)
        if ms is not None and getattr(ms, "_taskctx_conn", None) is not None:
            ms._taskctx_conn.close()
        if self.conn is not None:
            self.conn.close()
        if self.pool is not None:
            self.pool.close()
        self.stores.close()

    def __enter__(self) -> Project:
        """The project itself; closed when the ``with`` block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the project."""
        self.close()


register_task_kind("replay", replay_task_graph)
register_task_kind("run", run_task_graph)


def db_exists(db: str | Path) -> bool:
    """Whether ``db`` names an existing database.

    Args:
        db: A SQLite file, ``:memory:`` or a ``postgresql://`` URL.

    Returns:
        True for a file that exists, ``:memory:``, or a URL (whose tables are created on open).
    """
    return is_postgres_url(str(db)) or str(db) == ":memory:" or Path(db).exists()


def open_project(
    db: str | Path = DEFAULT_DB, *, readonly: bool = False, memory_index: dict[str, Any] | None = None
) -> Project:
    """Open the project database at ``db``, creating it and its folder if needed.

    Args:
        db: A SQLite file path, ``:memory:``, or a ``postgresql://user@host:port/dbname`` URL.
        readonly: Create and change nothing: a missing file or a database without the taskctx
            tables is an error.
        memory_index: LangGraph's index config for the long-term memory store (``{"dims": N,
            "embed": <embedding function or Embeddings>}``): memories are then found by semantic
            search; None: lexically (nothing downloaded).

    Returns:
        The open project (close it, or use it as a context manager).

    Raises:
        StoreOpenError: The database cannot be opened (named; a URL without its password).
        NotTaskctxDatabaseError: ``readonly`` and the database holds no taskctx tables.
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
