"""A taskctx project: one database's stores, checkpointer and memory, and the jobs done on it.

:func:`open_project` opens one; :class:`Project` builds a task's graph (:meth:`Project.graph`),
runs it (:meth:`Project.run`), resumes it from its last checkpoint (:meth:`Project.resume`), forks
it at an earlier seq (:meth:`Project.fork`) and shows it (:meth:`Project.inspect`). The ``taskctx``
commands are built on these.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from context import (
    InvalidInputError,
    Permissions,
    SqliteStores,
    StoreOpenError,
    TaskContext,
    UnknownTaskError,
    find_task,
)
from context.held_secrets import hold_secrets
from context.pg_store import PgStores, is_postgres_url
from nodes.runtime import DEFAULT_BUDGET

from .arunner import AsyncProject, start_state
from .diagnosis import ensure_sound, on_server
from .orchestrator import build_orchestrator
from .project_errors import NoCheckpointError, ServerTaskError, UnregisteredTaskError
from .project_views import DEFAULT_OUT, ProjectViews
from .runner import ResumePoint, RunResult, Stores, run_with_approvals, thread_config
from .task_kinds import TASK_KINDS, builder_of, register_task_kind
from .task_secrets import secrets_to_resume

if TYPE_CHECKING:  # (LangGraph's types: the graph runtime is imported when a graph is built, not by `inspect`)
    from langchain_core.language_models import BaseChatModel
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from nodes import ToolExecutor

    from .edits import TaskGraph
    from .fork import ForkResult

__all__ = [
    "DEFAULT_DB",
    "DEFAULT_OUT",
    "TASK_KINDS",
    "NoCheckpointError",
    "Project",
    "ServerTaskError",
    "UnregisteredTaskError",
    "db_exists",
    "open_project",
    "register_task_kind",
]

#: The database a project opens when none is named.
DEFAULT_DB = ".taskctx/taskctx.sqlite"

#: An approval answerer: the request in, ``{"action": "approve" | "edit" | "reject" | "respond",
#: ...}`` out, or None to leave it pending.
Answer = Callable[[dict[str, Any]], "dict[str, Any] | None"]


def _pending(request: dict[str, Any]) -> None:
    """The answerer of a run without one: every approval request stays pending."""
    return None


class Project(ProjectViews, AsyncProject):
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
        self.secrets: dict[str, str] = {}  # given to every task this project starts (open_project)
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
            from .checkpoint import open_readonly_checkpointer

            try:
                self.conn, self.checkpointer = open_readonly_checkpointer(path, checkpoint_serde())
            except BaseException:
                self.stores.close()
                raise
            return
        try:
            from .checkpoint import PruningSqliteSaver

            self.conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
            self.checkpointer = PruningSqliteSaver(self.conn, serde=checkpoint_serde())
            self.checkpointer.setup()
            # one lock for the file's two connections: the writers of one process (threads, async
            # tasks) queue for it in turn instead of starving each other in SQLite's busy wait
            self.checkpointer.lock = self.stores.lock
        except sqlite3.Error as exc:
            raise StoreOpenError(
                f"cannot open the checkpointer at {path}: {exc}; pass --db with a writable file"
            ) from exc

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
        tools: ToolExecutor | Sequence[Any] | None = None,
        budget: int = DEFAULT_BUDGET,
        workspace: str | Path | None = None,
        memory: bool = True,
        **kwargs: Any,
    ) -> TaskGraph:
        """The default graph (:func:`graphs.build_orchestrator`) on this project's stores and checkpointer.

        Args:
            model: A chat model or ``"provider:model"``.
            tools: The task's tool executor, or a list of LangChain tools and executors (as
                :func:`graphs.build_orchestrator` takes; receipts in ``receipts/`` beside the SQLite
                file); None: no tools but ``read_artifact``.
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
        builder = builder_of(str(kind))
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
        secrets: dict[str, str] | None = None,
    ) -> RunResult:
        """Start a new task on ``graph`` and run it until it ends, pauses or stops.

        Secrets (given, and those the detector finds in a request) are held for the run only and
        shown everywhere as ``{{secret:NAME}}`` (:mod:`context.held_secrets`); the tools get the
        values.

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
            secrets: Name -> value of secrets for the task (with the project's, :func:`open_project`).

        Returns:
            How the run ended.

        Raises:
            InvalidInputError: The task already exists, ``task_id`` contradicts the state's, or a
                secret is not valid (:class:`MissingSecretError`: a state's placeholder has no value).
            LeaseHeldError: Another live process, or another run of this one, runs a task of this
                id (:mod:`context.lease`).
        """
        task, held = start_state(self, request_or_task, task_id, constraints, permissions, secrets)
        with hold_secrets(held):  # the values are sealed in everything stored, from the first event on
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
        secrets: dict[str, str] | None = None,
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
            secrets: Name -> value of the task's secrets (with the project's); one not given is
                taken from the environment variable of its name.

        Returns:
            How the run ended.

        Raises:
            MissingSecretError: A secret the task uses has no value (nothing ran).
            DamagedStoreError: The stored data fails its checks (:class:`NoCheckpointError`:
                events but no checkpoint).
            ServerTaskError: The task runs on LangGraph Server (its checkpoints are the Server's).
            UnknownTaskError: The task is unknown, or registered but never started.
            LeaseHeldError: Another live process, or another run of this one (e.g. a second
                ``resume`` of the task at once in another thread), runs the task
                (:mod:`context.lease`); nothing ran. :class:`~context.LeaseLostError`: this run lost
                the lease midway (taken over); what it recorded stays, nothing after.
        """
        with self.stores.leases.hold(task_id) as owner:  # before the checks: a live writer's log is no crash
            return self._resume(
                task_id,
                graph,
                max_steps,
                approvals,
                budget,
                timeout,
                on_resume,
                on_event,
                on_request,
                prune,
                secrets,
                owner,
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
        secrets: dict[str, str] | None,
        owner: str,
    ) -> RunResult:
        """:meth:`resume` with the task's lease held by the run ``owner``."""
        plan = self._resume_point(task_id, graph, budget, timeout, on_resume, secrets)
        if isinstance(plan, RunResult):
            return plan
        g, done, checked, held = plan
        with hold_secrets(held):
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
                lease_owner=owner,
            )

    def _resume_point(
        self,
        task_id: str,
        graph: Any,
        budget: int | None,
        timeout: float | None,
        on_resume: Callable[[ResumePoint], None] | None,
        secrets: dict[str, str] | None = None,
    ) -> RunResult | tuple[Any, int, Any, dict[str, str]]:
        """What a resume continues: ``(graph, executor steps done, the checks' result, the secrets to hold)``.

        Or the result of a finished task (nothing to run). Sync: ``aresume`` runs it in a worker thread.
        A secret of the task without a value raises :class:`MissingSecretError` here, before anything runs.
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
        if not snap.values and has_events and on_server(spec):
            raise ServerTaskError(task_id, self.path)
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
        held = secrets_to_resume(state, {**self.secrets, **(secrets or {})})  # before anything runs
        if on_resume is not None:
            on_resume(ResumePoint(snap.config["configurable"].get("checkpoint_id"), done, tuple(snap.next)))
        return g, done, checked, held

    def fork(
        self,
        task_id: str,
        *,
        at: int | None = None,
        at_step: int | None = None,
        new_task_id: str | None = None,
        why: str = "",
        workspace_at_fork: bool = False,
        workspace: str | Path | None = None,
        spec_update: dict[str, Any] | None = None,
        graph: Any = None,
    ) -> ForkResult:
        """Fork a task at an earlier seq into a new task that runs on from there (:mod:`graphs.fork`).

        The child's log is the parent's up to the fork seq (referenced, not copied), then its
        ``task.forked``; its checkpoint holds that prefix's fold. :meth:`resume` runs it on. The
        parent is only read.

        Args:
            task_id: The parent.
            at: The fork seq (``inspect --all`` shows the seqs); it must end a node run.
            at_step: Or: the end of executor step N.
            new_task_id: The child's id (default ``<parent>-fork-<seq>``).
            why: Why, in words (recorded).
            workspace_at_fork: Give the child a copy of the workspace with the parent's own changes
                after the fork undone (else it shares the parent's).
            workspace: Where that copy goes (default: beside the parent's, named by the child's id).
            spec_update: Registry row keys to change for the child (``budget``, ``model``, ...).
            graph: The child's graph (None: rebuilt from its registry row).

        Returns:
            The child (:class:`graphs.fork.ForkResult`).

        Raises:
            InvalidInputError: Not a fork point, the child's id is taken, or no workspace to copy.
            UnknownTaskError: The parent has no events.
            DamagedStoreError: The parent's stored data fails its checks.
        """
        from .fork import check_child_id, fork_task

        if new_task_id is not None:
            check_child_id(new_task_id)
        return fork_task(
            self,
            task_id,
            at=at,
            at_step=at_step,
            new_task_id=new_task_id,
            why=why,
            workspace_at_fork=workspace_at_fork,
            workspace=workspace,
            spec_update=spec_update,
            graph=graph,
        )

    def _finished(self, task_id: str, state: TaskContext | None) -> RunResult:
        """The result of a resume that found the task finished (nothing ran)."""
        return RunResult(task_id, state or TaskContext(), (), False, already_finished=True)

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


def db_exists(db: str | Path) -> bool:
    """Whether ``db`` names an existing database.

    Args:
        db: A SQLite file, ``:memory:`` or a ``postgresql://`` URL.

    Returns:
        True for a file that exists, ``:memory:``, or a URL (whose tables are created on open).
    """
    return is_postgres_url(str(db)) or str(db) == ":memory:" or Path(db).exists()


def open_project(
    db: str | Path = DEFAULT_DB,
    *,
    readonly: bool = False,
    memory_index: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
) -> Project:
    """Open the project database at ``db``, creating it and its folder if needed.

    Args:
        db: A SQLite file path, ``:memory:``, or a ``postgresql://user@host:port/dbname`` URL.
        readonly: Create and change nothing: a missing file or a database without the taskctx
            tables is an error.
        memory_index: LangGraph's index config for the long-term memory store (``{"dims": N,
            "embed": <embedding function or Embeddings>}``): memories are then found by semantic
            search; None: lexically (nothing downloaded).
        secrets: Name -> value of secrets given to every task the project runs, and taken by its
            resumes (held in memory only, :meth:`Project.run`).

    Returns:
        The open project (close it, or use it as a context manager).

    Raises:
        StoreOpenError: The database cannot be opened (named; a URL without its password).
        NotTaskctxDatabaseError: ``readonly`` and the database holds no taskctx tables.
    """
    project = _open(str(db), readonly, memory_index)
    project.secrets = dict(secrets or {})
    return project


def _open(path: str, readonly: bool, memory_index: dict[str, Any] | None) -> Project:
    """:func:`open_project` without its secrets."""
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
