"""Durable memory across tasks, the Python API (``taskctx memory`` is built on it).

The long-term store is LangGraph's ``BaseStore`` beside the checkpointer: a ``SqliteStore`` on
the project's SQLite file (its own connection), or a ``PostgresStore`` on the checkpointer's
pool with ``--db postgresql://`` (:func:`open_memory_store`; ``Project.memory_store`` opens it
once). The graph's tasks load from it (:class:`nodes.memory_source.MemorySource`, given to
:func:`graphs.build_orchestrator` as ``memory=``).

Every change to the store is an event first: :func:`confirm_memory` records
``memory.confirmed`` and :func:`forget_memory` ``memory.forgotten`` in the event log (the
stream :data:`context.memory.MEMORY_LOG`, with the task the user confirmed it in as
provenance), then writes the store. So :func:`rebuild_memory` can restore the store's contents
from the confirmation events of every log (:func:`context.memory_writes.records_from_events`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context import InvalidInputError, TaskContext, new_event, replay
from context.events import MemoryConfirmed, MemoryForgotten
from context.memory import (
    MEMORY_LOG,
    MEMORY_NAMESPACES,
    FileStamp,
    MemoryRecord,
    StaleFile,
    memory_key,
    supersession,
)
from context.memory_writes import records_from_events
from nodes.memory_source import MemorySource, namespace_of
from nodes.workspace.paths import file_sha256

__all__ = [
    "MemoryView",
    "NoSuchMemoryError",
    "confirm_in_task",
    "confirm_memory",
    "forget_memory",
    "list_memories",
    "open_memory_store",
    "read_stamps",
    "rebuild_memory",
    "show_memory",
]


def open_memory_store(project: Any, *, index: dict[str, Any] | None = None) -> Any:
    """A set-up LangGraph store for ``project`` (a :class:`graphs.Project`): ``SqliteStore`` on
    its own connection to the project's SQLite file (``:memory:``: a throwaway in-memory one),
    or ``PostgresStore`` on the project's checkpointer pool. ``index``: LangGraph's index config
    (``{"dims": N, "embed": <function or Embeddings>, "fields": [...]}``) for semantic search;
    ``None``: lexical search (:func:`context.memory.lexical_score`). Read-only projects get a
    store that is not set up (reads only). Raises ``StoreOpenError`` naming the database."""
    import sqlite3

    from context import StoreOpenError

    if project.is_postgres:
        from langgraph.store.postgres import PostgresStore

        from context.pg_store import SCHEMA_LOCK, redact_url

        store = PostgresStore(project.pool, index=index)  # type: ignore[arg-type]
        if not project.readonly:
            try:
                with project.pool.connection() as conn:
                    conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK + 2,))
                    try:
                        store.setup()
                    finally:
                        conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK + 2,))
            except Exception as exc:
                raise StoreOpenError(
                    f"cannot set up the memory store in {redact_url(project.url)}: {' '.join(str(exc).split())}"
                ) from exc
        return store
    from langgraph.store.sqlite import SqliteStore

    from context.sqlite_db import connect_readonly

    try:
        if project.readonly:
            conn = connect_readonly(project.path)
            store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
            store.is_setup = True  # reads only: no tables created (an empty listing when there are none)
        else:
            conn = sqlite3.connect(project.path, check_same_thread=False, isolation_level=None, timeout=30)
            if index and not hasattr(conn, "enable_load_extension"):
                conn.close()
                raise StoreOpenError(
                    f"semantic memory search on SQLite ({project.path}) needs sqlite-vec, and this Python's sqlite3 "
                    "cannot load extensions; use a Python built with loadable sqlite extensions, a postgresql:// "
                    "--db with pgvector, or no index (lexical search)"
                )
            store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
            store.setup()
    except sqlite3.Error as exc:
        raise StoreOpenError(
            f"cannot open the memory store at {project.path}: {exc}; pass --db with a writable file"
        ) from exc
    store._taskctx_conn = conn  # closed with the project
    return store


def _source(project: Any, root: Path | None = None) -> MemorySource:
    return MemorySource(project.memory_store, root=root)


class NoSuchMemoryError(InvalidInputError):
    """A memory key that the long-term store does not hold.

    Attributes:
        key: The key asked for.
        head: The message without what to do (``"memory m_0: no such memory"``), for a caller
            that names its own command (the CLI names ``taskctx memory list``).
    """

    def __init__(self, head: str, key: str):
        super().__init__(f"{head}; list_memories shows the keys")
        self.head = head
        self.key = key


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def read_stamps(
    stores: Any, files: Sequence[str], *, task_id: str | None = None, root: Path | None = None
) -> list[FileStamp]:
    """The sha256 of each of ``files`` (workspace-relative paths): from the newest whole-file
    ``read_file`` result of task ``task_id`` whose artifact holds the file's exact bytes (what
    the task read; its ``tool.called`` / ``tool.result.received`` events only), else the file
    under ``root`` now. Raises ``InvalidInputError`` for a path with neither."""
    reads: dict[str, str] = {}
    if task_id:
        paths: dict[str, str] = {}  # call id -> the path a whole-file read_file call asked for
        for e in stores.events.read(task_id, kinds=("tool.called", "tool.result.received")):
            p = e.payload
            if e.kind == "tool.called" and p["tool"] == "read_file":
                try:
                    args = json.loads(p.get("arguments") or "{}")
                except ValueError:
                    continue
                whole = isinstance(args, dict) and args.get("start_line") is None and args.get("end_line") is None
                if whole and isinstance(args.get("path"), str):
                    paths[p["call_id"]] = _rel(args["path"])
            elif (
                e.kind == "tool.result.received" and p["call_id"] in paths and p["status"] == "ok" and p.get("raw_ref")
            ):
                reads[paths[p["call_id"]]] = p["raw_ref"].split("sha256:", 1)[1].split("#", 1)[0]
    out = []
    for f in files:
        rel = _rel(f)
        if rel in reads:
            out.append(FileStamp(path=rel, sha256=reads[rel]))
        elif root is not None and (h := file_sha256(root / rel)):
            out.append(FileStamp(path=rel, sha256=h))
        else:
            where = f"task {task_id} never read it whole" if task_id else "no task was given"
            raise InvalidInputError(
                f"--file {f}: no sha256 for it ({where}, and it is not a file under --workspace "
                f"{root if root is not None else '(none given)'}); pass --workspace DIR with the file in it"
            )
    return out


def confirm_memory(
    project: Any,
    text: str,
    *,
    kind: str = "fact",
    namespace: str = "project",
    subject: str = "",
    supersedes: str | None = None,
    files: Sequence[str] = (),
    root: Path | None = None,
    task_id: str | None = None,
    confirmed_by: str = "user",
    graph: Any = None,
) -> MemoryRecord:
    """Record that the user confirmed ``text`` and write it to the long-term store.

    ``kind``: fact | preference | convention; ``namespace``: user | project. ``subject``: what
    it is about (a newer memory of the same subject supersedes the older); ``supersedes``: the
    key of the memory it replaces (takes that memory's subject). ``files``: paths it rests on,
    stamped by :func:`read_stamps` (from task ``task_id``'s reads, else under ``root``).
    ``task_id``: the task it was confirmed in (must exist). With ``graph`` (the task's compiled
    graph, e.g. ``build_orchestrator(...)`` on the same checkpointer) and a task that is paused or
    finished (a checkpoint, no run in flight, no approval pending), ``memory.confirmed`` is
    appended to the task's own log and folded into its checkpoint (a working-memory item of the
    same text becomes durable: :func:`confirm_in_task`); otherwise it is appended to the
    :data:`~context.memory.MEMORY_LOG` stream with ``task_id`` as provenance. Then the record is
    put in the store. Returns the record. Raises ``InvalidInputError`` (one line naming the
    argument and the fix)."""
    from context import UnknownTaskError

    text = " ".join(str(text).split())
    if not text:
        raise InvalidInputError("memory confirm: the text is empty; pass the fact to remember")
    if kind not in ("fact", "preference", "convention"):
        raise InvalidInputError(f"--kind {kind!r} is not a memory kind; use fact, preference or convention")
    if namespace not in MEMORY_NAMESPACES:
        raise InvalidInputError(f"--namespace {namespace!r} is not a memory namespace; use user or project")
    if task_id is not None and not project.stores.events.last_seq(task_id):
        raise UnknownTaskError(f"--task {task_id!r}: no such task in {project.path}; check the id and --db")
    src = _source(project, root)
    if supersedes and supersedes == memory_key(namespace, kind, text):
        raise InvalidInputError(
            f"--supersedes {supersedes}: that is this memory's own key (same namespace, kind and text); "
            "pass the key of the older memory it replaces"
        )
    if supersedes:
        old = src.get(supersedes)
        if old is None:
            raise NoSuchMemoryError(f"--supersedes {supersedes}: no such memory", supersedes)
        subject = old.subject or old.key
        if old.namespace != namespace:
            raise InvalidInputError(
                f"--supersedes {supersedes}: it is a {old.namespace} memory; pass --namespace {old.namespace}"
            )
    stamps = read_stamps(project.stores, files, task_id=task_id, root=root)
    payload = MemoryConfirmed(
        kind=kind,  # type: ignore[arg-type]
        text=text,
        namespace=namespace,  # type: ignore[arg-type]
        subject=subject.strip(),
        files=stamps,
        confirmed_by=confirmed_by,
        task_id=task_id,
    )
    in_task = confirm_in_task(project, graph, task_id, payload) if graph is not None and task_id else None
    if in_task is not None:
        ev = in_task
        src.apply([ev], str(task_id))
    else:
        ev = _append(project, "memory.confirmed", payload)
        src.apply([ev], MEMORY_LOG)
    rec = src.get(memory_key(namespace, kind, ev.payload["text"]))  # as the log holds it (secrets masked)
    assert rec is not None
    return rec


def confirm_in_task(project: Any, graph: Any, task_id: str, payload: MemoryConfirmed) -> Any:
    """Append ``memory.confirmed`` (``payload``) to task ``task_id``'s own log and fold it into
    its checkpoint through ``graph.update_state`` (the fold of an event already in the log passes
    :mod:`graphs.edits` unchanged). Returns the appended event, or None (nothing recorded) when
    the task cannot take it now: no checkpoint, events past it (a run in flight), or an approval
    pending (an interrupt)."""
    from .runner import thread_config

    cfg = thread_config(task_id)
    snap = graph.get_state(cfg)
    if not snap.values or snap.interrupts or any(getattr(t, "interrupts", ()) for t in snap.tasks):
        return None
    ctx = TaskContext.model_validate(snap.values)
    if project.stores.events.read(task_id, after=ctx.events.cursor):
        return None
    e = new_event("memory.confirmed", payload, actor="user", correlation_id=task_id)
    appended = project.stores.events.append(task_id, [e.model_copy(update={"seq": ctx.events.cursor + 1})])
    new = replay(appended, ctx)
    graph.update_state(
        cfg, {p: getattr(new, p) for p in TaskContext.model_fields if getattr(new, p) != getattr(ctx, p)}
    )
    return appended[0]


def forget_memory(project: Any, key: str, *, reason: str = "") -> MemoryRecord:
    """Record ``memory.forgotten`` for the memory ``key`` and delete it from the store. Returns
    the record it removed; raises ``InvalidInputError`` when there is no such memory."""
    src = _source(project)
    rec = src.get(key)
    if rec is None:
        raise NoSuchMemoryError(f"memory {key}: no such memory", key)
    e = _append(
        project, "memory.forgotten", MemoryForgotten(key=key, namespace=rec.namespace, text=rec.text, reason=reason)
    )
    src.apply([e], MEMORY_LOG)
    return rec


def _append(project: Any, kind: str, payload: Any) -> Any:
    """Append one event to the :data:`MEMORY_LOG` stream. Its timestamp is after the stream's
    last one (at least 1 ms), so the order of two confirmations made in the same millisecond is
    the order they were made in (supersession compares ``confirmed_at``)."""
    from datetime import datetime, timedelta

    from context import utc_now

    log = project.stores.events
    seq = log.last_seq(MEMORY_LOG) + 1
    ts = utc_now()
    if seq > 1:
        last = log.read(MEMORY_LOG, after=seq - 2)[-1].timestamp
        if ts <= last:
            t = datetime.fromisoformat(last.replace("Z", "+00:00")) + timedelta(milliseconds=1)
            ts = t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    ev = new_event(kind, payload, actor="user", correlation_id=MEMORY_LOG, timestamp=ts)  # type: ignore[arg-type]
    return log.append(MEMORY_LOG, [ev.model_copy(update={"seq": seq})])[0]


@dataclass
class MemoryView:
    """A stored memory as ``taskctx memory list|show`` shows it: the record, the key of the
    newer memory that supersedes it (or None), whether that one has since been forgotten (the
    record stays superseded: :mod:`context.memory`), and its stale files (checked against
    ``root``)."""

    record: MemoryRecord
    superseded_by: str | None
    stale: list[StaleFile]
    superseder_forgotten: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            **self.record.model_dump(mode="json"),
            "superseded_by": self.superseded_by,
            "superseder_forgotten": self.superseder_forgotten,
            "stale": [s.model_dump() for s in self.stale],
        }


def list_memories(project: Any, *, namespace: str | None = None, root: Path | None = None) -> list[MemoryView]:
    """Every stored memory (of ``namespace``, or both), oldest confirmation first, each with what
    supersedes it and, when ``root`` is given, its stale files."""
    if namespace is not None and namespace not in MEMORY_NAMESPACES:
        raise InvalidInputError(f"--namespace {namespace!r} is not a memory namespace; use user or project")
    src = _source(project, root)
    recs = src.records()
    newer = supersession(recs)
    keys = {r.key for r in recs}
    return [
        MemoryView(r, newer.get(r.key), src.stale_files(r), r.key in newer and newer[r.key] not in keys)
        for r in recs
        if namespace is None or r.namespace == namespace
    ]


def show_memory(project: Any, key: str, *, root: Path | None = None) -> MemoryView:
    """One stored memory (see :func:`list_memories`; only it and the records of its subject are
    read, only its files hashed); ``InvalidInputError`` when there is none."""
    src = _source(project, root)
    r = src.get(key)
    if r is None:
        raise NoSuchMemoryError(f"memory {key}: no such memory", key)
    group = [r, *(x for x in src.group(r) if x.key != r.key)]
    newer = supersession(group).get(r.key)
    gone = newer is not None and not any(x.key == newer for x in group)
    return MemoryView(r, newer, src.stale_files(r), gone)


def rebuild_memory(project: Any) -> int:
    """Restore the store's contents from the confirmation events of every log of the project
    (:func:`context.memory_writes.records_from_events`): the store is cleared, then each record put.
    Returns how many records it holds."""
    stores = project.stores
    kinds = ["memory.confirmed", "memory.forgotten"]  # all a rebuild needs, not the whole logs
    logs = {t: stores.events.read(t, kinds=kinds) for t in stores.events.task_ids()}
    records = records_from_events(logs)
    src = _source(project)
    src.clear()
    for r in records.values():
        src.store.put(namespace_of(r.namespace), r.key, r.model_dump(mode="json"))
    return len(records)


def task_memories(state: TaskContext) -> list[dict[str, Any]]:
    """The memories a task loaded (``memory.loaded``), as JSON (for ``inspect --json``)."""
    return [m.model_dump(mode="json") for m in state.memory.loaded]
